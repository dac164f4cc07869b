/* json.c: the reader of the daemon's replies. A reply is one flat JSON
 * object (control/proto.Response); this reads the fields the library needs
 * and skips any other value, nested ones included, with every access
 * bounded by the message's length: a hostile daemon's bytes are input. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct lex {
	const char *p, *end;
	int depth;
};

/* depthLimit bounds nesting in skipped values (recursion depth). */
enum { depthLimit = 32 };

static void ws(struct lex *l)
{
	while (l->p < l->end && (*l->p == ' ' || *l->p == '\t' || *l->p == '\n' || *l->p == '\r'))
		l->p++;
}

/* str reads a string into out (truncated to cap-1 bytes, NUL-terminated;
 * out may be NULL to skip). Escapes are decoded; \u becomes '?' unless it
 * is ASCII. */
static int str(struct lex *l, char *out, size_t cap)
{
	size_t n = 0;
	if (l->p >= l->end || *l->p != '"')
		return -1;
	l->p++;
	while (l->p < l->end) {
		char c = *l->p++;
		if (c == '"') {
			if (out && cap)
				out[n < cap ? n : cap - 1] = 0;
			return 0;
		}
		if ((unsigned char)c < 0x20)
			return -1;
		if (c == '\\') {
			if (l->p >= l->end)
				return -1;
			c = *l->p++;
			switch (c) {
			case '"': case '\\': case '/': break;
			case 'b': c = '\b'; break;
			case 'f': c = '\f'; break;
			case 'n': c = '\n'; break;
			case 'r': c = '\r'; break;
			case 't': c = '\t'; break;
			case 'u': {
				unsigned v = 0;
				if (l->end - l->p < 4)
					return -1;
				for (int i = 0; i < 4; i++) {
					char h = *l->p++;
					v <<= 4;
					if (h >= '0' && h <= '9') v |= (unsigned)(h - '0');
					else if (h >= 'a' && h <= 'f') v |= (unsigned)(h - 'a' + 10);
					else if (h >= 'A' && h <= 'F') v |= (unsigned)(h - 'A' + 10);
					else return -1;
				}
				c = (v >= 0x20 && v < 0x7f) ? (char)v : '?';
				break;
			}
			default:
				return -1;
			}
		}
		if (out && n + 1 < cap)
			out[n++] = c;
	}
	return -1;
}

static int value(struct lex *l);

static int skip_container(struct lex *l, char open, char close)
{
	if (++l->depth > depthLimit)
		return -1;
	l->p++; /* open */
	ws(l);
	if (l->p < l->end && *l->p == close) {
		l->p++;
		l->depth--;
		return 0;
	}
	for (;;) {
		ws(l);
		if (open == '{') {
			if (str(l, NULL, 0) < 0)
				return -1;
			ws(l);
			if (l->p >= l->end || *l->p++ != ':')
				return -1;
			ws(l);
		}
		if (value(l) < 0)
			return -1;
		ws(l);
		if (l->p >= l->end)
			return -1;
		if (*l->p == ',') {
			l->p++;
			continue;
		}
		if (*l->p == close) {
			l->p++;
			l->depth--;
			return 0;
		}
		return -1;
	}
}

/* value skips one value. */
static int value(struct lex *l)
{
	if (l->p >= l->end)
		return -1;
	switch (*l->p) {
	case '"': return str(l, NULL, 0);
	case '{': return skip_container(l, '{', '}');
	case '[': return skip_container(l, '[', ']');
	default: {
		const char *s = l->p;
		while (l->p < l->end && strchr("+-.0123456789eEtrufalsn", *l->p))
			l->p++;
		return l->p > s ? 0 : -1;
	}
	}
}

/* number reads an integer value: nonnegative into *u, or (signed) *i. */
static int number(struct lex *l, uint64_t *u, int64_t *i)
{
	char tmp[32];
	size_t n = 0;
	while (l->p + n < l->end && n < sizeof tmp - 1 && strchr("+-0123456789", l->p[n]))
		n++;
	if (n == 0 || n == sizeof tmp - 1)
		return -1;
	memcpy(tmp, l->p, n);
	tmp[n] = 0;
	l->p += n;
	if (l->p < l->end && strchr(".eE", *l->p))
		return -1; /* no field we read is fractional */
	char *e;
	if (i) {
		*i = strtoll(tmp, &e, 10);
	} else {
		if (tmp[0] == '-')
			return -1;
		*u = strtoull(tmp, &e, 10);
	}
	return *e == 0 ? 0 : -1;
}

/* hexval is a hex digit's value, or -1. */
static int hexval(char h)
{
	if (h >= '0' && h <= '9')
		return h - '0';
	if (h >= 'a' && h <= 'f')
		return h - 'a' + 10;
	if (h >= 'A' && h <= 'F')
		return h - 'A' + 10;
	return -1;
}

/* private_data reads a hex string of at most MR_MAX_PRIVATE bytes into p:
 * longer, odd or not hex is malformed. The string is read into a buffer
 * one character longer than the longest valid one, so an overlong one
 * shows as too long rather than being cut to fit. */
