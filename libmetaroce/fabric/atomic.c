/* atomic.c: FI_ATOMIC over messages, applied by the target's provider.
 *
 * The daemon has no atomic verbs, so an atomic is a request message and
 * a response, as libfabric's rxm builds them over its messages:
 *
 *   initiator                                  target
 *   fi_atomic / fi_fetch_atomic / ...
 *     posts a response receive (if its peer's outbound queue pair has
 *     none to spare), then SENDs the request from a request buffer
 *     on that queue pair  ------------------>  in_slot_done hands it here:
 *                                              key, range and access are
 *                                              checked against this
 *                                              domain's registrations, the
 *                                              operation applied to the
 *                                              application's memory, and the
 *                                              response SENT back on the
 *                                              inbound queue pair it came
 *     <---------------------------------------  on (no address vector needed)
 *   out_wc hands the response here: the old
 *   values go to the result iovs, then the
 *   completion (FI_ATOMIC | FI_WRITE for base,
 *   FI_ATOMIC | FI_READ for fetch and compare)
 *   and the counters.
 *
 * Wire format (host byte order, like the message header: both ends run
 * this provider on the same architecture). The first byte is the kind,
 * MRP_K_AMO or MRP_K_AMO_RESP, far from the message kinds of struct
 * mrp_hdr:
 *
 *   request, 32 bytes, then count operands (none for FI_ATOMIC_READ),
 *   then, for compare operations, count compare values:
 *     u8 kind, u8 op (enum fi_op), u8 datatype (enum fi_datatype),
 *     u8 class (0 base, 1 fetch, 2 compare), u32 count,
 *     u64 id (the initiator's, echoed), u64 addr, u64 key
 *   response, 16 bytes, then for fetch and compare with status 0 the
 *   count old values:
 *     u8 kind, u8 pad[3], u32 status (0 or a positive FI_ errno), u64 id
 *
 * addr is what the target's application published: a virtual address
 * when its domain has FI_MR_VIRT_ADDR (it negotiated FI_RMA: mr.c
 * registers with the daemon and the key is the daemon's), else an offset
 * into the region (mr_mode 0: the key is the one the application chose).
 *
 * Ordering: every request to a peer rides its one outbound queue pair and
 * the target takes its inbound queue pair's arrivals in order, holding
 * the slot (and so the ones behind it) while it has no response buffer
 * free: atomics to one peer are applied in the order they were issued.
 *
 * Memory: one registered area per endpoint, made with its first atomic
 * (issued or received), holds AMO_RQ request buffers, as many response
 * receives and AMO_TX response sends. Atomics take none of the transmit
 * slots (xfer.c queues transfers on those, and would wait on a slot
 * an atomic holds with no completion left to wake it). Every request in
 * flight has a response receive posted on its queue pair (a queue pair's
 * receives complete in the order posted, but any of ours may hold any
 * response: the id says whose it is). Nothing is allocated per
 * operation. */
#include <complex.h>
#include <stddef.h>
#include <string.h>

#include "prov.h"

enum { AMO_BASE = 0, AMO_FETCH = 1, AMO_COMPARE = 2 };

struct amo_req_hdr {
	uint8_t kind, op, datatype, cls;
	uint32_t count;
	uint64_t id;
	uint64_t addr;
	uint64_t key;
};

struct amo_resp_hdr {
	uint8_t kind;
	uint8_t pad[3];
	uint32_t status;
	uint64_t id;
};

/* AMO_MAX: the operands of one call, in bytes (so as many old values,
 * and as many compare values besides): inject_size, so every atomic may
 * be injected, and small enough that the buffers below stay a quarter of
 * a MiB per endpoint. */
#define AMO_MAX MRP_INJECT
#define AMO_RQ_BUF (2 * AMO_MAX + 64) /* a request: header, operands, compare values, 64-byte aligned */
#define AMO_BUF (AMO_MAX + 64)        /* a response: header and old values */
/* AMO_RQ: atomics in flight per endpoint, each with its request buffer
 * and a response receive posted. AMO_TX: responses being sent per
 * endpoint; fewer than a queue pair's 64 send slots, so a response finds
 * room on its inbound queue pair (should it not, it waits, already
 * applied, and is posted again at the next completion). */
#define AMO_RQ 16
#define AMO_TX 16
/* A failed area allocation is not tried again for this long: arrivals
 * wait in their slots meanwhile. */
#define AMO_RETRY_US 100000

_Static_assert(sizeof(struct amo_req_hdr) == 32 && sizeof(struct amo_resp_hdr) == 16, "wire headers");
_Static_assert(AMO_RQ_BUF <= MRP_SLOT, "a request fits the peer's receive slot");
_Static_assert(sizeof(struct amo_req_hdr) + 2 * AMO_MAX <= AMO_RQ_BUF, "a compare request fits its buffer");
_Static_assert(sizeof(struct amo_resp_hdr) + AMO_MAX <= AMO_BUF, "a response fits its buffer");
_Static_assert(AMO_TX < 64, "responses fit the inbound queue pair's send queue");
/* An endpoint's atomics in flight never fill a peer's receive slots by
 * themselves: the last of them still finds one posted, not an RNR wait. */
_Static_assert(AMO_RQ <= MRP_RX_PEER, "atomics in flight fit the peer's receive slots");

/* wr_ids of ours: 0x40 in the top byte (neither the operations' indices
 * nor ep.c's WR_READY and WR_HELLO), what it is, and an index. */
#define AMO_WR_TAG 0x40ull
#define AMO_WR(what, i) ((AMO_WR_TAG << 56) | ((uint64_t)(what) << 32) | (uint64_t)(i))
enum { WR_REQ = 1, WR_RX = 2, WR_TX = 3 };

