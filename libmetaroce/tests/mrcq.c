/* mrcq: shared completion queues and scatter-gather lists of the C
 * library (issue 20), run by cq_test.go between two real daemons:
 *
 *   mrcq server SOCK                          prints "READY service token addr key"
 *   mrcq client SOCK PEER SERVICE TOKEN ADDR KEY
 *
 * The server makes one shared CQ and a listener, and accepts NCONN
 * connections, each onto a queue pair completing into that CQ, each with
 * a receive posted. It waits for everything through the CQ's descriptor
 * (mr_cq_arm, poll on mr_cq_fd, mr_cq_disarm, mr_cq_poll): the connected
 * events, then per connection a SEND whose bytes it checks, after the
 * client's WRITE, whose bytes it checks too, then the peer's close; each
 * entry must name its own queue pair (qp_num). Destroying the CQ while in
 * use is refused (MR_ERR_BUSY); another session naming it is refused
 * (MR_ERR_NOT_FOUND); once its queue pairs are gone it is destroyed.
 *
 * The client connects NCONN queue pairs; each WRITEs a 4-entry list from
 * two regions and SENDs a 3-entry list; the first also tries the hostile
 * cases: 5 entries (refused by mr_post), an entry under a wrong lkey and
 * one past its region (both complete MR_WC_LOCAL_PROTECTION). Exit 0 with
 * "PASS" is a pass. */
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "metaroce.h"

#include "check.h"

/* open_fds counts this process's descriptors. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

#define NCONN 8
#define MEM (1u << 20)
#define OFF_W 0                /* WRITEs land here, 8 KiB per connection */
#define OFF_RECV (512u << 10)  /* receive buffers, 4 KiB per connection */
#define SRC2 4096u             /* the client's second region */

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

/* The client's two source regions, per connection i. */
static uint8_t pat1(size_t j, int i) { return (uint8_t)(j * 13 + 5 + (size_t)i * 7); }
static uint8_t pat2(size_t j, int i) { return (uint8_t)(j * 29 + 1 + (size_t)i * 3); }

/* The lists, as (region, offset, length): region 1 or 2. */
struct piece {
	int region;
	uint32_t off, len;
};
static const struct piece wlist[4] = {{1, 100, 1000}, {2, 0, 37}, {1, 5000, 3000}, {2, 100, 1}};
static const struct piece slist[3] = {{1, 0, 10}, {2, 50, 2000}, {1, 9000, 500}};

/* expected writes the bytes a list gathers for connection i into out;
 * returns how many. */
static size_t expected(const struct piece *l, int n, int i, uint8_t *out)
{
	size_t k = 0;
	for (int e = 0; e < n; e++)
		for (uint32_t j = 0; j < l[e].len; j++)
			out[k++] = l[e].region == 1 ? pat1(l[e].off + j, i) : pat2(l[e].off + j, i);
	return k;
}

/* wait_cq takes one entry of the CQ, sleeping on its descriptor. */
static struct mr_wc wait_cq(struct mr_cq *cq, const char *what)
{
	struct mr_wc wc;
	for (int tries = 0; tries < 200; tries++) {
		int n = mr_cq_poll(cq, &wc, 1);
		if (n == 1)
			return wc;
		MUST(n);
		int ready = mr_cq_arm(cq);
		MUST(ready);
		if (ready == 0) {
			struct pollfd p = {mr_cq_fd(cq), POLLIN, 0};
			poll(&p, 1, 100);
		}
		mr_cq_disarm(cq);
	}
	fprintf(stderr, "FAIL %s: nothing in the shared CQ for 20 s\n", what);
	exit(1);
}

