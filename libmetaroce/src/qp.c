/* qp.c: queue pairs (docs/api.md, Queue pairs). create_qp answers with
 * three descriptors: the send queue's memfd, the completion queue's memfd
 * and the application's end of the queue pair's doorbell, an AF_UNIX
 * datagram socket whose other end only the daemon holds. Both directions
 * ring through it: we ring the engine when it sleeps on our send queue,
 * it rings us when we sleep on our completion queue. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* Slot offsets (control/proto/wr.go): bytes 44..63 of a WR carry inline
 * data (flag wrFlagInline) or are reserved, 0; bytes 22..31 of a
 * completion are reserved. */
enum {
	wrOp = 0, wrFlags = 1, wrStream = 2, wrLKey = 4, wrWRID = 8, wrLAddr = 16, wrLength = 24, wrRKey = 28,
	wrRAddr = 32, wrImm = 40, wrInline = 44,
	cqWRID = 0, cqOp = 8, cqStatus = 9, cqFlags = 10, cqEvent = 11, cqBytes = 12, cqImm = 16, cqStream = 20,
	cqQPN = 24,
};

/* The slot's flag bits (docs/api.md): bit 0 is MR_WR_UNSIGNALED as the
 * application passes it, bit 1 marks inline data, which the library sets
 * itself from mr_wr.inline_data, bit 2 a scatter-gather list (from
 * mr_wr.sg_list): byte 44 its count, its entries in the next slot, 16
 * bytes each (address, length, lkey). */
enum { wrFlagInline = 2, wrFlagSGL = 4, sgeSize = 16 };
_Static_assert(MR_MAX_SGE * sgeSize == MR_WR_SIZE, "a continuation slot holds the entries");
_Static_assert(MR_MAX_INLINE == MR_WR_SIZE - wrInline, "inline bytes are the slot's tail");

static void qp_release(struct mr_qp *q)
{
	mr_ring_detach(&q->sq);
	if (!q->shared)
		mr_ring_detach(&q->cq);
	if (q->sq_fd >= 0)
		close(q->sq_fd);
	if (q->cq_fd >= 0)
		close(q->cq_fd);
	if (q->bell >= 0)
		close(q->bell);
	free(q);
}

static int valid_addr(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	if (n == 0 || n == cap)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF:.%", s[i]))
			return 0;
	return 1;
}

