/* prov.h: what the provider's files share. docs/libfabric.md has the
 * design; the mechanism in short:
 *
 * A domain is one session with the local metaroced (the protection
 * domain: regions registered in it are reachable through every endpoint
 * of the domain). An FI_EP_RDM endpoint is a listener (its name is the
 * engine's address and the listener's service), a registered bounce area
 * (transmit slots), one shared completion queue of the daemon's
 * (mr_create_cq, on the listener's engine) and two sets of queue pairs,
 * one per peer each way, all completing into that CQ: progress polls the
 * one ring and hands each entry to its queue pair's connection by
 * mr_wc.qp_num, and a sleeper waits on the one CQ descriptor however many
 * peers there are:
 *
 *   outbound: the first operation towards a peer creates a queue pair
 *     and connects it to the peer's listener, then waits (the operation
 *     answers -FI_EAGAIN) for the peer's READY, which says the peer has
 *     accepted the connection and posted receives on it; the first
 *     message is then our HELLO, naming us, and every message and RMA
 *     operation to that peer rides this queue pair.
 *   inbound: progress takes the listener's connection requests (without
 *     waiting, at most every MRP_LISTEN_MAX_US), accepts each onto a fresh
 *     queue pair with MRP_RX_PEER receive slots of its own posted, and
 *     sends READY. The HELLO that comes first names the peer, which the
 *     address vector turns into the fi_addr_t of FI_SOURCE and directed
 *     receives.
 *
 * Every message carries a 16-byte header (struct mrp_hdr): its kind
 * (message, tagged, hello), its 64-bit tag and 32 bits of remote CQ data.
 * Receives match in order, tagged ones by tag, ignore mask and source;
 * what matches no receive waits, copied, on an unexpected queue (bounded:
 * past it, a peer's receive slots stay held, in order, and the transport's
 * RNR wait pushes back on the sender). RMA rides the daemon's WRITE and
 * READ on the outbound queue pair, between registered regions; fi_mr_reg
 * makes the application's pages memfd-backed in place (mr_mem_adopt) and
 * registers them, so a key reaches the application's own memory. */
#ifndef MRP_PROV_H
#define MRP_PROV_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/uio.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_prov.h>

#include "metaroce.h"

#define MRP_HIDDEN __attribute__((visibility("hidden")))

/* MRP_MAX_MSG is the largest message and RMA transfer: what one bounce
 * slot holds after the header. 64 KiB keeps a peer's receive slots at
 * MRP_RX_PEER x 64 KiB = 1 MiB. */
#define MRP_MAX_MSG (64u << 10)
#define MRP_HDR 16
#define MRP_SLOT (MRP_MAX_MSG + 64) /* slot stride: header, payload, kept 64-byte aligned */
#define MRP_TX 16                   /* transmit slots: bounced operations in flight per endpoint */
#define MRP_RX_PEER 16              /* receive slots posted per inbound peer */
#define MRP_OPS 256                 /* operations in flight per endpoint (wr_id indexes them) */
#define MRP_POSTED 1024             /* posted receives per endpoint (rx_attr size) */
#define MRP_UX_MAX 4096             /* unexpected messages kept, copied, per endpoint */
#define MRP_CQ_LEN 8192             /* more than MRP_OPS + MRP_POSTED + peeks: never overruns */
#define MRP_INJECT 4096             /* inject_size: every send is copied anyway */
#define MRP_CQ_DATA 4               /* remote CQ data: 32 bits (the transport's immediate) */
#define MRP_IOV 4                   /* tx iov_limit: local iovs of a send or an RMA operation */
#define MRP_DCQ_SLOTS 4096          /* the daemon's shared CQ: room for ~200 peers' posted receives */
#define MRP_PROV_VERSION FI_VERSION(0, 2)
/* A connecting side waits this long for a peer's READY. */
#define MRP_READY_MS 30000
/* Listener polls back off from MIN to MAX while no peer connects. */
#define MRP_LISTEN_MIN_US 100
#define MRP_LISTEN_MAX_US 20000

/* The endpoint's name: the engine's address, the listener's service and
 * its token, which a peer's connect must present (docs/spec.md §7.3): the
 * name travels out of band, as fi_getname's output always does, so only
 * those given it can connect. */
struct mrp_name {
	char ip[46];
	uint8_t pad[2];
	uint32_t service;
	uint32_t pad2;
	uint64_t token;
};

/* The header in front of every message (host byte order: both ends run
 * this provider on the same architecture, as libfabric's own do). */
enum { MRP_K_MSG = 1, MRP_K_TAGGED = 2, MRP_K_HELLO = 3, MRP_K_READY = 4 };
enum { MRP_F_DATA = 1 };
struct mrp_hdr {
	uint8_t kind, flags;
	uint16_t rsvd;
	uint32_t data;
	uint64_t tag;
};

struct mrp_ep;
struct mrp_domain;

