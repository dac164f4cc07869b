/* session.c: the control connection (control/proto): one JSON object per
 * SOCK_SEQPACKET message, descriptors beside it as SCM_RIGHTS, requests
 * answered in order, one at a time. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "internal.h"

const char *mr_strerror(int err)
{
	switch (err) {
	case MR_OK: return "ok";
	case MR_ERR_BAD_REQUEST: return "bad request";
	case MR_ERR_VERSION: return "daemon speaks another protocol version";
	case MR_ERR_UNKNOWN_OP: return "unknown operation";
	case MR_ERR_LIMIT: return "session limit reached";
	case MR_ERR_NOT_FOUND: return "no such object";
	case MR_ERR_BAD_REGION: return "memory cannot be registered";
	case MR_ERR_BAD_STATE: return "queue pair in the wrong state";
	case MR_ERR_CONNECT: return "connect failed";
	case MR_ERR_DENIED: return "denied";
	case MR_ERR_BUSY: return "busy";
	case MR_ERR_INTERNAL: return "daemon error";
	case MR_ERR_DAEMON_GONE: return "daemon gone";
	case MR_ERR_PROTOCOL: return "reply refused";
	case MR_ERR_CORRUPT: return "ring corrupt";
	case MR_ERR_SQ_FULL: return "send queue full";
	case MR_ERR_TIMEOUT: return "timed out";
	case MR_ERR_INVAL: return "invalid argument";
	case MR_ERR_SYS: return "system call failed";
	case MR_ERR_CONN_CLOSED: return "connection closed";
	}
	return "unknown error";
}

const char *mr_wc_status_str(int s)
{
	static const char *names[] = {"success", "remote access error", "remote invalid request",
				      "receiver not ready, retries exceeded", "retries exceeded",
				      "local length error", "flushed", "reset by the peer", "rejected",
				      "local protection error", "bad work request", "not connected"};
	if (s >= 0 && s < (int)(sizeof names / sizeof names[0]))
		return names[s];
	return "unknown status";
}

const char *mr_event_str(int e)
{
	switch (e) {
	case MR_EVENT_CONNECTED: return "connected";
	case MR_EVENT_PEER_CLOSED: return "peer closed";
	case MR_EVENT_FAILED: return "failed";
	case MR_EVENT_RETRY_EXCEEDED: return "retry exceeded";
	case MR_EVENT_DAEMON_GONE: return "daemon gone";
	}
	return "unknown event";
}

void mr_seterr(struct mr_ctx *ctx, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
	va_end(ap);
}

static int code_err(const char *code)
{
	static const struct {
		const char *code;
		int err;
	} t[] = {
		{"bad_request", MR_ERR_BAD_REQUEST}, {"unsupported_version", MR_ERR_VERSION},
		{"unknown_op", MR_ERR_UNKNOWN_OP},   {"limit", MR_ERR_LIMIT},
		{"not_found", MR_ERR_NOT_FOUND},     {"bad_region", MR_ERR_BAD_REGION},
		{"bad_state", MR_ERR_BAD_STATE},     {"connect_failed", MR_ERR_CONNECT},
		{"denied", MR_ERR_DENIED},           {"busy", MR_ERR_BUSY},
	};
	for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
		if (strcmp(code, t[i].code) == 0)
			return t[i].err;
	return MR_ERR_INTERNAL;
}

static void close_fds(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* recv_reply reads one message and its descriptors (all of them, so none
 * leaks: those beyond max are closed). Returns the length, or an error. */
