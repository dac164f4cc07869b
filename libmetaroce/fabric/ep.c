/* ep.c: endpoints, their connections, and progress (prov.h has the
 * design). Progress is manual: every fi_cq_read, a send that finds no
 * room, and fi_trywait drive it. One pass takes the listener's waiting
 * connection request (when its back-off says to look), then the
 * completions of every inbound and outbound queue pair. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prov.h"

/* The control area after the transmit slots: where a READY lands on our
 * outbound queue pairs, and our HELLO. */
#define CTL_READY 0
#define CTL_HELLO 64
#define CTL_SIZE 256
/* wr_ids beyond the operations: the READY receive and send, the HELLO. */
#define WR_READY UINT64_MAX
#define WR_HELLO (UINT64_MAX - 1)

/* mrp_dbg: METAROCE_DEBUG=1 traces connection setup and matching to
 * stderr, for whoever debugs an application's launch. */
int mrp_debug = -1;

void mrp_dbg(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "metaroce[%d]: ", (int)getpid());
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

int64_t mrp_now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

int mrp_errno(int mr_err)
{
	switch (mr_err) {
	case MR_ERR_SQ_FULL: return FI_EAGAIN;
	case MR_ERR_DAEMON_GONE: return FI_ESHUTDOWN;
	case MR_ERR_CONNECT: return FI_ECONNREFUSED;
	case MR_ERR_TIMEOUT: return FI_ETIMEDOUT;
	case MR_ERR_LIMIT: return FI_ENOSPC;
	case MR_ERR_INVAL: case MR_ERR_BAD_REQUEST: return FI_EINVAL;
	case MR_ERR_BAD_REGION: return FI_EFAULT;
	}
	return FI_EIO;
}

int mrp_wc_errno(int status)
{
	switch (status) {
	case MR_WC_LOCAL_LENGTH: return FI_ETRUNC;
	case MR_WC_REMOTE_ACCESS: case MR_WC_LOCAL_PROTECTION: return FI_EACCES;
	case MR_WC_RNR: case MR_WC_RETRY_EXCEEDED: return FI_ETIMEDOUT;
	case MR_WC_FLUSHED: return FI_ECANCELED;
	case MR_WC_RESET: case MR_WC_REJECTED: case MR_WC_NOT_CONNECTED: return FI_ECONNRESET;
	case MR_WC_REMOTE_INVALID: return FI_EINVAL;
	}
	return FI_EIO;
}

static const char *socket_path(void)
{
	const char *s = getenv("METAROCE_SOCKET");
	return s && *s ? s : MR_DEFAULT_SOCKET;
}

int mrp_session(struct mrp_domain *d)
{
	if (d->ctx)
		return 0;
	int e = mr_open(socket_path(), &d->ctx);
	return e ? -mrp_errno(e) : 0;
}

/* ---- transmit slots and operations ---- */

uint8_t *mrp_slot_ptr(struct mrp_ep *ep, int slot) { return (uint8_t *)ep->mr->buf + (size_t)slot * MRP_SLOT; }
uint64_t mrp_slot_addr(struct mrp_ep *ep, int slot) { return ep->mr->addr + (uint64_t)slot * MRP_SLOT; }
static uint8_t *ctl_ptr(struct mrp_ep *ep, size_t off) { return mrp_slot_ptr(ep, MRP_TX) + off; }
static uint64_t ctl_addr(struct mrp_ep *ep, size_t off) { return mrp_slot_addr(ep, MRP_TX) + off; }

int mrp_slot_get(struct mrp_ep *ep)
{
	for (int i = 0; i < MRP_TX; i++)
		if (!ep->slot_busy[i])
			return i;
	return -1;
}

struct mrp_op *mrp_op_get(struct mrp_ep *ep)
{
	struct mrp_op *op = ep->free_ops;
	if (op)
		ep->free_ops = op->next_free;
	return op;
}

void mrp_op_put(struct mrp_ep *ep, struct mrp_op *op)
{
	op->kind = 0;
	op->next_free = ep->free_ops;
	ep->free_ops = op;
}

/* ---- queue pair numbers: whose entry is it ---- */

static size_t qhash(uint32_t qpn, size_t mask) { return (size_t)((qpn * 0x9E3779B1u) >> 7) & mask; }

static struct mrp_qref *qref_find(struct mrp_ep *ep, uint32_t qpn)
{
	if (!ep->qcap || !qpn)
		return NULL;
	size_t mask = ep->qcap - 1;
	for (size_t i = qhash(qpn, mask);; i = (i + 1) & mask) {
		if (ep->qmap[i].qpn == qpn)
			return &ep->qmap[i];
		if (!ep->qmap[i].qpn)
			return NULL;
	}
}

