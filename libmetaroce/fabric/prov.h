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
 * A message is one or more segments of up to 64 KiB, each a SEND with a
 * 32-byte header (struct mrp_hdr): its kind (message, tagged, hello), its
 * 64-bit tag, 32 bits of remote CQ data, the message's length and number
 * and the segment's offset. A send is queued on its peer's queue of
 * transfers and its segments posted from there as transmit slots free
 * (xfer.c), one message after another. Receives match first segments in
 * order, tagged ones by tag, ignore mask and source; continuations land
 * at their offsets in what the first matched. What matches no receive
 * waits, copied, on an unexpected queue (bounded in messages and bytes:
 * past it, a peer's receive slots stay held, in order, and the
 * transport's RNR wait pushes back on the sender). RMA rides the daemon's
 * WRITE and READ on the outbound queue pair, between registered regions,
 * in requests of at most 2 GiB (in place) or 64 KiB (bounced); fi_mr_reg
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

/* MRP_MAX_MSG is the largest message and RMA operation (max_msg_size):
 * 1 GiB, what Open MPI's OFI MTL and fabtests send. A message goes as
 * SENDs of MRP_SEG bytes each (segments, xfer.c), an RMA operation as
 * requests of at most MRP_WR_MAX (local iovs registered, in place) or
 * MRP_SEG (through a transmit slot). */
#define MRP_MAX_MSG (1u << 30)
/* MRP_SEG is one segment's payload, what a bounce slot holds after the
 * header: 64 KiB keeps a peer's receive slots at MRP_RX_PEER x 64 KiB =
 * 1 MiB. */
#define MRP_SEG (64u << 10)
#define MRP_HDR 32                  /* sizeof(struct mrp_hdr) */
#define MRP_SLOT (MRP_SEG + 64)     /* slot stride: header, payload, kept 64-byte aligned */
/* MRP_WR_MAX: one request's length is 32 bits at the daemon (docs/api.md,
 * work requests) and in the transport's MsgLen (docs/spec.md §4.1), so a
 * longer in-place RMA operation is several requests at consecutive
 * remote offsets; 2 GiB, the power of two below, keeps them aligned. */
#define MRP_WR_MAX (1u << 31)
#define MRP_XFERS 256               /* sends and RMA operations accepted, not yet complete (tx_size_left) */
#define MRP_UX_BYTES (256u << 20)   /* unexpected bytes kept, copied, per endpoint (one larger message alone may exceed it) */
#define MRP_RX_IOV 4                /* rx iov_limit: arrivals are copied out of the receive slots, into up to 4 iovs */
#define MRP_MIN_MULTI_RECV 64       /* FI_OPT_MIN_MULTI_RECV's default, as libfabric's sockets and cxi providers have it */
#define MRP_TX 16                   /* transmit slots: segments and bounced RMA chunks in flight per endpoint */
#define MRP_RX_PEER 16              /* receive slots posted per inbound peer */
#define MRP_OPS 256                 /* operations in flight per endpoint (wr_id indexes them) */
#define MRP_POSTED 1024             /* posted receives per endpoint (rx_attr size) */
#define MRP_UX_MAX 4096             /* unexpected messages kept, copied, per endpoint */
#define MRP_CQ_LEN 8192             /* more than MRP_OPS + MRP_POSTED + peeks: never overruns */
/* An arrival waits in its slot while the receive CQ has no more room than
 * what is owed already (every transfer's and posted receive's entry, and
 * slack for messages landing in multi-receive buffers, which take no
 * posted receive each): the CQ never overruns. */
#define MRP_CQ_RESERVE (MRP_XFERS + MRP_POSTED + 512)
#define MRP_INJECT 4096             /* inject_size: an inject is copied into a transmit slot at the call */
#define MRP_CQ_DATA 4               /* remote CQ data: 32 bits (the transport's immediate) */
#define MRP_IOV 4                   /* tx iov_limit: local iovs of a send or an RMA operation */
#define MRP_DCQ_SLOTS 4096          /* the daemon's shared CQ: room for ~200 peers' posted receives */
#define MRP_PROV_VERSION FI_VERSION(0, 3) /* 0.3: the 32-byte segment header */
/* A connecting side's CONNECT is retried this long while nothing
 * answers (a peer whose endpoint is still coming up is reached), and the
 * peer's READY must follow its accept within the slack. */
#define MRP_READY_MS 30000
#define MRP_READY_SLACK_MS 10000
/* Where an endpoint addressed by sockaddr picks its port when the
 * application named none (the dynamic range of RFC 6335). */
#define MRP_PORT_LO 49152u
#define MRP_PORT_HI 65535u
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

/* The header in front of every SEND (host byte order: both ends run this
 * provider on the same architecture, as libfabric's own do). A message
 * is one or more segments, each a SEND of this header and up to MRP_SEG
 * bytes of the message; every segment carries the whole header, so each
 * is placed at its offset by itself. off 0 is the first segment, the one
 * matching looks at. MRP_F_ABORT (a continuation with no payload): the
 * sender gave the message up after its first segment went, so the
 * receiver fails what it was placing rather than wait for the rest. */
enum { MRP_K_MSG = 1, MRP_K_TAGGED = 2, MRP_K_HELLO = 3, MRP_K_READY = 4 };
enum { MRP_F_DATA = 1, MRP_F_ABORT = 2 };
struct mrp_hdr {
	uint8_t kind, flags;
	uint16_t msgno; /* the message's number on its connection, from 0, wrapping */
	uint32_t data;  /* remote CQ data (MRP_F_DATA) */
	uint64_t tag;   /* MRP_K_TAGGED */
	uint64_t len;   /* the message's bytes, at most MRP_MAX_MSG */
	uint64_t off;   /* this segment's first byte in the message */
};
_Static_assert(sizeof(struct mrp_hdr) == MRP_HDR, "MRP_HDR is the header's size");

struct mrp_ep;
struct mrp_domain;
struct mrp_cntr;
struct mrp_amo;

/* What a counter bound to an endpoint counts (fi_ep_bind's flags). */
enum { MRP_CNTR_SEND, MRP_CNTR_RECV, MRP_CNTR_READ, MRP_CNTR_WRITE, MRP_CNTR_KINDS };

/* The first byte of an atomic's request and response (atomic.c has their
 * format): far from the MRP_K_* message kinds, so new kinds there do not
 * meet them. */
enum { MRP_K_AMO = 0xA1, MRP_K_AMO_RESP = 0xA2 };

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
	struct mrp_name *peers; /* a removed entry has service 0 */
	size_t n, cap;
	/* The endpoints bound to it: fi_av_remove ends their connections to
	 * a removed entry. */
	struct mrp_ep **eps;
	size_t neps, capeps;
	int fmt; /* its domain's address format */
	/* FI_EVENT: inserts complete as FI_AV_COMPLETE on this queue. */
	int events;
	struct fid_eq *eq;
};

