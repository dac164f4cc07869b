/* listen.c: listeners (docs/api.md, Listeners), rdma_listen's shape. A
 * listener is a service number on one engine; each connection a peer makes
 * to it waits in the daemon as a request until get_request hands it out
 * and accept_request binds it to an idle queue pair of this session on the
 * same engine (or reject_request closes it). Every call is one control
 * request; get_request with a negative timeout looks without waiting, so
 * an event loop can ask between its other work. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* addr_ok: what the daemon names a peer or an engine by, an IP address in
 * text (refused otherwise, as qp.c does for its replies). */
static int addr_ok(const char *s, size_t cap)
{
	size_t n = strnlen(s, cap);
	if (n == 0 || n == cap)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!strchr("0123456789abcdefABCDEF:.%", s[i]))
			return 0;
	return 1;
}

int mr_listen(struct mr_ctx *ctx, int engine, int backlog, int public_listener, uint32_t *service, uint64_t *token,
	      char *local, size_t local_len)
{
	if (engine < 0 || backlog < 0 || !service || !token)
		return MR_ERR_INVAL;
	char body[112];
	snprintf(body, sizeof body, "\"op\":\"listen\",\"engine\":%d,\"backlog\":%d,\"public\":%s}", engine, backlog,
		 public_listener ? "true" : "false");
	struct mr_reply r;
	int err = mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err)
		return err;
	if (r.service == 0 || r.service > UINT32_MAX || !addr_ok(r.local, sizeof r.local)) {
		mr_seterr(ctx, "listen: service %llu, local %.40s", (unsigned long long)r.service, r.local);
		return MR_ERR_PROTOCOL;
	}
	if (!public_listener && r.token == 0) {
		mr_seterr(ctx, "listen: no token for a private listener");
		return MR_ERR_PROTOCOL;
	}
	*service = (uint32_t)r.service;
	*token = r.token;
	if (local && local_len)
		snprintf(local, local_len, "%s", r.local);
	return MR_OK;
}

int mr_listen_service(struct mr_ctx *ctx, int engine, int backlog, uint32_t service, char *local, size_t local_len)
{
	if (engine < 0 || backlog < 0 || service == 0)
		return MR_ERR_INVAL;
	char body[144];
	snprintf(body, sizeof body, "\"op\":\"listen\",\"engine\":%d,\"backlog\":%d,\"public\":true,\"service\":%u}",
		 engine, backlog, service);
	struct mr_reply r;
	int err = mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err)
		return err;
	if (r.service == service && r.token == 0 && addr_ok(r.local, sizeof r.local)) {
		if (local && local_len)
			snprintf(local, local_len, "%s", r.local);
		return MR_OK;
	}
	/* Not what was asked (a daemon that predates chosen services draws
	 * a number, which no peer knows): close whatever it made. */
	char why[sizeof ctx->err];
	snprintf(why, sizeof why, "listen: asked for service %u, the daemon answered service %llu, token %llu, local %.40s",
		 service, (unsigned long long)r.service, (unsigned long long)r.token, r.local);
	if (r.service != 0 && r.service <= UINT32_MAX)
		mr_unlisten(ctx, (uint32_t)r.service);
	mr_seterr(ctx, "%s", why);
	return MR_ERR_PROTOCOL;
}

int mr_get_request_ex(struct mr_ctx *ctx, uint32_t service, int timeout_ms, struct mr_conn_request *out)
{
	if (!out)
		return MR_ERR_INVAL;
	memset(out, 0, sizeof *out);
	char body[112];
	snprintf(body, sizeof body, "\"op\":\"get_request\",\"service\":%u,\"timeout_ms\":%d}", service,
		 timeout_ms < 0 ? -1 : timeout_ms);
	struct mr_reply r;
	int err = mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err)
		return err;
	if (r.request == 0 || !addr_ok(r.peer, sizeof r.peer)) {
		mr_seterr(ctx, "get_request: request %llu, peer %.40s", (unsigned long long)r.request, r.peer);
		return MR_ERR_PROTOCOL;
	}
	out->request = r.request;
	memcpy(out->peer, r.peer, sizeof out->peer);
	out->priv = r.priv; /* the reader bounded it to MR_MAX_PRIVATE */
	return MR_OK;
}

int mr_get_request(struct mr_ctx *ctx, uint32_t service, int timeout_ms, uint64_t *request, char *peer,
		   size_t peer_len)
{
	if (!request)
		return MR_ERR_INVAL;
	struct mr_conn_request cr;
	int err = mr_get_request_ex(ctx, service, timeout_ms, &cr);
	if (err)
		return err;
	*request = cr.request;
	if (peer && peer_len)
		snprintf(peer, peer_len, "%s", cr.peer);
	return MR_OK;
}

int mr_accept_request_with(struct mr_ctx *ctx, uint32_t service, uint64_t request, struct mr_qp *qp,
			   const void *priv, size_t priv_len)
{
	char hex[2 * MR_MAX_PRIVATE + 16];
	if (!qp || (priv_len && !priv) || mr_private_hex(priv, priv_len, hex, sizeof hex) < 0)
		return MR_ERR_INVAL;
	char body[320];
	snprintf(body, sizeof body, "\"op\":\"accept_request\",\"service\":%u,\"request\":%llu,\"qpn\":%u%s}",
		 service, (unsigned long long)request, qp->num, hex);
	struct mr_reply r;
	int err = mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
	if (err == MR_OK)
		qp->state = MR_QP_CONNECTED;
	return err;
}

int mr_accept_request(struct mr_ctx *ctx, uint32_t service, uint64_t request, struct mr_qp *qp)
{
	return mr_accept_request_with(ctx, service, request, qp, NULL, 0);
}

int mr_reject_request_with(struct mr_ctx *ctx, uint32_t service, uint64_t request, uint16_t app_reason,
			   const void *priv, size_t priv_len)
{
	char hex[2 * MR_MAX_PRIVATE + 16];
	if ((priv_len && !priv) || mr_private_hex(priv, priv_len, hex, sizeof hex) < 0)
		return MR_ERR_INVAL;
	char body[320];
	snprintf(body, sizeof body,
		 "\"op\":\"reject_request\",\"service\":%u,\"request\":%llu,\"app_reason\":%u%s}", service,
		 (unsigned long long)request, (unsigned)app_reason, hex);
	struct mr_reply r;
	return mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
}

int mr_reject_request(struct mr_ctx *ctx, uint32_t service, uint64_t request)
{
	return mr_reject_request_with(ctx, service, request, 0, NULL, 0);
}

int mr_unlisten(struct mr_ctx *ctx, uint32_t service)
{
	char body[80];
	snprintf(body, sizeof body, "\"op\":\"unlisten\",\"service\":%u}", service);
	struct mr_reply r;
	return mr_request(ctx, body, NULL, 0, &r, NULL, 0, NULL);
}