/* A request in flight at the initiator. */
struct amo_req {
	uint64_t id;   /* 0: free */
	size_t peer;   /* its outbound connection (fi_addr_t) */
	int sending;   /* its SEND (from request buffer of its index) has not completed */
	int answered;  /* the response came, or it failed: reported */
	int cls;
	size_t bytes;  /* old values expected (fetch, compare) */
	struct iovec res[MRP_IOV];
	int nres;
	void *ctx;
	uint64_t flags; /* FI_ATOMIC | FI_WRITE or FI_READ */
	int complete;   /* report a CQ entry on success */
	struct amo_req *next_free;
};

/* Per outbound connection: response receives posted on it, and requests
 * owed a response. posted >= owed always; more are spares (a request
 * whose SEND could not be posted left its receive). */
struct amo_peer {
	unsigned posted, owed;
};

/* A response buffer at the target. */
struct amo_tx {
	struct mrp_in *in; /* the connection it answers on */
	uint32_t len;
	int busy;   /* sent, or waiting to be */
	int unsent; /* the send queue was full: posted again at the next completion */
};

struct mrp_amo {
	struct mr_mem *mem;
	struct mr_mr *mr; /* AMO_RQ request buffers, AMO_RQ receive buffers, AMO_TX send buffers */
	int64_t retry_us;
	uint64_t seq;
	struct amo_req req[AMO_RQ], *free_req;
	int rx_free[AMO_RQ]; /* a stack of free receive buffers */
	int nrx_free;
	struct amo_tx tx[AMO_TX];
	int unsent;
	struct amo_peer *peer; /* by fi_addr_t */
	size_t npeer;
};

#define EP(f) ((struct mrp_ep *)(f))

/* ---- what is supported ---- */

enum { T_INT, T_REAL, T_CPLX };

static int type_class(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: case FI_INT16: case FI_UINT16: case FI_INT32: case FI_UINT32:
	case FI_INT64: case FI_UINT64: case FI_INT128: case FI_UINT128:
		return T_INT;
	case FI_FLOAT: case FI_DOUBLE: case FI_LONG_DOUBLE:
		return T_REAL;
	case FI_FLOAT_COMPLEX: case FI_DOUBLE_COMPLEX: case FI_LONG_DOUBLE_COMPLEX:
		return T_CPLX;
	default:
		return -1;
	}
}

static size_t type_size(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8: case FI_UINT8: return 1;
	case FI_INT16: case FI_UINT16: return 2;
	case FI_INT32: case FI_UINT32: return 4;
	case FI_INT64: case FI_UINT64: return 8;
	case FI_INT128: case FI_UINT128: return 16;
	case FI_FLOAT: return sizeof(float);
	case FI_DOUBLE: return sizeof(double);
	case FI_LONG_DOUBLE: return sizeof(long double);
	case FI_FLOAT_COMPLEX: return sizeof(float complex);
	case FI_DOUBLE_COMPLEX: return sizeof(double complex);
	case FI_LONG_DOUBLE_COMPLEX: return sizeof(long double complex);
	default: return 0;
	}
}

/* supported: fi_atomic(3)'s operations per call class, on the types where
 * they mean something, as libfabric's own software atomics have them:
 * ordering (MIN, MAX, CSWAP_LE..GT) not on complex numbers, bits (BOR,
 * BAND, BXOR, MSWAP) on integers only. */
static int supported(int cls, enum fi_datatype dt, enum fi_op op)
{
	int tc = type_class(dt);
	if (tc < 0)
		return 0;
	switch (op) {
	case FI_MIN: case FI_MAX:
		return cls != AMO_COMPARE && tc != T_CPLX;
	case FI_SUM: case FI_PROD: case FI_LOR: case FI_LAND: case FI_LXOR: case FI_ATOMIC_WRITE:
		return cls != AMO_COMPARE;
	case FI_BOR: case FI_BAND: case FI_BXOR:
		return cls != AMO_COMPARE && tc == T_INT;
	case FI_ATOMIC_READ:
		return cls == AMO_FETCH;
	case FI_CSWAP: case FI_CSWAP_NE:
		return cls == AMO_COMPARE;
	case FI_CSWAP_LE: case FI_CSWAP_LT: case FI_CSWAP_GE: case FI_CSWAP_GT:
		return cls == AMO_COMPARE && tc != T_CPLX;
	case FI_MSWAP:
		return cls == AMO_COMPARE && tc == T_INT;
	default:
		return 0;
	}
}

/* max_count: the most elements one call takes. */
static size_t max_count(int cls, size_t size)
{
	(void)cls; /* the same for all: fetch and compare answer as many old values as base sends operands */
	return AMO_MAX / size;
}

static int valid(int cls, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	if (!supported(cls, dt, op))
		return -FI_EOPNOTSUPP;
	if (count)
		*count = max_count(cls, type_size(dt));
	return 0;
}

int mrp_query_atomic(struct fid_domain *dom, enum fi_datatype dt, enum fi_op op, struct fi_atomic_attr *attr,
		     uint64_t flags)
{
	(void)dom;
	if (!attr)
		return -FI_EINVAL;
	if (flags & ~(uint64_t)(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED))
		return -FI_EBADFLAGS;
	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL; /* fi_atomic(3): not both */
	if (flags & FI_TAGGED)
		return -FI_EOPNOTSUPP; /* no atomics into tagged receive buffers */
	int cls = (flags & FI_FETCH_ATOMIC) ? AMO_FETCH : (flags & FI_COMPARE_ATOMIC) ? AMO_COMPARE : AMO_BASE;
	size_t count;
	int e = valid(cls, dt, op, &count);
	if (e)
		return e;
	attr->count = count;
	attr->size = type_size(dt);
	return 0;
}

/* ---- applying an operation ----
 * Elements are loaded and stored with memcpy: the application's target
 * need not be aligned. The target is written only when an element
 * changes hands (never for FI_ATOMIC_READ, nor for a compare that does
 * not take), so a region registered for remote reads only is never
 * stored to. Signed integer arithmetic is done unsigned, where it wraps
 * instead of being undefined. */

typedef void (*apply_fn)(enum fi_op op, uint8_t *dst, const uint8_t *src, const uint8_t *cmp, uint8_t *old,
			 size_t n);

