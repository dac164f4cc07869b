/* rma.c: FI_RMA on the daemon's WRITE, WRITE with immediate and READ, on
 * the peer's outbound queue pair. The remote side is a region the peer
 * registered with fi_mr_reg (its key, and its virtual addresses:
 * FI_MR_PROV_KEY, FI_MR_VIRT_ADDR). The local side is the application's
 * buffer itself when desc is a region of this domain that holds it (no
 * copy), or else a transmit slot: a write copies into it before posting,
 * a read copies out of it at its completion. fi_writedata carries 32 bits
 * of remote CQ data in the WRITE's immediate; the peer reports it on its
 * receive CQ (FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE) without
 * taking a posted receive. */
#include <string.h>

#include "prov.h"

static ssize_t do_rma(struct mrp_ep *ep, int read, void *buf, size_t len, void *desc, int has_data, uint64_t data,
		      fi_addr_t dest, uint64_t addr, uint64_t key, void *ctx, uint64_t flags, int inject)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (ep->failed)
		return -FI_ESHUTDOWN;
	if (len > MRP_MAX_MSG || (inject && len > MRP_INJECT))
		return -FI_EMSGSIZE;
	if (key > UINT32_MAX)
		return -FI_EKEYREJECTED;
	struct mrp_out *o;
	int e = mrp_peer(ep, dest, &o);
	if (e == -FI_EAGAIN)
		mrp_progress(ep);
	if (e)
		return e;
	struct mrp_mr *m = inject ? NULL : mrp_mr_of(ep->dom, desc, buf, len);
	int slot = -1;
	if (!m && (slot = mrp_slot_get(ep)) < 0) {
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
	if (m) {
		w.lkey = m->reg->key;
		w.laddr = (uint64_t)(uintptr_t)buf;
	} else {
		w.lkey = ep->mr->key;
		w.laddr = mrp_slot_addr(ep, slot);
		if (!read && len)
			memcpy(mrp_slot_ptr(ep, slot), buf, len);
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
	op->ubuf = buf;
	op->len = len;
	return 0;
}

#define EP(f) ((struct mrp_ep *)(f))

static ssize_t r_read(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t addr,
		      uint64_t key, void *ctx)
{
	return do_rma(EP(f), 1, buf, len, desc, 0, 0, src, addr, key, ctx, EP(f)->tx_flags, 0);
}

static ssize_t r_readv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       uint64_t addr, uint64_t key, void *ctx)
{
	if (count != 1)
		return -FI_EINVAL; /* iov_limit 1 for RMA */
	return do_rma(EP(f), 1, iov[0].iov_base, iov[0].iov_len, desc ? desc[0] : NULL, 0, 0, src, addr, key, ctx,
		      EP(f)->tx_flags, 0);
}

static ssize_t r_readmsg(struct fid_ep *f, const struct fi_msg_rma *m, uint64_t flags)
{
	if (m->iov_count != 1 || m->rma_iov_count != 1)
		return -FI_EINVAL;
	return do_rma(EP(f), 1, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len, m->desc ? m->desc[0] : NULL, 0, 0,
		      m->addr, m->rma_iov[0].addr, m->rma_iov[0].key, m->context, flags, 0);
}

static ssize_t r_write(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t addr,
		       uint64_t key, void *ctx)
{
	return do_rma(EP(f), 0, (void *)buf, len, desc, 0, 0, dest, addr, key, ctx, EP(f)->tx_flags, 0);
}

static ssize_t r_writev(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			uint64_t addr, uint64_t key, void *ctx)
{
	if (count != 1)
		return -FI_EINVAL;
	return do_rma(EP(f), 0, iov[0].iov_base, iov[0].iov_len, desc ? desc[0] : NULL, 0, 0, dest, addr, key, ctx,
		      EP(f)->tx_flags, 0);
}

static ssize_t r_writemsg(struct fid_ep *f, const struct fi_msg_rma *m, uint64_t flags)
{
	if (m->iov_count != 1 || m->rma_iov_count != 1)
		return -FI_EINVAL;
	return do_rma(EP(f), 0, m->msg_iov[0].iov_base, m->msg_iov[0].iov_len, m->desc ? m->desc[0] : NULL,
		      !!(flags & FI_REMOTE_CQ_DATA), m->data, m->addr, m->rma_iov[0].addr, m->rma_iov[0].key,
		      m->context, flags, !!(flags & FI_INJECT));
}

static ssize_t r_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t addr, uint64_t key)
{
	return do_rma(EP(f), 0, (void *)buf, len, NULL, 0, 0, dest, addr, key, NULL, 0, 1);
}

static ssize_t r_writedata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data,
			   fi_addr_t dest, uint64_t addr, uint64_t key, void *ctx)
{
	return do_rma(EP(f), 0, (void *)buf, len, desc, 1, data, dest, addr, key, ctx, EP(f)->tx_flags, 0);
}

static ssize_t r_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			    uint64_t addr, uint64_t key)
{
	return do_rma(EP(f), 0, (void *)buf, len, NULL, 1, data, dest, addr, key, NULL, 0, 1);
}

struct fi_ops_rma mrp_rma_ops = {.size = sizeof(struct fi_ops_rma), .read = r_read, .readv = r_readv,
				 .readmsg = r_readmsg, .write = r_write, .writev = r_writev,
				 .writemsg = r_writemsg, .inject = r_inject, .writedata = r_writedata,
				 .injectdata = r_injectdata};
