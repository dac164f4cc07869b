/* rma.c: FI_RMA on the daemon's WRITE, WRITE with immediate and READ, on
 * the peer's outbound queue pair, up to MRP_MAX_MSG per operation. The
 * remote side is one range of a region the peer registered with
 * fi_mr_reg (its key, and its virtual addresses: FI_MR_PROV_KEY,
 * FI_MR_VIRT_ADDR): rma_iov_limit 1. The local side is up to MRP_IOV iovs
 * (fi_writev, fi_readv, fi_writemsg, fi_readmsg). An operation is checked
 * here and becomes a transfer (xfer.c): when each iov lies in the region
 * of this domain its desc names, requests carry them as they are, one
 * buffer or a scatter-gather list (mr_wr.sg_list, at most the daemon's
 * max_sge entries) which a WRITE gathers from and a READ's response is
 * scattered into, with no copy here, MRP_WR_MAX bytes per request at
 * most; otherwise chunks of MRP_SEG go through transmit slots (a write
 * copies into one before posting, a read out of it at the chunk's
 * completion), at consecutive remote offsets. The operation completes
 * once, when every request has; the first failure fails it.
 * fi_writedata carries 32 bits of remote CQ data in the immediate of its
 * last request; the peer reports it on its receive CQ (FI_REMOTE_CQ_DATA
 * | FI_RMA | FI_REMOTE_WRITE) without taking a posted receive, once. */
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
	uint64_t len;
	if (mrp_iov_len(iov, count, &len))
		return -FI_EINVAL;
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
	struct mrp_xfer *x = mrp_xfer_new(ep);
	if (!x) {
		mrp_progress(ep);
		return -FI_EAGAIN;
	}
	x->kind = read ? MRP_X_READ : MRP_X_WRITE;
	x->dest = dest;
	x->niov = (int)count;
	for (size_t i = 0; i < count; i++)
		x->iov[i] = iov[i];
	x->len = len;
	x->raddr = addr;
	x->rkey = (uint32_t)key;
	x->imm = (uint32_t)data;
	x->has_imm = has_data;
	x->signal = !inject && mrp_want(ep->tx_sel, flags);
	x->ctx = ctx;
	x->flags = FI_RMA | (read ? FI_READ : FI_WRITE);
	if (inject) {
		/* Copied now: the buffer is the application's again when the
		 * call returns. */
		if (mrp_xfer_hold_slot(ep, x)) {
			mrp_xfer_free(ep, x);
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		mrp_iov_gather(mrp_slot_ptr(ep, x->slot), iov, (int)count, 0, (size_t)len);
	} else {
		/* In place if every non-empty iov is in its desc's region and
		 * the list fits the daemon's. */
		mrp_xfer_regs(ep, x, desc);
		int nsg = 0;
		x->direct = len > 0;
		for (size_t i = 0; i < count; i++) {
			if (!iov[i].iov_len)
				continue;
			nsg++;
			if (!x->reg[i])
				x->direct = 0;
		}
		if (nsg > 1 && nsg > ep->max_sge)
			x->direct = 0;
	}
	mrp_xfer_start(ep, x);
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
	if (!m || m->rma_iov_count != 1 || !m->rma_iov)
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
	if (!m || m->rma_iov_count != 1 || !m->rma_iov)
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