#define LOAD(v, p, i) memcpy(&(v), (p) + (i) * sizeof(v), sizeof(v))
#define STORE(p, i, v) memcpy((p) + (i) * sizeof(v), &(v), sizeof(v))

/* Integers: every operation. W is the unsigned type the arithmetic is
 * done in (at least as wide as T and as unsigned int). */
#define APPLY_INT(name, T, W)                                                                                  \
	static void name(enum fi_op op, uint8_t *dst, const uint8_t *src, const uint8_t *cmp, uint8_t *old,   \
			 size_t n)                                                                             \
	{                                                                                                      \
		for (size_t i = 0; i < n; i++) {                                                               \
			T d, s = 0, c = 0, r;                                                                  \
			LOAD(d, dst, i);                                                                       \
			if (src)                                                                               \
				LOAD(s, src, i);                                                               \
			if (cmp)                                                                               \
				LOAD(c, cmp, i);                                                               \
			if (old)                                                                               \
				STORE(old, i, d);                                                              \
			switch (op) {                                                                          \
			case FI_MIN: r = s < d ? s : d; break;                                                 \
			case FI_MAX: r = s > d ? s : d; break;                                                 \
			case FI_SUM: r = (T)((W)d + (W)s); break;                                              \
			case FI_PROD: r = (T)((W)d * (W)s); break;                                             \
			case FI_LOR: r = d || s; break;                                                        \
			case FI_LAND: r = d && s; break;                                                       \
			case FI_BOR: r = (T)((W)d | (W)s); break;                                              \
			case FI_BAND: r = (T)((W)d & (W)s); break;                                             \
			case FI_LXOR: r = !d != !s; break;                                                     \
			case FI_BXOR: r = (T)((W)d ^ (W)s); break;                                             \
			case FI_ATOMIC_WRITE: r = s; break;                                                    \
			case FI_CSWAP: if (c != d) continue; r = s; break;                                     \
			case FI_CSWAP_NE: if (c == d) continue; r = s; break;                                  \
			case FI_CSWAP_LE: if (!(c <= d)) continue; r = s; break;                               \
			case FI_CSWAP_LT: if (!(c < d)) continue; r = s; break;                                \
			case FI_CSWAP_GE: if (!(c >= d)) continue; r = s; break;                               \
			case FI_CSWAP_GT: if (!(c > d)) continue; r = s; break;                                \
			case FI_MSWAP: r = (T)(((W)s & (W)c) | ((W)d & ~(W)c)); break;                         \
			default: continue; /* FI_ATOMIC_READ: the old value is all */                         \
			}                                                                                      \
			STORE(dst, i, r);                                                                      \
		}                                                                                              \
	}

/* Real numbers: no bit operations. */
#define APPLY_REAL(name, T)                                                                                    \
	static void name(enum fi_op op, uint8_t *dst, const uint8_t *src, const uint8_t *cmp, uint8_t *old,   \
			 size_t n)                                                                             \
	{                                                                                                      \
		for (size_t i = 0; i < n; i++) {                                                               \
			T d, s = 0, c = 0, r;                                                                  \
			LOAD(d, dst, i);                                                                       \
			if (src)                                                                               \
				LOAD(s, src, i);                                                               \
			if (cmp)                                                                               \
				LOAD(c, cmp, i);                                                               \
			if (old)                                                                               \
				STORE(old, i, d);                                                              \
			switch (op) {                                                                          \
			case FI_MIN: r = s < d ? s : d; break;                                                 \
			case FI_MAX: r = s > d ? s : d; break;                                                 \
			case FI_SUM: r = d + s; break;                                                         \
			case FI_PROD: r = d * s; break;                                                        \
			case FI_LOR: r = d || s; break;                                                        \
			case FI_LAND: r = d && s; break;                                                       \
			case FI_LXOR: r = !d != !s; break;                                                     \
			case FI_ATOMIC_WRITE: r = s; break;                                                    \
			case FI_CSWAP: if (c != d) continue; r = s; break;                                     \
			case FI_CSWAP_NE: if (c == d) continue; r = s; break;                                  \
			case FI_CSWAP_LE: if (!(c <= d)) continue; r = s; break;                               \
			case FI_CSWAP_LT: if (!(c < d)) continue; r = s; break;                                \
			case FI_CSWAP_GE: if (!(c >= d)) continue; r = s; break;                               \
			case FI_CSWAP_GT: if (!(c > d)) continue; r = s; break;                                \
			default: continue;                                                                     \
			}                                                                                      \
			STORE(dst, i, r);                                                                      \
		}                                                                                              \
	}

/* Complex numbers: no ordering, no bits; logic on "is not zero". */
#define APPLY_CPLX(name, T)                                                                                    \
	static void name(enum fi_op op, uint8_t *dst, const uint8_t *src, const uint8_t *cmp, uint8_t *old,   \
			 size_t n)                                                                             \
	{                                                                                                      \
		for (size_t i = 0; i < n; i++) {                                                               \
			T d, s = 0, c = 0, r;                                                                  \
			LOAD(d, dst, i);                                                                       \
			if (src)                                                                               \
				LOAD(s, src, i);                                                               \
			if (cmp)                                                                               \
				LOAD(c, cmp, i);                                                               \
			if (old)                                                                               \
				STORE(old, i, d);                                                              \
			switch (op) {                                                                          \
			case FI_SUM: r = d + s; break;                                                         \
			case FI_PROD: r = d * s; break;                                                        \
			case FI_LOR: r = d != 0 || s != 0; break;                                              \
			case FI_LAND: r = d != 0 && s != 0; break;                                             \
			case FI_LXOR: r = (d != 0) != (s != 0); break;                                         \
			case FI_ATOMIC_WRITE: r = s; break;                                                    \
			case FI_CSWAP: if (c != d) continue; r = s; break;                                     \
			case FI_CSWAP_NE: if (c == d) continue; r = s; break;                                  \
			default: continue;                                                                     \
			}                                                                                      \
			STORE(dst, i, r);                                                                      \
		}                                                                                              \
	}

