/* rma.c: FI_RMA on the daemon's WRITE, WRITE with immediate and READ, on
 * the peer's outbound queue pair. The remote side is one range of a region
 * the peer registered with fi_mr_reg (its key, and its virtual addresses:
 * FI_MR_PROV_KEY, FI_MR_VIRT_ADDR): rma_iov_limit 1. The local side is up
 * to MRP_IOV iovs (fi_writev, fi_readv, fi_writemsg, fi_readmsg). When
 * each lies in the region of this domain its desc names, the request
 * carries them as they are: one buffer, or several as a scatter-gather
 * list (mr_wr.sg_list, at most the daemon's max_sge entries) which a WRITE
 * gathers from and a READ's response is scattered into, with no copy
 * here. Otherwise a transmit slot stands in for them all: a write copies
 * the iovs into it before posting, a read copies out of it into the iovs
 * at its completion. fi_writedata carries 32 bits of remote CQ data in
 * the WRITE's immediate; the peer reports it on its receive CQ
 * (FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE) without taking a posted
 * receive. */
#include <string.h>

#include "prov.h"

static ssize_t do_rma(struct mrp_ep *ep, int read, const struct iovec *iov, void **desc, size_t count,
		      int has_data, uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key, uint64_t rlen,
		      void *ctx, uint64_t flags, int inject)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (ep->failed)
		return -FI_ESHUTDOWN;
	if (count > MRP_IOV || (count && !iov))
		return -FI_EINVAL;
	size_t len = 0;
	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	if (len > MRP_MAX_MSG || (inject && len > MRP_INJECT))
		return -FI_EMSGSIZE;
	if (len > rlen)
		return -FI_EINVAL; /* more than the remote range the application named */
	if (key > UINT32_MAX)
		return -FI_EKEYREJECTED;
	struct mrp_out *o;
	int e = mrp_peer(ep, dest, &o);
	if (e == -FI_EAGAIN)
		mrp_progress(ep);
	if (e)
		return e;
	/* In place if every non-empty iov is in its desc's region and the
	 * list fits the daemon's. */
	struct mr_sge sg[MRP_IOV];
	int nsg = 0, direct = !inject && len > 0;
	for (size_t i = 0; direct && i < count; i++) {
		if (!iov[i].iov_len)
			continue;
		struct mrp_mr *m = mrp_mr_of(ep->dom, desc ? desc[i] : NULL, iov[i].iov_base, iov[i].iov_len);
		if (!m)
			direct = 0;
		else
			sg[nsg++] = (struct mr_sge){.addr = (uint64_t)(uintptr_t)iov[i].iov_base,
						    .length = (uint32_t)iov[i].iov_len, .lkey = m->reg->key};
	}
	if (nsg > 1 && nsg > ep->max_sge)
		direct = 0;
	int slot = -1;
	if (!direct && (slot = mrp_slot_get(ep)) < 0) {
		mrp_progress(ep);
		return -FI_EAGAIN;
	}
	struct mrp_op *op = mrp_op_get(ep);
	if (!op) {
		mrp_progress(ep);
		return -FI_EAGAIN;
	}
	struct mr_wr w = {.op = read ? MR_WR_READ : has_data ? MR_WR_WRITE_IMM : MR_WR_WRITE,
			  .wr_id = (uint64_t)(op - ep->ops), .length = (uint32_t)len, .rkey = (uint32_t)key,
			  .raddr = addr, .imm = (uint32_t)data};
	if (direct && nsg == 1) {
		w.lkey = sg[0].lkey;
		w.laddr = sg[0].addr;
	} else if (direct) {
		w.sg_list = sg;
		w.num_sge = nsg;
	} else {
		w.lkey = ep->mr->key;
		w.laddr = mrp_slot_addr(ep, slot);
		if (!read)
			for (size_t i = 0, off = 0; i < count; off += iov[i].iov_len, i++)
				if (iov[i].iov_len)
					memcpy(mrp_slot_ptr(ep, slot) + off, iov[i].iov_base, iov[i].iov_len);
	}
	int n = mr_post(o->qp, &w, 1);
	if (n < 0) {
		mrp_op_put(ep, op);
		if (n == MR_ERR_SQ_FULL) {
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		return -mrp_errno(n);
	}
	if (slot >= 0)
		ep->slot_busy[slot] = 1;
	op->kind = read ? MRP_OP_READ : MRP_OP_WRITE;
	op->slot = slot;
	op->complete = !inject && (!ep->tx_sel || (flags & FI_COMPLETION));
	op->ctx = ctx;
	op->flags = FI_RMA | (read ? FI_READ : FI_WRITE);
	op->niov = (int)count;
	for (size_t i = 0; i < count; i++)
		op->uiov[i] = iov[i];
	return 0;
}

