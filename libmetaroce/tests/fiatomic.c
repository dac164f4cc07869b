/* fiatomic: the provider's atomics and counters between two processes,
 * run by fiatomic_test.go through two daemons in two network namespaces
 * whose switch drops 1%:
 *
 *   fiatomic server SOCK PROVDIR          prints "READY field..." and serves
 *   fiatomic client SOCK PROVDIR field... (the server's READY fields)
 *
 * Both open two domains: "virt" with FI_RMA | FI_ATOMIC (registrations
 * are the daemon's: provider keys, virtual addresses) and "offset" with
 * FI_ATOMIC alone (mr_mode 0: keys the application chose, addresses
 * offsets into the region), as fabtests' fi_rdm_atomic gets it.
 *
 * Atomics, in each domain: every operation of every class (base, fetch,
 * compare) on every datatype the test's own table says is supported, on
 * 7 elements each, into its own 256 bytes of the server's region. The
 * region is first written through 4096-element FI_UINT8 writes (the
 * largest count), each case's operation follows (plain call, v-call with
 * split iovs, msg call, inject: by turns), and the region is read back
 * through 4096-element FI_UINT8 fetches: all pipelined, so the checks
 * also prove that atomics to one peer are applied in the order issued.
 * Every result is checked against a reference computed here: the target
 * elements (by value), the bytes around them (untouched), fetched old
 * values, completions' contexts and flags. Compare values are below,
 * equal to and above the target by turns, so each compare operation both
 * takes and does not. A bad key, a range past the region's end or before
 * its start, a write into a region registered for remote reads only and
 * a fetch from one registered for remote writes only answer FI_EACCES and
 * leave memory as it was (the server checks its guard pages and those
 * regions). An atomic to the endpoint's own address. The calls' refusals:
 * count 0 or past the maximum, results or compares not matching the
 * operands, unsupported combinations, flags, remote iov counts.
 * fi_query_atomic and the valid calls against the table, for every
 * datatype, operation and class.
 *
 * Counters (virt domain, an endpoint bound with FI_SELECTIVE_COMPLETION,
 * so successes make no CQ entry and are seen only there): send, read and
 * write counters counting sends, injects, RMA writes and reads and base,
 * fetch and compare atomics, an RMA and an atomic with a bad key counting
 * as errors (and ending fi_cntr_wait with -FI_EAVAIL), fi_cntr_wait
 * reaching its threshold (FI_WAIT_UNSPEC: sleeping), timing out, fi_cntr_set,
 * add, seterr, adderr; the server's receive counter counting receives that
 * make no CQ entry and a truncated one as an error. Binding what is not
 * offered (FI_REMOTE_WRITE), a second counter for a kind, another
 * domain's counter: refused. Exit 0 and "PASS" is a pass. */
#define _GNU_SOURCE
#include <complex.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "check.h"

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
#define EXPECT(call, want)                                                                                     \
	do {                                                                                                   \
		long got_ = (long)(call);                                                                      \
		CHECK(got_ == (long)(want), "%s: %ld (%s), want %ld", #call, got_, fi_strerror((int)-got_),    \
		      (long)(want));                                                                           \
	} while (0)

#define PAGE 4096
#define REGION (128 << 10)  /* each domain's atomic target */
#define AREA 256            /* one case's bytes in it */
#define NEL 7               /* elements per case */
#define CHUNK 4096          /* FI_UINT8 elements per write or fetch of the whole region: the provider's maximum */
#define SMALL PAGE          /* the read-only, write-only and RMA regions */
#define NSEND 10            /* the server's receives that make no CQ entry */
#define MSGLEN 16
#define GUARD 0xEE
#define MAXNAME 256

enum { BASE, FETCH, COMPARE };

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* ---- one domain's objects ---- */

struct side {
	const char *what;
	struct fi_info *info;
	struct fid_fabric *fab;
	struct fid_domain *dom;
	struct fid_av *av;
};

struct ep {
	struct side *s;
	struct fid_ep *ep;
	struct fid_cq *cq;
	char name[MAXNAME];
	size_t namelen;
};

/* The endpoints whose CQs wait_all drains. */
static struct ep *live[4];
static int nlive;

static void open_side(struct side *s, const char *what, int rma)
{
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_MSG | FI_ATOMIC | (rma ? FI_RMA : 0);
	hints->domain_attr->mr_mode = rma ? FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED : 0;
	hints->fabric_attr->prov_name = strdup("metaroce");
	s->what = what;
	MUST(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &s->info));
	fi_freeinfo(hints);
	if (!(s->info->caps & FI_ATOMIC) || !(s->info->tx_attr->caps & FI_ATOMIC))
		DIE("%s: caps %#" PRIx64 " tx %#" PRIx64, what, s->info->caps, s->info->tx_attr->caps);
	if (rma != !!(s->info->domain_attr->mr_mode & FI_MR_VIRT_ADDR))
		DIE("%s: mr_mode %#x", what, s->info->domain_attr->mr_mode);
	if (s->info->domain_attr->cntr_cnt == 0)
		DIE("%s: cntr_cnt 0", what);
	MUST(fi_fabric(s->info->fabric_attr, &s->fab, NULL));
	MUST(fi_domain(s->fab, s->info, &s->dom, NULL));
	MUST(fi_av_open(s->dom, &(struct fi_av_attr){.type = FI_AV_TABLE}, &s->av, NULL));
}

static void close_side(struct side *s)
{
	MUST(fi_close(&s->av->fid));
	MUST(fi_close(&s->dom->fid));
	MUST(fi_close(&s->fab->fid));
	fi_freeinfo(s->info);
}

static void open_ep(struct side *s, struct ep *e, uint64_t cqflags)
{
	e->s = s;
	MUST(fi_cq_open(s->dom, &(struct fi_cq_attr){.format = FI_CQ_FORMAT_DATA, .wait_obj = FI_WAIT_NONE, .size = 1024},
			&e->cq, NULL));
	MUST(fi_endpoint(s->dom, s->info, &e->ep, NULL));
	MUST(fi_ep_bind(e->ep, &s->av->fid, 0));
	MUST(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV | cqflags));
}

static void enable_ep(struct ep *e)
{
	MUST(fi_enable(e->ep));
	if (nlive < 4)
		live[nlive++] = e;
	e->namelen = sizeof e->name;
	MUST(fi_getname(&e->ep->fid, e->name, &e->namelen));
}

static void close_ep(struct ep *e)
{
	for (int i = 0; i < nlive; i++)
		if (live[i] == e)
			live[i] = live[--nlive];
	MUST(fi_close(&e->ep->fid));
	MUST(fi_close(&e->cq->fid));
}

static void hex(const void *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static size_t unhex(const char *s, void *p, size_t max)
{
	size_t n = strlen(s) / 2;
	if (n > max || strlen(s) % 2)
		DIE("hex %s", s);
	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", (unsigned char *)p + i);
	return n;
}

static fi_addr_t insert(struct side *s, const void *name)
{
	fi_addr_t a;
	if (fi_av_insert(s->av, name, 1, &a, 0, NULL) != 1)
		DIE("%s: fi_av_insert", s->what);
	return a;
}

/* ---- completions expected ----
 * Every operation that reports carries a struct want as its context:
 * the flags and error its entry must have. */

struct want {
	uint64_t flags;
	int err;
	int done;
	const char *what;
};

#define MAXWANT 4096
static struct want wants[MAXWANT];
static int nwant, ndone;

static struct want *expect(uint64_t flags, int err, const char *what)
{
	if (nwant == MAXWANT)
		DIE("too many operations");
	wants[nwant] = (struct want){.flags = flags, .err = err, .what = what};
	return &wants[nwant++];
}

static int known(const void *ctx) { return ctx >= (void *)wants && ctx < (void *)(wants + nwant); }

/* drain takes what one endpoint's CQ has (reading it drives progress). */
static void drain(struct ep *e)
{
	struct fi_cq_data_entry c[8];
	ssize_t n = fi_cq_read(e->cq, c, 8);
	for (ssize_t i = 0; i < n; i++) {
		struct want *w = c[i].op_context;
		if (!known(w))
			DIE("%s: a completion with context %p", e->s->what, c[i].op_context);
		CHECK(!w->done && !w->err && c[i].flags == w->flags, "%s: %s completed: flags %#" PRIx64 " want %#" PRIx64
		      ", err want %d, done %d", e->s->what, w->what, c[i].flags, w->flags, w->err, w->done);
		w->done = 1;
		ndone++;
	}
	if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry err = {0};
		if (fi_cq_readerr(e->cq, &err, 0) != 1)
			DIE("readerr");
		struct want *w = err.op_context;
		if (!known(w))
			DIE("%s: an error %d (%s) with context %p", e->s->what, err.err, fi_strerror(err.err), err.op_context);
		CHECK(!w->done && err.err == w->err && err.flags == w->flags,
		      "%s: %s failed: err %d (%s) want %d, flags %#" PRIx64 " want %#" PRIx64, e->s->what, w->what, err.err,
		      fi_strerror(err.err), w->err, err.flags, w->flags);
		w->done = 1;
		ndone++;
	} else if (n < 0 && n != -FI_EAGAIN) {
		DIE("%s: fi_cq_read: %zd (%s)", e->s->what, n, fi_strerror((int)-n));
	}
}