APPLY_INT(ap_i8, int8_t, uint64_t)
APPLY_INT(ap_u8, uint8_t, uint64_t)
APPLY_INT(ap_i16, int16_t, uint64_t)
APPLY_INT(ap_u16, uint16_t, uint64_t)
APPLY_INT(ap_i32, int32_t, uint64_t)
APPLY_INT(ap_u32, uint32_t, uint64_t)
APPLY_INT(ap_i64, int64_t, uint64_t)
APPLY_INT(ap_u64, uint64_t, uint64_t)
APPLY_INT(ap_i128, __int128, unsigned __int128)
APPLY_INT(ap_u128, unsigned __int128, unsigned __int128)
APPLY_REAL(ap_f, float)
APPLY_REAL(ap_d, double)
APPLY_REAL(ap_ld, long double)
APPLY_CPLX(ap_cf, float complex)
APPLY_CPLX(ap_cd, double complex)
APPLY_CPLX(ap_cld, long double complex)

static apply_fn apply_for(enum fi_datatype dt)
{
	switch (dt) {
	case FI_INT8: return ap_i8;
	case FI_UINT8: return ap_u8;
	case FI_INT16: return ap_i16;
	case FI_UINT16: return ap_u16;
	case FI_INT32: return ap_i32;
	case FI_UINT32: return ap_u32;
	case FI_INT64: return ap_i64;
	case FI_UINT64: return ap_u64;
	case FI_INT128: return ap_i128;
	case FI_UINT128: return ap_u128;
	case FI_FLOAT: return ap_f;
	case FI_DOUBLE: return ap_d;
	case FI_LONG_DOUBLE: return ap_ld;
	case FI_FLOAT_COMPLEX: return ap_cf;
	case FI_DOUBLE_COMPLEX: return ap_cd;
	case FI_LONG_DOUBLE_COMPLEX: return ap_cld;
	default: return NULL;
	}
}

/* target finds [addr, addr + len) in the registration of this domain
 * that key names, if it grants need (FI_REMOTE_READ, FI_REMOTE_WRITE). */
static uint8_t *target(struct mrp_domain *d, uint64_t key, uint64_t addr, size_t len, uint64_t need)
{
	for (struct mrp_mr *m = d->mrs; m; m = m->next) {
		if (m->mr.key != key || (d->rma && !m->reg))
			continue;
		if ((m->access & need) != need)
			return NULL;
		uint64_t size = m->hi - m->lo, off = addr;
		if (d->rma) {
			/* FI_MR_VIRT_ADDR: the application's own address */
			if (addr < m->lo)
				return NULL;
			off = addr - m->lo;
		}
		if (off > size || len > size - off)
			return NULL;
		return (uint8_t *)(m->lo + (uintptr_t)off);
	}
	return NULL;
}

/* execute checks one request against this domain and applies it; the
 * old values (fetch, compare) go to old, *olen bytes of them. It returns
 * the response's status. */
static uint32_t execute(struct mrp_domain *d, const struct amo_req_hdr *q, const uint8_t *payload, size_t plen,
			uint8_t *old, size_t *olen)
{
	*olen = 0;
	enum fi_datatype dt = (enum fi_datatype)q->datatype;
	enum fi_op op = (enum fi_op)q->op;
	if (q->cls > AMO_COMPARE || !supported(q->cls, dt, op))
		return FI_EOPNOTSUPP;
	size_t size = type_size(dt), n = q->count;
	if (n == 0 || n > max_count(q->cls, size))
		return FI_EINVAL;
	size_t bytes = n * size;
	size_t want = op == FI_ATOMIC_READ ? 0 : q->cls == AMO_COMPARE ? 2 * bytes : bytes;
	if (plen != want)
		return FI_EINVAL;
	uint64_t need = (op != FI_ATOMIC_READ ? FI_REMOTE_WRITE : 0) | (q->cls != AMO_BASE ? FI_REMOTE_READ : 0);
	uint8_t *dst = target(d, q->key, q->addr, bytes, need);
	if (!dst)
		return FI_EACCES;
	apply_for(dt)(op, dst, want ? payload : NULL, q->cls == AMO_COMPARE ? payload + bytes : NULL,
		      q->cls != AMO_BASE ? old : NULL, n);
	if (q->cls != AMO_BASE)
		*olen = bytes;
	return 0;
}

/* ---- the endpoint's area ---- */

#define AMO_RX_OFF ((size_t)AMO_RQ * AMO_RQ_BUF)
static uint8_t *rq_ptr(struct mrp_amo *a, size_t r) { return (uint8_t *)a->mr->buf + r * AMO_RQ_BUF; }
static uint64_t rq_addr(struct mrp_amo *a, size_t r) { return a->mr->addr + r * AMO_RQ_BUF; }
static uint8_t *rx_ptr(struct mrp_amo *a, int b) { return (uint8_t *)a->mr->buf + AMO_RX_OFF + (size_t)b * AMO_BUF; }
static uint64_t rx_addr(struct mrp_amo *a, int b) { return a->mr->addr + AMO_RX_OFF + (uint64_t)b * AMO_BUF; }
static uint8_t *tx_ptr(struct mrp_amo *a, int t) { return rx_ptr(a, AMO_RQ + t); }
static uint64_t tx_addr(struct mrp_amo *a, int t) { return rx_addr(a, AMO_RQ + t); }

/* area makes the endpoint's atomic state and its registered buffers, the
 * first time they are needed. */
