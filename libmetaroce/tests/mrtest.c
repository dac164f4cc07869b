/* mrtest: the C library's test program, run by libmetaroce_test.go against
 * real daemons in network namespaces (and against a hostile fake one).
 *
 *   mrtest server SOCK             prints "READY qpn token addr key", serves one client
 *   mrtest client SOCK PEER QPN ADDR KEY
 *   mrtest gone SOCK               prints "READY", expects the daemon to be killed
 *   mrtest hostile SOCK CASE       expects the library to refuse what the fake daemon sends
 *
 * Exit 0 is a pass; anything else prints why. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metaroce.h"

#include "check.h"

#define MEM (1u << 20)
#define CHUNK (64u << 10)
#define OFF_READ_SRC (512u << 10)
#define OFF_RECV (256u << 10)
#define OFF_SEND (320u << 10)
#define IMM_WRITE 0x1234abcdu
#define IMM_SEND 77u


#define MUST(call)                                                                                             \
	do {                                                                                                   \
		int e_ = (call);                                                                               \
		if (e_ < 0) {                                                                                  \
			fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call, mr_strerror(e_), \
				ctx ? mr_ctx_error(ctx) : "");                                                 \
			exit(1);                                                                               \
		}                                                                                              \
	} while (0)

static uint8_t pat(int which, size_t i) { return (uint8_t)(i * (size_t)(which * 6 + 1) + (size_t)which); }

static void fill(uint8_t *b, int which, size_t n)
{
	for (size_t i = 0; i < n; i++)
		b[i] = pat(which, i);
}

static int same(const uint8_t *b, int which, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != pat(which, i))
			return 0;
	return 1;
}

static struct mr_ctx *ctx;

/* wait1 waits for one completion (10 s). */
static struct mr_wc wait1(struct mr_qp *qp)
{
	struct mr_wc wc;
	int n = mr_wait_cq(qp, &wc, 1, 10000);
	if (n != 1) {
		fprintf(stderr, "FAIL wait_cq: %s (%s)\n", mr_strerror(n), mr_ctx_error(ctx));
		exit(1);
	}
	return wc;
}

static int post1(struct mr_qp *qp, uint8_t op, uint64_t id, const struct mr_mr *mr, size_t off, uint32_t len,
		 uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct mr_wr w = {.op = op, .wr_id = id, .lkey = mr->key, .laddr = mr->addr + off, .length = len,
			  .rkey = rkey, .raddr = raddr, .imm = imm};
	return mr_post(qp, &w, 1);
}

