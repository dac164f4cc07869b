/* av.c: address vectors. An entry is a peer endpoint's name (its engine's
 * address, its listener's service and that listener's token: 0 for an
 * endpoint that listens publicly at a service its application chose);
 * fi_addr_t is the entry's index, for FI_AV_TABLE and FI_AV_MAP alike. The
 * vector grows as needed. fi_av_remove empties an entry for good (its
 * index is not given out again, so an fi_addr_t an application still
 * holds can never name another peer) and ends the outbound connection
 * every bound endpoint had to it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "prov.h"

/* MRP_AV_MAX bounds a vector: far more peers than queue pairs a daemon
 * gives one session. */
#define MRP_AV_MAX (1u << 20)
/* MRP_SERVICE_MAX: services are 24-bit numbers (docs/api.md). */
#define MRP_SERVICE_MAX 0xFFFFFFu

/* numeric_ip says whether s is an IPv4 or IPv6 address in text. */
static int numeric_ip(const char *s)
{
	unsigned char b[16];
	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

int mrp_name_parse(const char *node, const char *service, struct mrp_name *out)
{
	memset(out, 0, sizeof *out);
	if (service) {
		char *end;
		errno = 0;
		unsigned long v = strtoul(service, &end, 10);
		if (errno || end == service || *end || v == 0 || v > MRP_SERVICE_MAX)
			return -FI_EINVAL;
		out->service = (uint32_t)v;
	}
	if (node) {
		struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM}, *res = NULL;
		if (getaddrinfo(node, NULL, &hints, &res) != 0 || !res)
			return -FI_EINVAL;
		const void *a = res->ai_family == AF_INET ? (const void *)&((struct sockaddr_in *)res->ai_addr)->sin_addr
							 : (const void *)&((struct sockaddr_in6 *)res->ai_addr)->sin6_addr;
		const char *ok = inet_ntop(res->ai_family, a, out->ip, sizeof out->ip);
		freeaddrinfo(res);
		if (!ok)
			return -FI_EINVAL;
	}
	return 0;
}

size_t mrp_addrlen(int fmt) { return fmt == FI_SOCKADDR_IN ? sizeof(struct sockaddr_in) : sizeof(struct mrp_name); }

int mrp_name_fits(int fmt, const struct mrp_name *n)
{
	if (fmt != FI_SOCKADDR_IN)
		return 1;
	unsigned char b[4];
	return n->service <= 0xFFFF && (!n->ip[0] || inet_pton(AF_INET, n->ip, b) == 1);
}

int mrp_addr_to_name(int fmt, const void *addr, struct mrp_name *out)
{
	memset(out, 0, sizeof *out);
	if (fmt != FI_SOCKADDR_IN) {
		memcpy(out, addr, sizeof *out); /* checked by whoever uses it */
		return 0;
	}
	struct sockaddr_in sin;
	memcpy(&sin, addr, sizeof sin);
	if (sin.sin_family != AF_INET)
		return -FI_EINVAL;
	out->service = ntohs(sin.sin_port);
	if (sin.sin_addr.s_addr != htonl(INADDR_ANY))
		inet_ntop(AF_INET, &sin.sin_addr, out->ip, sizeof out->ip);
	return 0;
}

void mrp_name_to_addr(int fmt, const struct mrp_name *n, void *out)
{
	if (fmt != FI_SOCKADDR_IN) {
		memcpy(out, n, sizeof *n);
		return;
	}
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons((uint16_t)n->service)};
	if (n->ip[0] && inet_pton(AF_INET, n->ip, &sin.sin_addr) != 1)
		sin.sin_addr.s_addr = htonl(INADDR_ANY);
	memcpy(out, &sin, sizeof sin);
}

/* name_ok checks an entry an application hands in: the bytes come from
 * anywhere (a peer's message, a file), so everything is checked before
 * the name is used to connect. */
static int name_ok(struct mrp_name *nm)
{
	nm->ip[sizeof nm->ip - 1] = 0;
	memset(nm->pad, 0, sizeof nm->pad);
	nm->pad2 = 0;
	return nm->service != 0 && nm->service <= MRP_SERVICE_MAX && numeric_ip(nm->ip);
}

static int av_add(struct mrp_av *av, const struct mrp_name *nm, fi_addr_t *out)
{
	if (av->n >= MRP_AV_MAX)
		return -FI_ENOSPC;
	if (av->n == av->cap) {
		size_t cap = av->cap ? av->cap * 2 : 64;
		struct mrp_name *p = realloc(av->peers, cap * sizeof *p);
		if (!p)
			return -FI_ENOMEM;
		av->peers = p;
		av->cap = cap;
	}
	av->peers[av->n] = *nm;
	*out = (fi_addr_t)av->n++;
	return 0;
}

#define MRP_AV_FLAGS ((uint64_t)(FI_MORE | FI_SYNC_ERR))

/* insert_one adds entry i of an insert call, reporting its fate where the
 * application asked (fi_addr, and with FI_SYNC_ERR the int array in
 * context); 1 if it was added. */
