/* qp.c: queue pairs (docs/api.md, Queue pairs). create_qp answers with
 * three descriptors: the send queue's memfd, the completion queue's memfd
 * and the application's end of the queue pair's doorbell, an AF_UNIX
 * datagram socket whose other end only the daemon holds. Both directions
 * ring through it: we ring the engine when it sleeps on our send queue,
 * it rings us when we sleep on our completion queue. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Slot offsets (control/proto/wr.go); bytes 44..63 of a WR and 22..31 of
 * a completion are reserved. */
enum {
	wrOp = 0, wrStream = 2, wrLKey = 4, wrWRID = 8, wrLAddr = 16, wrLength = 24, wrRKey = 28, wrRAddr = 32,
	wrImm = 40,
	cqWRID = 0, cqOp = 8, cqStatus = 9, cqFlags = 10, cqBytes = 12, cqImm = 16, cqStream = 20,
};

/* defaultSpinUs is client.SpinBeforeSleep: a completion due within a
 * round trip is picked up without a wake-up. */
enum { defaultSpinUs = 500 };

static int check_bell(int fd)
{
	int dom = 0, typ = 0;
	socklen_t l = sizeof dom;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0)
		return -1;
	l = sizeof typ;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &typ, &l) < 0)
		return -1;
	return dom == AF_UNIX && typ == SOCK_DGRAM ? 0 : -1;
}

static void qp_release(struct mr_qp *q)
{
	mr_ring_detach(&q->sq);
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
	if ((a.sq_slots & (a.sq_slots - 1)) || (a.cq_slots & (a.cq_slots - 1)) || a.engine < 0)
		return MR_ERR_INVAL;
	char body[160];
	snprintf(body, sizeof body, "\"op\":\"create_qp\",\"sq_slots\":%u,\"cq_slots\":%u,\"engine\":%d}", a.sq_slots,
		 a.cq_slots, a.engine);
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
	q->sq_fd = q->cq_fd = q->bell = -1;
	if (nfds > 0)
		q->sq_fd = fds[0];
	if (nfds > 1)
		q->cq_fd = fds[1];
	if (nfds > 2)
		q->bell = fds[2];
	char why[200] = "";
	if (nfds != 3) {
		mr_seterr(ctx, "create_qp: %d descriptors, want 3", nfds);
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
	q->spin_us = a.spin_us == 0 ? defaultSpinUs : a.spin_us;
	if ((err = mr_ring_attach(q->sq_fd, MR_WR_SIZE, &q->sq, why, sizeof why)) != MR_OK) {
		mr_seterr(ctx, "send queue: %s", why);
		goto fail;
	}
	if ((err = mr_ring_attach(q->cq_fd, MR_CQE_SIZE, &q->cq, why, sizeof why)) != MR_OK) {
		mr_seterr(ctx, "completion queue: %s", why);
		goto fail;
	}
	if (check_bell(q->bell) < 0) {
		mr_seterr(ctx, "doorbell: descriptor is not an AF_UNIX datagram socket");
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	mr_ring_producer(&q->sq);
	mr_ring_consumer(&q->cq);
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
uint32_t mr_qp_cq_slots(const struct mr_qp *q) { return q->cq.slots; }
int mr_qp_fd(const struct mr_qp *q) { return q->bell; }

int mr_connect_token(struct mr_qp *q, const char *peer, uint32_t remote, uint64_t token, int timeout_ms)
{
	if (!peer || !valid_addr(peer, 64))
		return MR_ERR_INVAL;
	char body[240];
	snprintf(body, sizeof body,
		 "\"op\":\"connect\",\"qpn\":%u,\"peer\":\"%s\",\"remote_qpn\":%u,\"token\":%llu,\"timeout_ms\":%d}", q->num,
		 peer, remote, (unsigned long long)token, timeout_ms > 0 ? timeout_ms : 0);
	struct mr_reply r;
	return mr_request(q->ctx, body, NULL, 0, &r, NULL, 0, NULL);
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
			return MR_OK;
		}
		if (err != MR_ERR_CONNECT)
			return err;
	}
}

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
	if (n <= 0)
		return MR_ERR_INVAL;
	if (atomic_load(&q->ctx->gone))
		return MR_ERR_DAEMON_GONE;
	uint32_t first;
	int got = mr_ring_reserve(&q->sq, (uint32_t)n, &first);
	if (got < 0)
		return got;
	if (got == 0)
		return MR_ERR_SQ_FULL;
	for (int i = 0; i < got; i++) {
		const struct mr_wr *w = &wrs[i];
		uint8_t s[MR_WR_SIZE] = {0};
		s[wrOp] = w->op;
		put16(s + wrStream, w->stream);
		put32(s + wrLKey, w->lkey);
		put64(s + wrWRID, w->wr_id);
		put64(s + wrLAddr, w->laddr);
		put32(s + wrLength, w->length);
		put32(s + wrRKey, w->rkey);
		put64(s + wrRAddr, w->raddr);
		put32(s + wrImm, w->imm);
		memcpy(mr_ring_slot(&q->sq, first + (uint32_t)i), s, sizeof s);
	}
	mr_ring_commit(&q->sq, (uint32_t)got);
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
	return got;
}