static int server(const char *sock)
{
	struct mr_mem *mem;
	struct mr_mr *mr;
	struct mr_qp *qp;
	MUST(mr_open(sock, &ctx));
	MUST(mr_mem_alloc(MEM, &mem));
	MUST(mr_reg(ctx, mem, 0, MEM, 7, &mr));
	uint8_t *b = mr->buf;
	fill(b + OFF_READ_SRC, 3, CHUNK);
	MUST(mr_create_qp(ctx, NULL, &qp));
	for (int k = 0; k < 4; k++)
		MUST(post1(qp, MR_WR_RECV, 100 + (uint64_t)k, mr, OFF_RECV + (size_t)k * 4096, 4096, 0, 0, 0));
	printf("READY %u %llu %llu %u\n", mr_qp_num(qp), (unsigned long long)mr_qp_token(qp), (unsigned long long)mr->addr,
	       mr->key);
	fflush(stdout);
	char peer[64];
	MUST(mr_accept(qp, 30000, peer, sizeof peer));
	int got_imm = 0, got_check = 0;
	size_t check_off = 0;
	while (!got_imm || !got_check) {
		struct mr_wc wc = wait1(qp);
		CHECK(wc.status == MR_WC_SUCCESS, "server completion %u: %s", wc.op, mr_wc_status_str(wc.status));
		if (wc.op == MR_WC_RECV_WRITE_IMM) {
			CHECK(wc.flags & MR_WC_FLAG_IMM, "WRITE_IMM without immediate");
			CHECK(wc.imm == IMM_WRITE, "WRITE_IMM immediate %#x", wc.imm);
			CHECK(wc.bytes == CHUNK, "WRITE_IMM bytes %u", wc.bytes);
			got_imm = 1;
		} else if (wc.op == MR_WC_RECV) {
			CHECK(wc.wr_id >= 100 && wc.wr_id < 104, "RECV wr_id %llu", (unsigned long long)wc.wr_id);
			CHECK((wc.flags & MR_WC_FLAG_IMM) && wc.imm == IMM_SEND, "SEND_IMM immediate %#x flags %u", wc.imm,
			      wc.flags);
			CHECK(wc.bytes == 6, "RECV bytes %u", wc.bytes);
			check_off = OFF_RECV + (size_t)(wc.wr_id - 100) * 4096;
			got_check = 1;
		} else {
			CHECK(0, "server: unexpected completion op %u", wc.op);
		}
	}
	CHECK(memcmp(b + check_off, "CHECK", 6) == 0, "SEND payload %.6s", (char *)b + check_off);
	int ok = same(b, 1, CHUNK) && same(b + CHUNK, 2, CHUNK);
	CHECK(ok, "WRITE data differ");
	const char *reply = ok && !fails ? "OK" : "BAD";
	memcpy(b + OFF_SEND, reply, strlen(reply) + 1);
	MUST(post1(qp, MR_WR_SEND, 7, mr, OFF_SEND, (uint32_t)strlen(reply) + 1, 0, 0, 0));
	struct mr_wc wc = wait1(qp);
	CHECK(wc.op == MR_WC_SEND && wc.status == MR_WC_SUCCESS && wc.wr_id == 7, "reply SEND: op %u %s", wc.op,
	      mr_wc_status_str(wc.status));
	/* Stay until the client has done its error cases and gone. */
	for (;;) {
		int n = mr_wait_cq(qp, &wc, 1, 15000);
		if (n < 0)
			break;
		/* Flushed receives when the client's connection ends. */
	}
	mr_destroy_qp(qp);
	mr_dereg(mr);
	mr_mem_free(mem);
	mr_close(ctx);
	return fails ? 1 : 0;
}

