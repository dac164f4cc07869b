/* xfer.c: transfers, what sends and RMA operations become below the API.
 *
 * A call (msg.c, rma.c) fills a transfer from a fixed pool of MRP_XFERS
 * and queues it on its peer's queue (mrp_out.txq), then returns: the
 * transfer's requests are posted from there, now and from progress, as
 * transmit slots, operations (wr_ids) and the queue pair's send queue
 * have room. Only a queue's head posts, so one message's segments all
 * go before the next message's first (FI_ORDER_SAS holds at the
 * receiver, whose RECVs complete in SEND order, docs/spec.md §9.1), and
 * peers with queued transfers take turns, one request each, so a large
 * transfer to one peer does not starve the others.
 *
 *   SEND: segments of up to MRP_SEG bytes, each a SEND of the header
 *     (struct mrp_hdr, prov.h) from a transmit slot and its bytes: a
 *     registered iov's piece in place (an entry of the SEND's
 *     scatter-gather list), others copied into the slot behind the
 *     header; a list longer than the daemon's max_sge copies all.
 *   WRITE, READ: local iovs all registered (direct): requests of up to
 *     MRP_WR_MAX as they are, one buffer or a list; otherwise chunks of
 *     MRP_SEG through a slot (a WRITE copies into it, a READ out of it
 *     when the chunk completes), at consecutive remote offsets.
 *     fi_writedata's immediate rides the last request only, so the
 *     target reports its CQ data once, when everything before it on the
 *     stream has landed.
 *
 * A transfer completes once: when its last request completed, with the
 * first failure if any request failed (the rest are not posted). A
 * message whose continuation failed while the connection lives on is
 * ended at the receiver by an MRP_F_ABORT segment. A connection's
 * terminal event fails what is queued to it. Every completion of a
 * transfer's request comes here through mrp_wc_take (mrp_progress calls
 * it for each entry of the shared CQ before its own handlers). */
#include <string.h>

#include "prov.h"

/* ---- iov arithmetic, shared with recv.c ---- */

int mrp_iov_len(const struct iovec *iov, size_t count, uint64_t *len)
{
	uint64_t t = 0;
	for (size_t i = 0; i < count; i++) {
		if (iov[i].iov_len && !iov[i].iov_base)
			return -FI_EINVAL;
		if (iov[i].iov_len > MRP_MAX_MSG || t + iov[i].iov_len > MRP_MAX_MSG) {
			t = (uint64_t)MRP_MAX_MSG + 1; /* too long (and no overflow) */
			continue;
		}
		t += iov[i].iov_len;
	}
	*len = t;
	return 0;
}

void mrp_iov_gather(uint8_t *dst, const struct iovec *iov, int niov, uint64_t off, size_t n)
{
	for (int i = 0; i < niov && n; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - off < n ? iov[i].iov_len - off : n;
		memcpy(dst, (const uint8_t *)iov[i].iov_base + off, k);
		dst += k;
		n -= k;
		off = 0;
	}
}

void mrp_iov_scatter(const struct iovec *iov, int niov, uint64_t off, const uint8_t *src, size_t n)
{
	for (int i = 0; i < niov && n; i++) {
		if (off >= iov[i].iov_len) {
			off -= iov[i].iov_len;
			continue;
		}
		size_t k = iov[i].iov_len - off < n ? iov[i].iov_len - off : n;
		memcpy((uint8_t *)iov[i].iov_base + off, src, k);
		src += k;
		n -= k;
		off = 0;
	}
}

/* ---- the pool ---- */

static void pool_init(struct mrp_ep *ep)
{
	if (ep->xinit)
		return;
	for (int i = MRP_XFERS - 1; i >= 0; i--) {
		ep->xfers[i].next = ep->xfree;
		ep->xfree = &ep->xfers[i];
	}
	ep->nxfree = MRP_XFERS;
	ep->xinit = 1;
}

struct mrp_xfer *mrp_xfer_new(struct mrp_ep *ep)
{
	pool_init(ep);
	struct mrp_xfer *x = ep->xfree;
	if (!x)
		return NULL;
	ep->xfree = x->next;
	ep->nxfree--;
	memset(x, 0, sizeof *x);
	x->slot = -1;
	return x;
}

