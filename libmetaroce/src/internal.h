/* internal.h: what the library's files share. */
#ifndef METAROCE_INTERNAL_H
#define METAROCE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "metaroce.h"

/* The control protocol's bounds (control/proto): a message's JSON is at
 * most MR_MAX_MESSAGE bytes and carries at most MR_MAX_FDS descriptors. */
#define MR_MAX_MESSAGE (128 << 10)
#define MR_MAX_FDS 8
#define MR_PROTO_VERSION 1

/* Slot sizes of send and completion queues (control/proto/wr.go). */
#define MR_WR_SIZE 64
#define MR_CQE_SIZE 32

/* A reply's fields this library reads. Absent fields stay zero. */
struct mr_reply {
	uint64_t v, seq;
	char code[32];
	char error[256];
	uint64_t key, qpn, max_payload, max_regions, max_qps, session_id, token;
	int64_t max_region_bytes;
	uint64_t regions, qps, sessions, bytes;
	uint64_t service, request; /* listen, get_request */
	uint64_t cq, max_sge;      /* create_cq, create_qp with a cq; hello */
	char local[64], peer[64];
	char state[16], reason[24]; /* query_qp */
	struct mr_private priv;     /* connect: the ACCEPT's; get_request: the CONNECT's */
	/* A refused connect's rejection object (has_rejection set). */
	int has_rejection;
	char rej_reason[16];
	uint64_t rej_app_reason;
	struct mr_private rej_priv;
	int has_v, has_seq, has_code;
};

/* mr_json_reply parses one reply object of n bytes. 0 or -1 (malformed). */
int mr_json_reply(const char *b, size_t n, struct mr_reply *r);

/* A ring as one side sees it (ring/layout.go): validated geometry copied
 * once, the three shared words, and this side's view. */
struct mr_ring {
	uint8_t *mem;
	size_t map_len;
	uint32_t slots, slot_size, mask;
	_Atomic uint32_t *prod_word, *cons_word, *flag_word;
	uint8_t *slot0;
	/* Producer view: reserved, prod, cached_cons. Consumer view: peeked,
	 * cons, cached_prod. Only one is used per ring. */
	uint32_t next, mine, cached;
	int err; /* sticky MR_ERR_CORRUPT */
};

/* mr_ring_attach maps the ring in memfd fd (kept open by the caller) after
 * checking the file and the header; min_slot is the smallest slot size the
 * caller's records need. */
int mr_ring_attach(int fd, uint32_t min_slot, struct mr_ring *r, char *why, size_t why_len);
void mr_ring_detach(struct mr_ring *r);
void mr_ring_producer(struct mr_ring *r);
void mr_ring_consumer(struct mr_ring *r);
int mr_ring_reserve(struct mr_ring *r, uint32_t n, uint32_t *first); /* got, or error */
void mr_ring_commit(struct mr_ring *r, uint32_t n);
int mr_ring_peek(struct mr_ring *r, uint32_t n, uint32_t *first); /* got, or error */
void mr_ring_release(struct mr_ring *r, uint32_t n);
int mr_ring_available(struct mr_ring *r);
uint8_t *mr_ring_slot(const struct mr_ring *r, uint32_t i);

struct mr_ctx {
	int fd;
	pthread_mutex_t mu; /* one request at a time */
	uint64_t seq;
	atomic_int gone;
	struct mr_limits limits;
	char err[320];
	char *buf; /* MR_MAX_MESSAGE + 1 bytes, for replies */
};

struct mr_mem {
	int fd;
	void *ptr;
	size_t size;
	int adopted; /* mr_mem_adopt: the application's pages, left mapped at free */
};

/* A shared completion queue (create_cq): its ring and the application's
 * end of its doorbell, which the engine rings while it is armed. */
struct mr_cq {
	struct mr_ctx *ctx;
	uint32_t num;
	int spin_us;
	int ring_fd, bell; /* ring_fd closed (-1) once mapped */
	struct mr_ring ring;
};

/* mr_parse_wcs copies up to n entries out of a completion ring into wcs
 * and judges them (events only if events is set); it returns how many,
 * or MR_ERR_PROTOCOL for a malformed first entry (a later one ends the
 * batch before it). note, if not NULL, sees every event. */
int mr_parse_wcs(struct mr_ctx *ctx, struct mr_ring *ring, int events, struct mr_wc *wcs, int n,
		 void (*note)(void *, uint8_t), void *arg);

struct mr_qp {
	struct mr_ctx *ctx;
	uint32_t num;
	uint64_t token;
	char local[64];
	int max_payload;
	int spin_us;
	int sq_fd, cq_fd, bell; /* the rings' memfds are closed (-1) once mapped */
	struct mr_ring sq, cq; /* cq unused (unmapped) on a shared CQ */
	struct mr_cq *shared;  /* the shared CQ it completes into, if any */
	/* Events (mr_qp_attr.events): the state they imply, whether a
	 * terminal one was taken, and whether MR_EVENT_DAEMON_GONE was. */
	int events;
	int state; /* enum mr_qp_state */
	int terminal, gone_noted;
};

/* mr_private_hex writes n bytes of p as a JSON field "private":"<hex>",
 * (with the comma) into out (cap >= 2 * MR_MAX_PRIVATE + 16), or "" for
 * none. -1 if n > MR_MAX_PRIVATE. */
int mr_private_hex(const void *p, size_t n, char *out, size_t cap);

/* mr_request sends req (a JSON object without v and seq, which it adds:
 * the text after "{") with fds, and reads the reply into r with up to
 * want_fds descriptors into fds_out (*nfds set). A refusal returns its
 * code's error with the sentence in ctx->err. */
int mr_request(struct mr_ctx *ctx, const char *body, const int *fds, int nfds, struct mr_reply *r,
	       int *fds_out, int want_fds, int *got_fds);

void mr_seterr(struct mr_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* mr_is_bell: fd is an AF_UNIX datagram socket, as a doorbell end is
 * (a daemon that sent anything else is not trusted with it). */
int mr_is_bell(int fd);

/* mr_defaultSpinUs is client.SpinBeforeSleep, a wait's spin when its
 * attributes say 0: a completion due within a round trip is picked up
 * without a wake-up. */
enum { mr_defaultSpinUs = 500 };

/* mr_bell_ring sends one byte on a doorbell end (never blocks). */
int mr_bell_ring(int fd);
void mr_bell_clear(int fd);

/* mr_waiter is a completion queue as mr_wait sees it: a queue pair's own
 * (qp.c) or a shared one (cq.c). */
struct mr_waiter {
	struct mr_ctx *ctx;
	int bell;	     /* the doorbell end to sleep on */
	int spin_us;	     /* how long to spin before sleeping; negative: never sleep */
	const int *terminal; /* when set and nonzero, nothing more can complete */
	void *obj;
	int (*poll)(void *obj, struct mr_wc *wcs, int n);
	int (*arm)(void *obj); /* 1: entries are there, 0: armed, < 0: an error */
	void (*disarm)(void *obj);
};

/* mr_wait is mr_wait_cq and mr_cq_wait (wait.c). */
int mr_wait(const struct mr_waiter *w, struct mr_wc *wcs, int n, int timeout_ms);

#endif