/* A posted receive (recv.c): on its list until a message takes it, then
 * the message's until its last byte is in. */
struct mrp_rx {
	struct mrp_rx *next;
	struct iovec iov[MRP_RX_IOV];
	int niov;
	size_t len; /* the iovs' bytes */
	void *ctx;
	fi_addr_t src;
	uint64_t tag, ignore;
	uint64_t flags; /* FI_MSG or FI_TAGGED, FI_COMPLETION, FI_MULTI_RECV */
	/* FI_MULTI_RECV (one iov): bytes handed out to messages, messages
	 * landing in it, and whether it left the posted list (less than the
	 * minimum left, or cancelled): the completion that brings refs to 0
	 * once released carries FI_MULTI_RECV and frees the record. */
	size_t used;
	unsigned refs;
	int released;
};

struct mrp_in;

/* An unexpected message (recv.c), kept whole: its continuation segments
 * land in data while filling. */
struct mrp_ux {
	struct mrp_ux *next;
	struct mrp_in *from; /* NULL: sent by this endpoint to itself */
	fi_addr_t self;      /* the source when from is NULL */
	struct mrp_hdr h;
	size_t len;          /* h.len */
	uint8_t *data;
	size_t bytes;        /* what data holds against MRP_UX_BYTES (0 once failed) */
	int filling;         /* from->part is placing its segments */
	int err;             /* its sender's connection failed first: a receive that takes it fails so */
	void *claim;         /* FI_CLAIM: the context that claimed it */
};

/* The message an inbound connection is in the middle of (recv.c): its
 * first segment matched a receive (or was kept unexpected), its
 * continuations land at their offsets until got reaches h.len. One per
 * connection: a queue pair's RECVs complete in the order of the peer's
 * SENDs (docs/spec.md §9.1, one stream), and a sender posts a message's
 * segments before the next message's. A local one describes a message
 * placed at once. */
