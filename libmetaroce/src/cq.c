/* cq.c: shared completion queues (docs/api.md, Shared completion queues).
 * create_cq answers with two descriptors: the ring's memfd and the
 * application's end of the CQ's doorbell, which the engine rings when it
 * writes an entry into an armed CQ. A queue pair made with
 * mr_qp_attr.cq completes into it; every entry says whose (qp_num). */
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

enum { defaultSpinUs = 500 };

static void cq_release(struct mr_cq *cq)
{
	mr_ring_detach(&cq->ring);
	if (cq->ring_fd >= 0)
		close(cq->ring_fd);
	if (cq->bell >= 0)
		close(cq->bell);
	free(cq);
}

/* is_bell: the descriptor is an AF_UNIX datagram socket, as a doorbell
 * end is. */
static int is_bell(int fd)
{
	int dom = 0, typ = 0;
	socklen_t l = sizeof dom;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0)
		return 0;
	l = sizeof typ;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &typ, &l) < 0)
		return 0;
	return dom == AF_UNIX && typ == SOCK_DGRAM;
}

int mr_create_cq(struct mr_ctx *ctx, const struct mr_cq_attr *attr, struct mr_cq **out)
{
	struct mr_cq_attr a = {0};
	*out = NULL;
	if (attr)
		a = *attr;
	if ((a.slots & (a.slots - 1)) || a.engine < 0)
		return MR_ERR_INVAL;
	char body[128];
	snprintf(body, sizeof body, "\"op\":\"create_cq\",\"cq_slots\":%u,\"engine\":%d}", a.slots, a.engine);
	struct mr_reply r;
	int fds[2], nfds = 0;
	int err = mr_request(ctx, body, NULL, 0, &r, fds, 2, &nfds);
	if (err)
		return err;
	struct mr_cq *cq = calloc(1, sizeof *cq);
	if (!cq) {
		for (int i = 0; i < nfds; i++)
			close(fds[i]);
		return MR_ERR_SYS;
	}
	cq->ctx = ctx;
	cq->ring_fd = nfds > 0 ? fds[0] : -1;
	cq->bell = nfds > 1 ? fds[1] : -1;
	cq->spin_us = a.spin_us == 0 ? defaultSpinUs : a.spin_us;
	char why[200] = "";
	if (nfds != 2) {
		mr_seterr(ctx, "create_cq: %d descriptors, want 2", nfds);
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	if (r.cq == 0 || r.cq > UINT32_MAX) {
		mr_seterr(ctx, "create_cq: cq %llu", (unsigned long long)r.cq);
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	cq->num = (uint32_t)r.cq;
	if ((err = mr_ring_attach(cq->ring_fd, MR_CQE_SIZE, &cq->ring, why, sizeof why)) != MR_OK) {
		mr_seterr(ctx, "completion queue: %s", why);
		goto fail;
	}
	if (!is_bell(cq->bell)) {
		mr_seterr(ctx, "doorbell: descriptor is not an AF_UNIX datagram socket");
		err = MR_ERR_PROTOCOL;
		goto fail;
	}
	mr_ring_consumer(&cq->ring);
	close(cq->ring_fd); /* the mapping keeps the memfd: the CQ holds one descriptor, its doorbell end */
	cq->ring_fd = -1;
	*out = cq;
	return MR_OK;
fail:
	if (cq->num) {
		char saved[sizeof ctx->err];
		memcpy(saved, ctx->err, sizeof saved);
		snprintf(body, sizeof body, "\"op\":\"destroy_cq\",\"cq\":%u}", cq->num);
		mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
		memcpy(ctx->err, saved, sizeof saved);
	}
	cq_release(cq);
	return err;
}

int mr_destroy_cq(struct mr_cq *cq)
{
	if (!cq)
		return MR_OK;
	char body[64];
	snprintf(body, sizeof body, "\"op\":\"destroy_cq\",\"cq\":%u}", cq->num);
	struct mr_reply r;
	int err = mr_request(cq->ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err == MR_ERR_BUSY)
		return err; /* queue pairs still complete into it: it stays */
	cq_release(cq);
	return err;
}

uint32_t mr_cq_num(const struct mr_cq *cq) { return cq->num; }
uint32_t mr_cq_slots(const struct mr_cq *cq) { return cq->ring.slots; }
int mr_cq_fd(const struct mr_cq *cq) { return cq->bell; }

int mr_cq_poll(struct mr_cq *cq, struct mr_wc *wcs, int n)
{
	if (n <= 0 || !wcs)
		return MR_ERR_INVAL;
	int got = mr_parse_wcs(cq->ctx, &cq->ring, 1, wcs, n, NULL, NULL);
	if (got == 0 && atomic_load(&cq->ctx->gone))
		return MR_ERR_DAEMON_GONE;
	return got;
}

int mr_cq_arm(struct mr_cq *cq)
{
	int a = mr_ring_available(&cq->ring);
	if (a != 0)
		return a < 0 ? a : 1;
	atomic_store(cq->ring.flag_word, 1);
	a = mr_ring_available(&cq->ring);
	return a < 0 ? a : a > 0;
}

void mr_cq_disarm(struct mr_cq *cq)
{
	atomic_store(cq->ring.flag_word, 0);
	mr_bell_clear(cq->bell);
}

static int64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

int mr_cq_wait(struct mr_cq *cq, struct mr_wc *wcs, int n, int timeout_ms)
{
	int64_t start = now_us();
	int64_t deadline = timeout_ms >= 0 ? start + (int64_t)timeout_ms * 1000 : 0;
	/* Spin, yielding the CPU between looks, then sleep. */
	for (int i = 0;; i++) {
		int got = mr_cq_poll(cq, wcs, n);
		if (got != 0)
			return got;
		if (i < 8)
			continue;
		int64_t t = now_us();
		if (deadline && t >= deadline)
			return MR_ERR_TIMEOUT;
		if (cq->spin_us < 0 || t - start >= cq->spin_us)
			break;
		if (i % 1024 == 0 && mr_ctx_alive(cq->ctx) != MR_OK)
			return mr_cq_poll(cq, wcs, n);
		sched_yield();
	}
	for (;;) {
		int ready = mr_cq_arm(cq);
		if (ready != 0) {
			mr_cq_disarm(cq);
			if (ready < 0)
				return ready;
			int got = mr_cq_poll(cq, wcs, n);
			if (got != 0)
				return got;
			continue;
		}
		int wait = -1;
		if (deadline) {
			int64_t rem = deadline - now_us();
			if (rem <= 0) {
				mr_cq_disarm(cq);
				return MR_ERR_TIMEOUT;
			}
			wait = (int)((rem + 999) / 1000);
		}
		/* The control socket turns readable (EOF) when the daemon goes. */
		struct pollfd p[2] = {{cq->bell, POLLIN, 0}, {cq->ctx->fd, POLLIN, 0}};
		int r = poll(p, 2, wait);
		mr_cq_disarm(cq);
		if (r < 0 && errno != EINTR)
			return MR_ERR_SYS;
		if ((p[1].revents || (p[0].revents & (POLLERR | POLLHUP | POLLNVAL))) && mr_ctx_alive(cq->ctx) != MR_OK)
			return mr_cq_poll(cq, wcs, n);
		int got = mr_cq_poll(cq, wcs, n);
		if (got != 0)
			return got;
		if (r == 0 && deadline && now_us() >= deadline)
			return MR_ERR_TIMEOUT;
	}
}