void mrp_xfer_free(struct mrp_ep *ep, struct mrp_xfer *x)
{
	if (x->slot >= 0)
		ep->slot_busy[x->slot] = 0;
	x->kind = 0;
	x->next = ep->xfree;
	ep->xfree = x;
	ep->nxfree++;
}

ssize_t mrp_tx_size_left(struct fid_ep *fep)
{
	struct mrp_ep *ep = (struct mrp_ep *)fep;
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	pool_init(ep);
	return (ssize_t)ep->nxfree;
}

int mrp_xfer_hold_slot(struct mrp_ep *ep, struct mrp_xfer *x)
{
	int s = mrp_slot_get(ep);
	if (s < 0)
		return -FI_EAGAIN;
	ep->slot_busy[s] = 1;
	x->slot = s;
	return 0;
}

void mrp_xfer_regs(struct mrp_ep *ep, struct mrp_xfer *x, void **desc)
{
	for (int i = 0; i < x->niov; i++) {
		struct mrp_mr *m = x->iov[i].iov_len ? mrp_mr_of(ep->dom, desc ? desc[i] : NULL, x->iov[i].iov_base,
							     x->iov[i].iov_len)
						     : NULL;
		x->reg[i] = m != NULL;
		x->lkey[i] = m ? m->reg->key : 0;
	}
}

/* ---- finishing ---- */

static void finish(struct mrp_ep *ep, struct mrp_xfer *x)
{
	mrp_count(ep, x->flags, x->err != 0);
	if (x->err || x->signal) {
		struct mrp_cqe e = {.ctx = x->ctx, .flags = x->flags, .src = FI_ADDR_NOTAVAIL, .err = x->err,
				    .prov_errno = x->prov_errno};
		mrp_cq_push(ep->tx, &e);
	}
	mrp_xfer_free(ep, x);
}

static void finish_if_idle(struct mrp_ep *ep, struct mrp_xfer *x)
{
	if (!x->queued && !x->inflight)
		finish(ep, x);
}

static void fail(struct mrp_xfer *x, int err, int prov_errno)
{
	if (!x->err) {
		x->err = err;
		x->prov_errno = prov_errno;
	}
}

/* ---- the peers' queues ---- */

static void activate(struct mrp_ep *ep, fi_addr_t d)
{
	struct mrp_out *o = &ep->out[d];
	if (o->active)
		return;
	o->active = 1;
	ep->act[ep->act_t++ % MRP_XFERS] = d;
}

static void dequeue(struct mrp_out *o)
{
	struct mrp_xfer *x = o->txq;
	o->txq = x->next;
	if (!o->txq)
		o->txq_tail = NULL;
	x->next = NULL;
	x->queued = 0;
}

static void enqueue(struct mrp_ep *ep, struct mrp_xfer *x)
{
	struct mrp_out *o = &ep->out[x->dest];
	x->next = NULL;
	if (o->txq_tail)
		o->txq_tail->next = x;
	else
		o->txq = x;
	o->txq_tail = x;
	x->queued = 1;
	activate(ep, x->dest);
}

/* requeue_front puts a transfer back at its queue's head: its abort must
 * go before anything queued behind it. */
static void requeue_front(struct mrp_ep *ep, struct mrp_xfer *x)
{
	struct mrp_out *o = &ep->out[x->dest];
	x->next = o->txq;
	o->txq = x;
	if (!o->txq_tail)
		o->txq_tail = x;
	x->queued = 1;
	activate(ep, x->dest);
}

/* ---- posting ---- */

enum { PUSHED, BLOCKED };

/* seg_list builds the scatter-gather list of a segment's bytes [off, off
 * + n) behind the header in slot s (address sa): registered pieces in
 * place, the others copied into the slot, adjacent copies one entry. A
 * list longer than the daemon takes is given up for copying everything.
 * Returns the entry count (1: the slot alone). */
