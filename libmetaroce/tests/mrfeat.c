/* mrfeat: issue 20's features of the C library, run by features_test.go
 * between two real daemons:
 *
 *   mrfeat server SOCK                          prints "READY service token addr key"
 *   mrfeat client SOCK PEER SERVICE TOKEN ADDR KEY
 *
 * The server listens; the client connects four times:
 *   1. with private data, which the server's application reads and rejects
 *      with a reason and private data of its own (and once with a wrong
 *      token: no_service);
 *   2. with 64 bytes of private data, accepted with private data: then
 *      unsignaled WRITEs (one completion for sixteen, a failed unsignaled
 *      request still completes, an unsignaled RECV too), inline WRITE and
 *      SEND verified at the target, query_qp on both sides; the client
 *      destroys its queue pair and the server sees MR_EVENT_PEER_CLOSED
 *      after its flushed receives;
 *   3. once more, after which both print a line ("ACCEPTED3",
 *      "CONNECTED3") and the test kills the server's daemon: the server's
 *      queue pair reports MR_EVENT_DAEMON_GONE, the client's
 *      MR_EVENT_RETRY_EXCEEDED once its keepalive probes go unanswered.
 * Every queue pair but one has events; each step checks the events and
 * mr_qp_state. Exit 0 with "PASS" is a pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metaroce.h"

#include "check.h"

#define MEM (1u << 20)
#define OFF_U 0                  /* sixteen unsignaled WRITEs land here */
#define NU 16
#define USZ 4096u
#define OFF_INL (128u << 10)     /* the inline WRITE */
#define OFF_RECV (256u << 10)    /* receive buffers, 4 KiB each */
#define OFF_MARK (384u << 10)    /* the last signaled WRITE */
#define APP_REASON 0xbeefu
#define IMM_DONE 0x55u

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

/* What each side sends the other, binary bytes included. */
static const uint8_t reject_me[] = "reject me";
static const uint8_t no_thanks[] = {'n', 'o', 0, 0xff, 't', 'h', 'x'};
static const uint8_t welcome[] = {'w', 'e', 'l', 0, 'c', 0x80, 'm', 'e'};
static const char inline_write[MR_MAX_INLINE + 1] = "inline WRITE 20 byte"; /* exactly MR_MAX_INLINE */

static void big_private(uint8_t *p)
{
	for (int i = 0; i < MR_MAX_PRIVATE; i++)
		p[i] = (uint8_t)(i * 37 + 11);
}

static uint8_t pat(size_t i) { return (uint8_t)(i * 13 + 5); }

static int same_private(const struct mr_private *p, const void *want, size_t n)
{
	return p->len == n && memcmp(p->data, want, n) == 0;
}

/* next waits for one entry (completion or event), 20 s. */
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

static void expect_event(struct mr_qp *qp, int event, int status, const char *what)
{
	struct mr_wc wc = next(qp, what);
	CHECK(wc.op == MR_WC_EVENT && wc.event == event && wc.status == status,
	      "%s: op %u event %u (%s) status %u (%s), want event %d (%s) status %d", what, wc.op, wc.event,
	      mr_event_str(wc.event), wc.status, mr_wc_status_str(wc.status), event, mr_event_str(event), status);
	CHECK(wc.wr_id == 0 && wc.bytes == 0 && wc.imm == 0 && wc.stream == 0, "%s: event with fields", what);
}

static void expect_query(struct mr_qp *qp, int state, const char *peer, int reason, const char *what)
{
	struct mr_qp_query a;
	MUST(mr_query_qp(qp, &a));
	CHECK(a.state == state, "%s: query state %d, want %d", what, a.state, state);
	if (peer)
		CHECK(strcmp(a.peer, peer) == 0, "%s: query peer %s, want %s", what, a.peer, peer);
	CHECK(a.reason == reason, "%s: query reason %d (%s), want %d", what, a.reason, a.reason_name, reason);
	if (reason >= 0)
		CHECK(a.reason_name[0] != 0, "%s: reason without a name", what);
}

