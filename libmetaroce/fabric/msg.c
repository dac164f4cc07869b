/* msg.c: the calls of FI_MSG and FI_TAGGED. A send is checked, then
 * becomes a transfer queued on its peer's queue (xfer.c: segments of
 * MRP_SEG bytes, posted as transmit slots free, one message after another
 * per peer) and the call returns; a send to this endpoint itself is
 * matched here at once, with no daemon. A receive is checked, then takes
 * the first unexpected message it matches or is posted (recv.c, which
 * places what arrives). fi_cancel takes a posted receive back. */
#include <stdlib.h>
#include <string.h>

#include "prov.h"

size_t mrp_min_multi_recv(const struct mrp_ep *ep) { return ep->mrecv_min_set ? ep->mrecv_min : MRP_MIN_MULTI_RECV; }

static ssize_t do_recv(struct mrp_ep *ep, int tagged, const struct iovec *iov, size_t count, fi_addr_t src,
		       uint64_t tag, uint64_t ignore, void *ctx, uint64_t flags)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	MRP_DBG("recv: %s tag %#llx ignore %#llx src %lld flags %#llx", tagged ? "tagged" : "msg",
		(unsigned long long)tag, (unsigned long long)ignore, (long long)src, (unsigned long long)flags);
	if (count && !iov && (flags & FI_PEEK))
		count = 0; /* a peek needs no buffer (fi_tagged(3)) */
	if (count > MRP_RX_IOV || (count && !iov))
		return -FI_EINVAL; /* rx iov_limit */
	struct mrp_rx want = {.niov = (int)count, .ctx = ctx, .src = src, .tag = tag, .ignore = ignore, .flags = flags};
	for (size_t i = 0; i < count; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -FI_EINVAL;
		if (iov[i].iov_len > SIZE_MAX - want.len)
			return -FI_EINVAL;
		want.iov[i] = iov[i];
		want.len += iov[i].iov_len;
	}
	if (!(ep->caps & FI_DIRECTED_RECV))
		src = want.src = FI_ADDR_UNSPEC; /* fi_recv(3): the source is ignored without FI_DIRECTED_RECV */
	if (src != FI_ADDR_UNSPEC && (!ep->av || !mrp_av_live(ep->av, src)))
		return -FI_EINVAL;
	if (flags & (FI_PEEK | FI_CLAIM)) {
		if (!tagged)
			return -FI_EBADFLAGS;
		if (flags & FI_PEEK) {
			/* What has arrived by now counts. */
			mrp_progress(ep);
			return mrp_recv_peek(ep, &want);
		}
		/* FI_CLAIM: the message an earlier FI_PEEK|FI_CLAIM with this
		 * context set aside. */
		return mrp_recv_claim(ep, &want);
	}
	if (!tagged && (flags & FI_MULTI_RECV) && count != 1)
		return -FI_EINVAL; /* a multi-receive buffer is one buffer */
	ssize_t r = mrp_recv_post(ep, tagged, &want);
	if (r == -FI_EAGAIN)
		mrp_progress(ep);
	return r;
}

static ssize_t do_send(struct mrp_ep *ep, int kind, const struct iovec *iov, void **desc, size_t count,
		       int has_data, uint64_t data, uint64_t tag, fi_addr_t dest, void *ctx, uint64_t flags, int inject)
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
	if (!ep->av || !mrp_av_live(ep->av, dest))
		return -FI_EINVAL;
	struct mrp_hdr h = {.kind = (uint8_t)kind, .flags = has_data ? MRP_F_DATA : 0, .data = (uint32_t)data,
			    .tag = kind == MRP_K_TAGGED ? tag : 0, .len = len};
	uint64_t cflags = FI_SEND | (kind == MRP_K_TAGGED ? FI_TAGGED : FI_MSG);
	int signal = !inject && mrp_want(ep->tx_sel, flags);
	if (mrp_is_self(ep, dest)) {
		/* To ourselves: matched here, as if it had arrived. */
		if (!mrp_deliver_self(ep, dest, &h, iov, count)) {
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		mrp_count(ep, cflags, 0);
		if (signal) {
			struct mrp_cqe e = {.ctx = ctx, .flags = cflags, .src = FI_ADDR_NOTAVAIL};
			mrp_cq_push(ep->tx, &e);
		}
		return 0;
	}
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
	x->kind = MRP_X_SEND;
	x->dest = dest;
	x->niov = (int)count;
	for (size_t i = 0; i < count; i++)
		x->iov[i] = iov[i];
	x->len = len;
	x->h = h;
	x->signal = signal;
	x->ctx = ctx;
	x->flags = cflags;
	if (inject) {
		/* The application's buffer is its own again when the call
		 * returns: the bytes wait in a transmit slot of their own. */
		if (mrp_xfer_hold_slot(ep, x)) {
			mrp_xfer_free(ep, x);
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		mrp_iov_gather(mrp_slot_ptr(ep, x->slot) + MRP_HDR, iov, (int)count, 0, (size_t)len);
	} else {
		mrp_xfer_regs(ep, x, desc);
	}
	mrp_xfer_start(ep, x);
	return 0;
}

ssize_t mrp_cancel(fid_t fid, void *context)
{
	if (!fid || fid->fclass != FI_CLASS_EP)
		return -FI_EINVAL;
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	/* Only what waits on a posted list: a receive a message has taken
	 * is that message's now, and a send is queued or on its way. */
	return mrp_recv_cancel(ep, context);
}

ssize_t mrp_rx_size_left(struct fid_ep *fep)
{
	struct mrp_ep *ep = (struct mrp_ep *)fep;
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	return (ssize_t)(MRP_POSTED - ep->rx_inuse);
}

#define EP(f) ((struct mrp_ep *)(f))
#define IOV1(b, l) (&(struct iovec){.iov_base = (void *)(b), .iov_len = (l)})
#define DESC1(d) (&(void *){(d)})

/* ---- FI_MSG ---- */

static ssize_t m_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 0, IOV1(buf, len), 1, src, 0, 0, ctx, EP(f)->rx_flags);
}