struct mrp_part {
	int active;
	struct mrp_hdr h;             /* its first segment's */
	uint64_t got, hi;             /* bytes taken; the end of the furthest segment */
	struct iovec iov[MRP_RX_IOV]; /* where bytes [0, cap) go; the rest are dropped (FI_ETRUNC) */
	int niov;
	size_t cap;
	struct mrp_rx *rx; /* the receive it completes */
	struct mrp_ux *ux; /* or the unexpected entry it fills; neither: discarded (FI_DISCARD) */
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
	struct mrp_part part; /* the message being placed (recv.c) */
	int dead;             /* its terminal event came: the positive fi errno a message still coming fails with */
};

enum { MRP_OUT_NONE, MRP_OUT_WAIT, MRP_OUT_READY, MRP_OUT_FAILED };

/* An outbound connection to one address vector entry. */
struct mrp_out {
	struct mr_qp *qp;
	int state;
	int err;             /* MRP_OUT_FAILED: the positive fi errno */
	int64_t deadline_us; /* MRP_OUT_WAIT: READY by then */
	/* Transfers to this peer with requests still to post, oldest first
	 * (xfer.c): only the head posts, so a later message's first segment
	 * never goes before an earlier one's last (FI_ORDER_SAS). */
	struct mrp_xfer *txq, *txq_tail;
	int active;     /* in the endpoint's ring of peers taking turns */
	uint16_t msgno; /* the next message's number (mrp_hdr.msgno) */
};

/* A send or an RMA operation (xfer.c), from its call until its last
 * request completed: the call queues it on its peer's txq, and the
 * requests are posted from there as transmit slots, operations and send
 * queue room allow (the call itself and every completion push them). */
enum { MRP_X_SEND = 1, MRP_X_WRITE, MRP_X_READ };
struct mrp_xfer {
	struct mrp_xfer *next; /* its peer's txq, or the free list */
	int kind;
	fi_addr_t dest;
	struct iovec iov[MRP_IOV];
	uint32_t lkey[MRP_IOV]; /* where reg: the key of the region the iov lies in (a key, not the region: the application may close it) */
	uint8_t reg[MRP_IOV];   /* the iov goes in place, an entry of the request's scatter-gather list */
	int niov;
	int direct;             /* RMA: every iov in place, no transmit slot */
	uint64_t len, off;      /* its bytes; the first not yet posted */
	unsigned nposted, inflight;
	int queued;             /* on its peer's txq */
	int err, prov_errno;    /* the first failure */
	int signal;             /* report success too (FI_SELECTIVE_COMPLETION, inject) */
	int first_ok;           /* SEND: the first segment completed: the receiver is placing it */
	int abort;              /* SEND: an MRP_F_ABORT segment is to go */
	int slot;               /* an inject's transmit slot, holding its bytes until posted; -1 */
	void *ctx;
	uint64_t flags;         /* the completion's */
	struct mrp_hdr h;       /* SEND */
	uint64_t raddr;         /* RMA */
	uint32_t rkey, imm;
	int has_imm;            /* fi_writedata: the last request is a WRITE with immediate */
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
	/* A request of a transfer (xfer.c takes its completion): bytes
	 * [off, off + n) of it, or its MRP_F_ABORT segment. */
	struct mrp_xfer *x;
	uint64_t off;
	size_t n;
	int abort;
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
	/* receives (recv.c) */
	size_t rx_inuse;      /* records of rx_pool posted or taken by a message */
	size_t ux_bytes;      /* the unexpected queue's bytes, against MRP_UX_BYTES */
	size_t mrecv_min;     /* FI_OPT_MIN_MULTI_RECV, once set (mrecv_min_set) */
	int mrecv_min_set;
	/* transfers (xfer.c): a fixed pool, set up at the first use; the
	 * peers with queued transfers take turns, each once in the ring
	 * (never more peers than transfers) */
	struct mrp_xfer xfers[MRP_XFERS], *xfree;
	size_t nxfree;
	int xinit;
	fi_addr_t act[MRP_XFERS];
	unsigned act_h, act_t;
	/* Counters bound (cntr.c), by what they count: mrp_count adds to
	 * them at every completion. */
	struct mrp_cntr *cntr[MRP_CNTR_KINDS];
	/* Atomics (atomic.c): made with the first one issued or arrived. */
	struct mrp_amo *amo;
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
	uint64_t access;       /* FI_REMOTE_READ, FI_REMOTE_WRITE as registered: what a peer's atomic may do */
};