static int server(const char *sock)
{
	struct mr_mem *mem;
	struct mr_mr *mr;
	MUST(mr_open(sock, &ctx));
	CHECK(mr_ctx_limits(ctx)->max_sge == MR_MAX_SGE, "max_sge %d, want %d", mr_ctx_limits(ctx)->max_sge, MR_MAX_SGE);
	MUST(mr_mem_alloc(MEM, &mem));
	MUST(mr_reg(ctx, mem, 0, MEM, 7, &mr));
	uint8_t *b = mr->buf;
	struct mr_cq *cq;
	MUST(mr_create_cq(ctx, &(struct mr_cq_attr){.slots = 256}, &cq));
	CHECK(mr_cq_slots(cq) == 256 && mr_cq_fd(cq) >= 0, "cq: %u slots, fd %d", mr_cq_slots(cq), mr_cq_fd(cq));

	/* Another session cannot put a queue pair on it. */
	struct mr_ctx *other;
	MUST(mr_open(sock, &other));
	struct mr_qp *stolen = NULL;
	int e = mr_create_qp(other, &(struct mr_qp_attr){.cq = cq}, &stolen);
	CHECK(e == MR_ERR_NOT_FOUND && stolen == NULL, "a queue pair on another session's CQ: %s (%s)", mr_strerror(e),
	      mr_ctx_error(other));
	mr_close(other);
	struct mr_qp *bad;
	CHECK(mr_create_qp(ctx, &(struct mr_qp_attr){.cq = cq, .cq_slots = 8}, &bad) == MR_ERR_INVAL,
	      "a shared-CQ queue pair with cq_slots");

	uint32_t service;
	uint64_t token;
	char local[64];
	MUST(mr_listen(ctx, 0, 0, 0, &service, &token, local, sizeof local));
	printf("READY %u %llu %llu %u\n", service, (unsigned long long)token, (unsigned long long)mr->addr, mr->key);

	struct mr_qp *qps[NCONN];
	int fds0 = open_fds();
	for (int i = 0; i < NCONN; i++) {
		struct mr_conn_request cr;
		MUST(mr_get_request_ex(ctx, service, 30000, &cr));
		MUST(mr_create_qp(ctx, &(struct mr_qp_attr){.sq_slots = 8, .cq = cq}, &qps[i]));
		struct mr_wr w = {.op = MR_WR_RECV, .wr_id = 100 + (uint64_t)i, .lkey = mr->key,
				  .laddr = mr->addr + OFF_RECV + (uint64_t)i * 4096, .length = 4096};
		MUST(mr_post(qps[i], &w, 1));
		MUST(mr_accept_request_with(ctx, service, cr.request, qps[i], &i, sizeof i));
		struct mr_wc x;
		CHECK(mr_poll_cq(qps[i], &x, 1) == MR_ERR_INVAL && mr_qp_arm(qps[i]) == MR_ERR_INVAL,
		      "a shared-CQ queue pair polled on its own");
		CHECK(mr_qp_fd(qps[i]) == mr_cq_fd(cq), "a shared-CQ queue pair's descriptor is not the CQ's");
	}
	/* Each queue pair holds one descriptor, its doorbell end (its send
	 * queue's memfd is closed once mapped); the CQ's is the one to wait on. */
	CHECK(open_fds() - fds0 == NCONN, "%d queue pairs on a shared CQ hold %d descriptors, want %d", NCONN,
	      open_fds() - fds0, NCONN);
	CHECK(mr_destroy_cq(cq) == MR_ERR_BUSY, "destroying a CQ in use: not refused (%s)", mr_ctx_error(ctx));

	int connected = 0, received = 0, closed = 0;
	uint8_t want[16384];
	while (closed < NCONN) {
		struct mr_wc wc = wait_cq(cq, "server");
		int i = -1;
		for (int k = 0; k < NCONN; k++)
			if (qps[k] && mr_qp_num(qps[k]) == wc.qp_num)
				i = k;
		if (i < 0) {
			CHECK(0, "an entry for queue pair %u, not one of ours (op %u)", wc.qp_num, wc.op);
			break;
		}
		if (wc.op == MR_WC_EVENT) {
			if (wc.event == MR_EVENT_CONNECTED) {
				connected++;
				continue;
			}
			CHECK(wc.event == MR_EVENT_PEER_CLOSED, "queue pair %d: event %s", i, mr_event_str(wc.event));
			MUST(mr_destroy_qp(qps[i]));
			qps[i] = NULL;
			closed++;
			continue;
		}
		CHECK(wc.op == MR_WC_RECV && wc.status == MR_WC_SUCCESS && wc.wr_id == 100 + (uint64_t)i,
		      "queue pair %d: op %u status %s wr_id %llu", i, wc.op, mr_wc_status_str(wc.status),
		      (unsigned long long)wc.wr_id);
		size_t n = expected(slist, 3, i, want);
		CHECK(wc.bytes == n && memcmp(b + OFF_RECV + (size_t)i * 4096, want, n) == 0,
		      "queue pair %d: the SEND from a 3-entry list (%u bytes, want %zu) differs", i, wc.bytes, n);
		n = expected(wlist, 4, i, want);
		CHECK(memcmp(b + OFF_W + (size_t)i * 8192, want, n) == 0, "queue pair %d: the WRITE from a 4-entry list differs",
		      i);
		received++;
	}
	CHECK(connected == NCONN && received == NCONN, "%d connected, %d received, want %d", connected, received, NCONN);
	MUST(mr_destroy_cq(cq));
	MUST(mr_dereg(mr));
	mr_mem_free(mem);
	mr_close(ctx);
	if (fails) {
		fprintf(stderr, "%d of %d checks failed\n", fails, checks);
		return 1;
	}
	printf("PASS %d checks\n", checks);
	return 0;
}

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

static void to_sges(const struct piece *l, int n, const struct mr_mr *m1, const struct mr_mr *m2, struct mr_sge *out)
{
	for (int e = 0; e < n; e++) {
		const struct mr_mr *m = l[e].region == 1 ? m1 : m2;
		out[e] = (struct mr_sge){.addr = m->addr + l[e].off, .length = l[e].len, .lkey = m->key};
	}
}