static int client(const char *sock, const char *peer, uint32_t rqpn, uint64_t rtoken, uint64_t raddr, uint32_t rkey)
{
	struct mr_mem *mem;
	struct mr_mr *mr;
	struct mr_qp *qp;
	MUST(mr_open(sock, &ctx));
	MUST(mr_mem_alloc(MEM, &mem));
	MUST(mr_reg(ctx, mem, 0, MEM, 7, &mr));
	uint8_t *b = mr->buf;
	fill(b, 1, CHUNK);
	fill(b + CHUNK, 2, CHUNK);
	MUST(mr_create_qp(ctx, &(struct mr_qp_attr){.sq_slots = 64, .cq_slots = 256}, &qp));
	CHECK(mr_qp_sq_slots(qp) == 64 && mr_qp_cq_slots(qp) == 256, "ring sizes %u %u", mr_qp_sq_slots(qp),
	      mr_qp_cq_slots(qp));
	/* Without the token the daemon refuses, as if nothing listened. */
	CHECK(mr_connect(qp, peer, rqpn, 10000) == MR_ERR_CONNECT, "connect without the token: %s", mr_ctx_error(ctx));
	mr_destroy_qp(qp);
	MUST(mr_create_qp(ctx, &(struct mr_qp_attr){.sq_slots = 64, .cq_slots = 256}, &qp));
	MUST(mr_connect_token(qp, peer, rqpn, rtoken, 10000));
	MUST(post1(qp, MR_WR_RECV, 50, mr, OFF_RECV, 4096, 0, 0, 0));
	MUST(post1(qp, MR_WR_WRITE, 1, mr, 0, CHUNK, raddr, rkey, 0));
	MUST(post1(qp, MR_WR_WRITE_IMM, 2, mr, CHUNK, CHUNK, raddr + CHUNK, rkey, IMM_WRITE));
	MUST(post1(qp, MR_WR_READ, 3, mr, OFF_READ_SRC, CHUNK, raddr + OFF_READ_SRC, rkey, 0));
	int seen = 0;
	for (int i = 0; i < 3; i++) {
		struct mr_wc wc = wait1(qp);
		CHECK(wc.status == MR_WC_SUCCESS, "wr %llu: %s", (unsigned long long)wc.wr_id,
		      mr_wc_status_str(wc.status));
		static const uint8_t want[] = {0, MR_WC_WRITE, MR_WC_WRITE, MR_WC_READ};
		CHECK(wc.wr_id >= 1 && wc.wr_id <= 3 && wc.op == want[wc.wr_id], "completion wr %llu op %u",
		      (unsigned long long)wc.wr_id, wc.op);
		if (wc.wr_id >= 1 && wc.wr_id <= 3)
			seen |= 1 << wc.wr_id;
	}
	CHECK(seen == 0xe, "completions seen %#x", seen);
	CHECK(same(b + OFF_READ_SRC, 3, CHUNK), "READ data differ");
	memcpy(b + OFF_SEND, "CHECK", 6);
	MUST(post1(qp, MR_WR_SEND_IMM, 4, mr, OFF_SEND, 6, 0, 0, IMM_SEND));
	int got_send = 0, got_reply = 0;
	while (!got_send || !got_reply) {
		struct mr_wc wc = wait1(qp);
		CHECK(wc.status == MR_WC_SUCCESS, "wr %llu: %s", (unsigned long long)wc.wr_id,
		      mr_wc_status_str(wc.status));
		if (wc.op == MR_WC_SEND && wc.wr_id == 4)
			got_send = 1;
		else if (wc.op == MR_WC_RECV && wc.wr_id == 50) {
			CHECK(wc.bytes == 3 && memcmp(b + OFF_RECV, "OK", 3) == 0, "server says %.8s (%u bytes)",
			      (char *)b + OFF_RECV, wc.bytes);
			got_reply = 1;
		} else {
			CHECK(0, "unexpected completion op %u wr %llu", wc.op, (unsigned long long)wc.wr_id);
			break;
		}
	}
	/* Errors: a bad lkey is refused on this side, before the wire. */
	struct mr_wr w = {.op = MR_WR_WRITE, .wr_id = 8, .lkey = mr->key ^ 0x5a5a5a5a, .laddr = mr->addr,
			  .length = 64, .rkey = rkey, .raddr = raddr};
	MUST(mr_post(qp, &w, 1));
	struct mr_wc wc = wait1(qp);
	CHECK(wc.wr_id == 8 && wc.status == MR_WC_LOCAL_PROTECTION, "bad lkey: wr %llu %s",
	      (unsigned long long)wc.wr_id, mr_wc_status_str(wc.status));
	/* A range past the region is too. */
	MUST(post1(qp, MR_WR_WRITE, 9, mr, MEM - 16, 64, raddr, rkey, 0));
	wc = wait1(qp);
	CHECK(wc.wr_id == 9 && wc.status == MR_WC_LOCAL_PROTECTION, "bad range: wr %llu %s",
	      (unsigned long long)wc.wr_id, mr_wc_status_str(wc.status));
	/* A bad rkey is refused by the peer. */
	MUST(post1(qp, MR_WR_WRITE, 10, mr, 0, 64, raddr, rkey ^ 0x5a5a5a5a, 0));
	wc = wait1(qp);
	CHECK(wc.wr_id == 10 && wc.status == MR_WC_REMOTE_ACCESS, "bad rkey: wr %llu %s",
	      (unsigned long long)wc.wr_id, mr_wc_status_str(wc.status));
	/* A control-protocol error maps to its code. */
	struct mr_qp *bad;
	int e = mr_create_qp(ctx, &(struct mr_qp_attr){.engine = 99}, &bad);
	CHECK(e == MR_ERR_NOT_FOUND || e == MR_ERR_BAD_REQUEST, "create_qp on engine 99: %s", mr_strerror(e));
	struct mr_mr *stale = malloc(sizeof *stale);
	*stale = *mr;
	stale->key ^= 1;
	e = mr_dereg(stale); /* frees stale */
	CHECK(e == MR_ERR_NOT_FOUND, "dereg of an unknown key: %s (%s)", mr_strerror(e), mr_ctx_error(ctx));
	mr_destroy_qp(qp);
	mr_dereg(mr);
	mr_mem_free(mem);
	mr_close(ctx);
	if (!fails)
		printf("PASS\n");
	return fails ? 1 : 0;
}