struct mrp_cqe {
	void *ctx;
	uint64_t flags;
	size_t len;
	void *buf;
	uint64_t data, tag;
	fi_addr_t src;
	size_t olen;
	int err; /* positive FI_ errno, 0: success */
	int prov_errno;
};

struct mrp_cq {
	struct fid_cq cq;
	struct mrp_ep *ep;
	int format;
	int wait;           /* FI_WAIT_FD: epfd below is the wait object */
	int epfd, timerfd;  /* epoll set of the bound endpoint's CQ doorbell and the listener timer */
	int sigfd;          /* eventfd for fi_cq_signal */
	struct mrp_cqe *e;  /* MRP_CQ_LEN */
	unsigned head, tail;
};

struct mrp_av {
	struct fid_av av;
	struct mrp_name *peers;
	size_t n, cap;
};

/* A posted receive. */
struct mrp_rx {
	struct mrp_rx *next;
	void *buf;
	size_t len;
	void *ctx;
	fi_addr_t src;
	uint64_t tag, ignore;
	uint64_t flags; /* FI_MSG or FI_TAGGED, FI_COMPLETION */
};

struct mrp_in;

/* An unexpected message. */
struct mrp_ux {
	struct mrp_ux *next;
	struct mrp_in *from; /* NULL: sent by this endpoint to itself */
	fi_addr_t self;      /* the source when from is NULL */
	struct mrp_hdr h;
	size_t len;
	uint8_t *data;
	void *claim; /* FI_CLAIM: the context that claimed it */
};

/* An inbound connection: a peer's outbound queue pair accepted here. */
struct mrp_in {
	struct mr_qp *qp;
	struct mr_mem *mem;
	struct mr_mr *mr;
	struct mrp_name name; /* from its HELLO */
	int named;
	fi_addr_t addr; /* its index in the address vector, once found */
	size_t av_seen; /* entries looked at for it */
	/* Arrivals that could be neither matched nor kept: their slots stay
	 * held, in order, until the unexpected queue has room. */
	uint32_t held[MRP_RX_PEER], held_len[MRP_RX_PEER];
	unsigned hh, ht;
};

enum { MRP_OUT_NONE, MRP_OUT_WAIT, MRP_OUT_READY, MRP_OUT_FAILED };

/* An outbound connection to one address vector entry. */
struct mrp_out {
	struct mr_qp *qp;
	int state;
	int err;             /* MRP_OUT_FAILED: the positive fi errno */
	int64_t deadline_us; /* MRP_OUT_WAIT: READY by then */
};

/* An operation in flight on an outbound queue pair (wr_id indexes it). */
enum { MRP_OP_SEND = 1, MRP_OP_WRITE, MRP_OP_READ, MRP_OP_HELLO };
struct mrp_op {
	int kind;
	int slot;     /* its transmit slot, or -1 */
	int complete; /* report a completion on success */
	void *ctx;
	uint64_t flags;
	/* A read through a slot: the application's iovs, where the bytes go. */
	struct iovec uiov[MRP_IOV];
	int niov;
	struct mrp_op *next_free;
};

/* What a queue pair number names: an outbound connection (index into
 * out) or an inbound one (index into in). */
struct mrp_qref {
	uint32_t qpn; /* 0: empty */
	int inbound;
	size_t idx;
};

struct mrp_ep {
	struct fid_ep ep;
	struct mrp_domain *dom;
	struct mrp_cq *tx, *rx;
	struct mrp_av *av;
	int tx_sel, rx_sel;        /* bound with FI_SELECTIVE_COMPLETION, per direction */
	uint64_t tx_flags, rx_flags; /* op_flags of the info */
	uint64_t caps;
	struct mr_mem *mem; /* transmit slots and the control area */
	struct mr_mr *mr;
	uint32_t service;
	struct mrp_name name;
	int enabled;
	int failed; /* the session is gone: FI_ESHUTDOWN */
	/* transmit slots */
	int slot_busy[MRP_TX];
	/* operations */
	struct mrp_op ops[MRP_OPS];
	struct mrp_op *free_ops;
	/* connections */
	struct mrp_out *out; /* by fi_addr_t, outs entries */
	size_t outs;
	struct mrp_in **in;
	size_t nin, capin;
	int64_t listen_at, listen_gap; /* next listener poll, and the back-off (us) */
	/* The shared completion queue every queue pair above completes into,
	 * and its entries' owners by queue pair number (open addressing). */
	struct mr_cq *dcq;
	struct mrp_qref *qmap;
	size_t qcap, qn;
	int max_sge;     /* scatter-gather entries per request (the daemon's, at most MR_MAX_SGE; 0: none) */
	size_t held;     /* arrivals held in slots, over all inbound connections */
	size_t nwaiting; /* outbound connections waiting for READY */
	/* receives */
	struct mrp_rx rx_pool[MRP_POSTED], *rx_free;
	struct mrp_rx *msg_head, *msg_tail, *tag_head, *tag_tail;
	struct mrp_ux *uxm_head, *uxm_tail, *uxt_head, *uxt_tail;
	size_t nux;
	int armed; /* fi_trywait armed the CQ's doorbell: disarm at the next progress */
};