static int area(struct mrp_ep *ep)
{
	struct mrp_amo *a = ep->amo;
	if (a && a->mr)
		return 0;
	if (!a) {
		a = calloc(1, sizeof *a);
		if (!a)
			return -FI_ENOMEM;
		for (int i = AMO_RQ - 1; i >= 0; i--) {
			a->req[i].next_free = a->free_req;
			a->free_req = &a->req[i];
			a->rx_free[a->nrx_free++] = i;
		}
		ep->amo = a;
	}
	int64_t now = mrp_now_us();
	if (now < a->retry_us)
		return -FI_ENOMEM;
	size_t size = AMO_RX_OFF + (size_t)(AMO_RQ + AMO_TX) * AMO_BUF;
	int e = mr_mem_alloc(size, &a->mem);
	if (!e)
		e = mr_reg(ep->dom->ctx, a->mem, 0, size, MR_ACCESS_LOCAL_WRITE, &a->mr);
	if (e) {
		MRP_DBG("atomic buffers: %s", mr_strerror(e));
		mr_mem_free(a->mem);
		a->mem = NULL;
		a->mr = NULL;
		a->retry_us = now + AMO_RETRY_US;
		return -mrp_errno(e);
	}
	return 0;
}

void mrp_amo_close(struct mrp_ep *ep)
{
	struct mrp_amo *a = ep->amo;
	if (!a)
		return;
	if (a->mr)
		mr_dereg(a->mr);
	mr_mem_free(a->mem);
	free(a->peer);
	free(a);
	ep->amo = NULL;
}

static struct amo_peer *peer_of(struct mrp_ep *ep, size_t i)
{
	struct mrp_amo *a = ep->amo;
	if (i >= a->npeer) {
		size_t n = a->npeer ? a->npeer : 16;
		while (n <= i)
			n *= 2;
		struct amo_peer *p = realloc(a->peer, n * sizeof *p);
		if (!p)
			return NULL;
		memset(p + a->npeer, 0, (n - a->npeer) * sizeof *p);
		a->peer = p;
		a->npeer = n;
	}
	return &a->peer[i];
}

/* ---- the initiator ---- */

static void req_free(struct mrp_amo *a, struct amo_req *r)
{
	r->id = 0;
	r->next_free = a->free_req;
	a->free_req = r;
}

/* report completes a request to the application: counters always, a CQ
 * entry for errors and for what asked for one. */
static void report(struct mrp_ep *ep, struct amo_req *r, int err, int prov_errno)
{
	r->answered = 1;
	mrp_count(ep, r->flags, err);
	if (err || r->complete) {
		struct mrp_cqe e = {.ctx = r->ctx, .flags = r->flags, .src = FI_ADDR_NOTAVAIL, .err = err,
				    .prov_errno = prov_errno};
		mrp_cq_push(ep->tx, &e);
	}
}

/* fail_owed fails the requests to peer i still waiting for a response:
 * its connection ended (its posted receives were flushed). */
static void fail_owed(struct mrp_ep *ep, size_t i, int err)
{
	struct mrp_amo *a = ep->amo;
	for (int k = 0; k < AMO_RQ; k++) {
		struct amo_req *r = &a->req[k];
		if (!r->id || r->answered || r->peer != i)
			continue;
		report(ep, r, err, MR_WC_FLUSHED);
		a->peer[i].owed--;
		if (!r->sending)
			req_free(a, r);
	}
}

static int post_rx(struct mrp_ep *ep, struct mrp_out *o, int b)
{
	struct mrp_amo *a = ep->amo;
	struct mr_wr w = {.op = MR_WR_RECV, .wr_id = AMO_WR(WR_RX, b), .lkey = a->mr->key, .laddr = rx_addr(a, b),
			  .length = AMO_BUF};
	return mr_post(o->qp, &w, 1);
}

/* status_prov: a provider errno for fi_cq_strerror (cq.c names it as a
 * completion status) for a status the target answered. */
static int status_prov(uint32_t st) { return st == FI_EACCES ? MR_WC_REMOTE_ACCESS : MR_WC_REMOTE_INVALID; }

/* response takes one response into receive buffer b, from peer i. */
static void response(struct mrp_ep *ep, size_t i, const uint8_t *p, size_t len)
{
	struct mrp_amo *a = ep->amo;
	struct amo_resp_hdr h;
	if (len < sizeof h)
		return; /* no correct peer sends it: dropped */
	memcpy(&h, p, sizeof h);
	size_t k = (size_t)(h.id & 0xffff);
	struct amo_req *r = k < AMO_RQ ? &a->req[k] : NULL;
	if (h.kind != MRP_K_AMO_RESP || !r || r->id != h.id || r->peer != i || r->answered) {
		MRP_DBG("atomic response %#llx matches nothing: dropped", (unsigned long long)h.id);
		return;
	}
	int err = (int)h.status;
	if (!err && len != sizeof h + r->bytes)
		err = FI_EIO; /* not what was asked: no correct peer answers so */
	if (!err && r->bytes) {
		const uint8_t *q = p + sizeof h;
		for (int v = 0; v < r->nres; v++) {
			memcpy(r->res[v].iov_base, q, r->res[v].iov_len);
			q += r->res[v].iov_len;
		}
	}
	a->peer[i].owed--;
	report(ep, r, err, err ? status_prov(h.status) : 0);
	if (!r->sending)
		req_free(a, r);
}

