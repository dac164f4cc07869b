/* cq.c: shared completion queues (docs/api.md, Shared completion queues).
 * create_cq answers with two descriptors: the ring's memfd and the
 * application's end of the CQ's doorbell, which the engine rings when it
 * writes an entry into an armed CQ. A queue pair made with
 * mr_qp_attr.cq completes into it; every entry says whose (qp_num). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void cq_release(struct mr_cq *cq)
{
	mr_ring_detach(&cq->ring);
	if (cq->ring_fd >= 0)
		close(cq->ring_fd);
	if (cq->bell >= 0)
		close(cq->bell);
	free(cq);
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
	cq->spin_us = a.spin_us == 0 ? mr_defaultSpinUs : a.spin_us;
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
	if (!mr_is_bell(cq->bell)) {
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

static int cq_poll(void *o, struct mr_wc *wcs, int n) { return mr_cq_poll(o, wcs, n); }
static int cq_arm(void *o) { return mr_cq_arm(o); }
static void cq_disarm(void *o) { mr_cq_disarm(o); }

int mr_cq_wait(struct mr_cq *cq, struct mr_wc *wcs, int n, int timeout_ms)
{
	struct mr_waiter w = {.ctx = cq->ctx, .bell = cq->bell, .spin_us = cq->spin_us, .obj = cq,
			      .poll = cq_poll, .arm = cq_arm, .disarm = cq_disarm};
	return mr_wait(&w, wcs, n, timeout_ms);
}