int mr_create_qp(struct mr_ctx *ctx, const struct mr_qp_attr *attr, struct mr_qp **out)
{
	struct mr_qp_attr a = {0};
	*out = NULL;
	if (attr)
		a = *attr;
	if ((a.sq_slots & (a.sq_slots - 1)) || (a.cq_slots & (a.cq_slots - 1)) || a.engine < 0 ||
	    (a.cq && a.cq_slots))
		return MR_ERR_INVAL;
	/* A CQ of another session is not refused here: the daemon refuses
	 * it (not_found), as it refuses any number the session does not
	 * hold. */
	if (a.cq)
		a.events = 1; /* a shared CQ's entries carry every queue pair's events */
	char body[200], cqf[32] = "";
	if (a.cq)
		snprintf(cqf, sizeof cqf, ",\"cq\":%u", a.cq->num);
	snprintf(body, sizeof body, "\"op\":\"create_qp\",\"sq_slots\":%u,\"cq_slots\":%u,\"engine\":%d%s%s%s}",
		 a.sq_slots, a.cq_slots, a.engine, a.events ? ",\"events\":true" : "", cqf,
		 a.rnr_retry_forever ? ",\"rnr_retry_forever\":true" : "");
	/* With a shared CQ: the send queue and the doorbell, no CQ ring. */
	int want = a.cq ? 2 : 3;
	struct mr_reply r;
	int fds[3], nfds = 0;
	int err = mr_request(ctx, body, NULL, 0, &r, fds, 3, &nfds);
	if (err)
		return err;
	struct mr_qp *q = calloc(1, sizeof *q);
	if (!q) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return MR_ERR_SYS;
	}
	q->ctx = ctx;
	q->shared = a.cq;
	q->sq_fd = q->cq_fd = q->bell = -1;
	if (nfds > 0)
		q->sq_fd = fds[0];
	if (a.cq) {
		if (nfds > 1)
			q->bell = fds[1];
		if (nfds > 2)
			close(fds[2]);
	} else {
		if (nfds > 1)
			q->cq_fd = fds[1];
		if (nfds > 2)
			q->bell = fds[2];
	}
	char why[200] = "";
	if (nfds != want) {
		mr_seterr(ctx, "create_qp: %d descriptors, want %d", nfds, want);
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	if (r.qpn == 0 || r.qpn > UINT32_MAX || (r.local[0] && !valid_addr(r.local, sizeof r.local))) {
		mr_seterr(ctx, "create_qp: qpn %llu, local %.40s", (unsigned long long)r.qpn, r.local);
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	q->num = (uint32_t)r.qpn;
	q->token = r.token;
	memcpy(q->local, r.local, sizeof q->local);
	q->max_payload = r.max_payload > (1 << 20) ? 0 : (int)r.max_payload;
	q->spin_us = a.spin_us == 0 ? mr_defaultSpinUs : a.spin_us;
	q->events = a.events != 0;
	q->state = MR_QP_IDLE;
	if ((err = mr_ring_attach(q->sq_fd, MR_WR_SIZE, &q->sq, why, sizeof why)) != MR_OK) {
		mr_seterr(ctx, "send queue: %s", why);
		goto fail;
	}
	if (!a.cq && (err = mr_ring_attach(q->cq_fd, MR_CQE_SIZE, &q->cq, why, sizeof why)) != MR_OK) {
		mr_seterr(ctx, "completion queue: %s", why);
		goto fail;
	}
	if (!mr_is_bell(q->bell)) {
		mr_seterr(ctx, "doorbell: descriptor is not an AF_UNIX datagram socket");
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	mr_ring_producer(&q->sq);
	if (!a.cq)
		mr_ring_consumer(&q->cq);
	/* The mappings keep the rings' memfds alive: their descriptors are
	 * not needed again, so a queue pair holds one, its doorbell end. */
	close(q->sq_fd);
	q->sq_fd = -1;
	if (q->cq_fd >= 0) {
		close(q->cq_fd);
		q->cq_fd = -1;
	}
	*out = q;
	return MR_OK;
fail:
	/* The daemon made the queue pair: free it there too. */
	if (q->num) {
		char saved[sizeof ctx->err];
		memcpy(saved, ctx->err, sizeof saved);
		snprintf(body, sizeof body, "\"op\":\"destroy_qp\",\"qpn\":%u}", q->num);
		mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
		memcpy(ctx->err, saved, sizeof saved);
	}
	qp_release(q);
	return err;
}

uint32_t mr_qp_num(const struct mr_qp *q) { return q->num; }
uint64_t mr_qp_token(const struct mr_qp *q) { return q->token; }
const char *mr_qp_local(const struct mr_qp *q) { return q->local; }
int mr_qp_max_payload(const struct mr_qp *q) { return q->max_payload; }
uint32_t mr_qp_sq_slots(const struct mr_qp *q) { return q->sq.slots; }
uint32_t mr_qp_cq_slots(const struct mr_qp *q) { return q->shared ? q->shared->ring.slots : q->cq.slots; }
int mr_qp_fd(const struct mr_qp *q) { return q->shared ? q->shared->bell : q->bell; }

/* reject_reason maps a rejection's name onto enum mr_reject_reason. */
static int reject_reason(const char *name)
{
	static const char *names[] = {"", "no_service", "limit", "params", "application"};
	for (int i = 1; i < (int)(sizeof names / sizeof names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return MR_REJECT_OTHER;
}

int mr_connect_ex(struct mr_qp *q, const char *peer, uint32_t remote, uint64_t token, int timeout_ms,
		  const void *priv, size_t priv_len, struct mr_private *accept_priv, struct mr_rejection *rej)
{
	if (rej)
		memset(rej, 0, sizeof *rej);
	if (accept_priv)
		memset(accept_priv, 0, sizeof *accept_priv);
	char hex[2 * MR_MAX_PRIVATE + 16];
	if (!peer || !valid_addr(peer, 64) || (priv_len && !priv) || mr_private_hex(priv, priv_len, hex, sizeof hex) < 0)
		return MR_ERR_INVAL;
	char body[400];
	snprintf(body, sizeof body,
		 "\"op\":\"connect\",\"qpn\":%u,\"peer\":\"%s\",\"remote_qpn\":%u,\"token\":%llu,\"timeout_ms\":%d%s}",
		 q->num, peer, remote, (unsigned long long)token, timeout_ms > 0 ? timeout_ms : 0, hex);
	struct mr_reply r;
	q->state = MR_QP_CONNECTING;
	int err = mr_request(q->ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err == MR_ERR_CONNECT) {
		q->state = MR_QP_CLOSED;
		if (rej && r.has_rejection) {
			rej->reason = reject_reason(r.rej_reason);
			memcpy(rej->reason_name, r.rej_reason, sizeof rej->reason_name);
			rej->reason_name[sizeof rej->reason_name - 1] = 0;
			rej->app_reason = (uint16_t)r.rej_app_reason;
			rej->priv = r.rej_priv;
		}
		return err;
	}
	if (err)
		return err;
	q->state = MR_QP_CONNECTED;
	if (accept_priv)
		*accept_priv = r.priv;
	return MR_OK;
}

int mr_connect_nowait(struct mr_qp *q, const char *peer, uint32_t remote, uint64_t token, int timeout_ms)
{
	if (!peer || !valid_addr(peer, 64))
		return MR_ERR_INVAL;
	if (!q->events) {
		/* The outcome comes only as an event (the daemon refuses it too). */
		mr_seterr(q->ctx, "nowait connect of queue pair %u, made without events", q->num);
		return MR_ERR_INVAL;
	}
	char body[320];
	snprintf(body, sizeof body,
		 "\"op\":\"connect\",\"qpn\":%u,\"peer\":\"%s\",\"remote_qpn\":%u,\"token\":%llu,\"timeout_ms\":%d,"
		 "\"nowait\":true}",
		 q->num, peer, remote, (unsigned long long)token, timeout_ms > 0 ? timeout_ms : 0);
	struct mr_reply r;
	int was = q->state;
	/* Before the request: the event that ends CONNECTING is taken from
	 * the completion queue only after this returns (one thread per
	 * queue pair), and moves the state on from here. */
	q->state = MR_QP_CONNECTING;
	int err = mr_request(q->ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err)
		q->state = was; /* nothing was started */
	return err;
}

int mr_connect_token(struct mr_qp *q, const char *peer, uint32_t remote, uint64_t token, int timeout_ms)
{
	return mr_connect_ex(q, peer, remote, token, timeout_ms, NULL, 0, NULL, NULL);
}

int mr_connect(struct mr_qp *q, const char *peer, uint32_t remote, int timeout_ms)
{
	return mr_connect_token(q, peer, remote, 0, timeout_ms);
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int mr_accept(struct mr_qp *q, int timeout_ms, char *peer, size_t peer_len)
{
	int64_t deadline = timeout_ms > 0 ? now_ms() + timeout_ms : 0;
	for (;;) {
		/* Short waits, asked again, keep the session's request loop
		 * responsive (as client.QP.Accept does). */
		int wait = 1000;
		if (deadline) {
			int64_t rem = deadline - now_ms();
			if (rem <= 0)
				return MR_ERR_TIMEOUT;
			if (rem < wait)
				wait = (int)rem;
		}
		char body[96];
		snprintf(body, sizeof body, "\"op\":\"accept\",\"qpn\":%u,\"timeout_ms\":%d}", q->num, wait);
		struct mr_reply r;
		int err = mr_request(q->ctx, body, NULL, 0, &r, NULL, 0, NULL);
		if (err == MR_OK) {
			if (!valid_addr(r.peer, sizeof r.peer)) {
				mr_seterr(q->ctx, "accept: peer %.40s", r.peer);
				return MR_ERR_PROTOCOL;
			}
			if (peer && peer_len)
				snprintf(peer, peer_len, "%s", r.peer);
			q->state = MR_QP_CONNECTED;
			return MR_OK;
		}
		if (err != MR_ERR_CONNECT)
			return err;
	}
}

/* status_by_name maps query_qp's reason onto a completion status. */
static int status_by_name(const char *name)
{
	static const char *names[] = {"ok", "remote_access", "remote_invalid", "rnr_retry_exceeded", "retry_exceeded",
				      "local_length", "flushed", "reset", "rejected", "local_protection", "bad_wr",
				      "not_connected"};
	for (int i = 0; i < (int)(sizeof names / sizeof names[0]); i++)
		if (strcmp(name, names[i]) == 0)
			return i;
	return -1;
}

int mr_query_qp(struct mr_qp *q, struct mr_qp_query *out)
{
	if (!out)
		return MR_ERR_INVAL;
	memset(out, 0, sizeof *out);
	out->reason = -1;
	char body[64];
	snprintf(body, sizeof body, "\"op\":\"query_qp\",\"qpn\":%u}", q->num);
	struct mr_reply r;
	int err = mr_request(q->ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err)
		return err;
	static const char *states[] = {"idle", "connecting", "connected", "closed"};
	int st = -1;
	for (int i = 0; i < 4; i++)
		if (strcmp(r.state, states[i]) == 0)
			st = i;
	if (st < 0 || (r.peer[0] && !valid_addr(r.peer, sizeof r.peer))) {
		mr_seterr(q->ctx, "query_qp: state %.16s, peer %.40s", r.state, r.peer);
		return MR_ERR_PROTOCOL;
	}
	for (const char *c = r.reason; *c; c++) {
		if (!strchr("abcdefghijklmnopqrstuvwxyz_", *c)) {
			mr_seterr(q->ctx, "query_qp: reason %.24s", r.reason);
			return MR_ERR_PROTOCOL;
		}
	}
	out->state = st;
	memcpy(out->peer, r.peer, sizeof out->peer);
	memcpy(out->reason_name, r.reason, sizeof out->reason_name);
	out->reason_name[sizeof out->reason_name - 1] = 0;
	if (r.reason[0])
		out->reason = status_by_name(r.reason);
	return MR_OK;
}

int mr_qp_state(const struct mr_qp *q) { return q->state; }

int mr_destroy_qp(struct mr_qp *q)
{
	if (!q)
		return MR_OK;
	char body[64];
	snprintf(body, sizeof body, "\"op\":\"destroy_qp\",\"qpn\":%u}", q->num);
	struct mr_reply r;
	int err = mr_request(q->ctx, body, NULL, 0, &r, NULL, 0, NULL);
	qp_release(q);
	return err;
}

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

int mr_post(struct mr_qp *q, const struct mr_wr *wrs, int n)
{
	if (n <= 0 || !wrs)
		return MR_ERR_INVAL;
	/* Judge every request before any is posted: a bad one posts none. */
	uint32_t slots = 0;
	for (int i = 0; i < n; i++) {
		const struct mr_wr *w = &wrs[i];
		if (w->flags & ~MR_WR_UNSIGNALED)
			return MR_ERR_INVAL;
		if (w->inline_data && (w->length > MR_MAX_INLINE || w->op == MR_WR_READ || w->op == MR_WR_RECV))
			return MR_ERR_INVAL;
		if (w->num_sge < 0 || (w->num_sge > 0 && (w->num_sge > q->ctx->limits.max_sge || !w->sg_list ||
							   w->op == MR_WR_RECV || w->inline_data)))
			return MR_ERR_INVAL;
		uint64_t total = 0;
		for (int j = 0; j < w->num_sge; j++)
			total += w->sg_list[j].length;
		if (total > UINT32_MAX)
			return MR_ERR_INVAL;
		slots += w->num_sge > 0 ? 2 : 1;
	}
	if (atomic_load(&q->ctx->gone))
		return MR_ERR_DAEMON_GONE;
	uint32_t first;
	int got = mr_ring_reserve(&q->sq, slots, &first);
	if (got < 0)
		return got;
	uint32_t used = 0;
	int posted = 0;
	for (; posted < n; posted++) {
		const struct mr_wr *w = &wrs[posted];
		uint32_t k = w->num_sge > 0 ? 2 : 1;
		if (used + k > (uint32_t)got)
			break;
		uint8_t s[MR_WR_SIZE] = {0};
		s[wrOp] = w->op;
		s[wrFlags] = w->flags;
		put16(s + wrStream, w->stream);
		put64(s + wrWRID, w->wr_id);
		put32(s + wrLength, w->length);
		if (w->num_sge > 0) {
			/* The entries go to the next slot; length is their sum. */
			uint8_t c[MR_WR_SIZE] = {0};
			uint32_t total = 0; /* at most UINT32_MAX: judged above */
			for (int j = 0; j < w->num_sge; j++) {
				put64(c + j * sgeSize, w->sg_list[j].addr);
				put32(c + j * sgeSize + 8, w->sg_list[j].length);
				put32(c + j * sgeSize + 12, w->sg_list[j].lkey);
				total += w->sg_list[j].length;
			}
			s[wrFlags] |= wrFlagSGL;
			s[wrInline] = (uint8_t)w->num_sge;
			put32(s + wrLength, total);
			memcpy(mr_ring_slot(&q->sq, first + used + 1), c, sizeof c);
		} else if (w->inline_data) {
			/* lkey and local address stay 0, as the daemon requires. */
			s[wrFlags] |= wrFlagInline;
			memcpy(s + wrInline, w->inline_data, w->length);
		} else {
			put32(s + wrLKey, w->lkey);
			put64(s + wrLAddr, w->laddr);
		}
		put32(s + wrRKey, w->rkey);
		put64(s + wrRAddr, w->raddr);
		put32(s + wrImm, w->imm);
		memcpy(mr_ring_slot(&q->sq, first + used), s, sizeof s);
		used += k;
	}
	mr_ring_commit(&q->sq, used);
	if (posted == 0)
		return MR_ERR_SQ_FULL;
	/* Notify: the commit's store is sequentially consistent, so it is
	 * ordered before this load of the engine's need-wakeup flag (see
	 * ring/doorbell.go, Consumer.wait). */
	if (atomic_load(q->sq.flag_word) != 0 && atomic_exchange(q->sq.flag_word, 0) != 0) {
		int err = mr_bell_ring(q->bell);
		if (err == MR_ERR_DAEMON_GONE)
			atomic_store(&q->ctx->gone, 1);
		if (err)
			return err;
	}
	return posted;
}

/* note_event records the state an event implies. */
static void note_event(struct mr_qp *q, uint8_t event)
{
	if (event == MR_EVENT_CONNECTED) {
		q->state = MR_QP_CONNECTED;
		return;
	}
	q->state = MR_QP_CLOSED;
	q->terminal = 1;
}

int mr_parse_wcs(struct mr_ctx *ctx, struct mr_ring *ring, int events, struct mr_wc *wcs, int n,
		 void (*note)(void *, uint8_t), void *arg)
{
	uint32_t first;
	int got = mr_ring_peek(ring, (uint32_t)n, &first);
	if (got < 0)
		return got;
	for (int i = 0; i < got; i++) {
		uint8_t s[MR_CQE_SIZE];
		/* Copy out, then judge the copy: the daemon may rewrite the slot. */
		memcpy(s, mr_ring_slot(ring, first + (uint32_t)i), sizeof s);
		struct mr_wc *c = &wcs[i];
		memcpy(&c->wr_id, s + cqWRID, 8);
		c->op = s[cqOp];
		c->status = s[cqStatus];
		c->flags = s[cqFlags] & MR_WC_FLAG_IMM;
		c->event = s[cqEvent];
		memcpy(&c->bytes, s + cqBytes, 4);
		memcpy(&c->imm, s + cqImm, 4);
		memcpy(&c->stream, s + cqStream, 2);
		memcpy(&c->qp_num, s + cqQPN, 4);
		/* An event only where asked for, and only the daemon's four;
		 * a completion carries no event byte. */
		int ok = c->op == MR_WC_EVENT
				 ? events && c->event >= MR_EVENT_CONNECTED && c->event <= MR_EVENT_RETRY_EXCEEDED
				 : c->op >= MR_WC_WRITE && c->op <= MR_WC_RECV_WRITE_IMM && c->event == 0;
		if (!ok) {
			mr_ring_release(ring, (uint32_t)i + 1); /* the bad one is consumed */
			mr_seterr(ctx, "malformed completion (op %u, event %u)", c->op, c->event);
			return i > 0 ? i : MR_ERR_PROTOCOL;
		}
		if (c->op == MR_WC_EVENT && note)
			note(arg, c->event);
	}
	mr_ring_release(ring, (uint32_t)got);
	return got;
}

static void note_qp_event(void *q, uint8_t event) { note_event(q, event); }

int mr_poll_cq(struct mr_qp *q, struct mr_wc *wcs, int n)
{
	if (n <= 0 || q->shared)
		return MR_ERR_INVAL;
	int got = mr_parse_wcs(q->ctx, &q->cq, q->events, wcs, n, note_qp_event, q);
	if (got < 0)
		return got;
	if (got == 0 && atomic_load(&q->ctx->gone)) {
		/* With events, the daemon's end is one more event, once, after
		 * everything it had written. */
		if (q->events && !q->gone_noted) {
			q->gone_noted = 1;
			note_event(q, MR_EVENT_DAEMON_GONE);
			wcs[0] = (struct mr_wc){.op = MR_WC_EVENT, .event = MR_EVENT_DAEMON_GONE, .qp_num = q->num};
			return 1;
		}
		return MR_ERR_DAEMON_GONE;
	}
	return got;
}

int mr_qp_arm(struct mr_qp *q)
{
	if (q->shared)
		return MR_ERR_INVAL;
	int a = mr_ring_available(&q->cq);
	if (a != 0)
		return a < 0 ? a : 1;
	atomic_store(q->cq.flag_word, 1);
	a = mr_ring_available(&q->cq);
	return a < 0 ? a : a > 0;
}

void mr_qp_disarm(struct mr_qp *q)
{
	if (q->shared)
		return;
	atomic_store(q->cq.flag_word, 0);
	mr_bell_clear(q->bell);
}

static int qp_poll(void *o, struct mr_wc *wcs, int n) { return mr_poll_cq(o, wcs, n); }
static int qp_arm(void *o) { return mr_qp_arm(o); }
static void qp_disarm(void *o) { mr_qp_disarm(o); }

int mr_wait_cq(struct mr_qp *q, struct mr_wc *wcs, int n, int timeout_ms)
{
	if (q->shared)
		return MR_ERR_INVAL;
	struct mr_waiter w = {.ctx = q->ctx, .bell = q->bell, .spin_us = q->spin_us, .terminal = &q->terminal,
			      .obj = q, .poll = qp_poll, .arm = qp_arm, .disarm = qp_disarm};
	return mr_wait(&w, wcs, n, timeout_ms);
}