int mrp_amo_out_wc(struct mrp_ep *ep, struct mrp_out *o, const struct mr_wc *wc)
{
	struct mrp_amo *a = ep->amo;
	if (!a || wc->op == MR_WC_EVENT || (wc->wr_id >> 56) != AMO_WR_TAG)
		return 0;
	int what = (int)((wc->wr_id >> 32) & 0xff);
	size_t idx = (size_t)(wc->wr_id & 0xffffffffu), i = (size_t)(o - ep->out);
	if (i >= a->npeer)
		return 1; /* nothing of ours was ever posted there */
	int ok = wc->status == MR_WC_SUCCESS;
	if (what == WR_REQ && idx < AMO_RQ) {
		struct amo_req *r = &a->req[idx];
		if (!r->id)
			return 1;
		r->sending = 0;
		if (!ok && !r->answered) {
			/* Not delivered: no response will come for it. */
			a->peer[i].owed--;
			report(ep, r, mrp_wc_errno(wc->status), wc->status);
		}
		if (r->answered)
			req_free(a, r);
		return ok; /* a failure is the connection's too: the caller ends it */
	}
	if (what != WR_RX || idx >= AMO_RQ)
		return 1;
	int b = (int)idx;
	struct amo_peer *p = &a->peer[i];
	p->posted--;
	if (!ok) {
		a->rx_free[a->nrx_free++] = b;
		if (p->owed)
			fail_owed(ep, i, o->state == MRP_OUT_FAILED ? o->err : FI_ECONNRESET);
		return 0;
	}
	response(ep, i, rx_ptr(a, b), wc->bytes);
	/* Requests still owed need a receive each: a response that matched
	 * nothing took one of theirs. */
	if (p->posted < p->owed) {
		if (post_rx(ep, o, b) >= 0) {
			p->posted++;
			return 1;
		}
		if (!p->posted)
			fail_owed(ep, i, FI_ECONNRESET); /* nothing can take their responses */
	}
	a->rx_free[a->nrx_free++] = b;
	return 1;
}

/* A call, normalised: cls, the operand, compare and result iovs (fi_ioc,
 * counts of elements), the remote element (rcount: the remote range's
 * count from a *msg call, SIZE_MAX: not given). */
struct amo_call {
	int cls;
	const struct fi_ioc *src, *cmp, *res;
	size_t nsrc, ncmp, nres;
	fi_addr_t dest;
	uint64_t addr, key;
	size_t rcount;
	enum fi_datatype dt;
	enum fi_op op;
	void *ctx;
	uint64_t flags;
	int inject; /* fi_inject_atomic: no completion, ever */
};

/* total sums an iov list's counts, refusing NULL buffers (unless
 * null_ok) and lists longer than MRP_IOV; SIZE_MAX if refused. */
static size_t total(const struct fi_ioc *v, size_t n, int null_ok, size_t max)
{
	if (n > MRP_IOV || (n && !v))
		return SIZE_MAX;
	size_t t = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].count > max)
			return max + 1; /* too many: -FI_EMSGSIZE, without overflowing the sum */
		if (v[i].count && !v[i].addr && !null_ok)
			return SIZE_MAX;
		t += v[i].count;
	}
	return t;
}

static uint8_t *gather(uint8_t *p, const struct fi_ioc *v, size_t n, size_t size)
{
	for (size_t i = 0; i < n; i++) {
		size_t b = v[i].count * size;
		if (b)
			memcpy(p, v[i].addr, b);
		p += b;
	}
	return p;
}

static ssize_t issue(struct mrp_ep *ep, const struct amo_call *c)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (ep->failed)
		return -FI_ESHUTDOWN;
	if (!supported(c->cls, c->dt, c->op))
		return -FI_EOPNOTSUPP;
	size_t size = type_size(c->dt), max = max_count(c->cls, size);
	int rd = c->op == FI_ATOMIC_READ;
	/* The operands' count rules; a read has none (its buffer may be
	 * NULL, fi_atomic(3)) and takes its count from the results. */
	size_t n = rd ? total(c->res, c->nres, 0, max) : total(c->src, c->nsrc, 0, max);
	size_t nres = c->cls == AMO_BASE ? 0 : total(c->res, c->nres, 0, max);
	size_t ncmp = c->cls == AMO_COMPARE ? total(c->cmp, c->ncmp, 0, max) : 0;
	if (n == SIZE_MAX || nres == SIZE_MAX || ncmp == SIZE_MAX || n == 0)
		return -FI_EINVAL;
	if (n > max || nres > max || ncmp > max)
		return -FI_EMSGSIZE;
	if ((c->cls != AMO_BASE && nres != n) || (c->cls == AMO_COMPARE && ncmp != n))
		return -FI_EINVAL; /* results and compare values: one per operand */
	if (c->rcount != SIZE_MAX && c->rcount != n)
		return -FI_EINVAL; /* the remote range is the operands' */
	size_t bytes = n * size;
	if ((c->inject || (c->flags & FI_INJECT)) && bytes > MRP_INJECT)
		return -FI_EMSGSIZE;
	struct mrp_out *o;
	int e = mrp_peer(ep, c->dest, &o);
	if (e == -FI_EAGAIN)
		mrp_progress(ep);
	if (e)
		return e;
	if ((e = area(ep)) != 0)
		return e;
	struct mrp_amo *a = ep->amo;
	size_t pi = (size_t)c->dest;
	struct amo_peer *p = peer_of(ep, pi);
	if (!p)
		return -FI_ENOMEM;
	int need_rx = p->posted <= p->owed;
	if (!a->free_req || (need_rx && !a->nrx_free)) {
		mrp_progress(ep);
		return -FI_EAGAIN;
	}
	struct amo_req *r = a->free_req;
	size_t ri = (size_t)(r - a->req);
	uint64_t id = (++a->seq << 16) | ri;
	/* The request, built in its buffer. */
	uint8_t *s = rq_ptr(a, ri);
	struct amo_req_hdr h = {.kind = MRP_K_AMO, .op = (uint8_t)c->op, .datatype = (uint8_t)c->dt,
				.cls = (uint8_t)c->cls, .count = (uint32_t)n, .id = id, .addr = c->addr,
				.key = c->key};
	memcpy(s, &h, sizeof h);
	uint8_t *end = s + sizeof h;
	if (!rd)
		end = gather(end, c->src, c->nsrc, size);
	if (c->cls == AMO_COMPARE)
		end = gather(end, c->cmp, c->ncmp, size);
	if (need_rx) {
		int b = a->rx_free[a->nrx_free - 1];
		int k = post_rx(ep, o, b);
		if (k < 0) {
			if (k == MR_ERR_SQ_FULL) {
				mrp_progress(ep);
				return -FI_EAGAIN;
			}
			return -mrp_errno(k);
		}
		a->nrx_free--;
		p->posted++;
	}
	struct mr_wr w = {.op = MR_WR_SEND, .wr_id = AMO_WR(WR_REQ, ri), .lkey = a->mr->key, .laddr = rq_addr(a, ri),
			  .length = (uint32_t)(end - s)};
	int k = mr_post(o->qp, &w, 1);
	if (k < 0) {
		/* Its receive, if one was posted, stays as a spare. */
		if (k == MR_ERR_SQ_FULL) {
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		return -mrp_errno(k);
	}
	a->free_req = r->next_free;
	p->owed++;
	*r = (struct amo_req){.id = id, .peer = pi, .sending = 1, .cls = c->cls,
			      .bytes = c->cls == AMO_BASE ? 0 : bytes, .ctx = c->ctx,
			      .flags = FI_ATOMIC | (c->cls == AMO_BASE ? FI_WRITE : FI_READ),
			      .complete = !c->inject && (!ep->tx_sel || (c->flags & FI_COMPLETION))};
	for (size_t v = 0; c->cls != AMO_BASE && v < c->nres; v++)
		if (c->res[v].count)
			r->res[r->nres++] = (struct iovec){c->res[v].addr, c->res[v].count * size};
	return 0;
}

