/*
 * metaroce.h: the C client library of metaroced (docs/api.md), with no Go
 * runtime. It speaks the control protocol over the daemon's SOCK_SEQPACKET
 * socket (JSON messages, descriptors as SCM_RIGHTS), registers memory from
 * sealed memfds, and maps each queue pair's send and completion queues, the
 * shared-memory rings of ring/, driving them with the need-wakeup protocol
 * and the queue pair's doorbell exactly as client/ (Go) does.
 *
 * The shape is verbs': a session (mr_ctx, the protection domain), memory
 * regions whose key is lkey and rkey alike, queue pairs with work requests
 * and work completions. Every call returns MR_OK (0) or a negative
 * MR_ERR_* code; mr_ctx_error gives the session's last refusal as a
 * sentence.
 *
 * Threads: a session may be used from several threads (control requests
 * are serialised); a queue pair is used from one thread at a time, as with
 * verbs (its rings have one producer and one consumer).
 *
 * Trust: nothing the daemon puts in shared memory is trusted. Ring headers
 * are validated once against the file's size and its seals, every index
 * the daemon writes is checked before use (an impossible one fails the
 * queue pair with MR_ERR_CORRUPT, for good), completions are copied out
 * before they are read, and replies with the wrong descriptors, the wrong
 * sequence number or malformed JSON are refused with MR_ERR_PROTOCOL, as
 * are private data longer than MR_MAX_PRIVATE (or not hex), a completion
 * entry with an event byte, an event the queue pair did not ask for, and a
 * query_qp state or reason that is not one of the documented names.
 *
 * Beyond verbs' shape (docs/api.md maps verbs, rdma_cm and libfabric onto
 * these calls): listeners with private data both ways (rdma_cm's), a
 * queue pair's connection events delivered in its completion queue, in
 * order with its completions (mr_qp_attr.events), unsignaled and inline
 * work requests, mr_query_qp, shared completion queues (mr_create_cq,
 * mr_qp_attr.cq) and scatter-gather lists (mr_wr.sg_list).
 */
#ifndef METAROCE_H
#define METAROCE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* MR_DEFAULT_SOCKET is where metaroced listens unless configured otherwise. */
#define MR_DEFAULT_SOCKET "/run/metaroced/control.sock"

/* Error codes: the control protocol's codes one to one, then the library's own. */
enum mr_error {
	MR_OK = 0,
	MR_ERR_BAD_REQUEST = -1,  /* bad_request */
	MR_ERR_VERSION = -2,      /* unsupported_version */
	MR_ERR_UNKNOWN_OP = -3,   /* unknown_op */
	MR_ERR_LIMIT = -4,        /* limit */
	MR_ERR_NOT_FOUND = -5,    /* not_found */
	MR_ERR_BAD_REGION = -6,   /* bad_region */
	MR_ERR_BAD_STATE = -7,    /* bad_state */
	MR_ERR_CONNECT = -8,      /* connect_failed */
	MR_ERR_DENIED = -9,       /* denied */
	MR_ERR_BUSY = -10,        /* busy */
	MR_ERR_INTERNAL = -11,    /* internal, or a code this library does not know */
	MR_ERR_DAEMON_GONE = -20, /* the control socket closed: the daemon went away */
	MR_ERR_PROTOCOL = -21,    /* a reply this library refuses (malformed, wrong seq or descriptors) */
	MR_ERR_CORRUPT = -22,     /* a ring header or index no correct daemon writes */
	MR_ERR_SQ_FULL = -23,     /* no room on the send queue */
	MR_ERR_TIMEOUT = -24,     /* a wait's time passed */
	MR_ERR_INVAL = -25,       /* a bad argument */
	MR_ERR_SYS = -26,         /* a system call failed: errno says which */
	MR_ERR_CONN_CLOSED = -27, /* mr_wait_cq on a queue pair with events whose connection is over */
};

/* mr_strerror names an error code. */
const char *mr_strerror(int err);

/* Access rights of a region (docs/api.md, Memory). */
enum {
	MR_ACCESS_LOCAL_WRITE = 1,  /* READ destinations, receive buffers */
	MR_ACCESS_REMOTE_READ = 2,
	MR_ACCESS_REMOTE_WRITE = 4,
};