/* A registered region (memory registration, mr.c). */
struct mrp_area;
struct mrp_mr {
	struct fid_mr mr;
	struct mrp_domain *dom;
	struct mrp_mr *next;
	struct mr_mr *reg;     /* the daemon's region: NULL without FI_RMA */
	struct mrp_area *area; /* the adopted pages under it */
	uintptr_t lo, hi;      /* the application's bytes */
};

struct mrp_domain {
	struct fid_domain dom;
	struct mr_ctx *ctx; /* the session, opened with the first endpoint or region */
	int rma;            /* FI_RMA negotiated: fi_mr_reg registers with the daemon */
	struct mrp_mr *mrs;
	struct mrp_area *areas;
	int eps;
};

/* Tracing (ep.c): MRP_DBG costs a load and a branch when off. */
MRP_HIDDEN extern int mrp_debug;
MRP_HIDDEN void mrp_dbg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define MRP_DBG(...)                                                                                          \
	do {                                                                                                   \
		if (mrp_debug < 0)                                                                             \
			mrp_debug = getenv("METAROCE_DEBUG") != NULL;                                          \
		if (mrp_debug)                                                                                 \
			mrp_dbg(__VA_ARGS__);                                                                  \
	} while (0)

/* nosys.c: the calls this provider does not implement. */
#define MRP_NOSYS_DECL(type, name, params) MRP_HIDDEN type name params;
#include "nosys.h"
#undef MRP_NOSYS_DECL

/* cq.c */
MRP_HIDDEN int mrp_cq_open(struct fid_domain *dom, struct fi_cq_attr *attr, struct fid_cq **out, void *context);
MRP_HIDDEN int mrp_cq_push(struct mrp_cq *cq, const struct mrp_cqe *e);
MRP_HIDDEN void mrp_cq_watch(struct mrp_cq *cq, int fd);
MRP_HIDDEN void mrp_cq_unwatch(struct mrp_cq *cq, int fd);
MRP_HIDDEN int mrp_cq_trywait(struct mrp_cq *cq);

/* av.c */
MRP_HIDDEN int mrp_av_open(struct fid_domain *dom, struct fi_av_attr *attr, struct fid_av **out, void *context);

/* ep.c: endpoints, connections, progress */
MRP_HIDDEN int mrp_ep_open(struct fid_domain *dom, struct fi_info *info, struct fid_ep **out, void *context);
MRP_HIDDEN void mrp_progress(struct mrp_ep *ep);
MRP_HIDDEN int mrp_errno(int mr_err);
MRP_HIDDEN int mrp_wc_errno(int status);
MRP_HIDDEN int64_t mrp_now_us(void);
MRP_HIDDEN int mrp_peer(struct mrp_ep *ep, fi_addr_t dest, struct mrp_out **out);
MRP_HIDDEN int mrp_is_self(struct mrp_ep *ep, fi_addr_t dest);
MRP_HIDDEN struct mrp_op *mrp_op_get(struct mrp_ep *ep);
MRP_HIDDEN void mrp_op_put(struct mrp_ep *ep, struct mrp_op *op);
MRP_HIDDEN int mrp_slot_get(struct mrp_ep *ep);
MRP_HIDDEN uint8_t *mrp_slot_ptr(struct mrp_ep *ep, int slot);
MRP_HIDDEN uint64_t mrp_slot_addr(struct mrp_ep *ep, int slot);
MRP_HIDDEN int mrp_arm(struct mrp_ep *ep);
MRP_HIDDEN int64_t mrp_listen_due_us(struct mrp_ep *ep);
MRP_HIDDEN int mrp_session(struct mrp_domain *d);

/* msg.c: messages, tagged messages, matching */
MRP_HIDDEN extern struct fi_ops_msg mrp_msg_ops;
MRP_HIDDEN extern struct fi_ops_tagged mrp_tagged_ops;
MRP_HIDDEN void mrp_arrived(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, const struct mrp_hdr *h,
			    const uint8_t *data, size_t len, int *kept);
MRP_HIDDEN int mrp_ux_room(struct mrp_ep *ep);
MRP_HIDDEN fi_addr_t mrp_src(struct mrp_ep *ep, struct mrp_in *from);
MRP_HIDDEN void mrp_rx_close(struct mrp_ep *ep);

/* rma.c */
MRP_HIDDEN extern struct fi_ops_rma mrp_rma_ops;

/* mr.c */
MRP_HIDDEN extern struct fi_ops_mr mrp_mr_ops;
MRP_HIDDEN struct mrp_mr *mrp_mr_of(struct mrp_domain *d, void *desc, const void *buf, size_t len);

#endif