/* ---- the target ---- */

/* send_tx posts response buffer t on its connection; a full send queue
 * leaves it to be posted again. */
static void send_tx(struct mrp_ep *ep, int t)
{
	struct mrp_amo *a = ep->amo;
	struct amo_tx *x = &a->tx[t];
	struct mr_wr w = {.op = MR_WR_SEND, .wr_id = AMO_WR(WR_TX, t), .lkey = a->mr->key, .laddr = tx_addr(a, t),
			  .length = x->len};
	int k = mr_post(x->in->qp, &w, 1);
	if (k == MR_ERR_SQ_FULL) {
		if (!x->unsent) {
			x->unsent = 1;
			a->unsent++;
		}
		return;
	}
	if (x->unsent) {
		x->unsent = 0;
		a->unsent--;
	}
	if (k < 0)
		x->busy = 0; /* the connection is gone: its initiator learns that from it */
}

int mrp_amo_arrived(struct mrp_ep *ep, struct mrp_in *in, const uint8_t *p, size_t len)
{
	struct amo_req_hdr q;
	if (len < sizeof q)
		return 1; /* nothing to answer: dropped */
	memcpy(&q, p, sizeof q);
	if (area(ep) != 0)
		return 0; /* held in its slot: taken again at a later progress */
	struct mrp_amo *a = ep->amo;
	int t = 0;
	while (t < AMO_TX && a->tx[t].busy)
		t++;
	if (t == AMO_TX)
		return 0; /* every response buffer is out: held, in order, until one comes back */
	uint8_t *buf = tx_ptr(a, t);
	size_t olen;
	uint32_t st = execute(ep->dom, &q, p + sizeof q, len - sizeof q, buf + sizeof(struct amo_resp_hdr), &olen);
	struct amo_resp_hdr r = {.kind = MRP_K_AMO_RESP, .status = st, .id = q.id};
	memcpy(buf, &r, sizeof r);
	a->tx[t] = (struct amo_tx){.in = in, .len = (uint32_t)(sizeof r + olen), .busy = 1};
	send_tx(ep, t);
	return 1;
}

int mrp_amo_in_wc(struct mrp_ep *ep, struct mrp_in *in, const struct mr_wc *wc)
{
	(void)in;
	struct mrp_amo *a = ep->amo;
	if (!a)
		return 0;
	if (a->unsent) /* a completion on some queue pair: room, perhaps, for responses that found none */
		for (int t = 0; t < AMO_TX; t++)
			if (a->tx[t].unsent)
				send_tx(ep, t);
	if (wc->op == MR_WC_EVENT || (wc->wr_id >> 56) != AMO_WR_TAG)
		return 0;
	size_t t = (size_t)(wc->wr_id & 0xffffffffu);
	if (((wc->wr_id >> 32) & 0xff) == WR_TX && t < AMO_TX)
		a->tx[t].busy = 0;
	return 1;
}

/* ---- the ops table ---- */

static ssize_t a_write(struct fid_ep *f, const void *buf, size_t count, void *desc, fi_addr_t dest, uint64_t addr,
		       uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	(void)desc; /* operands are copied into the request */
	struct fi_ioc v = {(void *)buf, count};
	return issue(EP(f), &(struct amo_call){.cls = AMO_BASE, .src = &v, .nsrc = 1, .dest = dest, .addr = addr,
					       .key = key, .rcount = SIZE_MAX, .dt = dt, .op = op, .ctx = ctx,
					       .flags = EP(f)->tx_flags});
}

static ssize_t a_writev(struct fid_ep *f, const struct fi_ioc *iov, void **desc, size_t count, fi_addr_t dest,
			uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	(void)desc;
	return issue(EP(f), &(struct amo_call){.cls = AMO_BASE, .src = iov, .nsrc = count, .dest = dest,
					       .addr = addr, .key = key, .rcount = SIZE_MAX, .dt = dt, .op = op,
					       .ctx = ctx, .flags = EP(f)->tx_flags});
}

/* msg_call checks what a *msg call adds: one remote range (rma_iov_limit
 * 1), and flags this provider does not do: FI_REMOTE_CQ_DATA (no data on
 * atomics), FI_TAGGED (no atomics into tagged buffers), FI_FENCE (not
 * implemented: an RMA read posted before would not be waited for). */
static int msg_call(const struct fi_msg_atomic *m, uint64_t flags, struct amo_call *c)
{
	if (!m || m->rma_iov_count != 1 || !m->rma_iov)
		return -FI_EINVAL;
	if (flags & (FI_REMOTE_CQ_DATA | FI_TAGGED | FI_FENCE))
		return -FI_EBADFLAGS;
	c->src = m->msg_iov;
	c->nsrc = m->iov_count;
	c->dest = m->addr;
	c->addr = m->rma_iov[0].addr;
	c->key = m->rma_iov[0].key;
	c->rcount = m->rma_iov[0].count;
	c->dt = m->datatype;
	c->op = m->op;
	c->ctx = m->context;
	c->flags = flags;
	return 0;
}