static int seg_list(struct mrp_ep *ep, const struct mrp_xfer *x, uint64_t off, size_t n, uint8_t *s, uint64_t sa,
		    struct mr_sge *sg)
{
	uint64_t off0 = off;
	size_t n0 = n, at = MRP_HDR;
	int nsg = 1;
	for (int i = 0; i < x->niov && n; i++) {
		const struct iovec *v = &x->iov[i];
		if (off >= v->iov_len) {
			off -= v->iov_len;
			continue;
		}
		size_t k = v->iov_len - off < n ? v->iov_len - off : n;
		const uint8_t *p = (const uint8_t *)v->iov_base + off;
		if (x->reg[i]) {
			if (nsg >= ep->max_sge)
				goto copy_all;
			sg[nsg++] = (struct mr_sge){.addr = (uint64_t)(uintptr_t)p, .length = (uint32_t)k, .lkey = x->lkey[i]};
		} else {
			memcpy(s + at, p, k);
			struct mr_sge *last = &sg[nsg - 1];
			if (last->lkey == ep->mr->key && last->addr + last->length == sa + at) {
				last->length += (uint32_t)k;
			} else {
				if (nsg >= ep->max_sge)
					goto copy_all;
				sg[nsg++] = (struct mr_sge){.addr = sa + at, .length = (uint32_t)k, .lkey = ep->mr->key};
			}
			at += k;
		}
		n -= k;
		off = 0;
	}
	return nsg;
copy_all:
	mrp_iov_gather(s + MRP_HDR, x->iov, x->niov, off0, n0);
	sg[0].length = (uint32_t)(MRP_HDR + n0);
	return 1;
}

/* post hands one request to the queue pair: 0, BLOCKED (send queue
 * full: nothing taken), or the failure. */
static int post(struct mrp_out *o, const struct mr_wr *w)
{
	int n = mr_post(o->qp, w, 1);
	if (n == MR_ERR_SQ_FULL)
		return BLOCKED;
	return n < 0 ? -mrp_errno(n) : 0;
}

/* push_send posts a message's next segment, or its abort. */
static int push_send(struct mrp_ep *ep, struct mrp_out *o, struct mrp_xfer *x)
{
	int own = x->slot >= 0 && !x->abort; /* an inject's bytes wait in its slot */
	int slot = own ? x->slot : mrp_slot_get(ep);
	if (slot < 0)
		return BLOCKED;
	struct mrp_op *op = mrp_op_get(ep);
	if (!op)
		return BLOCKED;
	uint8_t *s = mrp_slot_ptr(ep, slot);
	uint64_t sa = mrp_slot_addr(ep, slot);
	struct mrp_hdr h = x->h;
	size_t n = 0;
	struct mr_sge sg[MR_MAX_SGE];
	int nsg = 1;
	if (x->abort) {
		/* A continuation (off > 0: the message has more than one
		 * segment) with no bytes. */
		h.flags |= MRP_F_ABORT;
		h.off = x->len;
		sg[0] = (struct mr_sge){.addr = sa, .length = MRP_HDR, .lkey = ep->mr->key};
	} else {
		n = x->len - x->off < MRP_SEG ? (size_t)(x->len - x->off) : MRP_SEG;
		h.off = x->off;
		sg[0] = (struct mr_sge){.addr = sa, .length = (uint32_t)(MRP_HDR + (own ? n : 0)), .lkey = ep->mr->key};
		if (!own && n) {
			sg[0].length = MRP_HDR;
			nsg = seg_list(ep, x, x->off, n, s, sa, sg);
		}
	}
	memcpy(s, &h, sizeof h);
	struct mr_wr w = {.op = MR_WR_SEND, .wr_id = (uint64_t)(op - ep->ops), .lkey = ep->mr->key, .laddr = sa,
			  .length = (uint32_t)(MRP_HDR + n)};
	if (nsg > 1) {
		w.sg_list = sg;
		w.num_sge = nsg;
	}
	int r = post(o, &w);
	if (r) {
		mrp_op_put(ep, op);
		return r;
	}
	ep->slot_busy[slot] = 1;
	if (own)
		x->slot = -1; /* the request's now */
	*op = (struct mrp_op){.kind = MRP_OP_SEND, .slot = slot, .x = x, .off = h.off, .n = n, .abort = x->abort,
			      .next_free = NULL};
	if (x->abort) {
		x->abort = 0;
		x->off = x->len;
	} else {
		x->off += n;
	}
	return 0;
}