static struct mr_qp *new_qp(int events)
{
	struct mr_qp *qp;
	MUST(mr_create_qp(ctx, &(struct mr_qp_attr){.sq_slots = 64, .cq_slots = 256, .events = events}, &qp));
	CHECK(mr_qp_state(qp) == MR_QP_IDLE, "new queue pair in state %d", mr_qp_state(qp));
	return qp;
}

static int server(const char *sock)
{
	struct mr_mem *mem;
	struct mr_mr *mr;
	MUST(mr_open(sock, &ctx));
	MUST(mr_mem_alloc(MEM, &mem));
	MUST(mr_reg(ctx, mem, 0, MEM, 7, &mr));
	uint8_t *b = mr->buf;
	uint32_t service;
	uint64_t token;
	char local[64];
	MUST(mr_listen(ctx, 0, 0, 0, &service, &token, local, sizeof local));
	printf("READY %u %llu %llu %u\n", service, (unsigned long long)token, (unsigned long long)mr->addr, mr->key);

	/* 1: read the CONNECT's private data, reject with ours. */
	struct mr_conn_request cr;
	MUST(mr_get_request_ex(ctx, service, 30000, &cr));
	CHECK(same_private(&cr.priv, reject_me, sizeof reject_me), "request 1: private data of %u bytes", cr.priv.len);
	MUST(mr_reject_request_with(ctx, service, cr.request, APP_REASON, no_thanks, sizeof no_thanks));
	CHECK(mr_reject_request_with(ctx, service, cr.request, 1, no_thanks, MR_MAX_PRIVATE + 1) == MR_ERR_INVAL,
	      "reject with 65 bytes of private data");

	/* 2: 64 bytes in, accepted with ours. */
	MUST(mr_get_request_ex(ctx, service, 30000, &cr));
	uint8_t big[MR_MAX_PRIVATE];
	big_private(big);
	CHECK(same_private(&cr.priv, big, sizeof big), "request 2: private data of %u bytes", cr.priv.len);
	struct mr_qp *qp = new_qp(1);
	for (int k = 0; k < 4; k++) {
		struct mr_wr w = {.op = MR_WR_RECV, .wr_id = 10 + (uint64_t)k, .lkey = mr->key,
				  .laddr = mr->addr + OFF_RECV + (uint64_t)k * 4096, .length = 4096};
		MUST(mr_post(qp, &w, 1));
	}
	MUST(mr_accept_request_with(ctx, service, cr.request, qp, welcome, sizeof welcome));
	CHECK(mr_qp_state(qp) == MR_QP_CONNECTED, "accepted: state %d", mr_qp_state(qp));
	expect_event(qp, MR_EVENT_CONNECTED, MR_WC_SUCCESS, "server connected");
	expect_query(qp, MR_QP_CONNECTED, cr.peer, -1, "server connected");

	/* The client's inline SEND "DONE" says its WRITEs are all there. */
	struct mr_wc wc = next(qp, "DONE");
	CHECK(wc.op == MR_WC_RECV && wc.status == MR_WC_SUCCESS && wc.wr_id == 10, "DONE: op %u wr %llu %s", wc.op,
	      (unsigned long long)wc.wr_id, mr_wc_status_str(wc.status));
	CHECK(wc.bytes == 4 && memcmp(b + OFF_RECV, "DONE", 4) == 0, "DONE: %u bytes %.4s", wc.bytes,
	      (char *)b + OFF_RECV);
	CHECK((wc.flags & MR_WC_FLAG_IMM) && wc.imm == IMM_DONE, "DONE: immediate %#x", wc.imm);
	int bad = 0;
	for (size_t i = 0; i < NU * USZ; i++)
		bad += b[OFF_U + i] != pat(i);
	CHECK(bad == 0, "unsignaled WRITEs: %d bytes differ", bad);
	CHECK(memcmp(b + OFF_INL, inline_write, MR_MAX_INLINE) == 0 && b[OFF_INL + MR_MAX_INLINE] == 0,
	      "inline WRITE: %.24s", (char *)b + OFF_INL);
	CHECK(memcmp(b + OFF_MARK, "MARK", 4) == 0, "signaled WRITE: %.4s", (char *)b + OFF_MARK);
	const char *verdict = fails ? "BAD" : "OK";
	struct mr_wr reply = {.op = MR_WR_SEND, .wr_id = 7, .length = 3, .inline_data = verdict};
	MUST(mr_post(qp, &reply, 1));
	wc = next(qp, "reply");
	CHECK(wc.op == MR_WC_SEND && wc.wr_id == 7 && wc.status == MR_WC_SUCCESS, "reply: op %u wr %llu %s", wc.op,
	      (unsigned long long)wc.wr_id, mr_wc_status_str(wc.status));

	/* The client destroys its queue pair: three flushed receives, then
	 * the event, then nothing more to wait for. */
	int flushed = 0;
	for (;;) {
		wc = next(qp, "peer close");
		if (wc.op == MR_WC_EVENT)
			break;
		CHECK(wc.op == MR_WC_RECV && wc.status == MR_WC_FLUSHED, "peer close: op %u %s", wc.op,
		      mr_wc_status_str(wc.status));
		flushed++;
	}
	CHECK(flushed == 3, "%d flushed receives before the event, want 3", flushed);
	CHECK(wc.event == MR_EVENT_PEER_CLOSED && (wc.status == MR_WC_FLUSHED || wc.status == MR_WC_RESET),
	      "peer close: event %u (%s) status %s", wc.event, mr_event_str(wc.event), mr_wc_status_str(wc.status));
	int why = wc.status;
	CHECK(mr_qp_state(qp) == MR_QP_CLOSED, "after peer close: state %d", mr_qp_state(qp));
	int n = mr_wait_cq(qp, &wc, 1, 20000);
	CHECK(n == MR_ERR_CONN_CLOSED, "wait after the terminal event: %d %s", n, mr_strerror(n));
	expect_query(qp, MR_QP_CLOSED, NULL, why, "server after peer close");
	MUST(mr_destroy_qp(qp));

	/* 3: accepted, then our daemon is killed. */
	MUST(mr_get_request_ex(ctx, service, 30000, &cr));
	CHECK(cr.priv.len == 0, "request 3: %u bytes of private data", cr.priv.len);
	qp = new_qp(1);
	MUST(mr_accept_request(ctx, service, cr.request, qp));
	expect_event(qp, MR_EVENT_CONNECTED, MR_WC_SUCCESS, "server connected 3");
	printf("ACCEPTED3\n");
	expect_event(qp, MR_EVENT_DAEMON_GONE, 0, "server's daemon killed");
	CHECK(mr_qp_state(qp) == MR_QP_CLOSED, "daemon gone: state %d", mr_qp_state(qp));
	/* After the event the daemon's absence is the answer, as in Go. */
	n = mr_wait_cq(qp, &wc, 1, 20000);
	CHECK(n == MR_ERR_DAEMON_GONE, "wait after the daemon went: %d %s", n, mr_strerror(n));
	n = mr_poll_cq(qp, &wc, 1);
	CHECK(n == MR_ERR_DAEMON_GONE, "poll after the gone event: %d %s", n, mr_strerror(n));
	struct mr_qp_query qa;
	n = mr_query_qp(qp, &qa);
	CHECK(n == MR_ERR_DAEMON_GONE, "query after the daemon went: %s", mr_strerror(n));
	mr_destroy_qp(qp);
	free(mr); /* dereg would ask the daemon */
	mr_mem_free(mem);
	mr_close(ctx);
	if (!fails)
		printf("PASS %d checks\n", checks);
	return fails ? 1 : 0;
}