/* Work request operations (send queue slot byte 0). */
enum mr_wr_op {
	MR_WR_WRITE = 1,
	MR_WR_WRITE_IMM = 2,
	MR_WR_READ = 3,
	MR_WR_SEND = 4,
	MR_WR_SEND_IMM = 5,
	MR_WR_RECV = 6,
};

/* Work request flags (struct mr_wr's flags; send queue slot byte 1).
 * MR_WR_UNSIGNALED: no completion when the request succeeds (verbs
 * without IBV_SEND_SIGNALED, libfabric without FI_COMPLETION); a failure
 * completes as always, and a RECV always completes. Completions come in
 * order per stream, so a signaled request's completion says the
 * unsignaled ones before it on its stream are done. */
#define MR_WR_UNSIGNALED 1u

/* MR_MAX_INLINE is the most data a work request carries in its slot
 * (struct mr_wr's inline_data; docs/api.md, Work requests). */
#define MR_MAX_INLINE 20

/* MR_MAX_PRIVATE bounds connection private data each way (the wire's
 * bound, docs/spec.md §7.1). */
#define MR_MAX_PRIVATE 64

/* MR_MAX_SGE is the most scatter-gather entries a work request carries
 * (mr_wr.num_sge; the daemon says what it allows in mr_limits.max_sge). */
#define MR_MAX_SGE 4

/* Completion operations. */
enum mr_wc_op {
	MR_WC_WRITE = 1,
	MR_WC_READ = 2,
	MR_WC_SEND = 3,
	MR_WC_RECV = 4,           /* a peer's SEND landed in a posted receive */
	MR_WC_RECV_WRITE_IMM = 5, /* a peer's WRITE with immediate completed */
	/* MR_WC_EVENT: not a completion but a connection event (struct
	 * mr_wc's event says which, status the reason), in order with the
	 * completions around it: a closing connection's flushed completions
	 * come before its event. wr_id, bytes, imm and stream are 0. Only a
	 * queue pair made with mr_qp_attr.events gets them. */
	MR_WC_EVENT = 6,
};

/* Connection events (struct mr_wc's event when op is MR_WC_EVENT;
 * docs/api.md, Connection events). Every one but MR_EVENT_CONNECTED ends
 * the connection. */
enum mr_event {
	MR_EVENT_CONNECTED = 1,       /* up (connect or accept); status 0 */
	MR_EVENT_PEER_CLOSED = 2,     /* the peer closed it or no longer knows it: status flushed or reset */
	MR_EVENT_FAILED = 3,          /* it failed: status says why (rejected, remote invalid, RNR ...) */
	MR_EVENT_RETRY_EXCEEDED = 4,  /* the peer stopped answering (data, keepalive, handshake); status 4 */
	/* MR_EVENT_DAEMON_GONE: the daemon went away. The library adds it,
	 * once, to a queue pair with events after the entries the daemon had
	 * written; status 0. */
	MR_EVENT_DAEMON_GONE = 0x80,
};

/* mr_event_str names a connection event. */
const char *mr_event_str(int event);

/* Completion statuses (docs/api.md, Completions). */
enum mr_wc_status {
	MR_WC_SUCCESS = 0,
	MR_WC_REMOTE_ACCESS = 1,
	MR_WC_REMOTE_INVALID = 2,
	MR_WC_RNR = 3,
	MR_WC_RETRY_EXCEEDED = 4,
	MR_WC_LOCAL_LENGTH = 5,
	MR_WC_FLUSHED = 6,
	MR_WC_RESET = 7,
	MR_WC_REJECTED = 8,
	MR_WC_LOCAL_PROTECTION = 9,
	MR_WC_BAD_WR = 10,
	MR_WC_NOT_CONNECTED = 11,
};

/* MR_WC_FLAG_IMM: the completion carries immediate data. */
#define MR_WC_FLAG_IMM 1u

/* mr_wc_status_str names a completion status. */
const char *mr_wc_status_str(int status);

struct mr_ctx;  /* a session: one control connection, a protection domain */
struct mr_mem;  /* shareable memory: a sealed memfd mapped here */
struct mr_qp;   /* a queue pair */
struct mr_cq;   /* a shared completion queue */