static int insert_one(struct mrp_av *av, struct mrp_name nm, size_t i, fi_addr_t *fi_addr, uint64_t flags,
		      void *context)
{
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	int e = name_ok(&nm) ? av_add(av, &nm, &a) : -FI_EINVAL;
	if (fi_addr)
		fi_addr[i] = a;
	if ((flags & FI_SYNC_ERR) && context)
		((int *)context)[i] = -e;
	else if (e && av->events) {
		/* An event vector reports each refused address (fi_av(3)). */
		struct fi_eq_err_entry err = {.fid = &av->av.fid, .context = context, .data = i, .err = -e};
		mrp_eq_report_err(av->eq, &err);
	}
	return e == 0;
}

/* finish ends an insert call: with FI_EVENT the count goes to the event
 * queue as FI_AV_COMPLETE and the call answers 0 (every insert here is
 * complete when the call returns, so the event follows at once). */
static int finish(struct mrp_av *av, int done, void *context)
{
	if (!av->events)
		return done;
	struct fi_eq_entry ev = {.fid = &av->av.fid, .context = context, .data = (uint64_t)done};
	int e = mrp_eq_report(av->eq, FI_AV_COMPLETE, &ev, sizeof ev);
	return e ? e : 0;
}

/* check_call refuses what no insert call may do. */
static int check_call(const struct mrp_av *av, uint64_t flags)
{
	if (flags & ~MRP_AV_FLAGS)
		return -FI_EBADFLAGS;
	if (av->events && !av->eq)
		return -FI_ENOEQ; /* FI_EVENT without a bound queue */
	return 0;
}


static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	int e = check_call(av, flags);
	if (e)
		return e;
	if (count && !addr)
		return -FI_EINVAL;
	const uint8_t *p = addr;
	size_t stride = mrp_addrlen(av->fmt);
	int done = 0;
	for (size_t i = 0; i < count; i++) {
		struct mrp_name nm;
		/* The application's bytes, perhaps unaligned; one of the wrong
		 * family becomes a name insert_one refuses. */
		if (mrp_addr_to_name(av->fmt, p + i * stride, &nm))
			memset(&nm, 0, sizeof nm);
		done += insert_one(av, nm, i, fi_addr, flags, context);
	}
	return finish(av, done, context);
}

static int av_insertsvc(struct fid_av *fav, const char *node, const char *service, fi_addr_t *fi_addr,
			uint64_t flags, void *context)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	int e = check_call(av, flags);
	if (e)
		return e;
	if (!node || !service)
		return -FI_EINVAL;
	struct mrp_name nm;
	if (mrp_name_parse(node, service, &nm) || !mrp_name_fits(av->fmt, &nm))
		memset(&nm, 0, sizeof nm); /* refused by insert_one, which says so */
	return finish(av, insert_one(av, nm, 0, fi_addr, flags, context), context);
}

/* av_insertsym: nodecnt addresses from node up (the address as a number,
 * plus one each), each with svccnt services from service up (fi_av(3)). */
static int av_insertsym(struct fid_av *fav, const char *node, size_t nodecnt, const char *service, size_t svccnt,
			fi_addr_t *fi_addr, uint64_t flags, void *context)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	int e = check_call(av, flags);
	if (e)
		return e;
	struct mrp_name base;
	if (!node || !service || !nodecnt || !svccnt || mrp_name_parse(node, service, &base))
		return -FI_EINVAL;
	if (svccnt > MRP_SERVICE_MAX || base.service + svccnt - 1 > MRP_SERVICE_MAX || nodecnt > MRP_AV_MAX)
		return -FI_EINVAL;
	unsigned char b[16];
	int fam = inet_pton(AF_INET, base.ip, b) == 1 ? AF_INET : AF_INET6;
	size_t len = fam == AF_INET ? 4 : 16;
	if (fam == AF_INET6 && inet_pton(AF_INET6, base.ip, b) != 1)
		return -FI_EINVAL;
	int done = 0;
	size_t i = 0;
	for (size_t n = 0; n < nodecnt; n++) {
		unsigned char a[16];
		memcpy(a, b, len);
		/* a = b + n, big-endian; past the last address it wraps, and
		 * such an entry is refused below like any bad one. */
		unsigned carry = 0;
		size_t add = n;
		for (size_t k = len; k-- > 0;) {
			unsigned v = a[k] + (unsigned)(add & 0xff) + carry;
			a[k] = (unsigned char)v;
			carry = v >> 8;
			add >>= 8;
		}
		for (size_t s = 0; s < svccnt; s++, i++) {
			struct mrp_name nm = base;
			nm.service = base.service + (uint32_t)s;
			int ok = carry == 0 && add == 0 && inet_ntop(fam, a, nm.ip, sizeof nm.ip) != NULL;
			if (!ok)
				nm.service = 0; /* refused by name_ok */
			done += insert_one(av, nm, i, fi_addr, flags, context);
		}
	}
	return finish(av, done, context);
}