static int client(const char *sock, const char *peer, uint32_t service, uint64_t token, uint64_t raddr, uint32_t rkey)
{
	struct mr_mem *mem;
	struct mr_mr *mr;
	MUST(mr_open(sock, &ctx));
	MUST(mr_mem_alloc(MEM, &mem));
	MUST(mr_reg(ctx, mem, 0, MEM, 7, &mr));
	uint8_t *b = mr->buf;
	struct mr_private got;
	struct mr_rejection rej;

	/* A wrong token: refused as if nothing listened, and with no events
	 * asked for none come. */
	struct mr_qp *qp = new_qp(0);
	int e = mr_connect_ex(qp, peer, service, token ^ 1, 10000, NULL, 0, &got, &rej);
	CHECK(e == MR_ERR_CONNECT && rej.reason == MR_REJECT_NO_SERVICE && strcmp(rej.reason_name, "no_service") == 0,
	      "wrong token: %s, reason %d %s", mr_strerror(e), rej.reason, rej.reason_name);
	CHECK(mr_qp_state(qp) == MR_QP_CLOSED, "refused: state %d", mr_qp_state(qp));
	struct mr_wc wc;
	e = mr_poll_cq(qp, &wc, 1);
	CHECK(e == 0, "a queue pair without events: poll %d", e);
	mr_destroy_qp(qp);

	/* 1: rejected by the application, with its reason and data. */
	qp = new_qp(1);
	e = mr_connect_ex(qp, peer, service, token, 10000, reject_me, sizeof reject_me, &got, &rej);
	CHECK(e == MR_ERR_CONNECT, "connect 1: %s (%s)", mr_strerror(e), mr_ctx_error(ctx));
	CHECK(rej.reason == MR_REJECT_APPLICATION && strcmp(rej.reason_name, "application") == 0,
	      "rejection reason %d %s", rej.reason, rej.reason_name);
	CHECK(rej.app_reason == APP_REASON, "app_reason %#x", rej.app_reason);
	CHECK(same_private(&rej.priv, no_thanks, sizeof no_thanks), "rejection private data of %u bytes", rej.priv.len);
	expect_event(qp, MR_EVENT_FAILED, MR_WC_REJECTED, "rejected");
	e = mr_wait_cq(qp, &wc, 1, 20000);
	CHECK(e == MR_ERR_CONN_CLOSED, "wait after rejection: %s", mr_strerror(e));
	expect_query(qp, MR_QP_CLOSED, NULL, MR_WC_REJECTED, "rejected");
	mr_destroy_qp(qp);

	/* 2: 64 bytes of private data, accepted with the server's. */
	qp = new_qp(1);
	uint8_t big[MR_MAX_PRIVATE + 1];
	big_private(big);
	CHECK(mr_connect_ex(qp, peer, service, token, 10000, big, sizeof big, &got, &rej) == MR_ERR_INVAL,
	      "connect with 65 bytes of private data");
	MUST(mr_connect_ex(qp, peer, service, token, 10000, big, MR_MAX_PRIVATE, &got, &rej));
	CHECK(same_private(&got, welcome, sizeof welcome), "ACCEPT's private data of %u bytes", got.len);
	CHECK(mr_qp_state(qp) == MR_QP_CONNECTED, "connected: state %d", mr_qp_state(qp));
	expect_event(qp, MR_EVENT_CONNECTED, MR_WC_SUCCESS, "client connected");
	expect_query(qp, MR_QP_CONNECTED, peer, -1, "client connected");

	/* Requests the library refuses, whole batches at once. */
	struct mr_wr good = {.op = MR_WR_WRITE, .wr_id = 900, .inline_data = "x", .length = 1, .raddr = raddr,
			     .rkey = rkey};
	struct mr_wr bads[][2] = {
		{good, {.op = MR_WR_WRITE, .wr_id = 901, .inline_data = inline_write, .length = MR_MAX_INLINE + 1}},
		{good, {.op = MR_WR_READ, .wr_id = 902, .inline_data = "x", .length = 1}},
		{good, {.op = MR_WR_RECV, .wr_id = 903, .inline_data = "x", .length = 1}},
		{good, {.op = MR_WR_WRITE, .wr_id = 904, .flags = 4, .lkey = mr->key, .laddr = mr->addr, .length = 1}},
	};
	for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
		e = mr_post(qp, bads[i], 2);
		CHECK(e == MR_ERR_INVAL, "bad batch %zu: %d %s", i, e, mr_strerror(e));
	}

	/* An unsignaled RECV still completes (the server's reply). */
	struct mr_wr recv = {.op = MR_WR_RECV, .flags = MR_WR_UNSIGNALED, .wr_id = 50, .lkey = mr->key,
			     .laddr = mr->addr + OFF_RECV, .length = 4096};
	MUST(mr_post(qp, &recv, 1));
	/* Sixteen WRITEs, the last signaled: one completion. */
	for (size_t i = 0; i < NU * USZ; i++)
		b[OFF_U + i] = pat(i);
	struct mr_wr ws[NU];
	for (int i = 0; i < NU; i++)
		ws[i] = (struct mr_wr){.op = MR_WR_WRITE, .flags = i < NU - 1 ? MR_WR_UNSIGNALED : 0,
				       .wr_id = 100 + (uint64_t)i, .lkey = mr->key,
				       .laddr = mr->addr + OFF_U + (uint64_t)i * USZ, .length = USZ,
				       .raddr = raddr + OFF_U + (uint64_t)i * USZ, .rkey = rkey};
	int posted = 0;
	while (posted < NU) {
		e = mr_post(qp, ws + posted, NU - posted);
		MUST(e == MR_ERR_SQ_FULL ? 0 : e);
		posted += e > 0 ? e : 0;
	}
	/* An unsignaled request that fails completes all the same. */
	struct mr_wr badkey = {.op = MR_WR_WRITE, .flags = MR_WR_UNSIGNALED, .wr_id = 200, .lkey = mr->key ^ 0x5a5a5a5a,
			       .laddr = mr->addr, .length = 64, .raddr = raddr, .rkey = rkey};
	MUST(mr_post(qp, &badkey, 1));
	/* Inline: the buffer is clobbered as soon as mr_post returns. */
	char buf[MR_MAX_INLINE];
	memcpy(buf, inline_write, MR_MAX_INLINE);
	struct mr_wr inl = {.op = MR_WR_WRITE, .wr_id = 400, .inline_data = buf, .length = MR_MAX_INLINE,
			    .raddr = raddr + OFF_INL, .rkey = rkey};
	MUST(mr_post(qp, &inl, 1));
	memset(buf, 0xee, sizeof buf);
	memcpy(b + OFF_MARK, "MARK", 4);
	struct mr_wr mark = {.op = MR_WR_WRITE, .wr_id = 999, .lkey = mr->key, .laddr = mr->addr + OFF_MARK,
			     .length = 4, .raddr = raddr + OFF_MARK, .rkey = rkey};
	MUST(mr_post(qp, &mark, 1));
	memcpy(buf, "DONE", 4);
	struct mr_wr done = {.op = MR_WR_SEND_IMM, .flags = MR_WR_UNSIGNALED, .wr_id = 401, .inline_data = buf,
			     .length = 4, .imm = IMM_DONE};
	MUST(mr_post(qp, &done, 1));
	memset(buf, 0xee, sizeof buf);
	/* Expected: 115 (the signaled WRITE), 200 (failed), 400, 999 and the
	 * RECV of the server's verdict; nothing for the fifteen unsignaled
	 * WRITEs or the unsignaled SEND. The verdict comes after the server
	 * has seen DONE, which follows everything else on the stream. */
	int seen[4] = {0}, recvd = 0, others = 0;
	while (!recvd || !seen[0] || !seen[1] || !seen[2] || !seen[3]) {
		wc = next(qp, "unsignaled");
		if (wc.op == MR_WC_WRITE && wc.wr_id == 100 + NU - 1 && wc.status == MR_WC_SUCCESS)
			seen[0]++;
		else if (wc.wr_id == 200 && wc.status == MR_WC_LOCAL_PROTECTION)
			seen[1]++;
		else if (wc.op == MR_WC_WRITE && wc.wr_id == 400 && wc.status == MR_WC_SUCCESS)
			seen[2]++;
		else if (wc.op == MR_WC_WRITE && wc.wr_id == 999 && wc.status == MR_WC_SUCCESS)
			seen[3]++;
		else if (wc.op == MR_WC_RECV && wc.wr_id == 50 && wc.status == MR_WC_SUCCESS && !recvd) {
			recvd = 1;
			CHECK(wc.bytes == 3 && memcmp(b + OFF_RECV, "OK", 3) == 0, "server says %.3s (%u bytes)",
			      (char *)b + OFF_RECV, wc.bytes);
		} else {
			others++;
			CHECK(0, "unexpected completion op %u wr %llu %s", wc.op, (unsigned long long)wc.wr_id,
			      mr_wc_status_str(wc.status));
		}
	}
	/* A last signaled request: completions come in order on the stream,
	 * so a completion of the unsignaled SEND would be here before it. */
	struct mr_wr last = {.op = MR_WR_WRITE, .wr_id = 998, .inline_data = "L", .length = 1,
			     .raddr = raddr + OFF_MARK + 8, .rkey = rkey};
	MUST(mr_post(qp, &last, 1));
	for (;;) {
		wc = next(qp, "last");
		if (wc.op == MR_WC_WRITE && wc.wr_id == 998 && wc.status == MR_WC_SUCCESS)
			break;
		others++;
		CHECK(0, "unexpected completion op %u wr %llu %s", wc.op, (unsigned long long)wc.wr_id,
		      mr_wc_status_str(wc.status));
	}
	CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1 && seen[3] == 1 && others == 0,
	      "completions: signaled %d, failed unsignaled %d, inline %d, mark %d, others %d", seen[0], seen[1],
	      seen[2], seen[3], others);
	CHECK(mr_poll_cq(qp, &wc, 1) == 0, "a completion after the last: op %u wr %llu", wc.op,
	      (unsigned long long)wc.wr_id);
	mr_destroy_qp(qp); /* the server sees MR_EVENT_PEER_CLOSED */

	/* 3: then the server's daemon is killed under the connection. */
	qp = new_qp(1);
	MUST(mr_connect_ex(qp, peer, service, token, 10000, NULL, 0, &got, NULL));
	CHECK(got.len == 0, "ACCEPT 3 with %u bytes of private data", got.len);
	expect_event(qp, MR_EVENT_CONNECTED, MR_WC_SUCCESS, "client connected 3");
	printf("CONNECTED3\n");
	expect_event(qp, MR_EVENT_RETRY_EXCEEDED, MR_WC_RETRY_EXCEEDED, "server's daemon killed");
	CHECK(mr_qp_state(qp) == MR_QP_CLOSED, "peer gone: state %d", mr_qp_state(qp));
	e = mr_wait_cq(qp, &wc, 1, 20000);
	CHECK(e == MR_ERR_CONN_CLOSED, "wait after retry exceeded: %s", mr_strerror(e));
	expect_query(qp, MR_QP_CLOSED, peer, MR_WC_RETRY_EXCEEDED, "client after the server's daemon went");
	mr_destroy_qp(qp);
	mr_dereg(mr);
	mr_mem_free(mem);
	mr_close(ctx);
	if (!fails)
		printf("PASS %d checks\n", checks);
	return fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(argv[2]);
	if (argc == 8 && strcmp(argv[1], "client") == 0)
		return client(argv[2], argv[3], (uint32_t)strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
			      strtoull(argv[6], NULL, 10), (uint32_t)strtoul(argv[7], NULL, 10));
	fprintf(stderr, "usage: mrfeat server SOCK | client SOCK PEER SERVICE TOKEN ADDR KEY\n");
	return 2;
}