/* A registered region: bytes [off, off+len) of a mr_mem. */
struct mr_mr {
	struct mr_ctx *ctx;
	void *buf;     /* this process's address of the first byte */
	uint64_t addr; /* how work requests and peers address it (the address of buf) */
	size_t len;
	uint32_t key;  /* lkey and rkey */
};

/* One scatter-gather entry (ibv_sge): length bytes at addr in the region
 * lkey names. */
struct mr_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* One work request: an sge of the local region, and for WRITE and READ the
 * remote address and key. Zero the fields you do not use (a designated
 * initializer does). */
struct mr_wr {
	uint8_t op;    /* enum mr_wr_op */
	uint8_t flags; /* MR_WR_UNSIGNALED; other bits 0 */
	uint16_t stream;
	uint64_t wr_id;
	uint32_t lkey;
	uint64_t laddr;
	uint32_t length;
	uint32_t rkey;
	uint64_t raddr;
	uint32_t imm;
	/* inline_data, if not NULL: the data of a WRITE or SEND (with or
	 * without immediate), length bytes of it (at most MR_MAX_INLINE),
	 * carried in the send queue slot itself (IBV_SEND_INLINE,
	 * fi_inject). mr_post copies it, so the buffer may be reused as soon
	 * as it returns; lkey and laddr are unused. */
	const void *inline_data;
	/* sg_list, if num_sge > 0: the local side as num_sge entries (at
	 * most mr_limits.max_sge, MR_MAX_SGE), gathered in order for a WRITE
	 * or SEND, scattered into for a READ; not on a RECV, not with
	 * inline_data; lkey, laddr and length are unused. mr_post copies the
	 * list. Such a request takes two send queue slots. */
	const struct mr_sge *sg_list;
	int num_sge;
};

/* One work completion, or a connection event (op MR_WC_EVENT). */
struct mr_wc {
	uint64_t wr_id;
	uint8_t op;     /* enum mr_wc_op */
	uint8_t status; /* enum mr_wc_status; for an event its reason */
	uint8_t flags;  /* MR_WC_FLAG_IMM */
	uint8_t event;  /* enum mr_event when op is MR_WC_EVENT, else 0 */
	uint32_t bytes; /* received bytes (RECV, RECV_WRITE_IMM) */
	uint32_t imm;
	uint16_t stream;
	uint32_t qp_num; /* the queue pair it is for (what tells a shared CQ's entries apart) */
};

/* The daemon's limits for this session, from hello (0: none). */
struct mr_limits {
	int max_regions;
	int64_t max_region_bytes;
	int max_qps;
	uint64_t session_id;
	int max_sge; /* scatter-gather entries per work request (0: none) */
};

/* Sessions. */
int mr_open(const char *socket_path, struct mr_ctx **out); /* NULL path: MR_DEFAULT_SOCKET */
void mr_close(struct mr_ctx *ctx);
const struct mr_limits *mr_ctx_limits(const struct mr_ctx *ctx);
/* mr_ctx_error is the last failure of this session as a sentence (the
 * daemon's own words for a refusal). Valid until the next call. */
const char *mr_ctx_error(const struct mr_ctx *ctx);
/* mr_ctx_fd is the control socket, for polling beside other descriptors:
 * it turns readable (EOF) when the daemon goes. */
int mr_ctx_fd(const struct mr_ctx *ctx);
/* mr_ctx_alive looks, without blocking, whether the daemon is still there:
 * MR_OK or MR_ERR_DAEMON_GONE. */
int mr_ctx_alive(struct mr_ctx *ctx);

/* Memory. */
int mr_mem_alloc(size_t size, struct mr_mem **out);
/* mr_mem_adopt makes the application's own pages covering [addr,
 * addr+len) shareable in place (a memfd with their bytes mapped over
 * them at the same addresses), so they can be registered and reached by
 * WRITE and READ with no copy. mr_mem_ptr is the first page's address.
 * Writes to those pages by other threads during the call are lost; the
 * pages stay mapped, shared, after mr_mem_free. */