static int recv_reply(struct mr_ctx *ctx, int *fds, int max, int *nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * MR_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {ctx->buf, MR_MAX_MESSAGE + 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf.buf, .msg_controllen = sizeof cbuf.buf};
	*nfds = 0;
	ssize_t n;
	do {
		n = recvmsg(ctx->fd, &m, MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == ECONNRESET || errno == EPIPE) {
			atomic_store(&ctx->gone, 1);
			return MR_ERR_DAEMON_GONE;
		}
		mr_seterr(ctx, "recvmsg: %s", strerror(errno));
		return MR_ERR_SYS;
	}
	int got[MR_MAX_FDS * 2];
	int ngot = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k && ngot < (int)(sizeof got / sizeof got[0]); i++)
			memcpy(&got[ngot++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
	}
	if (n == 0) {
		close_fds(got, ngot);
		atomic_store(&ctx->gone, 1);
		return MR_ERR_DAEMON_GONE;
	}
	if ((m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || n > MR_MAX_MESSAGE) {
		close_fds(got, ngot);
		mr_seterr(ctx, "reply truncated");
		return MR_ERR_PROTOCOL;
	}
	for (int i = 0; i < ngot; i++) {
		if (i < max)
			fds[(*nfds)++] = got[i];
		else
			close(got[i]);
	}
	if (ngot > max) {
		close_fds(fds, *nfds);
		*nfds = 0;
		mr_seterr(ctx, "reply with %d descriptors, want at most %d", ngot, max);
		return MR_ERR_PROTOCOL;
	}
	return (int)n;
}

int mr_request(struct mr_ctx *ctx, const char *body, const int *fds, int nfds, struct mr_reply *r,
	       int *fds_out, int want_fds, int *got_fds)
{
	char msg[1024];
	int dummy;
	if (!got_fds)
		got_fds = &dummy;
	*got_fds = 0;
	pthread_mutex_lock(&ctx->mu);
	if (atomic_load(&ctx->gone)) {
		pthread_mutex_unlock(&ctx->mu);
		mr_seterr(ctx, "daemon gone");
		return MR_ERR_DAEMON_GONE;
	}
	uint64_t seq = ++ctx->seq;
	int len = snprintf(msg, sizeof msg, "{\"v\":%d,\"seq\":%llu,%s", MR_PROTO_VERSION, (unsigned long long)seq, body);
	if (len < 0 || (size_t)len >= sizeof msg) {
		pthread_mutex_unlock(&ctx->mu);
		return MR_ERR_INVAL;
	}
	union {
		char buf[CMSG_SPACE(sizeof(int) * MR_MAX_FDS)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {msg, (size_t)len};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (nfds > 0) {
		memset(cbuf.buf, 0, sizeof cbuf.buf);
		m.msg_control = cbuf.buf;
		m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t s;
	do {
		s = sendmsg(ctx->fd, &m, MSG_NOSIGNAL);
	} while (s < 0 && errno == EINTR);
	int err;
	if (s < 0) {
		if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN) {
			atomic_store(&ctx->gone, 1);
			err = MR_ERR_DAEMON_GONE;
		} else {
			mr_seterr(ctx, "sendmsg: %s", strerror(errno));
			err = MR_ERR_SYS;
		}
		goto out;
	}
	int fdsbuf[MR_MAX_FDS];
	int n = recv_reply(ctx, fdsbuf, want_fds < MR_MAX_FDS ? want_fds : MR_MAX_FDS, got_fds);
	if (n < 0) {
		err = n;
		if (err == MR_ERR_DAEMON_GONE)
			mr_seterr(ctx, "daemon gone");
		goto out;
	}
	if (mr_json_reply(ctx->buf, (size_t)n, r) < 0 || !r->has_code || !r->has_seq) {
		mr_seterr(ctx, "malformed reply of %d bytes", n);
		err = MR_ERR_PROTOCOL;
	} else if (r->v != MR_PROTO_VERSION) {
		mr_seterr(ctx, "reply of version %llu", (unsigned long long)r->v);
		err = MR_ERR_PROTOCOL;
	} else if (r->seq != seq) {
		mr_seterr(ctx, "reply to request %llu, want %llu", (unsigned long long)r->seq, (unsigned long long)seq);
		err = MR_ERR_PROTOCOL;
	} else if (strcmp(r->code, "ok") != 0) {
		mr_seterr(ctx, "%s: %s", r->code, r->error);
		err = code_err(r->code);
	} else {
		for (int i = 0; i < *got_fds; i++)
			fds_out[i] = fdsbuf[i];
		err = MR_OK;
		goto out;
	}
	close_fds(fdsbuf, *got_fds);
	*got_fds = 0;
out:
	pthread_mutex_unlock(&ctx->mu);
	return err;
}

int mr_open(const char *path, struct mr_ctx **out)
{
	*out = NULL;
	if (!path)
		path = MR_DEFAULT_SOCKET;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return MR_ERR_INVAL;
	strcpy(sa.sun_path, path);
	struct mr_ctx *ctx = calloc(1, sizeof *ctx);
	if (!ctx)
		return MR_ERR_SYS;
	ctx->buf = malloc(MR_MAX_MESSAGE + 1);
	ctx->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (!ctx->buf || ctx->fd < 0) {
		free(ctx->buf);
		if (ctx->fd >= 0)
			close(ctx->fd);
		free(ctx);
		return MR_ERR_SYS;
	}
	pthread_mutex_init(&ctx->mu, NULL);
	if (connect(ctx->fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		int e = errno;
		mr_close(ctx);
		errno = e;
		return e == ENOENT || e == ECONNREFUSED ? MR_ERR_DAEMON_GONE : MR_ERR_SYS;
	}
	struct mr_reply r;
	int err = mr_request(ctx, "\"op\":\"hello\"}", NULL, 0, &r, NULL, 0, NULL);
	if (err) {
		mr_close(ctx);
		return err;
	}
	ctx->limits.max_regions = (int)r.max_regions;
	ctx->limits.max_region_bytes = r.max_region_bytes;
	ctx->limits.max_qps = (int)r.max_qps;
	ctx->limits.session_id = r.session_id;
	ctx->limits.max_sge = r.max_sge > MR_MAX_SGE ? MR_MAX_SGE : (int)r.max_sge;
	*out = ctx;
	return MR_OK;
}

void mr_close(struct mr_ctx *ctx)
{
	if (!ctx)
		return;
	close(ctx->fd);
	pthread_mutex_destroy(&ctx->mu);
	free(ctx->buf);
	free(ctx);
}

const struct mr_limits *mr_ctx_limits(const struct mr_ctx *ctx) { return &ctx->limits; }
const char *mr_ctx_error(const struct mr_ctx *ctx) { return ctx->err; }
int mr_ctx_fd(const struct mr_ctx *ctx) { return ctx->fd; }

int mr_ctx_alive(struct mr_ctx *ctx)
{
	if (atomic_load(&ctx->gone))
		return MR_ERR_DAEMON_GONE;
	/* A request in flight reads the socket itself and sees the end. */
	if (pthread_mutex_trylock(&ctx->mu) != 0)
		return MR_OK;
	struct pollfd p = {ctx->fd, POLLIN, 0};
	if (poll(&p, 1, 0) == 1) {
		char c;
		ssize_t n = recv(ctx->fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
		if (n == 0 || (p.revents & (POLLHUP | POLLERR)))
			atomic_store(&ctx->gone, 1);
		else if (n > 0) {
			/* A stray message nobody asked for: drop it (and any
			 * descriptors, which recvmsg without a control buffer
			 * discards). */
			recv(ctx->fd, &c, 1, MSG_DONTWAIT);
		}
	}
	pthread_mutex_unlock(&ctx->mu);
	return atomic_load(&ctx->gone) ? MR_ERR_DAEMON_GONE : MR_OK;
}