/* push_rma posts an RMA operation's next request. */
static int push_rma(struct mrp_ep *ep, struct mrp_out *o, struct mrp_xfer *x)
{
	int read = x->kind == MRP_X_READ;
	uint64_t cap = x->direct ? MRP_WR_MAX : MRP_SEG;
	size_t n = x->len - x->off < cap ? (size_t)(x->len - x->off) : (size_t)cap;
	int own = x->slot >= 0;
	int slot = -1;
	if (!x->direct && (slot = own ? x->slot : mrp_slot_get(ep)) < 0)
		return BLOCKED;
	struct mrp_op *op = mrp_op_get(ep);
	if (!op)
		return BLOCKED;
	int last = x->off + n == x->len;
	struct mr_wr w = {.op = read ? MR_WR_READ : x->has_imm && last ? MR_WR_WRITE_IMM : MR_WR_WRITE,
			  .wr_id = (uint64_t)(op - ep->ops), .length = (uint32_t)n, .rkey = x->rkey,
			  .raddr = x->raddr + x->off};
	if (w.op == MR_WR_WRITE_IMM)
		w.imm = x->imm;
	struct mr_sge sg[MR_MAX_SGE];
	if (x->direct) {
		/* The pieces of [off, off + n): no more than the iovs, which
		 * the call checked against max_sge. */
		int nsg = 0;
		uint64_t off = x->off;
		size_t left = n;
		for (int i = 0; i < x->niov && left; i++) {
			const struct iovec *v = &x->iov[i];
			if (off >= v->iov_len) {
				off -= v->iov_len;
				continue;
			}
			size_t k = v->iov_len - off < left ? v->iov_len - off : left;
			sg[nsg++] = (struct mr_sge){.addr = (uint64_t)(uintptr_t)v->iov_base + off, .length = (uint32_t)k,
						    .lkey = x->lkey[i]};
			left -= k;
			off = 0;
		}
		if (nsg == 1) {
			w.lkey = sg[0].lkey;
			w.laddr = sg[0].addr;
		} else {
			w.sg_list = sg;
			w.num_sge = nsg;
		}
	} else {
		w.lkey = ep->mr->key;
		w.laddr = mrp_slot_addr(ep, slot);
		if (!read && !own && n)
			mrp_iov_gather(mrp_slot_ptr(ep, slot), x->iov, x->niov, x->off, n);
	}
	int r = post(o, &w);
	if (r) {
		mrp_op_put(ep, op);
		return r;
	}
	if (slot >= 0)
		ep->slot_busy[slot] = 1;
	if (own)
		x->slot = -1;
	*op = (struct mrp_op){.kind = read ? MRP_OP_READ : MRP_OP_WRITE, .slot = slot, .x = x, .off = x->off, .n = n,
			      .next_free = NULL};
	x->off += n;
	return 0;
}

/* push posts the next request of the transfer at the head of o's queue,
 * or takes it off the queue when it has none left to post: PUSHED
 * (something changed) or BLOCKED (no room now). */
static int push(struct mrp_ep *ep, struct mrp_out *o)
{
	struct mrp_xfer *x = o->txq;
	if (!x->err || x->abort) {
		int r = x->kind == MRP_X_SEND ? push_send(ep, o, x) : push_rma(ep, o, x);
		if (r == BLOCKED)
			return BLOCKED;
		if (r) {
			fail(x, -r, 0);
			x->abort = 0;
		} else {
			x->nposted++;
			x->inflight++;
		}
	}
	if ((x->err && !x->abort) || (x->off >= x->len && x->nposted && !x->abort)) {
		dequeue(o);
		finish_if_idle(ep, x);
	}
	return PUSHED;
}

/* pump posts what the queues hold while there is room, the peers taking
 * turns; it stops once every queued peer is blocked. */
static void pump(struct mrp_ep *ep)
{
	unsigned blocked = 0;
	while (ep->act_h != ep->act_t && blocked < ep->act_t - ep->act_h) {
		fi_addr_t d = ep->act[ep->act_h++ % MRP_XFERS];
		struct mrp_out *o = &ep->out[d];
		int r = o->txq ? push(ep, o) : PUSHED;
		if (!o->txq) {
			o->active = 0;
			blocked = 0;
			continue;
		}
		ep->act[ep->act_t++ % MRP_XFERS] = d;
		blocked = r == BLOCKED ? blocked + 1 : 0;
	}
}