int mr_mem_adopt(void *addr, size_t len, struct mr_mem **out);
void *mr_mem_ptr(const struct mr_mem *m);
size_t mr_mem_size(const struct mr_mem *m);
void mr_mem_free(struct mr_mem *m); /* regions on it stay valid in the daemon */

int mr_reg(struct mr_ctx *ctx, struct mr_mem *m, size_t off, size_t len, int access, struct mr_mr **out);
int mr_dereg(struct mr_mr *mr); /* revokes the key and frees mr */

/* Queue pairs. */
struct mr_qp_attr {
	uint32_t sq_slots, cq_slots; /* powers of two, 0: the daemon's defaults */
	int engine;
	/* spin_us: how long mr_wait_cq polls, yielding the CPU, before it
	 * sleeps on the doorbell (0: 500; negative: never sleep). */
	int spin_us;
	/* events: deliver the connection's events into the completion queue
	 * as MR_WC_EVENT entries (create_qp's events), and let mr_wait_cq
	 * return MR_ERR_CONN_CLOSED, instead of waiting, once a terminal
	 * event has been taken and nothing else is there. */
	int events;
	/* cq, if not NULL: the shared completion queue (mr_create_cq) the
	 * queue pair completes into instead of one of its own (cq_slots must
	 * be 0). It is placed on the CQ's engine (an engine naming another is
	 * refused), its events always go there, and mr_poll_cq, mr_wait_cq
	 * and mr_qp_arm on it return MR_ERR_INVAL: poll the CQ. */
	struct mr_cq *cq;
	/* rnr_retry_forever: a SEND the peer refuses for want of a posted
	 * receive (RNR) is retried for as long as the peer answers, the wait
	 * doubling from the daemon's rnr_delay (20 us) to 1 ms, instead of
	 * failing the connection (MR_WC_RNR, MR_EVENT_FAILED) after its
	 * rnr_retries (about 0.1 s): verbs' rnr_retry = 7 (create_qp's
	 * rnr_retry_forever, docs/api.md). For the queue pair's connection
	 * however it comes: mr_connect*, mr_accept, or a listener's request
	 * accepted onto it. A peer that is gone still ends it
	 * (MR_EVENT_RETRY_EXCEEDED). A daemon that predates it ignores it. */
	int rnr_retry_forever;
};

int mr_create_qp(struct mr_ctx *ctx, const struct mr_qp_attr *attr, struct mr_qp **out);
uint32_t mr_qp_num(const struct mr_qp *qp);
/* mr_qp_token is what a peer's connect must present with mr_qp_num (a
 * secret: ship it out of band with the number and the rkeys; a connect
 * without it is refused as if nothing listened there, docs/spec.md §7.3). */
uint64_t mr_qp_token(const struct mr_qp *qp);
const char *mr_qp_local(const struct mr_qp *qp); /* the engine's address: what a peer connects to */
int mr_qp_max_payload(const struct mr_qp *qp);
uint32_t mr_qp_sq_slots(const struct mr_qp *qp);
uint32_t mr_qp_cq_slots(const struct mr_qp *qp);
/* mr_qp_fd is the queue pair's doorbell end: poll it, after mr_qp_arm
 * said the completion queue is empty, to sleep for completions. */
int mr_qp_fd(const struct mr_qp *qp);

/* connect: to queue pair remote_qpn at peer (an IP address), presenting
 * its token (mr_qp_token on the peer's side; 0 only for a public
 * listener). mr_connect is mr_connect_token with token 0. A refusal is
 * MR_ERR_CONNECT, with the reason in mr_error. accept: wait for a peer
 * (timeout_ms <= 0: for ever) and write its address to peer. */
int mr_connect_token(struct mr_qp *qp, const char *peer, uint32_t remote_qpn, uint64_t token, int timeout_ms);
int mr_connect(struct mr_qp *qp, const char *peer, uint32_t remote_qpn, int timeout_ms);
int mr_accept(struct mr_qp *qp, int timeout_ms, char *peer, size_t peer_len);
int mr_destroy_qp(struct mr_qp *qp); /* frees qp whatever the daemon says */

/* Private data and refusals (rdma_cm's conn_param.private_data and
 * RDMA_CM_EVENT_REJECTED; docs/api.md, Listeners). */