struct mrp_domain {
	struct fid_domain dom;
	struct mr_ctx *ctx; /* the session, opened with the first endpoint or region */
	int rma;            /* FI_RMA negotiated: fi_mr_reg registers with the daemon */
	struct mrp_mr *mrs;
	struct mrp_area *areas;
	int eps;
	int addr_format; /* FI_FORMAT_UNSPEC (struct mrp_name) or FI_SOCKADDR_IN (av.c) */
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

/* eq.c */
MRP_HIDDEN int mrp_eq_open(struct fid_fabric *fab, struct fi_eq_attr *attr, struct fid_eq **out, void *context);
MRP_HIDDEN int mrp_eq_report(struct fid_eq *eq, uint32_t event, const void *buf, size_t len);
MRP_HIDDEN int mrp_eq_report_err(struct fid_eq *eq, const struct fi_eq_err_entry *err);
MRP_HIDDEN int mrp_eq_trywait(struct fid_eq *eq);

/* av.c */
MRP_HIDDEN int mrp_av_open(struct fid_domain *dom, struct fi_av_attr *attr, struct fid_av **out, void *context);
MRP_HIDDEN int mrp_name_parse(const char *node, const char *service, struct mrp_name *out);
/* An application's addresses in the domain's format, as names and back. */
#define MRP_ADDR_MAX sizeof(struct mrp_name)
MRP_HIDDEN size_t mrp_addrlen(int fmt);
MRP_HIDDEN int mrp_name_fits(int fmt, const struct mrp_name *n);
MRP_HIDDEN int mrp_addr_to_name(int fmt, const void *addr, struct mrp_name *out);
MRP_HIDDEN void mrp_name_to_addr(int fmt, const struct mrp_name *n, void *out);
MRP_HIDDEN void mrp_av_bind(struct mrp_av *av, struct mrp_ep *ep);
MRP_HIDDEN void mrp_av_unbind(struct mrp_av *av, struct mrp_ep *ep);
MRP_HIDDEN int mrp_av_live(const struct mrp_av *av, fi_addr_t a);
MRP_HIDDEN void mrp_ep_forget(struct mrp_ep *ep, fi_addr_t a);

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

/* want: whether a successful operation reports a completion
 * (fi_endpoint(3), FI_SELECTIVE_COMPLETION: only those with
 * FI_COMPLETION, per direction). */
static inline int mrp_want(int selective, uint64_t flags) { return !selective || (flags & FI_COMPLETION); }

/* msg.c: the calls of FI_MSG and FI_TAGGED, fi_cancel, fi_rx_size_left */
MRP_HIDDEN extern struct fi_ops_msg mrp_msg_ops;
MRP_HIDDEN extern struct fi_ops_tagged mrp_tagged_ops;
MRP_HIDDEN ssize_t mrp_cancel(fid_t fid, void *context);
MRP_HIDDEN ssize_t mrp_rx_size_left(struct fid_ep *ep);
MRP_HIDDEN size_t mrp_min_multi_recv(const struct mrp_ep *ep);

/* recv.c: arrivals, matching, the unexpected queue, placing segments */
MRP_HIDDEN void mrp_arrived(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, const struct mrp_hdr *h,
			    const uint8_t *data, size_t len, int *kept);
MRP_HIDDEN int mrp_deliver_self(struct mrp_ep *ep, fi_addr_t self, const struct mrp_hdr *h, const struct iovec *iov,
				size_t count);
MRP_HIDDEN void mrp_in_failed(struct mrp_ep *ep, struct mrp_in *in, int err);
MRP_HIDDEN ssize_t mrp_recv_post(struct mrp_ep *ep, int tagged, const struct mrp_rx *want);
MRP_HIDDEN ssize_t mrp_recv_peek(struct mrp_ep *ep, const struct mrp_rx *want);
MRP_HIDDEN ssize_t mrp_recv_claim(struct mrp_ep *ep, const struct mrp_rx *want);
MRP_HIDDEN int mrp_recv_cancel(struct mrp_ep *ep, void *ctx);
MRP_HIDDEN fi_addr_t mrp_src(struct mrp_ep *ep, struct mrp_in *from);
MRP_HIDDEN void mrp_rx_close(struct mrp_ep *ep);

/* xfer.c: transfers (segmented sends, chunked RMA), their completions */
MRP_HIDDEN struct mrp_xfer *mrp_xfer_new(struct mrp_ep *ep);
MRP_HIDDEN void mrp_xfer_free(struct mrp_ep *ep, struct mrp_xfer *x);
MRP_HIDDEN int mrp_xfer_hold_slot(struct mrp_ep *ep, struct mrp_xfer *x);
MRP_HIDDEN void mrp_xfer_start(struct mrp_ep *ep, struct mrp_xfer *x);
MRP_HIDDEN int mrp_wc_take(struct mrp_ep *ep, const struct mrp_qref *q, const struct mr_wc *wc);
MRP_HIDDEN ssize_t mrp_tx_size_left(struct fid_ep *ep);
MRP_HIDDEN int mrp_iov_len(const struct iovec *iov, size_t count, uint64_t *len);
MRP_HIDDEN void mrp_iov_gather(uint8_t *dst, const struct iovec *iov, int niov, uint64_t off, size_t n);
MRP_HIDDEN void mrp_iov_scatter(const struct iovec *iov, int niov, uint64_t off, const uint8_t *src, size_t n);
MRP_HIDDEN void mrp_xfer_regs(struct mrp_ep *ep, struct mrp_xfer *x, void **desc);

/* rma.c */
MRP_HIDDEN extern struct fi_ops_rma mrp_rma_ops;

/* cntr.c: counters. mrp_count is called wherever an operation completes,
 * successfully (err 0) or not, CQ entry or not, with the completion's
 * flags, which say what it counts to. */
MRP_HIDDEN int mrp_cntr_open(struct fid_domain *dom, struct fi_cntr_attr *attr, struct fid_cntr **out, void *context);
MRP_HIDDEN int mrp_cntr_bind(struct mrp_ep *ep, struct fid *cntr, uint64_t flags);
MRP_HIDDEN void mrp_cntr_unbind(struct mrp_ep *ep);
MRP_HIDDEN void mrp_count(struct mrp_ep *ep, uint64_t flags, int err);
MRP_HIDDEN int mrp_is_cntr(const struct fid *f);
MRP_HIDDEN uint64_t mrp_cntr_events(struct fid_cntr *f); /* successes and errors so far, after progress */

/* cq.c, for poll sets */
MRP_HIDDEN int mrp_is_cq(const struct fid *f);
MRP_HIDDEN int mrp_cq_ready(struct mrp_cq *cq); /* progresses its endpoint; 1 if an entry waits */

/* poll.c */
MRP_HIDDEN int mrp_poll_open(struct fid_domain *dom, struct fi_poll_attr *attr, struct fid_poll **out);

/* atomic.c: FI_ATOMIC over messages. ep.c hands it an inbound arrival of
 * kind MRP_K_AMO (mrp_amo_arrived: 1 done, 0 hold it in its slot) and the
 * completions of its own requests (wr_ids of its own): mrp_amo_out_wc and
 * mrp_amo_in_wc return 1 when the entry was theirs and is done, 0 when
 * the caller should look at it too (not theirs, or a failure that ends
 * the connection). */
MRP_HIDDEN extern struct fi_ops_atomic mrp_atomic_ops;
MRP_HIDDEN int mrp_query_atomic(struct fid_domain *dom, enum fi_datatype datatype, enum fi_op op,
				struct fi_atomic_attr *attr, uint64_t flags);
MRP_HIDDEN int mrp_amo_arrived(struct mrp_ep *ep, struct mrp_in *in, const uint8_t *p, size_t len);
MRP_HIDDEN int mrp_amo_out_wc(struct mrp_ep *ep, struct mrp_out *o, const struct mr_wc *wc);
MRP_HIDDEN int mrp_amo_in_wc(struct mrp_ep *ep, struct mrp_in *in, const struct mr_wc *wc);
MRP_HIDDEN void mrp_amo_close(struct mrp_ep *ep);

/* mr.c */
MRP_HIDDEN extern struct fi_ops_mr mrp_mr_ops;
MRP_HIDDEN struct mrp_mr *mrp_mr_of(struct mrp_domain *d, void *desc, const void *buf, size_t len);

#endif