static void qref_put(struct mrp_qref *map, size_t cap, uint32_t qpn, int inbound, size_t idx)
{
	size_t mask = cap - 1;
	size_t i = qhash(qpn, mask);
	while (map[i].qpn)
		i = (i + 1) & mask;
	map[i] = (struct mrp_qref){.qpn = qpn, .inbound = inbound, .idx = idx};
}

/* qref_add records that qpn's entries are inbound connection idx's or
 * outbound connection idx's, growing the table to keep it at most half
 * full. Queue pairs are destroyed only with the endpoint: nothing is
 * removed. */
static int qref_add(struct mrp_ep *ep, uint32_t qpn, int inbound, size_t idx)
{
	if (2 * (ep->qn + 1) > ep->qcap) {
		size_t cap = ep->qcap ? ep->qcap * 2 : 64;
		struct mrp_qref *m = calloc(cap, sizeof *m);
		if (!m)
			return -FI_ENOMEM;
		for (size_t i = 0; i < ep->qcap; i++)
			if (ep->qmap[i].qpn)
				qref_put(m, cap, ep->qmap[i].qpn, ep->qmap[i].inbound, ep->qmap[i].idx);
		free(ep->qmap);
		ep->qmap = m;
		ep->qcap = cap;
	}
	qref_put(ep->qmap, ep->qcap, qpn, inbound, idx);
	ep->qn++;
	return 0;
}

/* new_qp makes a queue pair completing into the endpoint's shared CQ (so
 * on its engine, the listener's). */
static int new_qp(struct mrp_ep *ep, struct mr_qp **qp)
{
	/* RNR for ever (as InfiniBand's rnr_retry 7): a peer's receive slots
	 * come back only when its application drives progress, and a rank
	 * busy computing for a second must find its connections alive; a
	 * peer that is gone still fails by the retransmission rules. */
	return mr_create_qp(ep->dom->ctx, &(struct mr_qp_attr){.sq_slots = 64, .cq = ep->dcq, .rnr_retry_forever = 1},
			    qp);
}

/* ---- outbound connections ---- */

int mrp_is_self(struct mrp_ep *ep, fi_addr_t dest)
{
	if (!ep->av || !mrp_av_live(ep->av, dest))
		return 0;
	const struct mrp_name *p = &ep->av->peers[dest];
	return p->service == ep->name.service && strcmp(p->ip, ep->name.ip) == 0;
}

static int grow_out(struct mrp_ep *ep, size_t n)
{
	if (n <= ep->outs)
		return 0;
	size_t cap = ep->outs ? ep->outs : 16;
	while (cap < n)
		cap *= 2;
	struct mrp_out *o = realloc(ep->out, cap * sizeof *o);
	if (!o)
		return -FI_ENOMEM;
	memset(o + ep->outs, 0, (cap - ep->outs) * sizeof *o);
	ep->out = o;
	ep->outs = cap;
	return 0;
}

/* mrp_ep_forget: fi_av_remove took entry a. Operations to it fail from
 * now on; those already on its queue pair complete as they would (their
 * slots and contexts come back), and the queue pair goes with the
 * endpoint. Inbound connections from that peer report no source again
 * until the peer is inserted anew. */
void mrp_ep_forget(struct mrp_ep *ep, fi_addr_t a)
{
	if (a < ep->outs && ep->out[a].state != MRP_OUT_FAILED) {
		if (ep->out[a].state == MRP_OUT_WAIT)
			ep->nwaiting--;
		ep->out[a].state = MRP_OUT_FAILED;
		ep->out[a].err = FI_EINVAL;
	}
	for (size_t i = 0; i < ep->nin; i++)
		if (ep->in[i]->addr == a) {
			ep->in[i]->addr = FI_ADDR_NOTAVAIL;
			ep->in[i]->av_seen = ep->av ? ep->av->n : 0;
		}
}

/* out_fail ends an outbound connection: later operations to the peer fail
 * at once with err. */
static void out_fail(struct mrp_ep *ep, struct mrp_out *o, int err)
{
	if (o->state == MRP_OUT_FAILED)
		return;
	if (o->state == MRP_OUT_WAIT)
		ep->nwaiting--;
	o->state = MRP_OUT_FAILED;
	o->err = err;
}

/* mrp_peer returns dest's outbound connection once it is ready; the first
 * call connects it and, like every call until the peer's READY came,
 * answers -FI_EAGAIN. */