struct mr_private {
	uint8_t len; /* at most MR_MAX_PRIVATE */
	uint8_t data[MR_MAX_PRIVATE];
};

/* Why a connect was refused (the REJECT's reason, docs/spec.md §7.5). */
enum mr_reject_reason {
	MR_REJECT_NONE = 0,        /* not refused: nothing answered, or another failure */
	MR_REJECT_NO_SERVICE = 1,  /* nothing listens there, or the wrong token */
	MR_REJECT_LIMIT = 2,       /* the listener's backlog or a limit was full */
	MR_REJECT_PARAMS = 3,      /* the peer refused the connection's parameters */
	MR_REJECT_APPLICATION = 4, /* the listening application rejected it: app_reason and private are its */
	MR_REJECT_OTHER = 5,       /* a reason this library does not know (name in reason_name) */
};

struct mr_rejection {
	int reason;          /* enum mr_reject_reason */
	char reason_name[16]; /* the daemon's name for it ("application" ...); "" if none */
	uint16_t app_reason; /* MR_REJECT_APPLICATION: mr_reject_request_with's app_reason */
	struct mr_private priv; /* MR_REJECT_APPLICATION: mr_reject_request_with's private data */
};

/* mr_connect_ex is mr_connect_token with private data for the listener
 * (priv, priv_len bytes, at most MR_MAX_PRIVATE; NULL for none). On
 * success accept_priv (if not NULL) receives the ACCEPT's private data;
 * on MR_ERR_CONNECT rej (if not NULL) says why (reason MR_REJECT_NONE when
 * nothing refused it: no answer). */
int mr_connect_ex(struct mr_qp *qp, const char *peer, uint32_t remote_qpn, uint64_t token, int timeout_ms,
		  const void *priv, size_t priv_len, struct mr_private *accept_priv, struct mr_rejection *rej);

/* mr_connect_nowait starts connecting qp as mr_connect_token does, and
 * returns MR_OK as soon as the daemon has sent the CONNECT, without
 * waiting for the peer (connect's nowait; docs/api.md, Queue pairs): for
 * an event loop, or two peers that each connect to the other's listener
 * before accepting the other's request. The outcome is the queue pair's
 * next connection event, an MR_WC_EVENT entry in its completion queue
 * (or in its shared CQ, naming it), in order with its completions:
 * MR_EVENT_CONNECTED; or the event mr_connect_token's failure reports,
 * MR_EVENT_FAILED (status MR_WC_REJECTED for any refusal, MR_WC_RESET
 * ...) or MR_EVENT_RETRY_EXCEEDED (nothing answered within timeout_ms).
 * The daemon sends CONNECT until timeout_ms has passed (<= 0: the
 * transport's one attempt, about half a second), so a listener whose
 * application accepts later is still reached. The queue pair must have
 * events (mr_qp_attr.events, or a shared CQ): MR_ERR_INVAL otherwise.
 * Requests posted meanwhile wait in the send queue for the connection.
 * mr_qp_state is MR_QP_CONNECTING from the call on and, on a queue pair's
 * own CQ, follows the event (a shared CQ's entries leave it alone: use
 * the event, or mr_query_qp). Any error means nothing was started: no
 * event follows, and the state is as it was (a daemon that predates
 * nowait waits instead, and then answers as mr_connect_token). The
 * ACCEPT's private data and a rejection's reason are not reported:
 * mr_connect_ex has them. */
int mr_connect_nowait(struct mr_qp *qp, const char *peer, uint32_t remote_qpn, uint64_t token, int timeout_ms);

/* Queue pair states, as mr_query_qp and mr_qp_state name them. */
enum mr_qp_state {
	MR_QP_IDLE = 0,       /* waiting for a connection to its number */
	MR_QP_CONNECTING = 1, /* connect sent, no answer yet */
	MR_QP_CONNECTED = 2,
	MR_QP_CLOSED = 3,     /* closed or failed: only mr_destroy_qp is left */
};