static int gone(const char *sock)
{
	struct mr_qp *qp;
	struct mr_mem *mem;
	struct mr_mr *mr;
	MUST(mr_open(sock, &ctx));
	MUST(mr_mem_alloc(4096, &mem));
	MUST(mr_reg(ctx, mem, 0, 4096, 7, &mr));
	MUST(mr_create_qp(ctx, NULL, &qp));
	MUST(post1(qp, MR_WR_RECV, 1, mr, 0, 4096, 0, 0, 0));
	printf("READY\n");
	fflush(stdout);
	struct mr_wc wc;
	int n = mr_wait_cq(qp, &wc, 1, 20000);
	CHECK(n == MR_ERR_DAEMON_GONE, "wait_cq with the daemon killed: %d %s", n, mr_strerror(n));
	n = post1(qp, MR_WR_RECV, 2, mr, 0, 4096, 0, 0, 0);
	CHECK(n == MR_ERR_DAEMON_GONE, "post after the daemon went: %s", mr_strerror(n));
	struct mr_qp *q2;
	n = mr_create_qp(ctx, NULL, &q2);
	CHECK(n == MR_ERR_DAEMON_GONE, "create_qp after the daemon went: %s", mr_strerror(n));
	mr_destroy_qp(qp);
	free(mr); /* dereg would ask the daemon */
	mr_mem_free(mem);
	mr_close(ctx);
	if (!fails)
		printf("PASS\n");
	return fails ? 1 : 0;
}

/* hostile20: the cases of issue 20's replies and entries. Every refusal is
 * MR_ERR_PROTOCOL, and the output structures hold nothing beyond their
 * bounds (AddressSanitizer watches the writes). */
static void hostile20(struct mr_qp *qp, const char *c)
{
	struct mr_private got;
	struct mr_rejection rej;
	int e;
	if (strncmp(c, "private-", 8) == 0) {
		e = mr_connect_ex(qp, "10.0.0.2", 5, 6, 1000, "hi", 2, &got, &rej);
		CHECK(e == MR_ERR_PROTOCOL, "%s: connect: %s (%s)", c, mr_strerror(e), mr_ctx_error(ctx));
		CHECK(got.len == 0, "%s: %u bytes of private data taken", c, got.len);
	} else if (strcmp(c, "request-private-long") == 0) {
		struct mr_conn_request cr;
		e = mr_get_request_ex(ctx, 5, 1000, &cr);
		CHECK(e == MR_ERR_PROTOCOL, "%s: get_request: %s (%s)", c, mr_strerror(e), mr_ctx_error(ctx));
		CHECK(cr.priv.len == 0, "%s: %u bytes of private data taken", c, cr.priv.len);
	} else if (strcmp(c, "rejection-good") == 0) {
		e = mr_connect_ex(qp, "10.0.0.2", 5, 6, 1000, NULL, 0, &got, &rej);
		CHECK(e == MR_ERR_CONNECT, "%s: connect: %s (%s)", c, mr_strerror(e), mr_ctx_error(ctx));
		/* The overlong reason is cut to its field and matches nothing. */
		CHECK(rej.reason == MR_REJECT_OTHER && strlen(rej.reason_name) == sizeof rej.reason_name - 1,
		      "%s: reason %d %s", c, rej.reason, rej.reason_name);
		CHECK(rej.app_reason == 7 && rej.priv.len == 2 && rej.priv.data[0] == 10 && rej.priv.data[1] == 11,
		      "%s: app_reason %u, %u bytes", c, rej.app_reason, rej.priv.len);
	} else if (strncmp(c, "rejection-", 10) == 0) {
		e = mr_connect_ex(qp, "10.0.0.2", 5, 6, 1000, NULL, 0, &got, &rej);
		CHECK(e == MR_ERR_PROTOCOL, "%s: connect: %s (%s)", c, mr_strerror(e), mr_ctx_error(ctx));
		CHECK(rej.reason == MR_REJECT_NONE && rej.priv.len == 0, "%s: a rejection taken", c);
	} else if (strncmp(c, "query-", 6) == 0) {
		struct mr_qp_query a;
		e = mr_query_qp(qp, &a);
		CHECK(e == MR_ERR_PROTOCOL, "%s: query: %s (%s)", c, mr_strerror(e), mr_ctx_error(ctx));
	} else {
		/* The queue pair asked for no events (and none of kind 9 exists). */
		struct mr_wc wc[2];
		e = mr_wait_cq(qp, wc, 2, 5000);
		CHECK(e == MR_ERR_PROTOCOL, "%s: wait: %d %s", c, e, mr_strerror(e));
	}
}