int mrp_peer(struct mrp_ep *ep, fi_addr_t dest, struct mrp_out **out)
{
	if (!ep->av || !mrp_av_live(ep->av, dest))
		return -FI_EINVAL;
	int e = grow_out(ep, ep->av->n);
	if (e)
		return e;
	struct mrp_out *o = &ep->out[dest];
	switch (o->state) {
	case MRP_OUT_READY:
		*out = o;
		return 0;
	case MRP_OUT_FAILED:
		return -o->err;
	case MRP_OUT_WAIT:
		return -FI_EAGAIN;
	}
	struct mr_qp *qp;
	e = new_qp(ep, &qp);
	if (e)
		return -mrp_errno(e);
	if ((e = qref_add(ep, mr_qp_num(qp), 0, (size_t)dest)) != 0) {
		mr_destroy_qp(qp);
		return e;
	}
	/* The receive for the peer's READY, posted before the connection can
	 * carry it. */
	struct mr_wr w = {.op = MR_WR_RECV, .wr_id = WR_READY, .lkey = ep->mr->key, .laddr = ctl_addr(ep, CTL_READY),
			  .length = CTL_HELLO - CTL_READY};
	int n = mr_post(qp, &w, 1);
	if (n < 0) {
		/* Kept, failed: its number stays in the table, naming a dead
		 * connection, so no entry of it can be mistaken for another's. */
		o->qp = qp;
		out_fail(ep, o, mrp_errno(n));
		return -o->err;
	}
	const struct mrp_name *p = &ep->av->peers[dest];
	MRP_DBG("connect to %s/%u (fi_addr %llu)", p->ip, p->service, (unsigned long long)dest);
	o->qp = qp;
	/* Started, not waited for: the peer's listener holds the connection
	 * until its application's progress accepts it, and that peer may be
	 * sending its own first message to us at this very moment (both
	 * ends' first sends, as RDM allows). Waiting here would keep our
	 * progress from accepting its connection while it waits for ours.
	 * The outcome comes as a connection event on the shared CQ. */
	e = mr_connect_nowait(qp, p->ip, p->service, p->token, MRP_READY_MS);
	if (e) {
		out_fail(ep, o, mrp_errno(e));
		MRP_DBG("connect failed: %s (%s)", mr_strerror(e), mr_ctx_error(ep->dom->ctx));
		return -o->err;
	}
	o->state = MRP_OUT_WAIT;
	ep->nwaiting++;
	/* The daemon gives up on the CONNECT by MRP_READY_MS and says so
	 * with an event; this bounds a READY that never follows an accept. */
	o->deadline_us = mrp_now_us() + (int64_t)(MRP_READY_MS + MRP_READY_SLACK_MS) * 1000;
	return -FI_EAGAIN;
}

static void out_ready(struct mrp_ep *ep, struct mrp_out *o)
{
	MRP_DBG("READY on queue pair %u", mr_qp_num(o->qp));
	/* Our HELLO names us to the peer: it comes before any message on
	 * this connection, so every message after it has a known source. */
	struct mrp_hdr h = {.kind = MRP_K_HELLO};
	memcpy(ctl_ptr(ep, CTL_HELLO), &h, sizeof h);
	memcpy(ctl_ptr(ep, CTL_HELLO) + MRP_HDR, &ep->name, sizeof ep->name);
	struct mr_wr w = {.op = MR_WR_SEND, .wr_id = WR_HELLO, .lkey = ep->mr->key, .laddr = ctl_addr(ep, CTL_HELLO),
			  .length = MRP_HDR + sizeof ep->name};
	int n = mr_post(o->qp, &w, 1);
	if (n < 0) {
		out_fail(ep, o, mrp_errno(n));
		return;
	}
	ep->nwaiting--;
	o->state = MRP_OUT_READY;
}

/* scatter copies len bytes at p into the iovs. */
static void scatter(const struct iovec *iov, int n, const uint8_t *p, size_t len)
{
	for (int i = 0; i < n && len; i++) {
		size_t k = iov[i].iov_len < len ? iov[i].iov_len : len;
		memcpy(iov[i].iov_base, p, k);
		p += k;
		len -= k;
	}
}

/* event_errno: why a terminal connection event ends the connection. */
static int event_errno(const struct mr_wc *wc)
{
	switch (wc->event) {
	case MR_EVENT_PEER_CLOSED: return FI_ECONNRESET;
	case MR_EVENT_RETRY_EXCEEDED: return FI_ETIMEDOUT;
	}
	return mrp_wc_errno(wc->status);
}

