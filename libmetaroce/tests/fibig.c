/* fibig: large messages and RMA, multi-receive buffers and fi_cancel
 * through the provider, between a server and a client endpoint in two
 * namespaces (fibig_test.go runs it through a lossy switch):
 *
 *   fibig server SOCK PROVDIR      prints "READY name name2 addr key"
 *   fibig client SOCK PROVDIR NAME NAME2 ADDR KEY
 *
 * Every byte of every message and RMA transfer is checked against a
 * pattern of the message (or transfer) and the offset, and the bytes
 * around every receive buffer are checked untouched. In order:
 *
 *   sizes: tagged and FI_MSG messages of 0, 1, 64 KiB-1, 64 KiB, 64 KiB+1,
 *     1 MiB, 16 MiB (and 256 MiB tagged), half with remote CQ data, one
 *     from a registered buffer (in place), one of three iovs, one
 *     received into four; the tagged receives posted in reverse order of
 *     tags, the FI_MSG ones in order; then four large tagged sends back
 *     to back whose receives are posted in reverse, and three with one
 *     tag, which must match in sending order (FI_ORDER_SAS).
 *   unexpected: large messages sent before any receive: FI_PEEK|FI_CLAIM
 *     of one still arriving, then FI_CLAIM; FI_PEEK of another (length,
 *     CQ data); FI_PEEK|FI_DISCARD of a third, gone after; an FI_MSG one
 *     received a while later.
 *   truncation: 16 MiB into a 1 MiB receive (FI_ETRUNC, olen 15 MiB, the
 *     first MiB right), the next message whole; an unexpected one
 *     truncated into two iovs.
 *   multi-receive: FI_OPT_MIN_MULTI_RECV set and read; 120 small messages
 *     land back to back in two buffers, reposted when a completion says
 *     FI_MULTI_RECV (only once less than the minimum is left); a buffer
 *     cancelled (FI_ECANCELED with FI_MULTI_RECV); one posted after its
 *     messages came takes them from the unexpected queue.
 *   cancel: a posted receive cancelled (FI_ECANCELED, its context, and
 *     the message it would have taken goes to the next receive), an
 *     unknown context -FI_ENOENT; fi_rx_size_left and fi_tx_size_left.
 *   RMA: fi_write and fi_read of 16 MiB and 256 MiB from and into
 *     registered and unregistered memory; fi_writedata of 16 MiB of each
 *     kind, whose CQ data the server sees once each.
 *   failures: the server closes an endpoint in the middle of a 64 MiB
 *     message to it (the client's send fails); the client dies in the
 *     middle of another (the server's receive fails). Nothing hangs.
 *
 * Exit 0 and "PASS" is a pass. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define NAMELEN 64
#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define SLACK 64           /* bytes after each receive buffer, checked untouched */
#define REGION (272 * MiB) /* the server's RMA target: 16 MiB, then 256 MiB */
#define FAIL_LEN (64 * MiB)

#define DIE(...)                                                                                              \
	do {                                                                                                   \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                          \
		fprintf(stderr, __VA_ARGS__);                                                                  \
		fputc('\n', stderr);                                                                           \
		exit(1);                                                                                       \
	} while (0)