static int client(const char *sock, const char *peer, uint32_t service, uint64_t token, uint64_t raddr, uint32_t rkey)
{
	struct mr_mem *mem;
	struct mr_mr *m1, *m2;
	MUST(mr_open(sock, &ctx));
	MUST(mr_mem_alloc(16384 + SRC2, &mem));
	MUST(mr_reg(ctx, mem, 0, 16384, 0, &m1));
	MUST(mr_reg(ctx, mem, 16384, SRC2, 0, &m2));
	struct mr_qp *qps[NCONN];
	for (int i = 0; i < NCONN; i++) {
		uint8_t *s1 = m1->buf, *s2 = m2->buf;
		for (size_t j = 0; j < 16384; j++)
			s1[j] = pat1(j, i);
		for (size_t j = 0; j < SRC2; j++)
			s2[j] = pat2(j, i);
		MUST(mr_create_qp(ctx, &(struct mr_qp_attr){.sq_slots = 16, .cq_slots = 16}, &qps[i]));
		MUST(mr_connect_token(qps[i], peer, service, token, 20000));
		struct mr_qp *q = qps[i];
		struct mr_sge sg[MR_MAX_SGE + 1];
		if (i == 0) {
			/* Hostile: too many entries, a wrong key, past the region. */
			for (int e = 0; e <= MR_MAX_SGE; e++)
				sg[e] = (struct mr_sge){.addr = m1->addr + (uint64_t)e, .length = 1, .lkey = m1->key};
			struct mr_wr w = {.op = MR_WR_WRITE, .wr_id = 1, .sg_list = sg, .num_sge = MR_MAX_SGE + 1,
					  .rkey = rkey, .raddr = raddr + (512u << 10) - 64};
			CHECK(mr_post(q, &w, 1) == MR_ERR_INVAL, "5 entries not refused");
			w.num_sge = 2;
			sg[1].lkey = m1->key ^ 0x5a5a;
			MUST(mr_post(q, &w, 1));
			struct mr_wc wc = next(q, "wrong lkey");
			CHECK(wc.wr_id == 1 && wc.status == MR_WC_LOCAL_PROTECTION, "wrong lkey: %s",
			      mr_wc_status_str(wc.status));
			sg[1] = (struct mr_sge){.addr = m2->addr + SRC2 - 4, .length = 8, .lkey = m2->key};
			w.wr_id = 2;
			MUST(mr_post(q, &w, 1));
			wc = next(q, "past the region");
			CHECK(wc.wr_id == 2 && wc.status == MR_WC_LOCAL_PROTECTION, "past the region: %s",
			      mr_wc_status_str(wc.status));
		}
		to_sges(wlist, 4, m1, m2, sg);
		struct mr_wr w = {.op = MR_WR_WRITE, .wr_id = 10, .sg_list = sg, .num_sge = 4, .rkey = rkey,
				  .raddr = raddr + OFF_W + (uint64_t)i * 8192};
		MUST(mr_post(q, &w, 1));
		struct mr_wc wc = next(q, "write");
		CHECK(wc.wr_id == 10 && wc.op == MR_WC_WRITE && wc.status == MR_WC_SUCCESS && wc.qp_num == mr_qp_num(q),
		      "write: op %u %s qp %u", wc.op, mr_wc_status_str(wc.status), wc.qp_num);
		to_sges(slist, 3, m1, m2, sg);
		w = (struct mr_wr){.op = MR_WR_SEND, .wr_id = 11, .sg_list = sg, .num_sge = 3};
		MUST(mr_post(q, &w, 1));
		wc = next(q, "send");
		CHECK(wc.wr_id == 11 && wc.op == MR_WC_SEND && wc.status == MR_WC_SUCCESS, "send: op %u %s", wc.op,
		      mr_wc_status_str(wc.status));
	}
	for (int i = 0; i < NCONN; i++)
		MUST(mr_destroy_qp(qps[i]));
	MUST(mr_dereg(m1));
	MUST(mr_dereg(m2));
	mr_mem_free(mem);
	mr_close(ctx);
	if (fails) {
		fprintf(stderr, "%d of %d checks failed\n", fails, checks);
		return 1;
	}
	printf("PASS %d checks\n", checks);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[1], "server") == 0)
		return server(argv[2]);
	if (argc == 8 && strcmp(argv[1], "client") == 0)
		return client(argv[2], argv[3], (uint32_t)strtoul(argv[4], NULL, 10), strtoull(argv[5], NULL, 10),
			      strtoull(argv[6], NULL, 10), (uint32_t)strtoul(argv[7], NULL, 10));
	fprintf(stderr, "usage: mrcq server SOCK | client SOCK PEER SERVICE TOKEN ADDR KEY\n");
	return 2;
}