void mrp_xfer_start(struct mrp_ep *ep, struct mrp_xfer *x)
{
	if (x->kind == MRP_X_SEND)
		x->h.msgno = ep->out[x->dest].msgno++;
	enqueue(ep, x);
	pump(ep);
}

/* ---- completions ---- */

/* survives: a request failing so leaves its connection up (as out_wc in
 * ep.c judges it): the peer must be told a message is over. */
static int survives(int status)
{
	return status == MR_WC_REMOTE_ACCESS || status == MR_WC_LOCAL_PROTECTION || status == MR_WC_LOCAL_LENGTH ||
	       status == MR_WC_BAD_WR;
}

static void op_done(struct mrp_ep *ep, struct mrp_op *op, const struct mr_wc *wc)
{
	struct mrp_xfer *x = op->x;
	int ok = wc->status == MR_WC_SUCCESS;
	if (ok && op->kind == MRP_OP_READ && op->slot >= 0)
		mrp_iov_scatter(x->iov, x->niov, op->off, mrp_slot_ptr(ep, op->slot), op->n);
	if (op->slot >= 0)
		ep->slot_busy[op->slot] = 0;
	int first = x->kind == MRP_X_SEND && op->off == 0 && !op->abort;
	int cont = x->kind == MRP_X_SEND && op->off > 0 && !op->abort;
	op->x = NULL;
	mrp_op_put(ep, op);
	x->inflight--;
	if (ok && first)
		x->first_ok = 1;
	if (!ok && !x->err) {
		fail(x, mrp_wc_errno(wc->status), wc->status);
		/* Completions come in posting order: the first segment's has
		 * come. If it went, the receiver is placing the message and
		 * waits for bytes that will not come. */
		if (cont && x->first_ok && survives(wc->status)) {
			x->abort = 1;
			if (!x->queued)
				requeue_front(ep, x);
		}
	}
	finish_if_idle(ep, x);
}

/* event_err: why a terminal connection event ends it (ep.c's mapping). */
static int event_err(const struct mr_wc *wc)
{
	switch (wc->event) {
	case MR_EVENT_PEER_CLOSED: return FI_ECONNRESET;
	case MR_EVENT_RETRY_EXCEEDED: return FI_ETIMEDOUT;
	}
	return mrp_wc_errno(wc->status);
}

/* fail_queue fails what is queued to a peer whose connection ended: its
 * completions all came before the event, so nothing queued is in flight
 * but what was posted after the end, which completes failed by itself. */
static void fail_queue(struct mrp_ep *ep, size_t d, int err)
{
	if (d >= ep->outs)
		return;
	struct mrp_out *o = &ep->out[d];
	while (o->txq) {
		struct mrp_xfer *x = o->txq;
		fail(x, err, 0);
		x->abort = 0;
		dequeue(o);
		finish_if_idle(ep, x);
	}
}

int mrp_wc_take(struct mrp_ep *ep, const struct mrp_qref *q, const struct mr_wc *wc)
{
	int terminal = wc->op == MR_WC_EVENT && wc->event != MR_EVENT_CONNECTED;
	if (q->inbound) {
		if (terminal)
			mrp_in_failed(ep, ep->in[q->idx], event_err(wc));
		return 0; /* in_wc has the rest */
	}
	if (terminal)
		fail_queue(ep, q->idx, event_err(wc));
	if (wc->op == MR_WC_EVENT || wc->wr_id >= MRP_OPS || !ep->ops[wc->wr_id].x) {
		/* Not a transfer's (READY, HELLO, an event): out_wc's. A
		 * HELLO's completion made room in the send queue. */
		if (ep->xinit)
			pump(ep);
		return 0;
	}
	op_done(ep, &ep->ops[wc->wr_id], wc);
	/* A slot, an operation and send queue room came free: the next
	 * request goes now (per entry: progress gives no end-of-batch hook,
	 * and each entry frees room for about one). */
	pump(ep);
	return 1;
}