int mrp_av_live(const struct mrp_av *av, fi_addr_t a) { return a < (fi_addr_t)av->n && av->peers[a].service != 0; }

static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	if (flags)
		return -FI_EBADFLAGS;
	if (count && !fi_addr)
		return -FI_EINVAL;
	/* All or nothing: check every address before removing any. */
	for (size_t i = 0; i < count; i++)
		if (!mrp_av_live(av, fi_addr[i]))
			return -FI_EINVAL;
	for (size_t i = 0; i < count; i++) {
		fi_addr_t a = fi_addr[i];
		if (!mrp_av_live(av, a))
			continue; /* listed twice */
		memset(&av->peers[a], 0, sizeof av->peers[a]);
		for (size_t k = 0; k < av->neps; k++)
			mrp_ep_forget(av->eps[k], a);
	}
	return 0;
}

static int av_lookup(struct fid_av *fav, fi_addr_t a, void *addr, size_t *len)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	if (!len || (*len && !addr))
		return -FI_EINVAL;
	if (!mrp_av_live(av, a))
		return -FI_ENOENT;
	uint8_t b[MRP_ADDR_MAX];
	size_t alen = mrp_addrlen(av->fmt);
	mrp_name_to_addr(av->fmt, &av->peers[a], b);
	memcpy(addr, b, *len < alen ? *len : alen);
	*len = alen;
	return 0;
}

static const char *av_straddr(struct fid_av *fav, const void *addr, char *buf, size_t *len)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	if (!addr || !buf || !len || !*len)
		return NULL;
	struct mrp_name nm;
	if (mrp_addr_to_name(av->fmt, addr, &nm))
		memset(&nm, 0, sizeof nm);
	nm.ip[sizeof nm.ip - 1] = 0;
	int n = av->fmt == FI_SOCKADDR_IN ? snprintf(buf, *len, "fi_sockaddr_in://%s:%u", nm.ip[0] ? nm.ip : "0.0.0.0", nm.service)
					  : snprintf(buf, *len, "metaroce://%.45s/%u", nm.ip, nm.service);
	*len = (size_t)n + 1;
	return buf;
}

void mrp_av_bind(struct mrp_av *av, struct mrp_ep *ep)
{
	for (size_t i = 0; i < av->neps; i++)
		if (av->eps[i] == ep)
			return;
	if (av->neps == av->capeps) {
		size_t cap = av->capeps ? av->capeps * 2 : 4;
		struct mrp_ep **p = realloc(av->eps, cap * sizeof *p);
		if (!p)
			return; /* then fi_av_remove cannot reach this endpoint's connections; they stay until it closes */
		av->eps = p;
		av->capeps = cap;
	}
	av->eps[av->neps++] = ep;
}

void mrp_av_unbind(struct mrp_av *av, struct mrp_ep *ep)
{
	for (size_t i = 0; i < av->neps; i++)
		if (av->eps[i] == ep) {
			av->eps[i] = av->eps[--av->neps];
			return;
		}
}

static int av_close(struct fid *fid)
{
	struct mrp_av *av = (struct mrp_av *)fid;
	if (av->neps)
		return -FI_EBUSY; /* an open endpoint still uses it */
	free(av->eps);
	free(av->peers);
	free(av);
	return 0;
}

/* av_bind takes the event queue of a vector opened with FI_EVENT. */
static int av_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct mrp_av *av = (struct mrp_av *)fid;
	if (flags || !bfid || bfid->fclass != FI_CLASS_EQ)
		return -FI_EINVAL;
	if (!av->events)
		return -FI_EINVAL; /* only an FI_EVENT vector reports to a queue */
	av->eq = (struct fid_eq *)bfid;
	return 0;
}

static struct fi_ops av_fi_ops = {.size = sizeof(struct fi_ops), .close = av_close, .bind = av_bind,
				  .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_av av_ops = {.size = sizeof(struct fi_ops_av), .insert = av_insert,
				  .insertsvc = av_insertsvc, .insertsym = av_insertsym, .remove = av_remove,
				  .lookup = av_lookup, .straddr = av_straddr, .av_set = no_av_set};

int mrp_av_open(struct fid_domain *dom, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	if (!attr || !out)
		return -FI_EINVAL;
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE && attr->type != FI_AV_MAP)
		return -FI_ENOSYS;
	if (attr->flags & FI_READ)
		return -FI_ENOSYS; /* no vectors shared between processes */
	if (attr->flags & ~(uint64_t)(FI_EVENT | FI_SYMMETRIC))
		return -FI_EINVAL;
	if (attr->name)
		return -FI_ENOSYS; /* a named vector is one shared between processes */
	struct mrp_av *av = calloc(1, sizeof *av);
	if (!av)
		return -FI_ENOMEM;
	av->events = (attr->flags & FI_EVENT) != 0;
	av->fmt = ((struct mrp_domain *)dom)->addr_format;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	*out = &av->av;
	return 0;
}