/* out_wc takes one entry of an outbound queue pair. */
static void out_wc(struct mrp_ep *ep, struct mrp_out *o, const struct mr_wc *wc)
{
	if (wc->op == MR_WC_EVENT) {
		/* Its completions came before it: nothing more can. */
		if (wc->event != MR_EVENT_CONNECTED)
			out_fail(ep, o, event_errno(wc));
		return;
	}
	if (wc->wr_id == WR_READY) {
		if (o->state == MRP_OUT_WAIT) {
			if (wc->status == MR_WC_SUCCESS)
				out_ready(ep, o);
			else
				out_fail(ep, o, mrp_wc_errno(wc->status));
		}
		return;
	}
	if (mrp_amo_out_wc(ep, o, wc))
		return; /* an atomic's request or response (atomic.c) */
	if (wc->wr_id >= MRP_OPS) {
		if (wc->status != MR_WC_SUCCESS && wc->status != MR_WC_FLUSHED)
			out_fail(ep, o, mrp_wc_errno(wc->status));
		return;
	}
	struct mrp_op *op = &ep->ops[wc->wr_id];
	if (!op->kind)
		return;
	int ok = wc->status == MR_WC_SUCCESS;
	if (ok && op->kind == MRP_OP_READ && op->slot >= 0) {
		size_t len = 0;
		for (int i = 0; i < op->niov; i++)
			len += op->uiov[i].iov_len;
		scatter(op->uiov, op->niov, mrp_slot_ptr(ep, op->slot), len);
	}
	if (op->slot >= 0)
		ep->slot_busy[op->slot] = 0;
	if (!ok || op->complete) {
		struct mrp_cqe e = {.ctx = op->ctx, .flags = op->flags, .src = FI_ADDR_NOTAVAIL};
		if (!ok) {
			e.err = mrp_wc_errno(wc->status);
			e.prov_errno = wc->status;
		}
		mrp_cq_push(ep->tx, &e);
	}
	mrp_count(ep, op->flags, !ok);
	if (!ok && wc->status != MR_WC_REMOTE_ACCESS && wc->status != MR_WC_LOCAL_PROTECTION &&
	    wc->status != MR_WC_LOCAL_LENGTH && wc->status != MR_WC_BAD_WR) {
		/* The connection is over: later operations fail at once. */
		out_fail(ep, o, mrp_wc_errno(wc->status));
	}
	mrp_op_put(ep, op);
}

/* out_deadlines fails connections whose READY did not come in time. */
static void out_deadlines(struct mrp_ep *ep, int64_t now)
{
	for (size_t i = 0; i < ep->outs && ep->nwaiting; i++)
		if (ep->out[i].state == MRP_OUT_WAIT && now > ep->out[i].deadline_us)
			out_fail(ep, &ep->out[i], FI_ETIMEDOUT);
}

/* ---- inbound connections ---- */

static uint8_t *in_slot(struct mrp_in *in, uint32_t slot) { return (uint8_t *)in->mr->buf + (size_t)slot * MRP_SLOT; }

static int in_post(struct mrp_in *in, uint32_t slot)
{
	struct mr_wr w = {.op = MR_WR_RECV, .wr_id = slot, .lkey = in->mr->key,
			  .laddr = in->mr->addr + (uint64_t)slot * MRP_SLOT, .length = MRP_SLOT};
	return mr_post(in->qp, &w, 1);
}

static void in_free(struct mrp_in *in)
{
	if (in->qp)
		mr_destroy_qp(in->qp);
	if (in->mr)
		mr_dereg(in->mr);
	mr_mem_free(in->mem);
	free(in);
}

/* accept_in takes connection request req onto a fresh queue pair with
 * its receives posted, then says READY. */