/* hostile: the fake daemon (libmetaroce_test.go) misbehaves as CASE says;
 * the library must refuse with the code named after the case and never
 * touch memory outside its mappings (the build has AddressSanitizer). */
static int hostile(const char *sock, const char *c)
{
	struct mr_qp *qp = NULL;
	int e = mr_open(sock, &ctx);
	if (strncmp(c, "hello-", 6) == 0) {
		CHECK(e == MR_ERR_PROTOCOL, "%s: open: %s", c, mr_strerror(e));
		goto out;
	}
	MUST(e);
	if (strcmp(c, "attr-rnr-forever") == 0) {
		/* The fake daemon refuses the queue pair unless create_qp
		 * carried rnr_retry_forever. */
		e = mr_create_qp(ctx, &(struct mr_qp_attr){.rnr_retry_forever = 1}, &qp);
		CHECK(e == MR_OK, "%s: create_qp: %s (%s)", c, mr_strerror(e), mr_ctx_error(ctx));
		if (qp)
			mr_destroy_qp(qp);
		goto out;
	}
	e = mr_create_qp(ctx, strcmp(c, "event-unknown") == 0 ? &(struct mr_qp_attr){.events = 1} : NULL, &qp);
	if (strcmp(c, "cq-index") == 0 || strcmp(c, "sq-index") == 0 || strcmp(c, "bad-cqe") == 0) {
		MUST(e);
		struct mr_wc wc[4];
		if (strcmp(c, "sq-index") == 0) {
			struct mr_wr w = {.op = MR_WR_SEND};
			int n = 0;
			for (int i = 0; i < 100000 && n >= 0; i++)
				n = mr_post(qp, &w, 1);
			CHECK(n == MR_ERR_CORRUPT, "%s: post: %s", c, mr_strerror(n));
		} else if (strcmp(c, "cq-index") == 0) {
			int n = mr_wait_cq(qp, wc, 4, 5000);
			CHECK(n == MR_ERR_CORRUPT, "%s: wait: %d %s", c, n, mr_strerror(n));
			n = mr_poll_cq(qp, wc, 4);
			CHECK(n == MR_ERR_CORRUPT, "%s: sticky: %s", c, mr_strerror(n));
		} else {
			int n = mr_wait_cq(qp, wc, 4, 5000);
			CHECK(n == MR_ERR_PROTOCOL, "%s: wait: %d %s", c, n, mr_strerror(n));
		}
		mr_destroy_qp(qp);
		goto out;
	}
	if (strncmp(c, "private-", 8) == 0 || strncmp(c, "rejection-", 10) == 0 || strncmp(c, "query-", 6) == 0 ||
	    strncmp(c, "request-", 8) == 0 || strncmp(c, "event-", 6) == 0) {
		MUST(e);
		hostile20(qp, c);
		mr_destroy_qp(qp);
		goto out;
	}
	int want = MR_ERR_PROTOCOL;
	if (strcmp(c, "ring-header") == 0 || strcmp(c, "ring-short") == 0)
		want = MR_ERR_CORRUPT;
	if (strcmp(c, "code") == 0)
		want = MR_ERR_LIMIT;
	CHECK(e == want, "%s: create_qp: %s, want %s (%s)", c, mr_strerror(e), mr_strerror(want), mr_ctx_error(ctx));
	CHECK(qp == NULL, "%s: a queue pair came back", c);
out:
	mr_close(ctx);
	if (!fails)
		printf("PASS\n");
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
	if (argc == 3 && strcmp(argv[1], "gone") == 0)
		return gone(argv[2]);
	if (argc == 4 && strcmp(argv[1], "hostile") == 0)
		return hostile(argv[2], argv[3]);
	fprintf(stderr, "usage: mrtest server SOCK | client SOCK PEER QPN ADDR KEY | gone SOCK | hostile SOCK CASE\n");
	return 2;
}