static int private_data(struct lex *l, struct mr_private *p)
{
	char tmp[2 * MR_MAX_PRIVATE + 2];
	if (str(l, tmp, sizeof tmp) < 0)
		return -1;
	size_t n = strlen(tmp);
	if (n > 2 * MR_MAX_PRIVATE || n % 2)
		return -1;
	for (size_t i = 0; i < n; i += 2) {
		int hi = hexval(tmp[i]), lo = hexval(tmp[i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		p->data[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	p->len = (uint8_t)(n / 2);
	return 0;
}

/* rejection reads a refused connect's rejection object: reason,
 * app_reason, private; other keys are skipped. */
static int rejection(struct lex *l, struct mr_reply *r)
{
	if (l->p >= l->end || *l->p != '{')
		return value(l) < 0 ? -1 : 0; /* null or another kind: no rejection */
	l->p++;
	ws(l);
	r->has_rejection = 1;
	if (l->p < l->end && *l->p == '}') {
		l->p++;
		return 0;
	}
	for (;;) {
		char key[32];
		ws(l);
		if (str(l, key, sizeof key) < 0)
			return -1;
		ws(l);
		if (l->p >= l->end || *l->p++ != ':')
			return -1;
		ws(l);
		int bad;
		if (strcmp(key, "reason") == 0)
			bad = str(l, r->rej_reason, sizeof r->rej_reason);
		else if (strcmp(key, "app_reason") == 0)
			bad = number(l, &r->rej_app_reason, NULL) < 0 || r->rej_app_reason > UINT16_MAX ? -1 : 0;
		else if (strcmp(key, "private") == 0)
			bad = private_data(l, &r->rej_priv);
		else
			bad = value(l);
		if (bad < 0)
			return -1;
		ws(l);
		if (l->p >= l->end)
			return -1;
		if (*l->p == ',') {
			l->p++;
			continue;
		}
		if (*l->p == '}') {
			l->p++;
			return 0;
		}
		return -1;
	}
}

int mr_json_reply(const char *b, size_t n, struct mr_reply *r)
{
	struct lex l = {b, b + n, 0};
	memset(r, 0, sizeof *r);
	ws(&l);
	if (l.p >= l.end || *l.p != '{')
		return -1;
	l.p++;
	ws(&l);
	if (l.p < l.end && *l.p == '}')
		return 0;
	for (;;) {
		char key[32];
		ws(&l);
		if (str(&l, key, sizeof key) < 0)
			return -1;
		ws(&l);
		if (l.p >= l.end || *l.p++ != ':')
			return -1;
		ws(&l);
		static const struct {
			const char *name;
			size_t off;
		} nums[] = {
			{"v", offsetof(struct mr_reply, v)},
			{"seq", offsetof(struct mr_reply, seq)},
			{"key", offsetof(struct mr_reply, key)},
			{"qpn", offsetof(struct mr_reply, qpn)},
			{"max_payload", offsetof(struct mr_reply, max_payload)},
			{"max_regions", offsetof(struct mr_reply, max_regions)},
			{"max_qps", offsetof(struct mr_reply, max_qps)},
			{"session_id", offsetof(struct mr_reply, session_id)},
			{"token", offsetof(struct mr_reply, token)},
			{"regions", offsetof(struct mr_reply, regions)},
			{"qps", offsetof(struct mr_reply, qps)},
			{"sessions", offsetof(struct mr_reply, sessions)},
			{"bytes", offsetof(struct mr_reply, bytes)},
			{"service", offsetof(struct mr_reply, service)},
			{"request", offsetof(struct mr_reply, request)},
			{"cq", offsetof(struct mr_reply, cq)},
			{"max_sge", offsetof(struct mr_reply, max_sge)},
		};
		int done = 0;
		for (size_t k = 0; k < sizeof nums / sizeof nums[0]; k++) {
			if (strcmp(key, nums[k].name) == 0) {
				if (number(&l, (uint64_t *)((char *)r + nums[k].off), NULL) < 0)
					return -1;
				if (k == 0)
					r->has_v = 1;
				if (k == 1)
					r->has_seq = 1;
				done = 1;
				break;
			}
		}
		if (done) {
		} else if (strcmp(key, "max_region_bytes") == 0) {
			if (number(&l, NULL, &r->max_region_bytes) < 0)
				return -1;
		} else if (strcmp(key, "code") == 0) {
			if (str(&l, r->code, sizeof r->code) < 0)
				return -1;
			r->has_code = 1;
		} else if (strcmp(key, "error") == 0) {
			if (str(&l, r->error, sizeof r->error) < 0)
				return -1;
		} else if (strcmp(key, "local") == 0) {
			if (str(&l, r->local, sizeof r->local) < 0)
				return -1;
		} else if (strcmp(key, "peer") == 0) {
			if (str(&l, r->peer, sizeof r->peer) < 0)
				return -1;
		} else if (strcmp(key, "state") == 0) {
			if (str(&l, r->state, sizeof r->state) < 0)
				return -1;
		} else if (strcmp(key, "reason") == 0) {
			if (str(&l, r->reason, sizeof r->reason) < 0)
				return -1;
		} else if (strcmp(key, "private") == 0) {
			if (private_data(&l, &r->priv) < 0)
				return -1;
		} else if (strcmp(key, "rejection") == 0) {
			if (rejection(&l, r) < 0)
				return -1;
		} else if (value(&l) < 0) {
			return -1;
		}
		ws(&l);
		if (l.p >= l.end)
			return -1;
		if (*l.p == ',') {
			l.p++;
			continue;
		}
		if (*l.p == '}') {
			l.p++;
			ws(&l);
			return l.p == l.end ? 0 : -1;
		}
		return -1;
	}
}

int mr_private_hex(const void *p, size_t n, char *out, size_t cap)
{
	static const char digits[] = "0123456789abcdef";
	if (cap == 0)
		return -1;
	out[0] = 0;
	if (n > MR_MAX_PRIVATE || cap < 2 * n + 16)
		return -1;
	if (n == 0)
		return 0;
	const uint8_t *b = p;
	size_t k = (size_t)snprintf(out, cap, ",\"private\":\"");
	for (size_t i = 0; i < n; i++) {
		out[k++] = digits[b[i] >> 4];
		out[k++] = digits[b[i] & 15];
	}
	out[k++] = '"';
	out[k] = 0;
	return 0;
}