static ssize_t a_writemsg(struct fid_ep *f, const struct fi_msg_atomic *m, uint64_t flags)
{
	struct amo_call c = {.cls = AMO_BASE};
	int e = msg_call(m, flags, &c);
	return e ? e : issue(EP(f), &c);
}

static ssize_t a_inject(struct fid_ep *f, const void *buf, size_t count, fi_addr_t dest, uint64_t addr,
			uint64_t key, enum fi_datatype dt, enum fi_op op)
{
	struct fi_ioc v = {(void *)buf, count};
	return issue(EP(f), &(struct amo_call){.cls = AMO_BASE, .src = &v, .nsrc = 1, .dest = dest, .addr = addr,
					       .key = key, .rcount = SIZE_MAX, .dt = dt, .op = op, .inject = 1});
}

static ssize_t a_readwrite(struct fid_ep *f, const void *buf, size_t count, void *desc, void *result,
			   void *result_desc, fi_addr_t dest, uint64_t addr, uint64_t key, enum fi_datatype dt,
			   enum fi_op op, void *ctx)
{
	(void)desc;
	(void)result_desc;
	struct fi_ioc v = {(void *)buf, count}, r = {result, count};
	return issue(EP(f), &(struct amo_call){.cls = AMO_FETCH, .src = &v, .nsrc = 1, .res = &r, .nres = 1,
					       .dest = dest, .addr = addr, .key = key, .rcount = SIZE_MAX, .dt = dt,
					       .op = op, .ctx = ctx, .flags = EP(f)->tx_flags});
}

static ssize_t a_readwritev(struct fid_ep *f, const struct fi_ioc *iov, void **desc, size_t count,
			    struct fi_ioc *resultv, void **result_desc, size_t result_count, fi_addr_t dest,
			    uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	(void)desc;
	(void)result_desc;
	return issue(EP(f), &(struct amo_call){.cls = AMO_FETCH, .src = iov, .nsrc = count, .res = resultv,
					       .nres = result_count, .dest = dest, .addr = addr, .key = key,
					       .rcount = SIZE_MAX, .dt = dt, .op = op, .ctx = ctx,
					       .flags = EP(f)->tx_flags});
}

static ssize_t a_readwritemsg(struct fid_ep *f, const struct fi_msg_atomic *m, struct fi_ioc *resultv,
			      void **result_desc, size_t result_count, uint64_t flags)
{
	(void)result_desc;
	struct amo_call c = {.cls = AMO_FETCH, .res = resultv, .nres = result_count};
	int e = msg_call(m, flags, &c);
	return e ? e : issue(EP(f), &c);
}

static ssize_t a_compwrite(struct fid_ep *f, const void *buf, size_t count, void *desc, const void *compare,
			   void *compare_desc, void *result, void *result_desc, fi_addr_t dest, uint64_t addr,
			   uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	struct fi_ioc v = {(void *)buf, count}, cv = {(void *)compare, count}, r = {result, count};
	return issue(EP(f), &(struct amo_call){.cls = AMO_COMPARE, .src = &v, .nsrc = 1, .cmp = &cv, .ncmp = 1,
					       .res = &r, .nres = 1, .dest = dest, .addr = addr, .key = key,
					       .rcount = SIZE_MAX, .dt = dt, .op = op, .ctx = ctx,
					       .flags = EP(f)->tx_flags});
}

static ssize_t a_compwritev(struct fid_ep *f, const struct fi_ioc *iov, void **desc, size_t count,
			    const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
			    struct fi_ioc *resultv, void **result_desc, size_t result_count, fi_addr_t dest,
			    uint64_t addr, uint64_t key, enum fi_datatype dt, enum fi_op op, void *ctx)
{
	(void)desc;
	(void)compare_desc;
	(void)result_desc;
	return issue(EP(f), &(struct amo_call){.cls = AMO_COMPARE, .src = iov, .nsrc = count, .cmp = comparev,
					       .ncmp = compare_count, .res = resultv, .nres = result_count,
					       .dest = dest, .addr = addr, .key = key, .rcount = SIZE_MAX, .dt = dt,
					       .op = op, .ctx = ctx, .flags = EP(f)->tx_flags});
}

static ssize_t a_compwritemsg(struct fid_ep *f, const struct fi_msg_atomic *m, const struct fi_ioc *comparev,
			      void **compare_desc, size_t compare_count, struct fi_ioc *resultv, void **result_desc,
			      size_t result_count, uint64_t flags)
{
	(void)compare_desc;
	(void)result_desc;
	struct amo_call c = {.cls = AMO_COMPARE, .cmp = comparev, .ncmp = compare_count, .res = resultv,
			     .nres = result_count};
	int e = msg_call(m, flags, &c);
	return e ? e : issue(EP(f), &c);
}

static int a_writevalid(struct fid_ep *f, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	(void)f;
	return valid(AMO_BASE, dt, op, count);
}

static int a_readwritevalid(struct fid_ep *f, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	(void)f;
	return valid(AMO_FETCH, dt, op, count);
}

static int a_compwritevalid(struct fid_ep *f, enum fi_datatype dt, enum fi_op op, size_t *count)
{
	(void)f;
	return valid(AMO_COMPARE, dt, op, count);
}

struct fi_ops_atomic mrp_atomic_ops = {
	.size = sizeof(struct fi_ops_atomic), .write = a_write, .writev = a_writev, .writemsg = a_writemsg,
	.inject = a_inject, .readwrite = a_readwrite, .readwritev = a_readwritev, .readwritemsg = a_readwritemsg,
	.compwrite = a_compwrite, .compwritev = a_compwritev, .compwritemsg = a_compwritemsg,
	.writevalid = a_writevalid, .readwritevalid = a_readwritevalid, .compwritevalid = a_compwritevalid};