static ssize_t m_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 0, iov, count, src, 0, 0, ctx, EP(f)->rx_flags);
}

static ssize_t m_recvmsg(struct fid_ep *f, const struct fi_msg *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_recv(EP(f), 0, m->msg_iov, m->iov_count, m->addr, 0, 0, m->context, flags);
}

static ssize_t m_send(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, void *ctx)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), DESC1(desc), 1, 0, 0, 0, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t m_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       void *ctx)
{
	return do_send(EP(f), MRP_K_MSG, iov, desc, count, 0, 0, 0, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t m_sendmsg(struct fid_ep *f, const struct fi_msg *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_send(EP(f), MRP_K_MSG, m->msg_iov, m->desc, m->iov_count, !!(flags & FI_REMOTE_CQ_DATA), m->data,
		       0, m->addr, m->context, flags, 0);
}

static ssize_t m_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), NULL, 1, 0, 0, 0, dest, NULL, 0, 1);
}

static ssize_t m_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
			  void *ctx)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), DESC1(desc), 1, 1, data, 0, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t m_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), NULL, 1, 1, data, 0, dest, NULL, 0, 1);
}

struct fi_ops_msg mrp_msg_ops = {.size = sizeof(struct fi_ops_msg), .recv = m_recv, .recvv = m_recvv,
				 .recvmsg = m_recvmsg, .send = m_send, .sendv = m_sendv, .sendmsg = m_sendmsg,
				 .inject = m_inject, .senddata = m_senddata, .injectdata = m_injectdata};

/* ---- FI_TAGGED ---- */

static ssize_t t_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
		      uint64_t ignore, void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 1, IOV1(buf, len), 1, src, tag, ignore, ctx, EP(f)->rx_flags);
}

static ssize_t t_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       uint64_t tag, uint64_t ignore, void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 1, iov, count, src, tag, ignore, ctx, EP(f)->rx_flags);
}

static ssize_t t_recvmsg(struct fid_ep *f, const struct fi_msg_tagged *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_recv(EP(f), 1, m->msg_iov, m->iov_count, m->addr, m->tag, m->ignore, m->context, flags);
}

static ssize_t t_send(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
		      void *ctx)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), DESC1(desc), 1, 0, 0, tag, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t t_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       uint64_t tag, void *ctx)
{
	return do_send(EP(f), MRP_K_TAGGED, iov, desc, count, 0, 0, tag, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t t_sendmsg(struct fid_ep *f, const struct fi_msg_tagged *m, uint64_t flags)
{
	if (!m)
		return -FI_EINVAL;
	return do_send(EP(f), MRP_K_TAGGED, m->msg_iov, m->desc, m->iov_count, !!(flags & FI_REMOTE_CQ_DATA), m->data,
		       m->tag, m->addr, m->context, flags, 0);
}

static ssize_t t_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), NULL, 1, 0, 0, tag, dest, NULL, 0, 1);
}

static ssize_t t_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
			  uint64_t tag, void *ctx)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), DESC1(desc), 1, 1, data, tag, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t t_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			    uint64_t tag)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), NULL, 1, 1, data, tag, dest, NULL, 0, 1);
}

struct fi_ops_tagged mrp_tagged_ops = {.size = sizeof(struct fi_ops_tagged), .recv = t_recv, .recvv = t_recvv,
				       .recvmsg = t_recvmsg, .send = t_send, .sendv = t_sendv,
				       .sendmsg = t_sendmsg, .inject = t_inject, .senddata = t_senddata,
				       .injectdata = t_injectdata};