#define MUST(call)                                                                                             \
	do {                                                                                                   \
		long e_ = (long)(call);                                                                        \
		if (e_)                                                                                        \
			DIE("%s: %ld (%s)", #call, e_, fi_strerror((int)-e_));                                 \
	} while (0)

static struct fi_info *info;
static struct fid_fabric *fab;
static struct fid_domain *dom;
static struct fid_av *av;

struct ep {
	struct fid_ep *ep;
	struct fid_cq *tx, *rx;
	char name[NAMELEN];
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- the pattern: bytes of message m at offset off ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ULL;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dULL;
	return x ^ (x >> 33);
}

static uint64_t word(uint32_t m, uint64_t w) { return mix(w * 0x9E3779B97F4A7C15ULL + ((uint64_t)m << 40) + m); }

static uint8_t pat(uint32_t m, uint64_t off)
{
	uint64_t v = word(m, off >> 3);
	uint8_t b[8];
	memcpy(b, &v, 8);
	return b[off & 7];
}

static void fill(uint8_t *p, size_t n, uint32_t m, uint64_t off)
{
	size_t i = 0;
	for (; i < n && ((off + i) & 7); i++)
		p[i] = pat(m, off + i);
	for (; i + 8 <= n; i += 8) {
		uint64_t v = word(m, (off + i) >> 3);
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = pat(m, off + i);
}

/* busy, if set, is progressed every MiB of a check: a peer streaming
 * to an endpoint that does not progress finds its receive slots full,
 * and the transport gives up after its RNR retries (about 0.1 s here,
 * transport.rnr_retries), as a real application must know too. */
static struct fid_cq *busy;

/* check: the first offset (from p) whose byte is not message m's, or -1. */
static long long check(const uint8_t *p, size_t n, uint32_t m, uint64_t off)
{
	size_t i = 0;
	for (; i < n && ((off + i) & 7); i++)
		if (p[i] != pat(m, off + i))
			return (long long)i;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = word(m, (off + i) >> 3);
		if (memcmp(p + i, &v, 8))
			break;
		if (busy && (i & ((1 << 20) - 1)) == 0) {
			struct fi_cq_tagged_entry x;
			fi_cq_read(busy, &x, 0);
		}
	}
	for (; i < n; i++)
		if (p[i] != pat(m, off + i))
			return (long long)i;
	return -1;
}

#define CHECK_BYTES(p, n, m, off, ...)                                                                         \
	do {                                                                                                   \
		long long bad_ = check((p), (n), (m), (off));                                                  \
		if (bad_ >= 0)                                                                                 \
			DIE("byte %lld of %zu (message %u) wrong: %s", bad_, (size_t)(n), (unsigned)(m), __VA_ARGS__); \
	} while (0)

/* A receive buffer with SLACK guard bytes behind it. */
static uint8_t *rbuf(size_t n)
{
	uint8_t *p = malloc(n + SLACK);
	if (!p)
		DIE("malloc %zu", n);
	memset(p, 0xEE, n + SLACK);
	return p;
}

static void guard(const uint8_t *p, size_t n, const char *what)
{
	for (size_t i = 0; i < SLACK; i++)
		if (p[n + i] != 0xEE)
			DIE("%s: byte %zu past the buffer's end written", what, i);
}

/* ---- completions ---- */

struct comp {
	void *ctx;
	uint64_t flags, tag, data;
	size_t len, olen;
	void *buf;
	int err, prov_errno;
};

/* get waits for one completion of cq (20 s at most); 0 or its error. */
static int get(struct fid_cq *cq, struct comp *c)
{
	double t0 = now_s();
	for (long spins = 0;; spins++) {
		struct fi_cq_tagged_entry e;
		ssize_t n = fi_cq_read(cq, &e, 1);
		if (n == 1) {
			*c = (struct comp){.ctx = e.op_context, .flags = e.flags, .tag = e.tag, .data = e.data, .len = e.len,
					   .buf = e.buf};
			return 0;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry x = {0};
			if (fi_cq_readerr(cq, &x, 0) != 1)
				DIE("fi_cq_readerr");
			*c = (struct comp){.ctx = x.op_context, .flags = x.flags, .tag = x.tag, .data = x.data,
					   .len = x.len, .olen = x.olen, .buf = x.buf, .err = x.err, .prov_errno = x.prov_errno};
			return x.err;
		}
		if (n != -FI_EAGAIN)
			DIE("fi_cq_read: %zd (%s)", n, fi_strerror((int)-n));
		if (spins % 256 == 0 && now_s() > t0 + 20)
			DIE("no completion in 20 s");
	}
}

/* linger progresses an endpoint for a while, taking nothing. */
static void linger(struct ep *e, double s)
{
	for (double t0 = now_s(); now_s() < t0 + s;) {
		struct fi_cq_tagged_entry x;
		fi_cq_read(e->tx, &x, 0);
	}
}

/* POST retries a call while the provider says -FI_EAGAIN (its CQ reads
 * progress it meanwhile: the send completions are drained later). */
#define POST(e, call)                                                                                          \
	do {                                                                                                   \
		ssize_t r_;                                                                                    \
		double t0_ = now_s();                                                                          \
		while ((r_ = (call)) == -FI_EAGAIN) {                                                          \
			struct fi_cq_tagged_entry x_;                                                          \
			fi_cq_read((e)->rx, &x_, 0);                                                           \
			if (now_s() > t0_ + 20)                                                                \
				DIE("%s: still -FI_EAGAIN after 20 s", #call);                                 \
		}                                                                                              \
		if (r_)                                                                                        \
			DIE("%s: %zd (%s)", #call, r_, fi_strerror((int)-r_));                                 \
	} while (0)

/* sends_done takes n send completions, each a success. */
static void sends_done(struct ep *e, int n, const char *what)
{
	for (int i = 0; i < n; i++) {
		struct comp c;
		int err = get(e->tx, &c);
		if (err)
			DIE("%s: send %d of %d failed: %s (%s)", what, i, n, fi_strerror(err),
			    fi_cq_strerror(e->tx, c.prov_errno, NULL, NULL, 0));
	}
}

/* Control messages: tag CTL | step, a 4-byte value. */
#define CTL 0xC000000000000000ULL

static void ctl_send(struct ep *e, fi_addr_t to, int step)
{
	static int v;
	v = step;
	POST(e, fi_tsend(e->ep, &v, sizeof v, NULL, to, CTL | (uint64_t)step, NULL));
	sends_done(e, 1, "control");
}

static void ctl_wait(struct ep *e, fi_addr_t from, int step)
{
	int v = -1;
	struct comp c;
	POST(e, fi_trecv(e->ep, &v, sizeof v, NULL, from, CTL | (uint64_t)step, 0, &v));
	if (get(e->rx, &c) || c.ctx != &v || v != step)
		DIE("control %d: %d", step, v);
}

/* ---- setup ---- */

static void open_fabric(const char *provdir)
{
	setenv("FI_PROVIDER_PATH", provdir, 1);
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_MULTI_RECV | FI_DIRECTED_RECV;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->domain_attr->cq_data_size = 4;
	hints->ep_attr->max_msg_size = 256 * MiB;
	hints->fabric_attr->prov_name = strdup("metaroce");
	MUST(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	if (info->ep_attr->max_msg_size < ((size_t)1 << 30))
		DIE("max_msg_size %zu, want 1 GiB or more", info->ep_attr->max_msg_size);
	if (!(info->caps & FI_MULTI_RECV) || info->rx_attr->iov_limit < 4)
		DIE("caps %#" PRIx64 " rx iov_limit %zu", info->caps, info->rx_attr->iov_limit);
	MUST(fi_fabric(info->fabric_attr, &fab, NULL));
	MUST(fi_domain(fab, info, &dom, NULL));
	MUST(fi_av_open(dom, &(struct fi_av_attr){.type = FI_AV_TABLE}, &av, NULL));
}

static void open_ep(struct ep *e)
{
	struct fi_cq_attr a = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE, .size = 4096};
	MUST(fi_cq_open(dom, &a, &e->tx, NULL));
	MUST(fi_cq_open(dom, &a, &e->rx, NULL));
	MUST(fi_endpoint(dom, info, &e->ep, NULL));
	MUST(fi_ep_bind(e->ep, &av->fid, 0));
	MUST(fi_ep_bind(e->ep, &e->tx->fid, FI_TRANSMIT));
	MUST(fi_ep_bind(e->ep, &e->rx->fid, FI_RECV));
	MUST(fi_enable(e->ep));
	size_t len = NAMELEN;
	MUST(fi_getname(&e->ep->fid, e->name, &len));
}

static void close_ep(struct ep *e)
{
	MUST(fi_close(&e->ep->fid));
	MUST(fi_close(&e->tx->fid));
	MUST(fi_close(&e->rx->fid));
}

static void hex(const void *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static void unhex(const char *s, void *p, size_t n)
{
	if (strlen(s) != 2 * n)
		DIE("hex %s", s);
	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", (unsigned char *)p + i);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		DIE("malloc %zu", n);
	return p;
}

/* ---- what both sides know ---- */

static const size_t sizes[] = {0, 1, 64 * KiB - 1, 64 * KiB, 64 * KiB + 1, MiB, 16 * MiB, 256 * MiB};
#define NSIZES 8
#define NMSG 7 /* FI_MSG sizes: all but 256 MiB */
enum { M_TAG = 10, M_MSG = 30, M_B2B = 50, M_SAME = 60, M_UX = 70, M_TRUNC = 80, M_MULTI = 1000, M_LATE = 1200,
       M_CANCEL = 90, M_RMA = 100, M_FAIL = 110 };
#define B2B_TAG 0x200
#define SAME_TAG 0x210
static const size_t b2b_len[4] = {3 * MiB, 3 * MiB + 777, 3 * MiB + 2 * 777, 3 * MiB + 3 * 777};
static const size_t same_len[3] = {2 * MiB + 1, 100, MiB};
#define NMULTI 120
#define NLATE 5
static size_t multi_len(int i) { return 300 + (size_t)(i * 37) % 900; }
#define MULTI_BUF (32 * KiB)
#define MULTI_MIN 2048

/* ---- the server ---- */

struct want {
	uint8_t *buf;
	size_t cap, len; /* the buffer's bytes; the message's */
	uint32_t m;
	int data;        /* remote CQ data expected: 1 + its value's index */
	uint64_t dval;
	int got;
};

static void check_recv(const struct comp *c, struct want *w, const char *what)
{
	if (c->err)
		DIE("%s: error %d (%s)", what, c->err, fi_strerror(c->err));
	if (w->got++)
		DIE("%s: completed twice", what);
	if (c->len != w->len)
		DIE("%s: %zu bytes, want %zu", what, c->len, w->len);
	if (w->data && (!(c->flags & FI_REMOTE_CQ_DATA) || c->data != w->dval))
		DIE("%s: CQ data %#" PRIx64 " flags %#" PRIx64 ", want %#" PRIx64, what, c->data, c->flags, w->dval);
	if (!w->data && (c->flags & FI_REMOTE_CQ_DATA))
		DIE("%s: CQ data where none was sent", what);
	CHECK_BYTES(w->buf, w->len, w->m, 0, what);
	guard(w->buf, w->cap, what);
}

static void server_sizes(struct ep *s, fi_addr_t cli)
{
	static struct want wt[NSIZES], wm[NMSG], wb[4], ws[3];
	struct comp c;
	/* tagged, in reverse order of tags (matching by tag); the 1 MiB one
	 * into four iovs */
	static struct iovec v4[4];
	for (int i = NSIZES - 1; i >= 0; i--) {
		wt[i] = (struct want){.buf = rbuf(sizes[i]), .cap = sizes[i], .len = sizes[i], .m = M_TAG + i,
				      .data = i % 2, .dval = 0x1000u + i};
		if (sizes[i] == MiB) {
			const size_t cut[4] = {1000, 70000, 300000, MiB - 371000};
			for (int k = 0, off = 0; k < 4; off += (int)cut[k], k++)
				v4[k] = (struct iovec){wt[i].buf + off, cut[k]};
			POST(s, fi_trecvv(s->ep, v4, NULL, 4, cli, 0x100 + i, 0, &wt[i]));
		} else {
			POST(s, fi_trecv(s->ep, wt[i].buf, sizes[i], NULL, cli, 0x100 + i, 0, &wt[i]));
		}
	}
	/* FI_MSG, in order (it matches in order) */
	for (int i = 0; i < NMSG; i++) {
		wm[i] = (struct want){.buf = rbuf(sizes[i]), .cap = sizes[i], .len = sizes[i], .m = M_MSG + i,
				      .data = i % 2, .dval = 0x2000u + i};
		POST(s, fi_recv(s->ep, wm[i].buf, sizes[i], NULL, cli, &wm[i]));
	}
	for (int i = 3; i >= 0; i--) {
		wb[i] = (struct want){.buf = rbuf(b2b_len[i]), .cap = b2b_len[i], .len = b2b_len[i], .m = M_B2B + i};
		POST(s, fi_trecv(s->ep, wb[i].buf, b2b_len[i], NULL, cli, B2B_TAG + i, 0, &wb[i]));
	}
	/* One tag, three messages: the n-th receive takes the n-th sent. */
	for (int i = 0; i < 3; i++) {
		ws[i] = (struct want){.buf = rbuf(2 * MiB + 1), .cap = 2 * MiB + 1, .len = same_len[i], .m = M_SAME + i};
		POST(s, fi_trecv(s->ep, ws[i].buf, 2 * MiB + 1, NULL, cli, SAME_TAG, 0, &ws[i]));
	}
	ctl_send(s, cli, 1);
	double t0 = now_s();
	for (int n = 0; n < NSIZES + NMSG + 4 + 3; n++) {
		get(s->rx, &c);
		struct want *w = c.ctx;
		char what[64];
		if (w >= wt && w < wt + NSIZES)
			snprintf(what, sizeof what, "tagged %zu B", w->len);
		else if (w >= wm && w < wm + NMSG)
			snprintf(what, sizeof what, "FI_MSG %zu B", w->len);
		else if (w >= wb && w < wb + 4)
			snprintf(what, sizeof what, "back to back %d", (int)(w - wb));
		else if (w >= ws && w < ws + 3)
			snprintf(what, sizeof what, "same tag %d", (int)(w - ws));
		else
			DIE("a completion for context %p", c.ctx);
		check_recv(&c, w, what);
		if (c.len == 256 * MiB)
			printf("256 MiB tagged message in %.2f s\n", now_s() - t0);
	}
	for (int i = 0; i < NSIZES; i++)
		free(wt[i].buf);
	for (int i = 0; i < NMSG; i++)
		free(wm[i].buf);
	for (int i = 0; i < 4; i++)
		free(wb[i].buf);
	for (int i = 0; i < 3; i++)
		free(ws[i].buf);
}

/* peek asks for tag until it is there (FI_ENOMSG meanwhile). */
static void peek(struct ep *s, uint64_t tag, uint64_t flags, struct fi_context *ctx, struct comp *c)
{
	struct fi_msg_tagged m = {.addr = FI_ADDR_UNSPEC, .tag = tag, .context = ctx};
	for (double t0 = now_s();;) {
		POST(s, fi_trecvmsg(s->ep, &m, FI_PEEK | flags));
		int err = get(s->rx, c);
		if (!err)
			break;
		if (err != FI_ENOMSG)
			DIE("peek %#" PRIx64 ": %s", tag, fi_strerror(err));
		if (now_s() > t0 + 20)
			DIE("peek %#" PRIx64 ": nothing in 20 s", tag);
	}
	if (c->ctx != ctx || c->tag != tag)
		DIE("peek %#" PRIx64 ": context %p tag %#" PRIx64, tag, c->ctx, c->tag);
}

static void server_unexpected(struct ep *s, fi_addr_t cli)
{
	struct comp c;
	ctl_send(s, cli, 2);
	/* Claimed, likely while its segments still arrive: the claiming
	 * receive then takes its place. */
	struct fi_context claim;
	peek(s, 0x300, FI_CLAIM, &claim, &c);
	if (c.len != 16 * MiB)
		DIE("peek 0x300: length %zu", c.len);
	uint8_t *b = rbuf(16 * MiB);
	struct iovec v = {b, 16 * MiB};
	struct fi_msg_tagged m = {.msg_iov = &v, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 0x300, .context = &claim};
	POST(s, fi_trecvmsg(s->ep, &m, FI_CLAIM));
	if (get(s->rx, &c) || c.ctx != &claim || c.len != 16 * MiB)
		DIE("claim 0x300: context %p length %zu", c.ctx, c.len);
	CHECK_BYTES(b, 16 * MiB, M_UX, 0, "claimed 16 MiB");
	guard(b, 16 * MiB, "claimed 16 MiB");
	free(b);
	struct fi_context pk;
	peek(s, 0x301, 0, &pk, &c);
	if (c.len != MiB + 7 || !(c.flags & FI_REMOTE_CQ_DATA) || c.data != 0x3001)
		DIE("peek 0x301: length %zu data %#" PRIx64, c.len, c.data);
	struct fi_context dis;
	peek(s, 0x302, FI_DISCARD, &dis, &c);
	if (c.len != 8 * MiB)
		DIE("peek|discard 0x302: length %zu", c.len);
	/* The control message comes after everything: the FI_MSG one is
	 * there, and 0x302 all drained. */
	ctl_wait(s, cli, 3);
	struct fi_msg_tagged m2 = {.addr = FI_ADDR_UNSPEC, .tag = 0x302, .context = &dis};
	POST(s, fi_trecvmsg(s->ep, &m2, FI_PEEK));
	if (get(s->rx, &c) != FI_ENOMSG)
		DIE("0x302 still there after FI_DISCARD");
	linger(s, 0.1); /* received later */
	b = rbuf(5 * MiB);
	static struct want w = {0};
	w = (struct want){.buf = b, .cap = 5 * MiB, .len = 5 * MiB, .m = M_UX + 3};
	POST(s, fi_recv(s->ep, b, 5 * MiB, NULL, FI_ADDR_UNSPEC, &w));
	get(s->rx, &c);
	if (c.ctx != &w)
		DIE("unexpected FI_MSG: context %p", c.ctx);
	check_recv(&c, &w, "unexpected FI_MSG 5 MiB");
	free(b);
	b = rbuf(MiB + 7);
	w = (struct want){.buf = b, .cap = MiB + 7, .len = MiB + 7, .m = M_UX + 1, .data = 1, .dval = 0x3001};
	POST(s, fi_trecv(s->ep, b, MiB + 7, NULL, FI_ADDR_UNSPEC, 0x301, 0, &w));
	get(s->rx, &c);
	check_recv(&c, &w, "unexpected tagged 1 MiB + 7");
	free(b);
}

static void server_trunc(struct ep *s, fi_addr_t cli)
{
	struct comp c;
	uint8_t *b = rbuf(MiB), *b2 = rbuf(8000);
	int x1, x2;
	POST(s, fi_trecv(s->ep, b, MiB, NULL, cli, 0x400, 0, &x1));
	POST(s, fi_trecv(s->ep, b2, 8000, NULL, cli, 0x401, 0, &x2));
	ctl_send(s, cli, 4);
	int err = get(s->rx, &c);
	if (err != FI_ETRUNC || c.ctx != &x1 || c.len != MiB || c.olen != 15 * MiB)
		DIE("truncated: err %d context %p len %zu olen %zu, want FI_ETRUNC, 1 MiB, 15 MiB", err, c.ctx, c.len, c.olen);
	CHECK_BYTES(b, MiB, M_TRUNC, 0, "truncated 16 MiB");
	guard(b, MiB, "truncated 16 MiB");
	if (get(s->rx, &c) || c.ctx != &x2 || c.len != 4000)
		DIE("after the truncated one: context %p len %zu", c.ctx, c.len);
	CHECK_BYTES(b2, 4000, M_TRUNC + 1, 0, "after the truncated one");
	/* Unexpected (it followed 0x401), truncated into two iovs. */
	uint8_t *b3 = rbuf(100 * KiB);
	struct iovec v[2] = {{b3, 30 * KiB + 3}, {b3 + 30 * KiB + 3, 70 * KiB - 3}};
	POST(s, fi_trecvv(s->ep, v, NULL, 2, cli, 0x402, 0, &x1));
	err = get(s->rx, &c);
	if (err != FI_ETRUNC || c.len != 100 * KiB || c.olen != 3 * MiB - 100 * KiB)
		DIE("unexpected truncated: err %d len %zu olen %zu", err, c.len, c.olen);
	CHECK_BYTES(b3, 100 * KiB, M_TRUNC + 2, 0, "unexpected truncated");
	guard(b3, 100 * KiB, "unexpected truncated");
	free(b);
	free(b2);
	free(b3);
}

static void post_multi(struct ep *s, uint8_t *buf, struct fi_context *ctx)
{
	memset(buf, 0xEE, MULTI_BUF + SLACK);
	struct iovec v = {buf, MULTI_BUF};
	struct fi_msg m = {.msg_iov = &v, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = ctx};
	POST(s, fi_recvmsg(s->ep, &m, FI_MULTI_RECV));
}

static void server_multi(struct ep *s, fi_addr_t cli)
{
	size_t min = MULTI_MIN, got = 0, len = sizeof got;
	MUST(fi_setopt(&s->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof min));
	MUST(fi_getopt(&s->ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &len));
	if (got != MULTI_MIN || len != sizeof got)
		DIE("FI_OPT_MIN_MULTI_RECV: %zu", got);
	static uint8_t bufs[2][MULTI_BUF + SLACK];
	static struct fi_context ctx[2];
	size_t used[2] = {0, 0};
	post_multi(s, bufs[0], &ctx[0]);
	post_multi(s, bufs[1], &ctx[1]);
	ctl_send(s, cli, 5);
	int releases = 0;
	for (int i = 0; i < NMULTI; i++) {
		struct comp c;
		int err = get(s->rx, &c);
		if (err)
			DIE("multi %d: %s", i, fi_strerror(err));
		int k = c.ctx == &ctx[0] ? 0 : c.ctx == &ctx[1] ? 1 : -1;
		if (k < 0)
			DIE("multi %d: context %p", i, c.ctx);
		/* Back to back in the buffer, in order. */
		if ((uint8_t *)c.buf != bufs[k] + used[k] || c.len != multi_len(i) || !(c.flags & FI_MSG))
			DIE("multi %d: buffer %d at %td (want %zu), %zu bytes (want %zu)", i, k,
			    (uint8_t *)c.buf - bufs[k], used[k], c.len, multi_len(i));
		CHECK_BYTES(bufs[k] + used[k], c.len, M_MULTI + i, 0, "multi");
		used[k] += c.len;
		int last = MULTI_BUF - used[k] < MULTI_MIN;
		if (!!(c.flags & FI_MULTI_RECV) != last)
			DIE("multi %d: FI_MULTI_RECV %s with %zu left (minimum %d)", i, last ? "missing" : "set",
			    MULTI_BUF - used[k], MULTI_MIN);
		if (last) {
			guard(bufs[k], MULTI_BUF, "multi-receive buffer");
			releases++;
			used[k] = 0;
			post_multi(s, bufs[k], &ctx[k]);
		}
	}
	if (releases < 2)
		DIE("multi: %d releases, want 2 or more", releases);
	/* Both buffers back: cancelled, with FI_MULTI_RECV (nothing of them
	 * in use). */
	for (int k = 0; k < 2; k++) {
		MUST(fi_cancel(&s->ep->fid, &ctx[k]));
		struct comp c;
		int err = get(s->rx, &c);
		if (err != FI_ECANCELED || !(c.flags & FI_MULTI_RECV) || (c.ctx != &ctx[0] && c.ctx != &ctx[1]))
			DIE("multi cancel: err %d flags %#" PRIx64, err, c.flags);
	}
	/* Sent with no buffer posted: unexpected, then taken by one. */
	ctl_send(s, cli, 9);
	ctl_wait(s, cli, 6);
	post_multi(s, bufs[0], &ctx[0]);
	size_t at = 0;
	for (int i = 0; i < NLATE; i++) {
		struct comp c;
		if (get(s->rx, &c) || c.ctx != &ctx[0] || (uint8_t *)c.buf != bufs[0] + at || c.len != multi_len(i))
			DIE("late multi %d", i);
		CHECK_BYTES(bufs[0] + at, c.len, M_LATE + i, 0, "late multi");
		at += c.len;
	}
	MUST(fi_cancel(&s->ep->fid, &ctx[0]));
	struct comp c;
	if (get(s->rx, &c) != FI_ECANCELED)
		DIE("late multi cancel");
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void server_cancel(struct ep *s, fi_addr_t cli)
{
	struct comp c;
	ssize_t left = fi_rx_size_left(s->ep);
	if (left <= 0)
		DIE("fi_rx_size_left: %zd", left);
	uint8_t *b = rbuf(MiB);
	int c1, c2, unknown;
	POST(s, fi_trecv(s->ep, b, MiB, NULL, cli, 0x500, 0, &c1));
	if (fi_rx_size_left(s->ep) != left - 1)
		DIE("fi_rx_size_left: %zd after one receive, want %zd", fi_rx_size_left(s->ep), left - 1);
	MUST(fi_cancel(&s->ep->fid, &c1));
	int err = get(s->rx, &c);
	if (err != FI_ECANCELED || c.ctx != &c1 || !(c.flags & FI_RECV) || !(c.flags & FI_TAGGED))
		DIE("cancel: err %d context %p flags %#" PRIx64, err, c.ctx, c.flags);
	if (fi_cancel(&s->ep->fid, &c1) != -FI_ENOENT || fi_cancel(&s->ep->fid, &unknown) != -FI_ENOENT)
		DIE("cancel of nothing posted: not -FI_ENOENT");
	if (fi_rx_size_left(s->ep) != left)
		DIE("fi_rx_size_left: %zd after the cancel, want %zd", fi_rx_size_left(s->ep), left);
	ctl_send(s, cli, 7);
	ctl_wait(s, cli, 8); /* after it: the cancelled receive's message is unexpected by now */
	POST(s, fi_trecv(s->ep, b, MiB, NULL, cli, 0x500, 0, &c2));
	if (get(s->rx, &c) || c.ctx != &c2 || c.len != 3 * MiB / 4)
		DIE("after the cancel: context %p len %zu", c.ctx, c.len);
	CHECK_BYTES(b, c.len, M_CANCEL, 0, "after the cancel");
	free(b);
}
#pragma GCC diagnostic pop

static void server_rma(struct ep *s, fi_addr_t cli, uint8_t *region)
{
	/* Writes: 16 MiB at 0 and 256 MiB at 16 MiB, twice (registered and
	 * unregistered sources swapped), each checked; then fi_writedata. */
	for (int round = 0; round < 2; round++) {
		ctl_wait(s, cli, 20 + round);
		CHECK_BYTES(region, 16 * MiB, M_RMA + 2 * round, 0, "fi_write 16 MiB");
		CHECK_BYTES(region + 16 * MiB, 256 * MiB, M_RMA + 2 * round + 1, 0, "fi_write 256 MiB");
		ctl_send(s, cli, 22 + round);
	}
	/* The reads see round 1's bytes; then fi_writedata, twice: one
	 * completion each, with its data, before the control message that
	 * follows them. */
	ctl_wait(s, cli, 24);
	int seen[2] = {0, 0}, v = -1;
	struct comp c;
	POST(s, fi_trecv(s->ep, &v, sizeof v, NULL, cli, CTL | 25, 0, &v));
	for (;;) {
		if (get(s->rx, &c))
			DIE("writedata: error");
		if (c.ctx == &v)
			break;
		if (!(c.flags & FI_REMOTE_CQ_DATA) || !(c.flags & FI_RMA) || (c.data != 0xD0 && c.data != 0xD1))
			DIE("writedata: flags %#" PRIx64 " data %#" PRIx64, c.flags, c.data);
		seen[c.data - 0xD0]++;
	}
	if (seen[0] != 1 || seen[1] != 1)
		DIE("fi_writedata: CQ data seen %d and %d times, want once each", seen[0], seen[1]);
	CHECK_BYTES(region, 16 * MiB, M_RMA + 4, 0, "fi_writedata registered");
	CHECK_BYTES(region + 16 * MiB, 16 * MiB, M_RMA + 5, 0, "fi_writedata unregistered");
}

static int server(void)
{
	struct ep s, s2;
	open_ep(&s);
	open_ep(&s2);
	busy = s.tx;
	uint8_t *region = malloc(REGION);
	if (!region)
		DIE("malloc region");
	memset(region, 0, REGION);
	struct fid_mr *mr;
	MUST(fi_mr_reg(dom, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	char n1[2 * NAMELEN + 1], n2[2 * NAMELEN + 1];
	hex(s.name, NAMELEN, n1);
	hex(s2.name, NAMELEN, n2);
	printf("READY %s %s %" PRIu64 " %" PRIu64 "\n", n1, n2, (uint64_t)(uintptr_t)region, fi_mr_key(mr));
	fflush(stdout);
	/* The client's names. */
	char names[2][NAMELEN];
	struct comp c;
	POST(&s, fi_trecv(s.ep, names, sizeof names, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
	if (get(s.rx, &c) || c.len != sizeof names)
		DIE("hello");
	fi_addr_t cli[2];
	if (fi_av_insert(av, names, 2, cli, 0, NULL) != 2)
		DIE("insert the client");
	double t = now_s();
	server_sizes(&s, cli[0]);
	printf("sizes %.2f s\n", now_s() - t), t = now_s();
	server_unexpected(&s, cli[0]);
	printf("unexpected %.2f s\n", now_s() - t), t = now_s();
	server_trunc(&s, cli[0]);
	server_multi(&s, cli[0]);
	server_cancel(&s, cli[0]);
	printf("truncation, multi-receive, cancel %.2f s\n", now_s() - t), t = now_s();
	server_rma(&s, cli[0], region);
	printf("RMA %.2f s\n", now_s() - t), t = now_s();
	/* Failures. The client closes the region it sends from once the
	 * message is arriving: the rest of its segments fail at its daemon
	 * while the connection lives, and the abort it sends fails the
	 * receive that took the message's place. */
	struct fi_context fc;
	peek(&s, 0x650, FI_CLAIM, &fc, &c);
	ctl_send(&s, cli[0], 31);
	uint8_t *ab = rbuf(32 * MiB);
	struct iovec av1 = {ab, 32 * MiB};
	struct fi_msg_tagged am = {.msg_iov = &av1, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 0x650, .context = &fc};
	POST(&s, fi_trecvmsg(s.ep, &am, FI_CLAIM));
	int aerr = get(s.rx, &c);
	if (aerr != FI_EIO || c.ctx != &fc)
		DIE("region closed under a send: the receive got %d (%s), want FI_EIO", aerr, fi_strerror(aerr));
	guard(ab, 32 * MiB, "aborted");
	free(ab);
	ctl_wait(&s, cli[0], 32); /* the connection lives: a message after it */
	/* s2 closes under a message arriving (the client's send must
	 * fail); then the client dies under one to s (its receive must
	 * fail). */
	peek(&s2, 0x600, 0, &fc, &c);
	close_ep(&s2);
	uint8_t *b = rbuf(FAIL_LEN);
	int x;
	POST(&s, fi_trecv(s.ep, b, FAIL_LEN, NULL, cli[0], 0x700, 0, &x));
	ctl_send(&s, cli[0], 30);
	int err = get(s.rx, &c);
	if (!err || c.ctx != &x)
		DIE("the sender died mid-message: err %d context %p", err, c.ctx);
	printf("the sender died mid-message: %s after %.2f s\n", fi_strerror(err), now_s() - t);
	free(b);
	MUST(fi_close(&mr->fid));
	close_ep(&s);
	free(region);
	printf("PASS server\n");
	return 0;
}

/* ---- the client ---- */

static uint8_t *src_of(uint32_t m, size_t n)
{
	uint8_t *p = xmalloc(n);
	fill(p, n, m, 0);
	return p;
}

static void client_sizes(struct ep *e, fi_addr_t srv, uint8_t *reg16, void *reg16_desc, uint8_t *big)
{
	ctl_wait(e, srv, 1);
	uint8_t *bufs[NSIZES + NMSG + 7];
	int nb = 0, sent = 0;
	for (int i = 0; i < NSIZES; i++) {
		uint8_t *p;
		void *desc = NULL;
		if (sizes[i] == 16 * MiB) {
			p = reg16; /* in place, segment by segment */
			desc = reg16_desc;
			fill(p, sizes[i], M_TAG + i, 0);
		} else if (sizes[i] == 256 * MiB) {
			p = big;
			fill(p, sizes[i], M_TAG + i, 0);
		} else {
			p = bufs[nb++] = src_of(M_TAG + i, sizes[i]);
		}
		if (i % 2)
			POST(e, fi_tsenddata(e->ep, p, sizes[i], desc, 0x1000u + i, srv, 0x100 + i, NULL));
		else
			POST(e, fi_tsend(e->ep, p, sizes[i], desc, srv, 0x100 + i, NULL));
		sent++;
	}
	for (int i = 0; i < NMSG; i++) {
		uint8_t *p = bufs[nb++] = src_of(M_MSG + i, sizes[i]);
		if (sizes[i] == 64 * KiB + 1) {
			/* three iovs, the middle one registered */
			static struct fid_mr *mr;
			static uint8_t *mid;
			mid = xmalloc(60000);
			memcpy(mid, p + 1000, 60000);
			MUST(fi_mr_reg(dom, mid, 60000, FI_SEND, 0, 0, 0, &mr, NULL));
			struct iovec v[3] = {{p, 1000}, {mid, 60000}, {p + 61000, 64 * KiB + 1 - 61000}};
			void *d[3] = {NULL, fi_mr_desc(mr), NULL};
			struct fi_msg m = {.msg_iov = v, .desc = d, .iov_count = 3, .addr = srv, .data = 0x2000u + i};
			POST(e, fi_sendmsg(e->ep, &m, i % 2 ? FI_REMOTE_CQ_DATA : 0));
			sends_done(e, sent + 1, "sizes");
			sent = 0;
			MUST(fi_close(&mr->fid));
			free(mid);
		} else if (i % 2) {
			POST(e, fi_senddata(e->ep, p, sizes[i], NULL, 0x2000u + i, srv, NULL));
			sent++;
		} else {
			POST(e, fi_send(e->ep, p, sizes[i], NULL, srv, NULL));
			sent++;
		}
	}
	/* Back to back to one peer. */
	for (int i = 0; i < 4; i++) {
		uint8_t *p = bufs[nb++] = src_of(M_B2B + i, b2b_len[i]);
		POST(e, fi_tsend(e->ep, p, b2b_len[i], NULL, srv, B2B_TAG + i, NULL));
	}
	for (int i = 0; i < 3; i++) {
		uint8_t *p = bufs[nb++] = src_of(M_SAME + i, same_len[i]);
		POST(e, fi_tsend(e->ep, p, same_len[i], NULL, srv, SAME_TAG, NULL));
	}
	sends_done(e, sent + 7, "sizes");
	for (int i = 0; i < nb; i++)
		free(bufs[i]);
}

static void client_unexpected(struct ep *e, fi_addr_t srv)
{
	ctl_wait(e, srv, 2);
	uint8_t *a = src_of(M_UX, 16 * MiB), *b = src_of(M_UX + 1, MiB + 7), *c = src_of(M_UX + 2, 8 * MiB),
		*d = src_of(M_UX + 3, 5 * MiB);
	POST(e, fi_tsend(e->ep, a, 16 * MiB, NULL, srv, 0x300, NULL));
	POST(e, fi_tsenddata(e->ep, b, MiB + 7, NULL, 0x3001, srv, 0x301, NULL));
	POST(e, fi_tsend(e->ep, c, 8 * MiB, NULL, srv, 0x302, NULL));
	POST(e, fi_send(e->ep, d, 5 * MiB, NULL, srv, NULL));
	sends_done(e, 4, "unexpected");
	ctl_send(e, srv, 3);
	free(a);
	free(b);
	free(c);
	free(d);
}

static void client_trunc(struct ep *e, fi_addr_t srv)
{
	ctl_wait(e, srv, 4);
	uint8_t *a = src_of(M_TRUNC, 16 * MiB), *b = src_of(M_TRUNC + 1, 4000), *c = src_of(M_TRUNC + 2, 3 * MiB);
	POST(e, fi_tsend(e->ep, a, 16 * MiB, NULL, srv, 0x400, NULL));
	POST(e, fi_tsend(e->ep, b, 4000, NULL, srv, 0x401, NULL));
	POST(e, fi_tsend(e->ep, c, 3 * MiB, NULL, srv, 0x402, NULL));
	sends_done(e, 3, "truncation");
	free(a);
	free(b);
	free(c);
}

static void client_multi(struct ep *e, fi_addr_t srv)
{
	ctl_wait(e, srv, 5);
	static uint8_t *p[NMULTI];
	for (int i = 0; i < NMULTI; i++) {
		p[i] = src_of(M_MULTI + i, multi_len(i));
		POST(e, fi_send(e->ep, p[i], multi_len(i), NULL, srv, NULL));
	}
	sends_done(e, NMULTI, "multi");
	ctl_wait(e, srv, 9); /* no buffer posted now */
	for (int i = 0; i < NLATE; i++) {
		free(p[i]);
		p[i] = src_of(M_LATE + i, multi_len(i));
		POST(e, fi_inject(e->ep, p[i], multi_len(i), srv));
	}
	ctl_send(e, srv, 6);
	for (int i = 0; i < NMULTI; i++)
		free(p[i]);
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void client_cancel(struct ep *e, fi_addr_t srv)
{
	ctl_wait(e, srv, 7);
	ssize_t left = fi_tx_size_left(e->ep);
	uint8_t *a = src_of(M_CANCEL, 3 * MiB / 4);
	POST(e, fi_tsend(e->ep, a, 3 * MiB / 4, NULL, srv, 0x500, NULL));
	if (fi_tx_size_left(e->ep) != left - 1)
		DIE("fi_tx_size_left: %zd with a send in flight, want %zd", fi_tx_size_left(e->ep), left - 1);
	sends_done(e, 1, "cancel");
	if (fi_tx_size_left(e->ep) != left)
		DIE("fi_tx_size_left: %zd after, want %zd", fi_tx_size_left(e->ep), left);
	ctl_send(e, srv, 8);
	free(a);
}
#pragma GCC diagnostic pop

static void rma_wait(struct ep *e, int n, const char *what)
{
	for (int i = 0; i < n; i++) {
		struct comp c;
		int err = get(e->tx, &c);
		if (err)
			DIE("%s: %s", what, fi_strerror(err));
		if (!(c.flags & FI_RMA))
			DIE("%s: flags %#" PRIx64, what, c.flags);
	}
}

static void client_rma(struct ep *e, fi_addr_t srv, uint64_t raddr, uint64_t key, uint8_t *reg16, void *d16,
		       uint8_t *big, uint8_t *regbig, void *dbig)
{
	/* round 0: 16 MiB registered, 256 MiB unregistered; round 1 the
	 * other way round */
	uint8_t *u16 = xmalloc(16 * MiB);
	for (int round = 0; round < 2; round++) {
		uint8_t *a = round ? u16 : reg16, *b = round ? regbig : big;
		void *da = round ? NULL : d16, *db = round ? dbig : NULL;
		fill(a, 16 * MiB, M_RMA + 2 * round, 0);
		fill(b, 256 * MiB, M_RMA + 2 * round + 1, 0);
		double t = now_s();
		POST(e, fi_write(e->ep, a, 16 * MiB, da, srv, raddr, key, a));
		POST(e, fi_write(e->ep, b, 256 * MiB, db, srv, raddr + 16 * MiB, key, b));
		rma_wait(e, 2, "fi_write");
		printf("fi_write 272 MiB (%s 256 MiB) %.2f s\n", round ? "registered" : "unregistered", now_s() - t);
		ctl_send(e, srv, 20 + round);
		ctl_wait(e, srv, 22 + round);
	}
	/* Reads of what round 1 left there, into the other kind of memory
	 * each. */
	for (int round = 0; round < 2; round++) {
		uint8_t *a = round ? u16 : reg16, *b = round ? regbig : big;
		void *da = round ? NULL : d16, *db = round ? dbig : NULL;
		memset(a, 0, 16 * MiB);
		memset(b, 0, 256 * MiB);
		double t = now_s();
		POST(e, fi_read(e->ep, a, 16 * MiB, da, srv, raddr, key, a));
		POST(e, fi_read(e->ep, b, 256 * MiB, db, srv, raddr + 16 * MiB, key, b));
		rma_wait(e, 2, "fi_read");
		printf("fi_read 272 MiB (%s 256 MiB) %.2f s\n", round ? "registered" : "unregistered", now_s() - t);
		CHECK_BYTES(a, 16 * MiB, M_RMA + 2, 0, "fi_read 16 MiB");
		CHECK_BYTES(b, 256 * MiB, M_RMA + 3, 0, "fi_read 256 MiB");
	}
	ctl_send(e, srv, 24);
	fill(reg16, 16 * MiB, M_RMA + 4, 0);
	fill(u16, 16 * MiB, M_RMA + 5, 0);
	POST(e, fi_writedata(e->ep, reg16, 16 * MiB, d16, 0xD0, srv, raddr, key, reg16));
	POST(e, fi_writedata(e->ep, u16, 16 * MiB, NULL, 0xD1, srv, raddr + 16 * MiB, key, u16));
	rma_wait(e, 2, "fi_writedata");
	ctl_send(e, srv, 25);
	free(u16);
}

static int client(const char *n1, const char *n2, uint64_t raddr, uint64_t key)
{
	struct ep e, e2;
	open_ep(&e);
	open_ep(&e2);
	char sname[2][NAMELEN];
	unhex(n1, sname[0], NAMELEN);
	unhex(n2, sname[1], NAMELEN);
	fi_addr_t srv[2];
	if (fi_av_insert(av, sname, 2, srv, 0, NULL) != 2)
		DIE("insert the server");
	char names[2][NAMELEN];
	memcpy(names[0], e.name, NAMELEN);
	memcpy(names[1], e2.name, NAMELEN);
	POST(&e, fi_tsend(e.ep, names, sizeof names, NULL, srv[0], 1, NULL));
	sends_done(&e, 1, "hello");
	/* Registered sources: 16 MiB and 256 MiB. */
	uint8_t *reg16 = xmalloc(16 * MiB), *regbig = xmalloc(256 * MiB), *big = xmalloc(256 * MiB);
	struct fid_mr *m16, *mbig;
	MUST(fi_mr_reg(dom, reg16, 16 * MiB, FI_SEND | FI_READ | FI_WRITE, 0, 0, 0, &m16, NULL));
	MUST(fi_mr_reg(dom, regbig, 256 * MiB, FI_SEND | FI_READ | FI_WRITE, 0, 0, 0, &mbig, NULL));
	client_sizes(&e, srv[0], reg16, fi_mr_desc(m16), big);
	client_unexpected(&e, srv[0]);
	client_trunc(&e, srv[0]);
	client_multi(&e, srv[0]);
	client_cancel(&e, srv[0]);
	client_rma(&e, srv[0], raddr, key, reg16, fi_mr_desc(m16), big, regbig, fi_mr_desc(mbig));
	/* Failures. The region under a send closed mid-message: the send
	 * fails (its later segments refused), the connection lives on. */
	uint8_t *f = src_of(M_FAIL, FAIL_LEN);
	memcpy(regbig, f, 32 * MiB);
	POST(&e, fi_tsend(e.ep, regbig, 32 * MiB, fi_mr_desc(mbig), srv[0], 0x650, regbig));
	ctl_wait(&e, srv[0], 31);
	MUST(fi_close(&mbig->fid));
	struct comp c;
	int err = get(e.tx, &c);
	if (!err || c.ctx != regbig)
		DIE("region closed under a send: the send did not fail (err %d context %p)", err, c.ctx);
	printf("region closed under a send: %s (%s)\n", fi_strerror(err), fi_cq_strerror(e.tx, c.prov_errno, NULL, NULL, 0));
	ctl_send(&e, srv[0], 32);
	/* The server closes its second endpoint under this one. */
	double t = now_s();
	POST(&e2, fi_tsend(e2.ep, f, FAIL_LEN, NULL, srv[1], 0x600, f));
	err = get(e2.tx, &c);
	if (!err || c.ctx != f)
		DIE("the receiver went mid-message: the send did not fail (err %d context %p)", err, c.ctx);
	printf("the receiver went mid-message: %s after %.2f s\n", fi_strerror(err), now_s() - t);
	/* Then this process dies under a message to the first. */
	ctl_wait(&e, srv[0], 30);
	POST(&e, fi_tsend(e.ep, f, FAIL_LEN, NULL, srv[0], 0x700, f));
	linger(&e, 0.03);
	printf("PASS client\n");
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	if (argc < 4)
		DIE("usage: fibig server SOCK PROVDIR | fibig client SOCK PROVDIR NAME NAME2 ADDR KEY");
	setenv("METAROCE_SOCKET", argv[2], 1);
	open_fabric(argv[3]);
	int r;
	if (!strcmp(argv[1], "server"))
		r = server();
	else if (argc == 8)
		r = client(argv[4], argv[5], strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10));
	else
		DIE("usage");
	MUST(fi_close(&av->fid));
	MUST(fi_close(&dom->fid));
	MUST(fi_close(&fab->fid));
	fi_freeinfo(info);
	return r;
}
