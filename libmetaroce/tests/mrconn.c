/* mrconn: the simultaneous open of two peers that know each other's
 * address and port only, run by connect_test.go as two processes, each
 * with a daemon of its own:
 *
 *   mrconn SOCK SERVICE PEER PEER_SERVICE GO_FILE    prints "READY", then "PASS"
 *
 * Each listens at its chosen SERVICE (mr_listen_service: public, token
 * 0), which a second listen finds taken, and prints READY; once GO_FILE
 * exists (the test makes it when both are ready) each connects to the
 * other's service with mr_connect_nowait, first, and only then takes the
 * other's request and accepts it: a waiting connect would hold each side
 * in its connect until the other's accept, which could not come. Both
 * queue pairs of each side report MR_EVENT_CONNECTED, with mr_qp_state
 * following; a SEND each way lands byte for byte. Beside them: a nowait
 * connect of a queue pair without events is refused and leaves it idle,
 * and one (on a shared CQ) to a service nothing listens at reports
 * MR_EVENT_FAILED, status rejected, through the CQ. Exit 0 with "PASS"
 * is a pass. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "metaroce.h"

#include "check.h"

#define MEM (64u << 10)
#define OFF_TX 0
#define OFF_RX (16u << 10)
#define LEN 4096u
#define WR_SEND 1
#define WR_RECV 2

#define MUST(call)                                                                                             \
	do {                                                                                                   \
		int e_ = (call);                                                                               \
		if (e_ < 0) {                                                                                  \
			fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, mr_strerror(e_), \
				ctx ? mr_ctx_error(ctx) : "");                                                 \
			exit(1);                                                                               \
		}                                                                                              \
	} while (0)

static struct mr_ctx *ctx;

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* What the side listening at service sends. */
static uint8_t pat(uint32_t service, size_t i) { return (uint8_t)(i * 7 + service * 13 + 1); }

/* next waits for one entry of qp (completion or event), 20 s. */
static struct mr_wc next(struct mr_qp *qp, const char *what)
{
	struct mr_wc wc;
	int n = mr_wait_cq(qp, &wc, 1, 20000);
	if (n != 1) {
		fprintf(stderr, "FAIL %s: wait_cq: %s (%s)\n", what, mr_strerror(n), mr_ctx_error(ctx));
		exit(1);
	}
	return wc;
}

static void check_event(const struct mr_wc *wc, int event, int status, const char *what)
{
	CHECK(wc->op == MR_WC_EVENT && wc->event == event && wc->status == status,
	      "%s: op %u event %u (%s) status %u (%s), want event %d (%s) status %d", what, wc->op, wc->event,
	      mr_event_str(wc->event), wc->status, mr_wc_status_str(wc->status), event, mr_event_str(event), status);
}

static void expect_completion(struct mr_qp *qp, int op, uint64_t wr_id, uint32_t bytes, const char *what)
{
	struct mr_wc wc = next(qp, what);
	CHECK(wc.op == op && wc.status == MR_WC_SUCCESS && wc.wr_id == wr_id && (!bytes || wc.bytes == bytes),
	      "%s: op %u status %u (%s) wr_id %llu bytes %u, want op %d wr_id %llu", what, wc.op, wc.status,
	      mr_wc_status_str(wc.status), (unsigned long long)wc.wr_id, wc.bytes, op, (unsigned long long)wr_id);
}