static int accept_in(struct mrp_ep *ep, uint64_t req)
{
	struct mr_ctx *ctx = ep->dom->ctx;
	if (ep->nin == ep->capin) {
		size_t cap = ep->capin ? ep->capin * 2 : 16;
		struct mrp_in **p = realloc(ep->in, cap * sizeof *p);
		if (!p)
			return MR_ERR_SYS;
		ep->in = p;
		ep->capin = cap;
	}
	struct mrp_in *in = calloc(1, sizeof *in);
	if (!in)
		return MR_ERR_SYS;
	in->addr = FI_ADDR_NOTAVAIL;
	size_t size = (size_t)MRP_RX_PEER * MRP_SLOT + CTL_SIZE;
	int e = new_qp(ep, &in->qp);
	if (!e)
		e = mr_mem_alloc(size, &in->mem);
	if (!e)
		e = mr_reg(ctx, in->mem, 0, size, MR_ACCESS_LOCAL_WRITE, &in->mr);
	for (uint32_t s = 0; !e && s < MRP_RX_PEER; s++) {
		int n = in_post(in, s);
		e = n < 0 ? n : 0;
	}
	if (!e)
		e = mr_accept_request(ctx, ep->service, req, in->qp);
	if (!e) {
		struct mrp_hdr h = {.kind = MRP_K_READY};
		uint8_t *c = in_slot(in, MRP_RX_PEER);
		memcpy(c, &h, sizeof h);
		struct mr_wr w = {.op = MR_WR_SEND, .wr_id = WR_READY, .lkey = in->mr->key,
				  .laddr = in->mr->addr + (uint64_t)MRP_RX_PEER * MRP_SLOT, .length = MRP_HDR};
		int n = mr_post(in->qp, &w, 1);
		e = n < 0 ? n : 0;
	}
	if (!e && qref_add(ep, mr_qp_num(in->qp), 1, ep->nin) != 0)
		e = MR_ERR_SYS;
	if (e) {
		/* Its entries already in the CQ (a flushed receive) name a
		 * number no longer in the table: dropped. */
		in_free(in);
		return e;
	}
	ep->in[ep->nin++] = in;
	return 0;
}

static void listen_poll(struct mrp_ep *ep, int64_t now)
{
	if (now < ep->listen_at)
		return;
	uint64_t req;
	char peer[64];
	int e = mr_get_request(ep->dom->ctx, ep->service, -1, &req, peer, sizeof peer);
	if (e == MR_ERR_DAEMON_GONE) {
		ep->failed = 1;
		return;
	}
	if (e) {
		/* None waiting (MR_ERR_CONNECT): look again later, less often. */
		ep->listen_gap = ep->listen_gap * 2 > MRP_LISTEN_MAX_US ? MRP_LISTEN_MAX_US : ep->listen_gap * 2;
		ep->listen_at = now + ep->listen_gap;
		return;
	}
	MRP_DBG("connection request %llu from %s", (unsigned long long)req, peer);
	if (accept_in(ep, req) != 0)
		mr_reject_request(ep->dom->ctx, ep->service, req); /* the peer sees its connection close */
	/* Another may be waiting right behind it. */
	ep->listen_gap = MRP_LISTEN_MIN_US;
	ep->listen_at = now;
}

int64_t mrp_listen_due_us(struct mrp_ep *ep)
{
	int64_t d = ep->listen_at - mrp_now_us();
	return d > 0 ? d : 0;
}

/* in_slot_done hands one arrived message to the matching; 0 if it must
 * stay in its slot (no room to keep it). */
static int in_slot_done(struct mrp_ep *ep, struct mrp_in *in, uint32_t slot, uint32_t len)
{
	const uint8_t *p = in_slot(in, slot);
	if (len && p[0] == MRP_K_AMO)
		return mrp_amo_arrived(ep, in, p, len); /* an atomic's request (atomic.c) */
	if (len < MRP_HDR || len > MRP_SLOT)
		return 1; /* not ours: dropped */
	struct mrp_hdr h;
	memcpy(&h, p, sizeof h);
	if (h.kind == MRP_K_HELLO) {
		if (len >= MRP_HDR + sizeof in->name) {
			memcpy(&in->name, p + MRP_HDR, sizeof in->name);
			in->name.ip[sizeof in->name.ip - 1] = 0;
			in->named = 1;
			MRP_DBG("HELLO from %s/%u", in->name.ip, in->name.service);
			in->addr = FI_ADDR_NOTAVAIL;
			in->av_seen = 0;
		}
		return 1;
	}
	if (h.kind != MRP_K_MSG && h.kind != MRP_K_TAGGED)
		return 1;
	int kept = 0;
	mrp_arrived(ep, in, FI_ADDR_NOTAVAIL, &h, p + MRP_HDR, len - MRP_HDR, &kept);
	return kept;
}

/* in_held hands on the arrivals an inbound connection holds, in order,
 * while there is room for them. */
static void in_held(struct mrp_ep *ep, struct mrp_in *in)
{
	while (in->hh != in->ht) {
		unsigned k = in->hh % MRP_RX_PEER;
		if (!in_slot_done(ep, in, in->held[k], in->held_len[k]))
			break;
		in_post(in, in->held[k]);
		in->hh++;
		ep->held--;
	}
}