#define EP(f) ((struct mrp_ep *)(f))
#define IOV1(b, l) (&(struct iovec){.iov_base = (void *)(b), .iov_len = (l)})
#define DESC1(d) (&(void *){(d)})

static ssize_t r_read(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t addr,
		      uint64_t key, void *ctx)
{
	return do_rma(EP(f), 1, IOV1(buf, len), DESC1(desc), 1, 0, 0, src, addr, key, UINT64_MAX, ctx,
		      EP(f)->tx_flags, 0);
}

static ssize_t r_readv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       uint64_t addr, uint64_t key, void *ctx)
{
	return do_rma(EP(f), 1, iov, desc, count, 0, 0, src, addr, key, UINT64_MAX, ctx, EP(f)->tx_flags, 0);
}

static ssize_t r_readmsg(struct fid_ep *f, const struct fi_msg_rma *m, uint64_t flags)
{
	if (m->rma_iov_count != 1)
		return -FI_EINVAL; /* rma_iov_limit 1: one remote range per operation */
	return do_rma(EP(f), 1, m->msg_iov, m->desc, m->iov_count, 0, 0, m->addr, m->rma_iov[0].addr,
		      m->rma_iov[0].key, m->rma_iov[0].len, m->context, flags, 0);
}

static ssize_t r_write(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t addr,
		       uint64_t key, void *ctx)
{
	return do_rma(EP(f), 0, IOV1(buf, len), DESC1(desc), 1, 0, 0, dest, addr, key, UINT64_MAX, ctx,
		      EP(f)->tx_flags, 0);
}

static ssize_t r_writev(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			uint64_t addr, uint64_t key, void *ctx)
{
	return do_rma(EP(f), 0, iov, desc, count, 0, 0, dest, addr, key, UINT64_MAX, ctx, EP(f)->tx_flags, 0);
}

static ssize_t r_writemsg(struct fid_ep *f, const struct fi_msg_rma *m, uint64_t flags)
{
	if (m->rma_iov_count != 1)
		return -FI_EINVAL;
	return do_rma(EP(f), 0, m->msg_iov, m->desc, m->iov_count, !!(flags & FI_REMOTE_CQ_DATA), m->data, m->addr,
		      m->rma_iov[0].addr, m->rma_iov[0].key, m->rma_iov[0].len, m->context, flags,
		      !!(flags & FI_INJECT));
}

static ssize_t r_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	return do_rma(EP(f), 0, IOV1(buf, len), NULL, 1, 0, 0, dest, addr, key, UINT64_MAX, NULL, 0, 1);
}

static ssize_t r_writedata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data,
			   fi_addr_t dest, uint64_t addr, uint64_t key, void *ctx)
{
	return do_rma(EP(f), 0, IOV1(buf, len), DESC1(desc), 1, 1, data, dest, addr, key, UINT64_MAX, ctx,
		      EP(f)->tx_flags, 0);
}

static ssize_t r_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			    uint64_t addr, uint64_t key)
{
	return do_rma(EP(f), 0, IOV1(buf, len), NULL, 1, 1, data, dest, addr, key, UINT64_MAX, NULL, 0, 1);
}

struct fi_ops_rma mrp_rma_ops = {.size = sizeof(struct fi_ops_rma), .read = r_read, .readv = r_readv,
				 .readmsg = r_readmsg, .write = r_write, .writev = r_writev,
				 .writemsg = r_writemsg, .inject = r_inject, .writedata = r_writedata,
				 .injectdata = r_injectdata};