static struct mr_qp *new_qp(int events, struct mr_cq *cq)
{
	struct mr_qp *qp;
	MUST(mr_create_qp(ctx, &(struct mr_qp_attr){.sq_slots = 16, .cq_slots = cq ? 0 : 64, .events = events, .cq = cq},
			  &qp));
	return qp;
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: mrconn SOCK SERVICE PEER PEER_SERVICE GO_FILE\n");
		return 2;
	}
	const char *sock = argv[1], *peer = argv[3], *go = argv[5];
	uint32_t service = (uint32_t)strtoul(argv[2], NULL, 10), peer_service = (uint32_t)strtoul(argv[4], NULL, 10);
	MUST(mr_open(sock, &ctx));
	struct mr_mem *mem;
	struct mr_mr *mr;
	MUST(mr_mem_alloc(MEM, &mem));
	MUST(mr_reg(ctx, mem, 0, MEM, MR_ACCESS_LOCAL_WRITE, &mr));
	uint8_t *b = mr->buf;

	/* The listener at our own number, and what a chosen number may not be. */
	char local[64];
	CHECK(mr_listen_service(ctx, 0, 16, 0, local, sizeof local) == MR_ERR_INVAL, "listen at service 0");
	CHECK(mr_listen_service(ctx, 0, 16, 1u << 24, local, sizeof local) == MR_ERR_BAD_REQUEST,
	      "listen above the daemon's numbers");
	MUST(mr_listen_service(ctx, 0, 16, service, local, sizeof local));
	CHECK(local[0] != 0, "listen: no local address");
	int e = mr_listen_service(ctx, 0, 16, service, NULL, 0);
	CHECK(e == MR_ERR_BUSY && strstr(mr_ctx_error(ctx), "in use"), "a second listen at %u: %s (%s)", service,
	      mr_strerror(e), mr_ctx_error(ctx));

	struct mr_cq *cq;
	MUST(mr_create_cq(ctx, &(struct mr_cq_attr){.slots = 64}, &cq));
	struct mr_qp *out = new_qp(1, NULL), *in = new_qp(1, NULL), *noev = new_qp(0, NULL), *stray = new_qp(1, cq);
	e = mr_connect_nowait(noev, peer, peer_service, 0, 5000);
	CHECK(e == MR_ERR_INVAL && mr_qp_state(noev) == MR_QP_IDLE,
	      "nowait connect without events: %s, state %d", mr_strerror(e), mr_qp_state(noev));
	struct mr_wr rw = {.op = MR_WR_RECV, .wr_id = WR_RECV, .lkey = mr->key, .laddr = mr->addr + OFF_RX, .length = LEN};
	MUST(mr_post(in, &rw, 1));
	for (size_t i = 0; i < LEN; i++)
		b[OFF_TX + i] = pat(service, i);
	printf("READY\n");
	fflush(stdout);
	for (int64_t until = now_ms() + 30000; access(go, F_OK) != 0;) {
		if (now_ms() > until) {
			fprintf(stderr, "FAIL: no %s\n", go);
			return 1;
		}
		usleep(1000);
	}

	/* Connect first, then accept: each side's connect must return
	 * before the other has accepted it. */
	int64_t t0 = now_ms();
	MUST(mr_connect_nowait(out, peer, peer_service, 0, 20000));
	int64_t took = now_ms() - t0;
	CHECK(took < 300, "the nowait connect took %lld ms: it waited", (long long)took);
	CHECK(mr_qp_state(out) == MR_QP_CONNECTING, "after the nowait connect: state %d", mr_qp_state(out));
	MUST(mr_connect_nowait(stray, peer, peer_service + 1, 0, 5000)); /* nothing listens there */
	struct mr_conn_request cr;
	MUST(mr_get_request_ex(ctx, service, 20000, &cr));
	CHECK(strcmp(cr.peer, peer) == 0, "request from %s, want %s", cr.peer, peer);
	MUST(mr_accept_request(ctx, service, cr.request, in));

	struct mr_wc wc = next(out, "outbound");
	check_event(&wc, MR_EVENT_CONNECTED, MR_WC_SUCCESS, "outbound");
	CHECK(mr_qp_state(out) == MR_QP_CONNECTED, "outbound: state %d after its event", mr_qp_state(out));
	wc = next(in, "inbound");
	check_event(&wc, MR_EVENT_CONNECTED, MR_WC_SUCCESS, "inbound");
	CHECK(mr_qp_state(in) == MR_QP_CONNECTED, "inbound: state %d", mr_qp_state(in));

	struct mr_wr sw = {.op = MR_WR_SEND, .wr_id = WR_SEND, .lkey = mr->key, .laddr = mr->addr + OFF_TX, .length = LEN};
	MUST(mr_post(out, &sw, 1));
	expect_completion(out, MR_WC_SEND, WR_SEND, 0, "send");
	expect_completion(in, MR_WC_RECV, WR_RECV, LEN, "receive");
	size_t bad = LEN;
	for (size_t i = 0; i < LEN && bad == LEN; i++)
		if (b[OFF_RX + i] != pat(peer_service, i))
			bad = i;
	CHECK(bad == LEN, "received bytes differ from byte %zu", bad);

	/* The stray connect's refusal, through the shared CQ. */
	int n = mr_cq_wait(cq, &wc, 1, 20000);
	CHECK(n == 1 && wc.qp_num == mr_qp_num(stray), "shared CQ: %d entries, queue pair %u (want %u)", n, wc.qp_num,
	      mr_qp_num(stray));
	check_event(&wc, MR_EVENT_FAILED, MR_WC_REJECTED, "nowait connect to nothing");
	struct mr_qp_query q;
	MUST(mr_query_qp(stray, &q));
	CHECK(q.state == MR_QP_CLOSED && q.reason == MR_WC_REJECTED, "stray: query state %d reason %d (%s)", q.state,
	      q.reason, q.reason_name);

	mr_destroy_qp(out);
	mr_destroy_qp(in);
	mr_destroy_qp(noev);
	mr_destroy_qp(stray);
	MUST(mr_destroy_cq(cq));
	MUST(mr_unlisten(ctx, service));
	mr_dereg(mr);
	mr_mem_free(mem);
	mr_close(ctx);
	ctx = NULL;
	if (fails) {
		fprintf(stderr, "%d of %d checks failed\n", fails, checks);
		return 1;
	}
	printf("PASS %d checks\n", checks);
	return 0;
}