struct mr_qp_query {
	int state;       /* enum mr_qp_state */
	char peer[64];   /* the peer's address; "" while idle */
	/* Once closed, why: a completion status (enum mr_wc_status, e.g.
	 * MR_WC_FLUSHED for an orderly close by either side, MR_WC_RESET,
	 * MR_WC_RETRY_EXCEEDED, MR_WC_REJECTED), -1 if none or unknown, and
	 * the daemon's name for it ("flushed" ...; "" if none). */
	int reason;
	char reason_name[24];
};

/* mr_query_qp asks the daemon where the queue pair is (ibv_query_qp's
 * qp_state): a round trip on the control socket. */
int mr_query_qp(struct mr_qp *qp, struct mr_qp_query *out);
/* mr_qp_state is the state as this side knows it without asking: from
 * connect and accept and, with events, from the events taken so far. */
int mr_qp_state(const struct mr_qp *qp);

/* mr_post puts up to n work requests on the send queue and wakes the engine
 * if it sleeps. Returns how many it posted (> 0), or MR_ERR_SQ_FULL if none
 * fit, or another error; MR_ERR_INVAL, posting none, if any request has an
 * unknown flag or inline data longer than MR_MAX_INLINE or on a READ or
 * RECV, or a scatter-gather list of more than mr_limits.max_sge entries, on
 * a RECV or with inline data. Every request posted completes once, except an unsignaled one that
 * succeeds. */
int mr_post(struct mr_qp *qp, const struct mr_wr *wrs, int n);
/* mr_poll_cq takes up to n completions (and, with events, connection
 * events) without blocking: the count (0: none), or an error. */
int mr_poll_cq(struct mr_qp *qp, struct mr_wc *wcs, int n);
/* mr_wait_cq blocks until a completion (or event) is there (then takes up
 * to n), the timeout passes (MR_ERR_TIMEOUT; timeout_ms < 0: no limit) or
 * the daemon goes (MR_ERR_DAEMON_GONE; with events, after the
 * MR_EVENT_DAEMON_GONE entry). With events, once a terminal event has been
 * taken and nothing else is there it returns MR_ERR_CONN_CLOSED at once:
 * nothing more can complete. */
int mr_wait_cq(struct mr_qp *qp, struct mr_wc *wcs, int n, int timeout_ms);
/* mr_qp_arm is the first half of a wait for callers that poll mr_qp_fd
 * themselves: it sets the completion queue's need-wakeup flag and reports
 * 1 if completions are already there (do not sleep), 0 if the doorbell
 * will ring for the next one, or an error. mr_qp_disarm clears the flag
 * and drains the doorbell after the sleep. */
int mr_qp_arm(struct mr_qp *qp);
void mr_qp_disarm(struct mr_qp *qp);

/* Shared completion queues (docs/api.md, Shared completion queues): one
 * ring many queue pairs complete into (ibv_create_cq handed to several
 * ibv_create_qp). Each entry's qp_num says whose; the queue pairs'
 * connection events come through it as MR_WC_EVENT entries. It lives on
 * one engine, which is its only producer, and its queue pairs are placed
 * there. */
struct mr_cq_attr {
	uint32_t slots; /* a power of two, 0: the daemon's default (1024) */
	int engine;
	int spin_us;    /* mr_cq_wait's spin before it sleeps (0: 500; negative: never sleep) */
};

int mr_create_cq(struct mr_ctx *ctx, const struct mr_cq_attr *attr, struct mr_cq **out);
/* mr_destroy_cq frees the CQ; MR_ERR_BUSY, leaving it as it was, while a
 * queue pair still completes into it. */
int mr_destroy_cq(struct mr_cq *cq);
uint32_t mr_cq_num(const struct mr_cq *cq);
uint32_t mr_cq_slots(const struct mr_cq *cq);
/* mr_cq_fd is the CQ's doorbell end, for poll/epoll beside other
 * descriptors: readable once an entry arrives after mr_cq_arm reported 0.
 * Arming is one-shot (ibv_req_notify_cq): arm, sleep until readable,
 * mr_cq_disarm, then poll until empty before arming again. */
int mr_cq_fd(const struct mr_cq *cq);
/* mr_cq_arm reports 1 if entries are there already (do not sleep), 0 if
 * the doorbell will ring for the next one, or an error; mr_cq_disarm
 * clears the flag and drains the doorbell after the sleep. */