int mr_poll_cq(struct mr_qp *q, struct mr_wc *wcs, int n)
{
	if (n <= 0)
		return MR_ERR_INVAL;
	uint32_t first;
	int got = mr_ring_peek(&q->cq, (uint32_t)n, &first);
	if (got < 0)
		return got;
	for (int i = 0; i < got; i++) {
		uint8_t s[MR_CQE_SIZE];
		/* Copy out, then judge the copy: the daemon may rewrite the slot. */
		memcpy(s, mr_ring_slot(&q->cq, first + (uint32_t)i), sizeof s);
		struct mr_wc *c = &wcs[i];
		memcpy(&c->wr_id, s + cqWRID, 8);
		c->op = s[cqOp];
		c->status = s[cqStatus];
		c->flags = s[cqFlags] & MR_WC_FLAG_IMM;
		memcpy(&c->bytes, s + cqBytes, 4);
		memcpy(&c->imm, s + cqImm, 4);
		memcpy(&c->stream, s + cqStream, 2);
		if (c->op < MR_WC_WRITE || c->op > MR_WC_RECV_WRITE_IMM) {
			mr_ring_release(&q->cq, (uint32_t)i + 1); /* the bad one is consumed */
			mr_seterr(q->ctx, "malformed completion (op %u)", c->op);
			return i > 0 ? i : MR_ERR_PROTOCOL;
		}
	}
	mr_ring_release(&q->cq, (uint32_t)got);
	if (got == 0 && atomic_load(&q->ctx->gone))
		return MR_ERR_DAEMON_GONE;
	return got;
}

int mr_qp_arm(struct mr_qp *q)
{
	int a = mr_ring_available(&q->cq);
	if (a != 0)
		return a < 0 ? a : 1;
	atomic_store(q->cq.flag_word, 1);
	a = mr_ring_available(&q->cq);
	return a < 0 ? a : a > 0;
}

void mr_qp_disarm(struct mr_qp *q)
{
	atomic_store(q->cq.flag_word, 0);
	mr_bell_clear(q->bell);
}

static int64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

int mr_wait_cq(struct mr_qp *q, struct mr_wc *wcs, int n, int timeout_ms)
{
	int64_t start = now_us();
	int64_t deadline = timeout_ms >= 0 ? start + (int64_t)timeout_ms * 1000 : 0;
	/* Spin, yielding the CPU between looks, then sleep. */
	for (int i = 0;; i++) {
		int got = mr_poll_cq(q, wcs, n);
		if (got != 0)
			return got;
		if (i < 8)
			continue;
		int64_t t = now_us();
		if (deadline && t >= deadline)
			return MR_ERR_TIMEOUT;
		if (q->spin_us >= 0 && t - start >= q->spin_us)
			break;
		if (i % 1024 == 0 && mr_ctx_alive(q->ctx) != MR_OK)
			return MR_ERR_DAEMON_GONE;
		sched_yield();
	}
	for (;;) {
		int ready = mr_qp_arm(q);
		if (ready != 0) {
			mr_qp_disarm(q);
			if (ready < 0)
				return ready;
			int got = mr_poll_cq(q, wcs, n);
			if (got != 0)
				return got;
			continue;
		}
		int wait = -1;
		if (deadline) {
			int64_t rem = deadline - now_us();
			if (rem <= 0) {
				mr_qp_disarm(q);
				return MR_ERR_TIMEOUT;
			}
			wait = (int)((rem + 999) / 1000);
		}
		/* The control socket turns readable (EOF) when the daemon goes. */
		struct pollfd p[2] = {{q->bell, POLLIN, 0}, {q->ctx->fd, POLLIN, 0}};
		int r = poll(p, 2, wait);
		mr_qp_disarm(q);
		if (r < 0 && errno != EINTR)
			return MR_ERR_SYS;
		if (p[1].revents && mr_ctx_alive(q->ctx) != MR_OK) {
			int got = mr_poll_cq(q, wcs, n);
			return got > 0 ? got : MR_ERR_DAEMON_GONE;
		}
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			int got = mr_poll_cq(q, wcs, n);
			return got != 0 ? got : MR_ERR_DAEMON_GONE;
		}
		int got = mr_poll_cq(q, wcs, n);
		if (got != 0)
			return got;
		if (r == 0 && deadline && now_us() >= deadline)
			return MR_ERR_TIMEOUT;
	}
}