/* in_wc takes one entry of an inbound queue pair. */
static void in_wc(struct mrp_ep *ep, struct mrp_in *in, const struct mr_wc *wc)
{
	if (mrp_amo_in_wc(ep, in, wc))
		return; /* an atomic's response went (atomic.c) */
	if (wc->op == MR_WC_RECV_WRITE_IMM) {
		/* fi_writedata's remote CQ data: the bytes are in place. */
		if (wc->status == MR_WC_SUCCESS) {
			struct mrp_cqe e = {.flags = FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE, .len = wc->bytes,
					    .data = wc->imm, .src = mrp_src(ep, in)};
			mrp_cq_push(ep->rx, &e);
		}
		return;
	}
	if (wc->op != MR_WC_RECV || wc->wr_id >= MRP_RX_PEER)
		return; /* our READY's SEND, or a connection event: the peer's sends say the rest */
	uint32_t slot = (uint32_t)wc->wr_id;
	if (wc->status != MR_WC_SUCCESS)
		return; /* flushed: the peer went */
	uint32_t len = wc->bytes;
	/* Behind held arrivals it waits its turn, keeping the peer's order. */
	if (in->hh == in->ht && in_slot_done(ep, in, slot, len)) {
		in_post(in, slot);
		return;
	}
	unsigned k = in->ht++ % MRP_RX_PEER;
	in->held[k] = slot;
	in->held_len[k] = len;
	ep->held++;
}

/* ---- progress and waiting ---- */

static void disarm(struct mrp_ep *ep)
{
	mr_cq_disarm(ep->dcq);
	uint64_t v;
	if (ep->tx && ep->tx->timerfd >= 0 && read(ep->tx->timerfd, &v, sizeof v) < 0) {
	}
	if (ep->rx && ep->rx != ep->tx && ep->rx->timerfd >= 0 && read(ep->rx->timerfd, &v, sizeof v) < 0) {
	}
	ep->armed = 0;
}

int mrp_arm(struct mrp_ep *ep)
{
	ep->armed = 1;
	if (mr_cq_arm(ep->dcq) != 0)
		return -FI_EAGAIN;
	if (ep->listen_at <= mrp_now_us())
		return -FI_EAGAIN;
	return 0;
}

/* MRP_POLL_BATCH entries are taken at a time; a pass takes at most
 * MRP_POLL_MAX, so one busy peer cannot keep the caller in progress. */
#define MRP_POLL_BATCH 32
#define MRP_POLL_MAX 1024

void mrp_progress(struct mrp_ep *ep)
{
	if (!ep->enabled || ep->failed)
		return;
	if (ep->armed)
		disarm(ep);
	int64_t now = mrp_now_us();
	listen_poll(ep, now);
	if (ep->held)
		for (size_t i = 0; i < ep->nin; i++)
			in_held(ep, ep->in[i]);
	struct mr_wc wc[MRP_POLL_BATCH];
	for (int taken = 0; taken < MRP_POLL_MAX;) {
		int n = mr_cq_poll(ep->dcq, wc, MRP_POLL_BATCH);
		if (n < 0) {
			/* The daemon went, or wrote what no correct one writes
			 * (MR_ERR_CORRUPT sticks): nothing more comes from it. */
			ep->failed = 1;
			MRP_DBG("shared CQ: %s", mr_strerror(n));
		}
		if (n <= 0)
			break;
		for (int i = 0; i < n; i++) {
			const struct mrp_qref *q = qref_find(ep, wc[i].qp_num);
			if (!q)
				continue; /* a queue pair given up before it was recorded */
			if (mrp_wc_take(ep, q, &wc[i]))
				continue; /* a transfer's request (xfer.c), which also sees every event first */
			if (q->inbound)
				in_wc(ep, ep->in[q->idx], &wc[i]);
			else
				out_wc(ep, &ep->out[q->idx], &wc[i]);
		}
		taken += n;
		if (n < MRP_POLL_BATCH)
			break;
	}
	if (ep->nwaiting)
		out_deadlines(ep, now);
}

/* ---- the endpoint object ---- */

static int ep_getname(fid_t fid, void *addr, size_t *len)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	if (!len || (*len && !addr))
		return -FI_EINVAL;
	int fmt = ep->dom->addr_format;
	size_t want = mrp_addrlen(fmt);
	if (*len < want) {
		*len = want;
		return -FI_ETOOSMALL;
	}
	mrp_name_to_addr(fmt, &ep->name, addr);
	*len = want;
	return 0;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	switch (bfid->fclass) {
	case FI_CLASS_CQ: {
		struct mrp_cq *cq = (struct mrp_cq *)bfid;
		if (cq->ep && cq->ep != ep)
			return -FI_EINVAL; /* a CQ serves one endpoint: its progress drives that one */
		cq->ep = ep;
		if (flags & FI_TRANSMIT)
			ep->tx = cq;
		if (flags & FI_RECV)
			ep->rx = cq;
		if ((flags & FI_SELECTIVE_COMPLETION) && (flags & FI_TRANSMIT))
			ep->tx_sel = 1;
		if ((flags & FI_SELECTIVE_COMPLETION) && (flags & FI_RECV))
			ep->rx_sel = 1;
		return 0;
	}
	case FI_CLASS_AV:
		if (ep->av && ep->av != (struct mrp_av *)bfid)
			return -FI_EINVAL; /* fi_addr_t values index one vector */
		ep->av = (struct mrp_av *)bfid;
		mrp_av_bind(ep->av, ep);
		return 0;
	case FI_CLASS_EQ:
		return 0;
	case FI_CLASS_CNTR:
		return mrp_cntr_bind(ep, bfid, flags);
	}
	return -FI_EINVAL;
}