int mr_cq_arm(struct mr_cq *cq);
void mr_cq_disarm(struct mr_cq *cq);
/* mr_cq_poll takes up to n entries without blocking: the count, or an
 * error (MR_ERR_DAEMON_GONE once the daemon has gone and it is empty).
 * mr_cq_wait blocks like mr_wait_cq (timeout_ms < 0: no limit). */
int mr_cq_poll(struct mr_cq *cq, struct mr_wc *wcs, int n);
int mr_cq_wait(struct mr_cq *cq, struct mr_wc *wcs, int n, int timeout_ms);

/* Listeners (docs/api.md, Listeners): a service that takes many
 * connections, each accepted onto an idle queue pair of the session on
 * the listener's engine. mr_listen writes the service number, its token
 * (what a peer's mr_connect_token must present; 0 for a public listener,
 * which anyone who knows the number may connect to) and the engine's
 * address (local, at least 64 bytes). mr_get_request takes the
 * next connection request: timeout_ms > 0 waits that long, 0 the
 * daemon's 30 s, < 0 not at all; MR_ERR_CONNECT when none came. */
int mr_listen(struct mr_ctx *ctx, int engine, int backlog, int public_listener, uint32_t *service, uint64_t *token,
	      char *local, size_t local_len);
/* mr_listen_service makes a public listener (token 0) at service, a
 * number the application chose, instead of one the daemon draws: for
 * peers that learn only the address and a port number (libfabric's
 * service given to fi_getinfo), which connect with
 * mr_connect_token(qp, addr, service, 0, ...). The number must be in
 * 1..2^24-1 (MR_ERR_INVAL for 0, MR_ERR_BAD_REQUEST above) and carry the
 * engine's connection-id tag, because a CONNECT is handed to the engine
 * whose tag its number carries: on a daemon with one engine per
 * interface any number does; with several, the number's low bits (the
 * engine count rounded up to a power of two, less one, as a mask) must
 * equal the engine's index, or MR_ERR_BAD_REQUEST says which engine it
 * would reach (docs/api.md, Listeners). MR_ERR_BUSY while a queue pair or
 * listener of any session on the daemon holds it; the daemon draws its
 * own numbers from 65536 up, so a port number is taken only by another
 * chosen listener. local (at least 64 bytes, or NULL) receives the
 * engine's address; mr_unlisten closes it. */
int mr_listen_service(struct mr_ctx *ctx, int engine, int backlog, uint32_t service, char *local, size_t local_len);
int mr_get_request(struct mr_ctx *ctx, uint32_t service, int timeout_ms, uint64_t *request, char *peer,
		   size_t peer_len);
int mr_accept_request(struct mr_ctx *ctx, uint32_t service, uint64_t request, struct mr_qp *qp);
int mr_reject_request(struct mr_ctx *ctx, uint32_t service, uint64_t request);

/* A connection request as mr_get_request_ex hands it out. */
struct mr_conn_request {
	uint64_t request; /* for mr_accept_request_with / mr_reject_request_with */
	char peer[64];    /* the connecting side's address */
	struct mr_private priv; /* the CONNECT's private data (mr_connect_ex's priv) */
};

/* mr_get_request_ex is mr_get_request with the peer's private data. */
int mr_get_request_ex(struct mr_ctx *ctx, uint32_t service, int timeout_ms, struct mr_conn_request *out);
/* mr_accept_request_with accepts with private data for the ACCEPT (the
 * connecting side's mr_connect_ex returns it; NULL for none).
 * mr_reject_request_with refuses with the application's reason and private
 * data (the connecting side's mr_connect_ex fails with MR_ERR_CONNECT and
 * an MR_REJECT_APPLICATION rejection carrying both). priv_len is at most
 * MR_MAX_PRIVATE. */
int mr_accept_request_with(struct mr_ctx *ctx, uint32_t service, uint64_t request, struct mr_qp *qp,
			   const void *priv, size_t priv_len);
int mr_reject_request_with(struct mr_ctx *ctx, uint32_t service, uint64_t request, uint16_t app_reason,
			   const void *priv, size_t priv_len);
int mr_unlisten(struct mr_ctx *ctx, uint32_t service);

#ifdef __cplusplus
}
#endif

#endif