static void wait_all(void)
{
	double t0 = now_s();
	while (ndone < nwant) {
		for (int i = 0; i < nlive; i++)
			drain(live[i]);
		if (now_s() > t0 + 30)
			DIE("%d of %d completions in 30 s", ndone, nwant);
	}
}

/* POST retries while the provider says -FI_EAGAIN (it drives progress
 * inside, and so does draining the CQ). */
#define POST(e, call)                                                                                          \
	do {                                                                                                   \
		ssize_t r_;                                                                                    \
		double t0_ = now_s();                                                                          \
		while ((r_ = (call)) == -FI_EAGAIN) {                                                          \
			drain(e);                                                                              \
			if (now_s() > t0_ + 30)                                                                \
				DIE("%s: still -FI_EAGAIN after 30 s", #call);                                 \
		}                                                                                              \
		if (r_)                                                                                        \
			DIE("%s: %zd (%s)", #call, r_, fi_strerror((int)-r_));                                 \
	} while (0)

/* ---- datatypes: the test's own semantics of fi_atomic(3) ---- */

/* The cases' values: the target's (A, AI: imaginary parts), the
 * operands' (B, BI), the compare values' (the target's, below, equal or
 * above by turns: DC), masks for FI_MSWAP. Zeros make every pairing for
 * the logical operations; small, so no signed arithmetic overflows. */
static const int A[NEL] = {5, 0, -3, 7, 0, 2, 9}, AI[NEL] = {1, 0, 2, -1, 0, 3, 0};
static const int B[NEL] = {3, 0, 4, 0, 8, -6, 1}, BI[NEL] = {0, 0, -1, 0, 2, 1, 0};
static const int DC[3] = {-1, 0, 1};
static const unsigned MASK[NEL] = {0x0f, 0xf0, 0x3c, 0xff, 0, 0x55, 0xaa};

enum { T_INT, T_REAL, T_CPLX };

struct ty {
	enum fi_datatype dt;
	const char *name;
	size_t size;
	int tc;
	void (*fill)(enum fi_op op, void *a, void *b, void *c);
	void (*ref)(enum fi_op op, const void *a, const void *b, const void *c, void *out);
	int (*eq)(const void *x, const void *y); /* one element, by value */
};

#define LOGIC(op, d, s)                                                                                        \
	((op) == FI_LOR ? ((d) != 0 || (s) != 0) : (op) == FI_LAND ? ((d) != 0 && (s) != 0)                    \
						       : (((d) != 0 && (s) == 0) || ((d) == 0 && (s) != 0)))

#define DEF_INT(N, T)                                                                                          \
	static void fill_##N(enum fi_op op, void *pa, void *pb, void *pc)                                     \
	{                                                                                                      \
		T *a = pa, *b = pb, *c = pc;                                                                   \
		for (int i = 0; i < NEL; i++) {                                                                \
			a[i] = (T)A[i];                                                                        \
			b[i] = (T)B[i];                                                                        \
			c[i] = op == FI_MSWAP ? (T)MASK[i] : (T)(a[i] + (T)DC[i % 3]);                         \
		}                                                                                              \
	}                                                                                                      \
	static void ref_##N(enum fi_op op, const void *pa, const void *pb, const void *pc, void *po)          \
	{                                                                                                      \
		const T *a = pa, *b = pb, *c = pc;                                                             \
		T *o = po;                                                                                     \
		for (int i = 0; i < NEL; i++) {                                                                \
			T d = a[i], s = b[i], k = c[i], r = d;                                                 \
			switch (op) {                                                                          \
			case FI_MIN: if (s < d) r = s; break;                                                  \
			case FI_MAX: if (s > d) r = s; break;                                                  \
			case FI_SUM: r = (T)(d + s); break;                                                    \
			case FI_PROD: r = (T)(d * s); break;                                                   \
			case FI_LOR: case FI_LAND: case FI_LXOR: r = (T)LOGIC(op, d, s); break;                \
			case FI_BOR: r = (T)(d | s); break;                                                    \
			case FI_BAND: r = (T)(d & s); break;                                                   \
			case FI_BXOR: r = (T)(d ^ s); break;                                                   \
			case FI_ATOMIC_WRITE: r = s; break;                                                    \
			case FI_CSWAP: if (k == d) r = s; break;                                               \
			case FI_CSWAP_NE: if (k != d) r = s; break;                                            \
			case FI_CSWAP_LE: if (k <= d) r = s; break;                                            \
			case FI_CSWAP_LT: if (k < d) r = s; break;                                             \
			case FI_CSWAP_GE: if (k >= d) r = s; break;                                            \
			case FI_CSWAP_GT: if (k > d) r = s; break;                                             \
			case FI_MSWAP: r = (T)((s & k) | (d & (T)~k)); break;                                  \
			default: break;                                                                        \
			}                                                                                      \
			o[i] = r;                                                                              \
		}                                                                                              \
	}                                                                                                      \
	static int eq_##N(const void *x, const void *y) { return !memcmp(x, y, sizeof(T)); }

#define DEF_REAL(N, T)                                                                                         \
	static void fill_##N(enum fi_op op, void *pa, void *pb, void *pc)                                     \
	{                                                                                                      \
		(void)op;                                                                                      \
		T *a = pa, *b = pb, *c = pc;                                                                   \
		for (int i = 0; i < NEL; i++) {                                                                \
			a[i] = (T)A[i];                                                                        \
			b[i] = (T)B[i];                                                                        \
			c[i] = a[i] + (T)DC[i % 3];                                                            \
		}                                                                                              \
	}                                                                                                      \
	static void ref_##N(enum fi_op op, const void *pa, const void *pb, const void *pc, void *po)          \
	{                                                                                                      \
		const T *a = pa, *b = pb, *c = pc;                                                             \
		T *o = po;                                                                                     \
		for (int i = 0; i < NEL; i++) {                                                                \
			T d = a[i], s = b[i], k = c[i], r = d;                                                 \
			switch (op) {                                                                          \
			case FI_MIN: if (s < d) r = s; break;                                                  \
			case FI_MAX: if (s > d) r = s; break;                                                  \
			case FI_SUM: r = d + s; break;                                                         \
			case FI_PROD: r = d * s; break;                                                        \
			case FI_LOR: case FI_LAND: case FI_LXOR: r = (T)LOGIC(op, d, s); break;                \
			case FI_ATOMIC_WRITE: r = s; break;                                                    \
			case FI_CSWAP: if (k == d) r = s; break;                                               \
			case FI_CSWAP_NE: if (k != d) r = s; break;                                            \
			case FI_CSWAP_LE: if (k <= d) r = s; break;                                            \
			case FI_CSWAP_LT: if (k < d) r = s; break;                                             \
			case FI_CSWAP_GE: if (k >= d) r = s; break;                                            \
			case FI_CSWAP_GT: if (k > d) r = s; break;                                             \
			default: break;                                                                        \
			}                                                                                      \
			o[i] = r;                                                                              \
		}                                                                                              \
	}                                                                                                      \
	static int eq_##N(const void *x, const void *y)                                                       \
	{                                                                                                      \
		T u, v;                                                                                        \
		memcpy(&u, x, sizeof u);                                                                       \
		memcpy(&v, y, sizeof v);                                                                       \
		return u == v;                                                                                 \
	}

#define DEF_CPLX(N, T, R)                                                                                      \
	static void fill_##N(enum fi_op op, void *pa, void *pb, void *pc)                                     \
	{                                                                                                      \
		(void)op;                                                                                      \
		T *a = pa, *b = pb, *c = pc;                                                                   \
		for (int i = 0; i < NEL; i++) {                                                                \
			a[i] = (R)A[i] + (R)AI[i] * I;                                                         \
			b[i] = (R)B[i] + (R)BI[i] * I;                                                         \
			c[i] = a[i] + (R)DC[i % 3];                                                            \
		}                                                                                              \
	}                                                                                                      \
	static void ref_##N(enum fi_op op, const void *pa, const void *pb, const void *pc, void *po)          \
	{                                                                                                      \
		const T *a = pa, *b = pb, *c = pc;                                                             \
		T *o = po;                                                                                     \
		for (int i = 0; i < NEL; i++) {                                                                \
			T d = a[i], s = b[i], k = c[i], r = d;                                                 \
			switch (op) {                                                                          \
			case FI_SUM: r = d + s; break;                                                         \
			case FI_PROD: r = d * s; break;                                                        \
			case FI_LOR: case FI_LAND: case FI_LXOR: r = (T)LOGIC(op, d, s); break;                \
			case FI_ATOMIC_WRITE: r = s; break;                                                    \
			case FI_CSWAP: if (k == d) r = s; break;                                               \
			case FI_CSWAP_NE: if (k != d) r = s; break;                                            \
			default: break;                                                                        \
			}                                                                                      \
			o[i] = r;                                                                              \
		}                                                                                              \
	}                                                                                                      \
	static int eq_##N(const void *x, const void *y)                                                       \
	{                                                                                                      \
		T u, v;                                                                                        \
		memcpy(&u, x, sizeof u);                                                                       \
		memcpy(&v, y, sizeof v);                                                                       \
		return u == v;                                                                                 \
	}

DEF_INT(i8, int8_t)
DEF_INT(u8, uint8_t)
DEF_INT(i16, int16_t)
DEF_INT(u16, uint16_t)
DEF_INT(i32, int32_t)
DEF_INT(u32, uint32_t)
DEF_INT(i64, int64_t)
DEF_INT(u64, uint64_t)
DEF_INT(i128, __int128)
DEF_INT(u128, unsigned __int128)
DEF_REAL(f, float)
DEF_REAL(d, double)
DEF_REAL(ld, long double)
DEF_CPLX(cf, float complex, float)
DEF_CPLX(cd, double complex, double)
DEF_CPLX(cld, long double complex, long double)

#define TY(D, N, T, C) {D, #D, sizeof(T), C, fill_##N, ref_##N, eq_##N}
static const struct ty types[] = {
	TY(FI_INT8, i8, int8_t, T_INT),
	TY(FI_UINT8, u8, uint8_t, T_INT),
	TY(FI_INT16, i16, int16_t, T_INT),
	TY(FI_UINT16, u16, uint16_t, T_INT),
	TY(FI_INT32, i32, int32_t, T_INT),
	TY(FI_UINT32, u32, uint32_t, T_INT),
	TY(FI_INT64, i64, int64_t, T_INT),
	TY(FI_UINT64, u64, uint64_t, T_INT),
	TY(FI_INT128, i128, __int128, T_INT),
	TY(FI_UINT128, u128, unsigned __int128, T_INT),
	TY(FI_FLOAT, f, float, T_REAL),
	TY(FI_DOUBLE, d, double, T_REAL),
	TY(FI_LONG_DOUBLE, ld, long double, T_REAL),
	TY(FI_FLOAT_COMPLEX, cf, float complex, T_CPLX),
	TY(FI_DOUBLE_COMPLEX, cd, double complex, T_CPLX),
	TY(FI_LONG_DOUBLE_COMPLEX, cld, long double complex, T_CPLX),
};
#define NTYPES (sizeof types / sizeof types[0])
#define MAXSZ 32 /* long double complex */

/* in_class: fi_atomic(3)'s lists of operations per call class. */
static int in_class(int cls, enum fi_op op)
{
	if (cls == COMPARE)
		return op >= FI_CSWAP && op <= FI_MSWAP;
	if (op == FI_ATOMIC_READ)
		return cls == FETCH;
	return op <= FI_BXOR || op == FI_ATOMIC_WRITE;
}

/* meaningful: which operations a type has (libfabric's own software
 * atomics have the same): no bits on reals, nor order on complexes. */
static int meaningful(int tc, enum fi_op op)
{
	int bits = op == FI_BOR || op == FI_BAND || op == FI_BXOR || op == FI_MSWAP;
	int order = op == FI_MIN || op == FI_MAX || (op >= FI_CSWAP_LE && op <= FI_CSWAP_GT);
	if (tc == T_REAL)
		return !bits;
	if (tc == T_CPLX)
		return !bits && !order;
	return 1;
}

static const struct ty *type_of(enum fi_datatype dt)
{
	for (size_t i = 0; i < NTYPES; i++)
		if (types[i].dt == dt)
			return &types[i];
	return NULL;
}

static const char *op_name(enum fi_op op)
{
	static char b[32];
	snprintf(b, sizeof b, "%s", fi_tostr(&op, FI_TYPE_ATOMIC_OP));
	return b;
}

/* ---- the cases ---- */

struct tcase {
	int cls;
	enum fi_op op;
	const struct ty *ty;
	size_t off; /* its AREA bytes in the region */
	int var;    /* 0 plain, 1 v-call, 2 msg, 3 inject (base) or msg with FI_INJECT */
	_Alignas(16) unsigned char a[NEL * MAXSZ];
	_Alignas(16) unsigned char b[NEL * MAXSZ], c[NEL * MAXSZ], res[NEL * MAXSZ], want[NEL * MAXSZ];
	struct want *w;
};

static struct tcase *cases;
static size_t ncases;

static void make_cases(void)
{
	cases = calloc(3 * (FI_MSWAP + 1) * NTYPES, sizeof *cases);
	for (int cls = BASE; cls <= COMPARE; cls++)
		for (int op = FI_MIN; op <= FI_MSWAP; op++)
			for (size_t k = 0; k < NTYPES; k++) {
				if (!in_class(cls, op) || !meaningful(types[k].tc, op))
					continue;
				struct tcase *t = &cases[ncases];
				*t = (struct tcase){.cls = cls, .op = op, .ty = &types[k], .off = ncases * AREA,
						    .var = (int)(ncases % 4)};
				t->ty->fill(t->op, t->a, t->b, t->c);
				t->ty->ref(t->op, t->a, t->b, t->c, t->want);
				ncases++;
			}
	if (ncases * AREA > REGION)
		DIE("%zu cases do not fit", ncases);
}

/* The region's image before the cases: each case's target values in its
 * area, zeros between. */
static void make_image(unsigned char *img)
{
	memset(img, 0, REGION);
	for (size_t i = 0; i < ncases; i++)
		memcpy(img + cases[i].off, cases[i].a, NEL * cases[i].ty->size);
}

/* POSTW posts call (which names its context W) with a want made once:
 * POST evaluates its call again at every retry. */
#define POSTW(e, flags, err, what, call)                                                                       \
	do {                                                                                                   \
		struct want *W = expect(flags, err, what);                                                     \
		POST(e, call);                                                                                 \
	} while (0)

static void post_case(struct ep *e, struct tcase *t, fi_addr_t peer, uint64_t base, uint64_t key)
{
	size_t z = t->ty->size;
	enum fi_datatype dt = t->ty->dt;
	enum fi_op op = t->op;
	uint64_t addr = base + t->off;
	int rd = op == FI_ATOMIC_READ;
	static char what[64];
	snprintf(what, sizeof what, "%s %s", op_name(op), t->ty->name);
	int inject = t->cls == BASE && t->var == 3;
	t->w = inject ? NULL : expect(FI_ATOMIC | (t->cls == BASE ? FI_WRITE : FI_READ), 0, "a case");
	struct fi_ioc src[2] = {{rd ? NULL : t->b, 3}, {rd ? NULL : t->b + 3 * z, NEL - 3}};
	struct fi_ioc res[2] = {{t->res, 4}, {t->res + 4 * z, NEL - 4}};
	struct fi_ioc cmp[2] = {{t->c, 2}, {t->c + 2 * z, NEL - 2}};
	struct fi_ioc src1 = {rd ? NULL : t->b, NEL}, res1 = {t->res, NEL}, cmp1 = {t->c, NEL};
	struct fi_rma_ioc rma = {addr, NEL, key};
	struct fi_msg_atomic m = {.msg_iov = &src1, .iov_count = 1, .addr = peer, .rma_iov = &rma, .rma_iov_count = 1,
				  .datatype = dt, .op = op, .context = t->w};
	uint64_t mflags = FI_COMPLETION | (t->var == 3 ? FI_INJECT : 0);
	switch (t->cls) {
	case BASE:
		if (t->var == 0)
			POST(e, fi_atomic(e->ep, t->b, NEL, NULL, peer, addr, key, dt, op, t->w));
		else if (t->var == 1)
			POST(e, fi_atomicv(e->ep, src, NULL, 2, peer, addr, key, dt, op, t->w));
		else if (t->var == 2)
			POST(e, fi_atomicmsg(e->ep, &m, mflags));
		else
			POST(e, fi_inject_atomic(e->ep, t->b, NEL, peer, addr, key, dt, op));
		break;
	case FETCH:
		if (t->var == 0)
			POST(e, fi_fetch_atomic(e->ep, rd ? NULL : t->b, NEL, NULL, t->res, NULL, peer, addr, key, dt, op,
						t->w));
		else if (t->var == 1)
			POST(e, fi_fetch_atomicv(e->ep, src, NULL, 2, res, NULL, 2, peer, addr, key, dt, op, t->w));
		else
			POST(e, fi_fetch_atomicmsg(e->ep, &m, &res1, NULL, 1, mflags));
		break;
	default:
		if (t->var == 0)
			POST(e, fi_compare_atomic(e->ep, t->b, NEL, NULL, t->c, NULL, t->res, NULL, peer, addr, key, dt, op,
						  t->w));
		else if (t->var == 1)
			POST(e, fi_compare_atomicv(e->ep, src, NULL, 2, cmp, NULL, 2, res, NULL, 2, peer, addr, key, dt, op,
						   t->w));
		else
			POST(e, fi_compare_atomicmsg(e->ep, &m, &cmp1, NULL, 1, &res1, NULL, 1, mflags));
	}
}

/* run_cases writes the image, runs every case and reads the region back
 * into out, all pipelined behind one another on one endpoint. */
static void run_cases(struct ep *e, fi_addr_t peer, uint64_t base, uint64_t key, const unsigned char *img,
		      unsigned char *out)
{
	for (size_t off = 0; off < REGION; off += CHUNK) {
		struct want *w = expect(FI_ATOMIC | FI_WRITE, 0, "the image");
		POST(e, fi_atomic(e->ep, img + off, CHUNK, NULL, peer, base + off, key, FI_UINT8, FI_ATOMIC_WRITE, w));
	}
	for (size_t i = 0; i < ncases; i++)
		post_case(e, &cases[i], peer, base, key);
	for (size_t off = 0; off < REGION; off += CHUNK) {
		struct want *w = expect(FI_ATOMIC | FI_READ, 0, "the read back");
		POST(e, fi_fetch_atomic(e->ep, NULL, CHUNK, NULL, out + off, NULL, peer, base + off, key, FI_UINT8,
					FI_ATOMIC_READ, w));
	}
	wait_all();
}

/* check_cases checks the region read back (out) and the fetched values. */
static void check_cases(const char *what, const unsigned char *img, const unsigned char *out)
{
	int bad = 0;
	for (size_t i = 0; i < ncases && bad < 20; i++) {
		struct tcase *t = &cases[i];
		size_t z = t->ty->size;
		for (int k = 0; k < NEL; k++) {
			if (!t->ty->eq(out + t->off + k * z, t->want + k * z)) {
				CHECK(0, "%s: %s %s class %d (call %d): element %d is not the reference", what,
				      op_name(t->op), t->ty->name, t->cls, t->var, k);
				bad++;
			}
			if (t->cls != BASE && !t->ty->eq(t->res + k * z, t->a + k * z)) {
				CHECK(0, "%s: %s %s class %d (call %d): fetched element %d is not the old value", what,
				      op_name(t->op), t->ty->name, t->cls, t->var, k);
				bad++;
			}
		}
		/* the rest of its area: as written (no element past count) */
		for (size_t b = t->off + NEL * z; b < t->off + AREA; b++)
			if (out[b] != img[b]) {
				CHECK(0, "%s: %s %s: byte %zu past the elements changed", what, op_name(t->op),
				      t->ty->name, b - t->off);
				bad++;
				break;
			}
	}
	for (size_t b = ncases * AREA; b < REGION; b++)
		if (out[b] != img[b]) {
			CHECK(0, "%s: byte %zu after the cases changed: %u", what, b, out[b]);
			break;
		}
	/* How many compare elements took: both kinds for every operation. */
	for (size_t i = 0; i < ncases; i++) {
		struct tcase *t = &cases[i];
		if (t->cls != COMPARE || t->op == FI_MSWAP)
			continue;
		int took = 0;
		for (int k = 0; k < NEL; k++)
			took += !t->ty->eq(t->want + k * t->ty->size, t->a + k * t->ty->size);
		CHECK(took > 0 && took < NEL, "%s %s: %d of %d elements swapped: not both kinds", op_name(t->op),
		      t->ty->name, took, NEL);
	}
}

/* ---- fi_query_atomic and the valid calls ---- */

static void check_query(struct side *s, struct ep *e)
{
	static const enum fi_datatype dts[] = {FI_INT8, FI_UINT8, FI_INT16, FI_UINT16, FI_INT32, FI_UINT32, FI_INT64,
					       FI_UINT64, FI_FLOAT, FI_DOUBLE, FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX,
					       FI_LONG_DOUBLE, FI_LONG_DOUBLE_COMPLEX, FI_INT128, FI_UINT128};
	static const uint64_t qflags[3] = {0, FI_FETCH_ATOMIC, FI_COMPARE_ATOMIC};
	int yes = 0, no = 0;
	for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++) {
		const struct ty *t = type_of(dts[d]);
		for (int op = FI_MIN; op < FI_ATOMIC_OP_LAST; op++)
			for (int cls = BASE; cls <= COMPARE; cls++) {
				int want = in_class(cls, op) && meaningful(t->tc, op);
				struct fi_atomic_attr attr = {0};
				int r = fi_query_atomic(s->dom, dts[d], op, &attr, qflags[cls]);
				size_t cnt = 0;
				int v = cls == BASE ? fi_atomicvalid(e->ep, dts[d], op, &cnt)
					: cls == FETCH ? fi_fetch_atomicvalid(e->ep, dts[d], op, &cnt)
						       : fi_compare_atomicvalid(e->ep, dts[d], op, &cnt);
				if (want) {
					yes++;
					CHECK(r == 0 && attr.size == t->size && attr.count == CHUNK / t->size,
					      "%s: fi_query_atomic(%s, %s, class %d): %d, size %zu count %zu", s->what,
					      t->name, op_name(op), cls, r, attr.size, attr.count);
					CHECK(v == 0 && cnt == CHUNK / t->size, "%s: valid(%s, %s, class %d): %d, count %zu",
					      s->what, t->name, op_name(op), cls, v, cnt);
				} else {
					no++;
					CHECK(r == -FI_EOPNOTSUPP && v == -FI_EOPNOTSUPP,
					      "%s: (%s, %s, class %d) is not supported, yet query %d valid %d", s->what,
					      t->name, op_name(op), cls, r, v);
				}
			}
	}
	CHECK(yes > 300 && no > 300, "%d supported combinations, %d not", yes, no);
	struct fi_atomic_attr attr;
	EXPECT(fi_query_atomic(s->dom, FI_UINT64, FI_SUM, &attr, FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC), -FI_EINVAL);
	EXPECT(fi_query_atomic(s->dom, FI_UINT64, FI_SUM, &attr, FI_TAGGED), -FI_EOPNOTSUPP);
	EXPECT(fi_query_atomic(s->dom, FI_UINT64, FI_SUM, NULL, 0), -FI_EINVAL);
	EXPECT(fi_query_atomic(s->dom, (enum fi_datatype)99, FI_SUM, &attr, 0), -FI_EOPNOTSUPP);
	EXPECT(fi_query_atomic(s->dom, FI_UINT64, (enum fi_op)99, &attr, 0), -FI_EOPNOTSUPP);
	EXPECT(fi_atomicvalid(e->ep, FI_VOID, FI_SUM, &(size_t){0}), -FI_EOPNOTSUPP);
}

/* check_refusals: what a call refuses before anything goes. */
static void check_refusals(struct ep *e, fi_addr_t peer, uint64_t addr, uint64_t key)
{
	uint64_t v[CHUNK / 8 + 1] = {0}, r[CHUNK / 8 + 1] = {0}, c[CHUNK / 8 + 1] = {0};
	struct fi_ioc iv = {v, 1}, rv = {r, 2}, cv = {c, 1};
	struct fi_rma_ioc rma[2] = {{addr, 1, key}, {addr, 1, key}};
	struct fi_msg_atomic m = {.msg_iov = &iv, .iov_count = 1, .addr = peer, .rma_iov = rma, .rma_iov_count = 1,
				  .datatype = FI_UINT64, .op = FI_SUM};
	EXPECT(fi_atomic(e->ep, v, 0, NULL, peer, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	EXPECT(fi_atomic(e->ep, v, CHUNK / 8 + 1, NULL, peer, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EMSGSIZE);
	EXPECT(fi_atomic(e->ep, NULL, 1, NULL, peer, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	EXPECT(fi_atomic(e->ep, v, 1, NULL, peer, addr, key, FI_DOUBLE, FI_BOR, NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_atomic(e->ep, v, 1, NULL, peer, addr, key, FI_UINT64, FI_ATOMIC_READ, NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_atomic(e->ep, v, 1, NULL, peer, addr, key, FI_UINT64, FI_CSWAP, NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_atomic(e->ep, v, 1, NULL, peer, addr, key, (enum fi_datatype)99, FI_SUM, NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_atomic(e->ep, v, 1, NULL, peer, addr, key, FI_UINT64, (enum fi_op)99, NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_inject_atomic(e->ep, v, CHUNK / 8 + 1, peer, addr, key, FI_UINT64, FI_SUM), -FI_EMSGSIZE);
	EXPECT(fi_atomic(e->ep, v, 1, NULL, (fi_addr_t)12345, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	EXPECT(fi_fetch_atomic(e->ep, v, 1, NULL, NULL, NULL, peer, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL);
	EXPECT(fi_fetch_atomicv(e->ep, &iv, NULL, 1, &rv, NULL, 1, peer, addr, key, FI_UINT64, FI_SUM, NULL),
	       -FI_EINVAL); /* two results for one operand */
	EXPECT(fi_fetch_atomic(e->ep, v, 1, NULL, r, NULL, peer, addr, key, FI_UINT64, FI_CSWAP, NULL), -FI_EOPNOTSUPP);
	EXPECT(fi_compare_atomic(e->ep, v, 1, NULL, NULL, NULL, r, NULL, peer, addr, key, FI_UINT64, FI_CSWAP, NULL),
	       -FI_EINVAL);
	EXPECT(fi_compare_atomic(e->ep, v, 1, NULL, c, NULL, r, NULL, peer, addr, key, FI_UINT64, FI_SUM, NULL),
	       -FI_EOPNOTSUPP);
	EXPECT(fi_compare_atomic(e->ep, v, 1, NULL, c, NULL, r, NULL, peer, addr, key, FI_DOUBLE_COMPLEX, FI_CSWAP_LT,
				 NULL),
	       -FI_EOPNOTSUPP);
	struct fi_ioc five[5] = {{v, 1}, {v, 1}, {v, 1}, {v, 1}, {v, 1}};
	EXPECT(fi_atomicv(e->ep, five, NULL, 5, peer, addr, key, FI_UINT64, FI_SUM, NULL), -FI_EINVAL); /* iov_limit 4 */
	EXPECT(fi_atomicmsg(e->ep, NULL, 0), -FI_EINVAL);
	EXPECT(fi_atomicmsg(e->ep, &m, FI_REMOTE_CQ_DATA), -FI_EBADFLAGS);
	m.rma_iov_count = 2;
	EXPECT(fi_atomicmsg(e->ep, &m, 0), -FI_EINVAL); /* rma_iov_limit 1 */
	m.rma_iov_count = 1;
	rma[0].count = 2;
	EXPECT(fi_atomicmsg(e->ep, &m, 0), -FI_EINVAL); /* the remote count is the operands' */
	rma[0].count = 1;
	EXPECT(fi_compare_atomicmsg(e->ep, &m, &cv, NULL, 1, &rv, NULL, 1, 0), -FI_EOPNOTSUPP); /* FI_SUM */
	m.op = FI_CSWAP;
	EXPECT(fi_compare_atomicmsg(e->ep, &m, &cv, NULL, 1, &rv, NULL, 1, 0), -FI_EINVAL);     /* two results */
	EXPECT(ndone, nwant);
}

/* ---- the server ---- */

struct region {
	unsigned char *mem; /* guard page, the region, guard page */
	unsigned char *buf;
	size_t len;
	struct fid_mr *mr;
};

static void region_open(struct side *s, struct region *g, size_t len, uint64_t access, uint64_t key, int pattern)
{
	g->len = len;
	g->mem = aligned_alloc(PAGE, len + 2 * PAGE);
	if (!g->mem)
		DIE("aligned_alloc");
	memset(g->mem, GUARD, len + 2 * PAGE);
	g->buf = g->mem + PAGE;
	for (size_t i = 0; i < len; i++)
		g->buf[i] = (unsigned char)(pattern + i * 7);
	MUST(fi_mr_reg(s->dom, g->buf, len, access, 0, key, 0, &g->mr, NULL));
}

static void region_check(const char *what, const struct region *g, int pattern)
{
	for (size_t i = 0; i < PAGE; i++)
		if (g->mem[i] != GUARD || g->buf[g->len + i] != GUARD) {
			CHECK(0, "%s: guard byte %zu changed", what, i);
			return;
		}
	if (pattern < 0)
		return;
	for (size_t i = 0; i < g->len; i++)
		if (g->buf[i] != (unsigned char)(pattern + i * 7)) {
			CHECK(0, "%s: byte %zu changed", what, i);
			return;
		}
}

static void region_close(struct region *g)
{
	MUST(fi_close(&g->mr->fid));
	free(g->mem);
}

/* The write-only region's first 8 bytes take the client's write. */
#define WO_VALUE 0x0123456789abcdefull

static int server(void)
{
	struct side v, o;
	open_side(&v, "virt", 1);
	open_side(&o, "offset", 0);
	struct ep ve, oe;
	/* Receives of the counter test make no CQ entry unless asked. */
	open_ep(&v, &ve, FI_SELECTIVE_COMPLETION);
	open_ep(&o, &oe, 0);
	struct fid_cntr *crecv;
	MUST(fi_cntr_open(v.dom, &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC},
			  &crecv, NULL));
	MUST(fi_ep_bind(ve.ep, &crecv->fid, FI_RECV));
	enable_ep(&ve);
	enable_ep(&oe);
	struct region vt, ro, wo, rmar, ot;
	region_open(&v, &vt, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 1);
	region_open(&v, &ro, SMALL, FI_REMOTE_READ, 0, 2);
	region_open(&v, &wo, SMALL, FI_REMOTE_WRITE, 0, 3);
	region_open(&v, &rmar, SMALL, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 4);
	region_open(&o, &ot, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0x5eed, 5);
	if (fi_mr_key(ot.mr) != 0x5eed)
		DIE("offset domain: key %#" PRIx64, fi_mr_key(ot.mr));
	/* NSEND receives without FI_COMPLETION, one too short (FI_ETRUNC),
	 * the bye with one. */
	static char rbuf[NSEND][MSGLEN], shortbuf[8], bye[MSGLEN];
	struct want *trunc = expect(FI_RECV | FI_MSG, FI_ETRUNC, "the short receive");
	struct want *wbye = expect(FI_RECV | FI_MSG, 0, "the bye");
	for (int i = 0; i < NSEND; i++) {
		struct iovec iv = {rbuf[i], MSGLEN};
		struct fi_msg m = {.msg_iov = &iv, .iov_count = 1, .addr = FI_ADDR_UNSPEC};
		MUST(fi_recvmsg(ve.ep, &m, 0));
	}
	MUST(fi_recv(ve.ep, shortbuf, sizeof shortbuf, NULL, FI_ADDR_UNSPEC, trunc));
	struct iovec biv = {bye, MSGLEN};
	struct fi_msg bm = {.msg_iov = &biv, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = wbye};
	MUST(fi_recvmsg(ve.ep, &bm, FI_COMPLETION));
	char vn[2 * MAXNAME + 1], on[2 * MAXNAME + 1];
	hex(ve.name, ve.namelen, vn);
	hex(oe.name, oe.namelen, on);
	printf("READY %s %s %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64
	       " %" PRIu64 " %" PRIu64 "\n",
	       vn, on, (uint64_t)(uintptr_t)vt.buf, fi_mr_key(vt.mr), (uint64_t)(uintptr_t)ro.buf, fi_mr_key(ro.mr),
	       (uint64_t)(uintptr_t)wo.buf, fi_mr_key(wo.mr), (uint64_t)(uintptr_t)rmar.buf, fi_mr_key(rmar.mr),
	       fi_mr_key(ot.mr));
	fflush(stdout);
	/* Serve: the target's progress applies the peers' atomics. */
	double t0 = now_s();
	while (!wbye->done) {
		drain(&ve);
		drain(&oe);
		if (now_s() > t0 + 50)
			DIE("no bye in 50 s");
	}
	CHECK(!strcmp(bye, "bye"), "bye: %.16s", bye);
	CHECK(trunc->done, "the short receive did not fail");
	for (int i = 0; i < NSEND; i++)
		CHECK(rbuf[i][0] == 'm' && rbuf[i][1] == (char)('0' + i), "receive %d: %.16s", i, rbuf[i]);
	/* NSEND receives with no CQ entry and the bye counted, the short one
	 * as an error. */
	EXPECT(fi_cntr_read(crecv), NSEND + 1);
	EXPECT(fi_cntr_readerr(crecv), 1);
	region_check("virt region", &vt, -1);
	region_check("read-only region", &ro, 2);
	uint64_t w0;
	memcpy(&w0, wo.buf, sizeof w0);
	CHECK(w0 == WO_VALUE, "write-only region: %#" PRIx64 ", want the client's write", w0);
	for (int i = 0; i < 8; i++) /* the pattern back where the write went, to check the rest */
		wo.buf[i] = (unsigned char)(3 + i * 7);
	region_check("write-only region", &wo, 3);
	region_check("rma region", &rmar, -1);
	region_check("offset region", &ot, -1);
	EXPECT(fi_close(&crecv->fid), -FI_EBUSY); /* bound */
	region_close(&vt);
	region_close(&ro);
	region_close(&wo);
	region_close(&rmar);
	region_close(&ot);
	close_ep(&ve);
	close_ep(&oe);
	MUST(fi_close(&crecv->fid));
	close_side(&v);
	close_side(&o);
	if (fails) {
		fprintf(stderr, "server: %d of %d checks failed\n", fails, checks);
		return 1;
	}
	printf("PASS server, %d checks\n", checks);
	return 0;
}

/* ---- the client ---- */

struct srv {
	char vname[MAXNAME], oname[MAXNAME];
	uint64_t vt, vtkey, ro, rokey, wo, wokey, rma, rmakey, otkey;
};

/* access checks FI_EACCES for what a registration does not allow, and
 * that what it allows goes. */
static void check_access(struct ep *e, fi_addr_t peer, const struct srv *sv, fi_addr_t opeer, struct ep *oe)
{
	uint64_t one = 1, got = 0;
	int before = ndone;
	const char *ea = "refused (FI_EACCES)";
	/* a bad key; a range past the end; one before the start */
	POSTW(e, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(e->ep, &one, 1, NULL, peer, sv->vt, sv->vtkey ^ 0x5a5a, FI_UINT64, FI_SUM, W));
	POSTW(e, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(e->ep, &one, 1, NULL, peer, sv->vt + REGION - 4, sv->vtkey, FI_UINT64, FI_SUM, W));
	POSTW(e, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(e->ep, &one, 1, NULL, peer, sv->vt - 8, sv->vtkey, FI_UINT64, FI_SUM, W));
	POSTW(e, FI_ATOMIC | FI_READ, FI_EACCES, ea,
	      fi_fetch_atomic(e->ep, &one, 1, NULL, &got, NULL, peer, sv->vt, sv->vtkey + 1, FI_UINT64, FI_SUM, W));
	/* read-only: no writing, fetching a read is fine */
	uint64_t rov = 0;
	POSTW(e, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(e->ep, &one, 1, NULL, peer, sv->ro, sv->rokey, FI_UINT64, FI_ATOMIC_WRITE, W));
	POSTW(e, FI_ATOMIC | FI_READ, FI_EACCES, ea,
	      fi_fetch_atomic(e->ep, &one, 1, NULL, &got, NULL, peer, sv->ro, sv->rokey, FI_UINT64, FI_SUM, W));
	POSTW(e, FI_ATOMIC | FI_READ, 0, "a read of read-only memory",
	      fi_fetch_atomic(e->ep, NULL, 1, NULL, &rov, NULL, peer, sv->ro + 8, sv->rokey, FI_UINT64, FI_ATOMIC_READ, W));
	/* write-only: no fetching, writing is fine */
	uint64_t wov = WO_VALUE, cmpv = 0;
	POSTW(e, FI_ATOMIC | FI_READ, FI_EACCES, ea,
	      fi_fetch_atomic(e->ep, NULL, 1, NULL, &got, NULL, peer, sv->wo, sv->wokey, FI_UINT64, FI_ATOMIC_READ, W));
	POSTW(e, FI_ATOMIC | FI_READ, FI_EACCES, ea,
	      fi_compare_atomic(e->ep, &one, 1, NULL, &cmpv, NULL, &got, NULL, peer, sv->wo, sv->wokey, FI_UINT64,
				FI_CSWAP, W));
	POSTW(e, FI_ATOMIC | FI_WRITE, 0, "a write of write-only memory",
	      fi_atomic(e->ep, &wov, 1, NULL, peer, sv->wo, sv->wokey, FI_UINT64, FI_ATOMIC_WRITE, W));
	/* offset domain: keys are the application's, addresses offsets */
	POSTW(oe, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(oe->ep, &one, 1, NULL, opeer, 0, sv->otkey + 1, FI_UINT64, FI_SUM, W));
	POSTW(oe, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(oe->ep, &one, 1, NULL, opeer, REGION - 4, sv->otkey, FI_UINT64, FI_SUM, W));
	POSTW(oe, FI_ATOMIC | FI_WRITE, FI_EACCES, ea,
	      fi_atomic(oe->ep, &one, 1, NULL, opeer, UINT64_MAX - 3, sv->otkey, FI_UINT64, FI_SUM, W));
	wait_all();
	uint64_t want = 0;
	for (int i = 0; i < 8; i++)
		want |= (uint64_t)(unsigned char)(2 + (8 + i) * 7) << (8 * i);
	CHECK(rov == want, "read-only region read: %#" PRIx64 ", want %#" PRIx64, rov, want);
	CHECK(ndone - before == 13, "access: %d completions", ndone - before);
}

/* self: an atomic to the endpoint's own address (through its own
 * listener, as its RMA goes). */
static void check_self(struct side *v, struct ep *e)
{
	struct region l;
	region_open(v, &l, SMALL, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 6);
	fi_addr_t me = insert(v, e->name);
	uint32_t add = 1000, old = 0, now = 0, exp0;
	memcpy(&exp0, l.buf + 64, 4);
	uint64_t at = (uint64_t)(uintptr_t)l.buf + 64;
	POSTW(e, FI_ATOMIC | FI_READ, 0, "an atomic to itself",
	      fi_fetch_atomic(e->ep, &add, 1, NULL, &old, NULL, me, at, fi_mr_key(l.mr), FI_UINT32, FI_SUM, W));
	wait_all();
	memcpy(&now, l.buf + 64, 4);
	CHECK(old == exp0 && now == exp0 + 1000, "self: old %u now %u, want %u and %u", old, now, exp0, exp0 + 1000);
	region_close(&l);
}

static double since(double t0) { return now_s() - t0; }

/* check_counters runs the counter tests on their own endpoint, whose CQ
 * is bound with FI_SELECTIVE_COMPLETION. */
static void check_counters(struct side *v, struct side *o, fi_addr_t peer, const struct srv *sv)
{
	struct ep e;
	open_ep(v, &e, FI_SELECTIVE_COMPLETION);
	struct fid_cntr *cs, *cr, *cw, *cx, *co;
	EXPECT(fi_cntr_open(v->dom, &(struct fi_cntr_attr){.events = (enum fi_cntr_events)7}, &cx, NULL), -FI_ENOSYS);
	EXPECT(fi_cntr_open(v->dom, &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP, .flags = 1}, &cx, NULL),
	       -FI_EINVAL);
	EXPECT(fi_cntr_open(v->dom, &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_FD}, &cx,
			    NULL),
	       -FI_ENOSYS);
	MUST(fi_cntr_open(v->dom, &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC}, &cs,
			  &cs));
	MUST(fi_cntr_open(v->dom, &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE}, &cr,
			  NULL));
	MUST(fi_cntr_open(v->dom, &(struct fi_cntr_attr){.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_YIELD}, &cw,
			  NULL));
	MUST(fi_cntr_open(v->dom, NULL, &cx, NULL));
	MUST(fi_cntr_open(o->dom, NULL, &co, NULL));
	CHECK(cs->fid.fclass == FI_CLASS_CNTR && cs->fid.context == &cs, "counter fid: class %zu context %p",
	      cs->fid.fclass, cs->fid.context);
	enum fi_wait_obj wo = FI_WAIT_NONE;
	EXPECT(fi_control(&cs->fid, FI_GETWAITOBJ, &wo), 0);
	CHECK(wo == FI_WAIT_UNSPEC, "wait object %d", wo);
	int fd = -1;
	EXPECT(fi_control(&cs->fid, FI_GETWAIT, &fd), -FI_ENODATA);
	EXPECT(fi_ep_bind(e.ep, &cs->fid, FI_TRANSMIT), 0); /* FI_TRANSMIT is FI_SEND */
	EXPECT(fi_ep_bind(e.ep, &cr->fid, FI_READ), 0);
	EXPECT(fi_ep_bind(e.ep, &cw->fid, FI_WRITE), 0);
	EXPECT(fi_ep_bind(e.ep, &cx->fid, FI_REMOTE_WRITE), -FI_EOPNOTSUPP); /* no FI_RMA_EVENT */
	EXPECT(fi_ep_bind(e.ep, &cx->fid, FI_REMOTE_READ), -FI_EOPNOTSUPP);
	EXPECT(fi_ep_bind(e.ep, &cx->fid, FI_SEND), -FI_EINVAL); /* one per kind */
	EXPECT(fi_ep_bind(e.ep, &cx->fid, FI_SELECTIVE_COMPLETION), -FI_EBADFLAGS);
	EXPECT(fi_ep_bind(e.ep, &co->fid, FI_RECV), -FI_EINVAL); /* another domain's */
	EXPECT(fi_ep_bind(e.ep, &cs->fid, FI_SEND), 0);          /* the same again: fine */
	enable_ep(&e);
	EXPECT(fi_close(&cs->fid), -FI_EBUSY);
	EXPECT(fi_cntr_read(cs), 0);
	EXPECT(fi_cntr_readerr(cs), 0);
	EXPECT(fi_cntr_wait(cs, 0, 0), 0); /* reached already */

	/* Sends: no CQ entry (selective), counted; fi_cntr_wait sleeps for
	 * them (FI_WAIT_UNSPEC). */
	static char msg[NSEND][MSGLEN];
	for (int i = 0; i < NSEND; i++) {
		snprintf(msg[i], MSGLEN, "m%d", i);
		POST(&e, fi_send(e.ep, msg[i], MSGLEN, NULL, peer, NULL));
	}
	double t0 = now_s();
	EXPECT(fi_cntr_wait(cs, NSEND, 10000), 0);
	EXPECT(fi_cntr_read(cs), NSEND);
	static char big[64] = "too long for the server's receive";
	POST(&e, fi_inject(e.ep, big, sizeof big, peer)); /* the server's short receive: counted here as a success */
	EXPECT(fi_cntr_wait(cs, NSEND + 1, 10000), 0);
	struct fi_cq_data_entry ce;
	EXPECT(fi_cq_read(e.cq, &ce, 1), -FI_EAGAIN);
	printf("sends counted in %.1f ms\n", since(t0) * 1e3);

	/* RMA: writes and reads counted, a bad key an error (and the end of
	 * a wait), with an error entry despite FI_SELECTIVE_COMPLETION. */
	static uint64_t wbuf[8], rbuf[8];
	for (int i = 0; i < 5; i++) {
		wbuf[i] = 0x1000 + (uint64_t)i;
		POST(&e, fi_write(e.ep, &wbuf[i], 8, NULL, peer, sv->rma + 8 * (uint64_t)i, sv->rmakey, NULL));
	}
	EXPECT(fi_cntr_wait(cw, 5, 10000), 0);
	struct want *wbad = expect(FI_RMA | FI_WRITE, FI_EACCES, "an RMA write with a bad key");
	POST(&e, fi_write(e.ep, &wbuf[5], 8, NULL, peer, sv->rma, sv->rmakey ^ 0x33, wbad));
	EXPECT(fi_cntr_wait(cw, 1000, 10000), -FI_EAVAIL);
	EXPECT(fi_cntr_readerr(cw), 1);
	EXPECT(fi_cntr_read(cw), 5);
	for (int i = 0; i < 4; i++)
		POST(&e, fi_read(e.ep, &rbuf[i], 8, NULL, peer, sv->rma + 8 * (uint64_t)i, sv->rmakey, NULL));
	struct want *rbad = expect(FI_RMA | FI_READ, FI_EACCES, "an RMA read with a bad key");
	POST(&e, fi_read(e.ep, &rbuf[4], 8, NULL, peer, sv->rma, sv->rmakey ^ 0x33, rbad));
	t0 = now_s();
	while ((fi_cntr_read(cr) < 4 || fi_cntr_readerr(cr) < 1) && since(t0) < 10) {
	}
	EXPECT(fi_cntr_read(cr), 4);
	EXPECT(fi_cntr_readerr(cr), 1);
	for (int i = 0; i < 4; i++)
		CHECK(rbuf[i] == 0x1000 + (uint64_t)i, "fi_read %d: %#" PRIx64, i, rbuf[i]);
	while (!wbad->done || !rbad->done)
		drain(&e);

	/* Atomics: base ones count as writes, fetch and compare as reads;
	 * one with FI_COMPLETION makes its CQ entry too. */
	uint64_t one = 1, res[4] = {0}, cmp = 0;
	uint64_t at = sv->rma + 1024;
	for (int i = 0; i < 3; i++)
		POST(&e, fi_atomic(e.ep, &one, 1, NULL, peer, at, sv->rmakey, FI_UINT64, FI_SUM, NULL));
	POST(&e, fi_fetch_atomic(e.ep, &one, 1, NULL, &res[0], NULL, peer, at, sv->rmakey, FI_UINT64, FI_SUM, NULL));
	POST(&e, fi_fetch_atomic(e.ep, NULL, 1, NULL, &res[1], NULL, peer, at, sv->rmakey, FI_UINT64, FI_ATOMIC_READ,
				 NULL));
	struct fi_ioc iv = {&one, 1}, rv = {&res[3], 1};
	struct fi_rma_ioc rma = {at, 1, sv->rmakey};
	struct want *wc = expect(FI_ATOMIC | FI_READ, 0, "a fetch with FI_COMPLETION");
	struct fi_msg_atomic m = {.msg_iov = &iv, .iov_count = 1, .addr = peer, .rma_iov = &rma, .rma_iov_count = 1,
				  .datatype = FI_UINT64, .op = FI_SUM, .context = wc};
	POST(&e, fi_fetch_atomicmsg(e.ep, &m, &rv, NULL, 1, FI_COMPLETION));
	cmp = 0; /* the target's value before: the pattern's, not 0: the swap does not take */
	POST(&e, fi_compare_atomic(e.ep, &one, 1, NULL, &cmp, NULL, &res[2], NULL, peer, at, sv->rmakey, FI_UINT64,
				   FI_CSWAP, NULL));
	struct want *abad = expect(FI_ATOMIC | FI_WRITE, FI_EACCES, "an atomic with a bad key");
	POST(&e, fi_atomic(e.ep, &one, 1, NULL, peer, at, sv->rmakey ^ 0x77, FI_UINT64, FI_SUM, abad));
	t0 = now_s();
	while ((fi_cntr_read(cw) < 8 || fi_cntr_readerr(cw) < 2 || fi_cntr_read(cr) < 8) && since(t0) < 10) {
	}
	EXPECT(fi_cntr_read(cw), 5 + 3);
	EXPECT(fi_cntr_readerr(cw), 2);
	EXPECT(fi_cntr_read(cr), 4 + 4);
	EXPECT(fi_cntr_readerr(cr), 1);
	while (!wc->done || !abad->done)
		drain(&e);
	uint64_t base;
	unsigned char pb[8];
	for (int i = 0; i < 8; i++)
		pb[i] = (unsigned char)(4 + (1024 + i) * 7);
	memcpy(&base, pb, 8);
	CHECK(res[0] == base + 3 && res[1] == base + 4 && res[3] == base + 4 && res[2] == base + 5,
	      "counted atomics fetched %#" PRIx64 " %#" PRIx64 " %#" PRIx64 " %#" PRIx64 " from %#" PRIx64, res[0],
	      res[1], res[3], res[2], base);

	/* A wait that times out; set, add, seterr, adderr. */
	uint64_t s0 = fi_cntr_read(cs);
	t0 = now_s();
	EXPECT(fi_cntr_wait(cs, s0 + 1000, 50), -FI_ETIMEDOUT);
	double took = since(t0);
	CHECK(took >= 0.045 && took < 2, "a 50 ms wait took %.3f s", took);
	EXPECT(fi_cntr_set(cs, 100), 0);
	EXPECT(fi_cntr_read(cs), 100);
	EXPECT(fi_cntr_add(cs, 5), 0);
	EXPECT(fi_cntr_read(cs), 105);
	EXPECT(fi_cntr_seterr(cs, 7), 0);
	EXPECT(fi_cntr_adderr(cs, 2), 0);
	EXPECT(fi_cntr_readerr(cs), 9);
	EXPECT(fi_cntr_set(cx, 3), 0); /* bound to nothing */
	EXPECT(fi_cntr_wait(cx, 3, 0), 0);
	EXPECT(fi_cntr_wait(cx, 4, 10), -FI_ETIMEDOUT);

	/* The bye, counted on top of the set value. */
	static char bye[MSGLEN] = "bye";
	POST(&e, fi_send(e.ep, bye, MSGLEN, NULL, peer, NULL));
	EXPECT(fi_cntr_wait(cs, 106, 10000), 0);
	EXPECT(fi_cntr_readerr(cs), 9);

	close_ep(&e);
	MUST(fi_close(&cs->fid));
	MUST(fi_close(&cr->fid));
	MUST(fi_close(&cw->fid));
	MUST(fi_close(&cx->fid));
	MUST(fi_close(&co->fid));
}

static int client(int argc, char **argv)
{
	struct srv sv;
	if (argc != 11)
		DIE("client: %d READY fields, want 11", argc);
	unhex(argv[0], sv.vname, sizeof sv.vname);
	unhex(argv[1], sv.oname, sizeof sv.oname);
	uint64_t *f[] = {&sv.vt, &sv.vtkey, &sv.ro, &sv.rokey, &sv.wo, &sv.wokey, &sv.rma, &sv.rmakey, &sv.otkey};
	for (int i = 0; i < 9; i++)
		*f[i] = strtoull(argv[2 + i], NULL, 10);
	struct side v, o;
	open_side(&v, "virt", 1);
	open_side(&o, "offset", 0);
	struct ep ve, oe;
	open_ep(&v, &ve, 0);
	open_ep(&o, &oe, 0);
	enable_ep(&ve);
	enable_ep(&oe);
	fi_addr_t vp = insert(&v, sv.vname), op = insert(&o, sv.oname);

	check_query(&v, &ve);
	check_query(&o, &oe);
	check_refusals(&ve, vp, sv.vt, sv.vtkey);

	make_cases();
	unsigned char *img = malloc(REGION), *out = malloc(REGION);
	make_image(img);
	double t0 = now_s();
	run_cases(&ve, vp, sv.vt, sv.vtkey, img, out);
	check_cases("virt", img, out);
	double tv = since(t0);
	for (size_t i = 0; i < ncases; i++) /* the same again, in the other domain */
		memset(cases[i].res, 0, sizeof cases[i].res);
	memset(out, 0, REGION);
	t0 = now_s();
	run_cases(&oe, op, 0, sv.otkey, img, out);
	check_cases("offset", img, out);
	printf("%zu cases of %zu bytes, each domain: %.2f s (virtual addresses), %.2f s (offsets)\n", ncases,
	       (size_t)AREA, tv, since(t0));

	check_access(&ve, vp, &sv, op, &oe);
	check_self(&v, &ve);
	check_counters(&v, &o, vp, &sv);

	free(img);
	free(out);
	free(cases);
	close_ep(&ve);
	close_ep(&oe);
	close_side(&v);
	close_side(&o);
	if (fails) {
		fprintf(stderr, "client: %d of %d checks failed\n", fails, checks);
		return 1;
	}
	printf("PASS client, %d checks\n", checks);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		DIE("usage: fiatomic server SOCK PROVDIR | fiatomic client SOCK PROVDIR FIELDS...");
	setenv("METAROCE_SOCKET", argv[2], 1);
	setenv("FI_PROVIDER_PATH", argv[3], 1);
	if (!strcmp(argv[1], "server"))
		return server();
	if (!strcmp(argv[1], "client"))
		return client(argc - 4, argv + 4);
	DIE("usage");
}