static int ep_control(struct fid *fid, int cmd, void *arg)
{
	(void)arg;
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	if (cmd != FI_ENABLE)
		return -FI_ENOSYS;
	if (!ep->rx || !ep->tx || !ep->av)
		return -FI_ENOCQ;
	/* One descriptor wakes the endpoint for every peer's queue pairs. */
	mrp_cq_watch(ep->tx, mr_cq_fd(ep->dcq));
	if (ep->rx != ep->tx)
		mrp_cq_watch(ep->rx, mr_cq_fd(ep->dcq));
	ep->enabled = 1;
	return 0;
}

static int ep_close(struct fid *fid)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	for (size_t i = 0; i < ep->outs; i++)
		if (ep->out[i].qp)
			mr_destroy_qp(ep->out[i].qp);
	free(ep->out);
	for (size_t i = 0; i < ep->nin; i++)
		in_free(ep->in[i]);
	free(ep->in);
	free(ep->qmap);
	if (ep->dcq) {
		if (ep->tx)
			mrp_cq_unwatch(ep->tx, mr_cq_fd(ep->dcq));
		if (ep->rx && ep->rx != ep->tx)
			mrp_cq_unwatch(ep->rx, mr_cq_fd(ep->dcq));
		mr_destroy_cq(ep->dcq); /* its queue pairs are gone: MR_ERR_BUSY cannot be, the session frees it if so */
	}
	if (ep->service)
		mr_unlisten(ep->dom->ctx, ep->service);
	if (ep->mr)
		mr_dereg(ep->mr);
	mr_mem_free(ep->mem);
	mrp_amo_close(ep);
	mrp_cntr_unbind(ep);
	mrp_rx_close(ep);
	if (ep->av)
		mrp_av_unbind(ep->av, ep);
	if (ep->tx)
		ep->tx->ep = NULL;
	if (ep->rx)
		ep->rx->ep = NULL;
	ep->dom->eps--;
	free(ep);
	return 0;
}

/* FI_OPT_MIN_MULTI_RECV is the one endpoint option: a multi-receive
 * buffer is released once less than it is left (recv.c). A new value
 * holds for buffers bound to messages after it. */
static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || !optlen)
		return -FI_EINVAL;
	if (*optlen < sizeof(size_t)) {
		*optlen = sizeof(size_t);
		return -FI_ETOOSMALL;
	}
	size_t v = mrp_min_multi_recv(ep);
	memcpy(optval, &v, sizeof v);
	*optlen = sizeof v;
	return 0;
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	if (level != FI_OPT_ENDPOINT || optname != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!optval || optlen != sizeof(size_t))
		return -FI_EINVAL;
	memcpy(&ep->mrecv_min, optval, sizeof ep->mrecv_min);
	ep->mrecv_min_set = 1;
	return 0;
}

static struct fi_ops ep_fi_ops = {.size = sizeof(struct fi_ops), .close = ep_close, .bind = ep_bind,
				  .control = ep_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_ep ep_ops = {.size = sizeof(struct fi_ops_ep), .cancel = mrp_cancel, .getopt = ep_getopt,
				  .setopt = ep_setopt, .tx_ctx = no_tx_ctx, .rx_ctx = no_rx_ctx,
				  .rx_size_left = mrp_rx_size_left, .tx_size_left = mrp_tx_size_left};
static struct fi_ops_cm ep_cm = {.size = sizeof(struct fi_ops_cm), .setname = no_setname, .getname = ep_getname,
				 .getpeer = no_getpeer, .connect = no_connect, .listen = no_listen,
				 .accept = no_accept, .reject = no_reject, .shutdown = no_shutdown, .join = no_join};
static struct fi_ops_collective ep_collective = {
	.size = sizeof(struct fi_ops_collective), .barrier = no_barrier, .broadcast = no_broadcast,
	.alltoall = no_alltoall, .allreduce = no_allreduce, .allgather = no_allgather,
	.reduce_scatter = no_reduce_scatter, .reduce = no_reduce, .scatter = no_scatter, .gather = no_gather,
	.msg = no_coll_msg, .barrier2 = no_barrier2};

int mrp_ep_open(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **out, void *context)
{
	struct mrp_domain *d = (struct mrp_domain *)fdom;
	if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_ENOPROTOOPT;
	struct mrp_ep *ep = calloc(1, sizeof *ep);
	if (!ep)
		return -FI_ENOMEM;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &ep_cm;
	ep->ep.msg = &mrp_msg_ops;
	ep->ep.rma = &mrp_rma_ops;
	ep->ep.tagged = &mrp_tagged_ops;
	ep->ep.atomic = &mrp_atomic_ops;
	ep->ep.collective = &ep_collective;
	ep->dom = d;
	d->eps++;
	ep->caps = info ? info->caps : 0;
	if (info && info->tx_attr)
		ep->tx_flags = info->tx_attr->op_flags;
	if (info && info->rx_attr)
		ep->rx_flags = info->rx_attr->op_flags;
	for (int i = MRP_OPS - 1; i >= 0; i--)
		mrp_op_put(ep, &ep->ops[i]);
	for (int i = MRP_POSTED - 1; i >= 0; i--) {
		ep->rx_pool[i].next = ep->rx_free;
		ep->rx_free = &ep->rx_pool[i];
	}
	ep->listen_gap = MRP_LISTEN_MIN_US;
	int e = mrp_session(d);
	if (e) {
		ep_close(&ep->ep.fid);
		return e;
	}
	size_t size = (size_t)MRP_TX * MRP_SLOT + CTL_SIZE;
	char local[64] = "";
	e = mr_mem_alloc(size, &ep->mem);
	if (!e)
		e = mr_reg(d->ctx, ep->mem, 0, size, MR_ACCESS_LOCAL_WRITE, &ep->mr);
	/* The CQ and the listener on one engine: a CQ's queue pairs live on
	 * its engine, accepted ones included (docs/api.md). */
	if (!e)
		e = mr_create_cq(d->ctx, &(struct mr_cq_attr){.slots = MRP_DCQ_SLOTS, .engine = 0}, &ep->dcq);
	/* An info whose src_addr names a service (fi_getinfo with FI_SOURCE
	 * and a service, or an application's own src_addr) listens there,
	 * publicly: peers that learnt only our address and that number, as
	 * in-band address exchange gives them, connect with token 0. Else
	 * the daemon draws the service and a secret token, and the name
	 * travels out of band. */
	uint32_t want = 0;
	struct mrp_name src;
	if (info && info->src_addr && info->src_addrlen == mrp_addrlen(d->addr_format) &&
	    mrp_addr_to_name(d->addr_format, info->src_addr, &src) == 0)
		want = src.service;
	if (!e && (want || d->addr_format == FI_SOCKADDR_IN)) {
		/* A sockaddr carries no token, and 16 bits of service: such an
		 * endpoint listens publicly at a port, its own pick if none was
		 * asked for (one a daemon never draws: those start at 65536). */
		int tries = want ? 1 : 64;
		for (int i = 0; i < tries; i++) {
			uint32_t svc = want ? want : MRP_PORT_LO + (uint32_t)rand() % (MRP_PORT_HI - MRP_PORT_LO + 1);
			e = mr_listen_service(d->ctx, 0, 256, svc, local, sizeof local);
			if (!e) {
				ep->service = svc;
				break;
			}
			MRP_DBG("listen at service %u: %s (%s)", svc, mr_strerror(e), mr_ctx_error(d->ctx));
			if (e != MR_ERR_BUSY)
				break;
		}
		ep->name.token = 0;
		if (e) {
			ep_close(&ep->ep.fid);
			return e == MR_ERR_BUSY ? -FI_EADDRINUSE : -mrp_errno(e);
		}
	} else if (!e)
		e = mr_listen(d->ctx, 0, 256, 0, &ep->service, &ep->name.token, local, sizeof local);
	if (e) {
		ep_close(&ep->ep.fid);
		return -mrp_errno(e);
	}
	snprintf(ep->name.ip, sizeof ep->name.ip, "%.45s", local);
	int sge = mr_ctx_limits(d->ctx)->max_sge;
	ep->max_sge = sge < 0 ? 0 : sge > MR_MAX_SGE ? MR_MAX_SGE : sge;
	ep->name.service = ep->service;
	*out = &ep->ep;
	return 0;
}
