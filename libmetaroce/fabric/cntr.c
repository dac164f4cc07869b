/* cntr.c: completion counters (fi_cntr_open, FI_CNTR_EVENTS_COMP).
 *
 * A counter is two numbers, successes and errors, that the bound
 * endpoints' completions add to: mrp_count is called wherever an
 * operation completes (ep.c for sends and RMA, msg.c for receives,
 * atomic.c for atomics), successful or not, whether a CQ entry is written
 * or not (FI_SELECTIVE_COMPLETION leaves counting alone). What a counter
 * counts is chosen at fi_ep_bind: FI_SEND (FI_TRANSMIT), FI_RECV,
 * FI_READ (RMA reads, fetching and comparing atomics), FI_WRITE (RMA
 * writes, base atomics). FI_REMOTE_READ and FI_REMOTE_WRITE are refused:
 * a peer's WRITE and READ are placed by the daemon with no event here
 * (FI_RMA_EVENT is not offered), so such a counter could never be right.
 *
 * Progress is manual (FI_PROGRESS_MANUAL): fi_cntr_read, fi_cntr_readerr
 * and fi_cntr_wait drive the bound endpoints, as reading a CQ does. The
 * threading model is FI_THREAD_DOMAIN, so the numbers are plain integers
 * that only the domain's one thread touches.
 *
 * Wait objects: FI_WAIT_NONE and FI_WAIT_YIELD make fi_cntr_wait spin on
 * progress, yielding the core; FI_WAIT_UNSPEC spins for a round trip's
 * worth and then sleeps in poll(2) on the bound endpoints' shared CQ
 * doorbells, armed as fi_trywait arms them, for at most the time to the
 * next listener poll (a new peer's connection rings no doorbell). No
 * descriptor is handed out (FI_GETWAIT: -FI_ENODATA): fi_trywait takes
 * CQs only, and a descriptor the application sleeps on without it would
 * never wake. */
#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "prov.h"

/* The bound endpoints' doorbells are slept on after this much spinning:
 * about one round trip through the daemons, as fi_cq_sread does. */
#define CNTR_SPIN_US 200

struct mrp_cntr {
	struct fid_cntr cntr;
	struct mrp_domain *dom;
	uint64_t value, err;
	uint64_t last; /* value at the previous fi_cntr_read: unchanged, the reader yields */
	int wait;      /* FI_WAIT_NONE, FI_WAIT_YIELD or FI_WAIT_UNSPEC */
	/* The endpoints bound to it, whose progress reading and waiting
	 * drive; pfd is poll(2)'s array for them, sized with eps. */
	struct mrp_ep **eps;
	struct pollfd *pfd;
	size_t neps, cap;
};

static void progress_all(struct mrp_cntr *c)
{
	for (size_t i = 0; i < c->neps; i++)
		mrp_progress(c->eps[i]);
}

static uint64_t cntr_read(struct fid_cntr *f)
{
	struct mrp_cntr *c = (struct mrp_cntr *)f;
	progress_all(c);
	/* Applications spin on fi_cntr_read (fabtests' counter wait is such
	 * a loop). A spinner that never yields keeps the daemon's engine off
	 * a shared core: when nothing moved, give the core away, as an empty
	 * CQ read does. */
	if (c->value == c->last)
		sched_yield();
	c->last = c->value;
	return c->value;
}

static uint64_t cntr_readerr(struct fid_cntr *f)
{
	struct mrp_cntr *c = (struct mrp_cntr *)f;
	progress_all(c);
	return c->err;
}

static int cntr_add(struct fid_cntr *f, uint64_t v)
{
	((struct mrp_cntr *)f)->value += v;
	return 0;
}

static int cntr_set(struct fid_cntr *f, uint64_t v)
{
	((struct mrp_cntr *)f)->value = v;
	return 0;
}

static int cntr_adderr(struct fid_cntr *f, uint64_t v)
{
	((struct mrp_cntr *)f)->err += v;
	return 0;
}

static int cntr_seterr(struct fid_cntr *f, uint64_t v)
{
	((struct mrp_cntr *)f)->err = v;
	return 0;
}

/* sleep_once arms every bound endpoint and sleeps on their doorbells
 * until one rings or ms passes; it returns at once if an endpoint has
 * something to do already (its arm says so). */
static void sleep_once(struct mrp_cntr *c, int ms)
{
	size_t n = 0;
	for (size_t i = 0; i < c->neps; i++) {
		struct mrp_ep *ep = c->eps[i];
		if (!ep->enabled || ep->failed || !ep->dcq)
			continue;
		if (mrp_arm(ep) != 0)
			return; /* completions waiting, or the listener is due: progress first */
		int64_t due = mrp_listen_due_us(ep);
		int due_ms = (int)((due + 999) / 1000);
		if (ms < 0 || due_ms < ms)
			ms = due_ms;
		c->pfd[n++] = (struct pollfd){.fd = mr_cq_fd(ep->dcq), .events = POLLIN};
	}
	/* Never longer than a listener poll's gap: nothing is missed for
	 * good even if no endpoint could be armed. */
	if (ms < 0 || ms > MRP_LISTEN_MAX_US / 1000)
		ms = MRP_LISTEN_MAX_US / 1000;
	if (poll(c->pfd, (nfds_t)n, ms) < 0) {
		/* EINTR: the caller looks again */
	}
}

static int cntr_wait(struct fid_cntr *f, uint64_t threshold, int timeout)
{
	struct mrp_cntr *c = (struct mrp_cntr *)f;
	uint64_t err0 = c->err;
	int64_t start = mrp_now_us();
	int64_t deadline = timeout >= 0 ? start + (int64_t)timeout * 1000 : -1;
	for (;;) {
		progress_all(c);
		if (c->value >= threshold)
			return 0;
		/* fi_cntr(3): any change of the error value ends a wait. */
		if (c->err != err0)
			return -FI_EAVAIL;
		int gone = c->neps > 0;
		for (size_t i = 0; i < c->neps; i++)
			gone = gone && c->eps[i]->failed;
		if (gone)
			return -FI_ESHUTDOWN; /* every bound endpoint lost its daemon: nothing more is coming */
		int64_t now = mrp_now_us();
		if (deadline >= 0 && now >= deadline)
			return -FI_ETIMEDOUT;
		if (c->wait != FI_WAIT_UNSPEC || now - start < CNTR_SPIN_US) {
			sched_yield();
			continue;
		}
		sleep_once(c, deadline >= 0 ? (int)((deadline - now + 999) / 1000) : -1);
	}
}

static int cntr_close(struct fid *fid)
{
	struct mrp_cntr *c = (struct mrp_cntr *)fid;
	if (c->neps)
		return -FI_EBUSY; /* fi_cntr(3): bound endpoints first */
	free(c->eps);
	free(c->pfd);
	free(c);
	return 0;
}

static int cntr_control(struct fid *fid, int cmd, void *arg)
{
	struct mrp_cntr *c = (struct mrp_cntr *)fid;
	switch (cmd) {
	case FI_GETWAIT:
		return -FI_ENODATA; /* no descriptor to give: see the top of the file */
	case FI_GETWAITOBJ:
		if (!arg)
			return -FI_EINVAL;
		*(enum fi_wait_obj *)arg = (enum fi_wait_obj)c->wait;
		return 0;
	}
	return -FI_ENOSYS;
}

static struct fi_ops cntr_fi_ops = {.size = sizeof(struct fi_ops), .close = cntr_close, .bind = no_bind,
				    .control = cntr_control, .ops_open = no_ops_open, .tostr = no_tostr,
				    .ops_set = no_ops_set};
static struct fi_ops_cntr cntr_ops = {.size = sizeof(struct fi_ops_cntr), .read = cntr_read,
				      .readerr = cntr_readerr, .add = cntr_add, .set = cntr_set, .wait = cntr_wait,
				      .adderr = cntr_adderr, .seterr = cntr_seterr};

int mrp_cntr_open(struct fid_domain *dom, struct fi_cntr_attr *attr, struct fid_cntr **out, void *context)
{
	if (!dom || !out)
		return -FI_EINVAL;
	struct fi_cntr_attr def = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_NONE};
	if (!attr)
		attr = &def;
	if (attr->events != FI_CNTR_EVENTS_COMP)
		return -FI_ENOSYS; /* the only kind libfabric defines */
	if (attr->flags)
		return -FI_EINVAL; /* fi_cntr(3): reserved, 0 */
	switch (attr->wait_obj) {
	case FI_WAIT_NONE: case FI_WAIT_YIELD: case FI_WAIT_UNSPEC:
		break;
	default:
		return -FI_ENOSYS; /* no wait sets, mutexes, or descriptors (see the top of the file) */
	}
	struct mrp_cntr *c = calloc(1, sizeof *c);
	if (!c)
		return -FI_ENOMEM;
	c->cntr.fid.fclass = FI_CLASS_CNTR;
	c->cntr.fid.context = context;
	c->cntr.fid.ops = &cntr_fi_ops;
	c->cntr.ops = &cntr_ops;
	c->dom = (struct mrp_domain *)dom;
	c->wait = attr->wait_obj;
	*out = &c->cntr;
	return 0;
}

/* What each bind flag counts, in the order of the kinds. */
static const uint64_t kind_flag[MRP_CNTR_KINDS] = {
	[MRP_CNTR_SEND] = FI_SEND, [MRP_CNTR_RECV] = FI_RECV, [MRP_CNTR_READ] = FI_READ, [MRP_CNTR_WRITE] = FI_WRITE};

int mrp_cntr_bind(struct mrp_ep *ep, struct fid *fid, uint64_t flags)
{
	/* Another provider's counter, or something that is no counter,
	 * would be written through as ours. */
	if (!fid || fid->ops != &cntr_fi_ops)
		return -FI_EINVAL;
	struct mrp_cntr *c = (struct mrp_cntr *)fid;
	if (c->dom != ep->dom)
		return -FI_EINVAL;
	if (flags & (FI_REMOTE_READ | FI_REMOTE_WRITE))
		return -FI_EOPNOTSUPP; /* no FI_RMA_EVENT: the peer's RMA is not seen here */
	if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE))
		return -FI_EBADFLAGS;
	/* One counter per kind (libfabric's util endpoints refuse a second
	 * too): checked for all before any is taken. */
	for (int k = 0; k < MRP_CNTR_KINDS; k++)
		if ((flags & kind_flag[k]) && ep->cntr[k] && ep->cntr[k] != c)
			return -FI_EINVAL;
	size_t i = 0;
	while (i < c->neps && c->eps[i] != ep)
		i++;
	if (i == c->neps) {
		if (c->neps == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 4;
			struct mrp_ep **e = realloc(c->eps, cap * sizeof *e);
			if (!e)
				return -FI_ENOMEM;
			c->eps = e;
			struct pollfd *p = realloc(c->pfd, cap * sizeof *p);
			if (!p)
				return -FI_ENOMEM;
			c->pfd = p;
			c->cap = cap;
		}
		c->eps[c->neps++] = ep;
	}
	for (int k = 0; k < MRP_CNTR_KINDS; k++)
		if (flags & kind_flag[k])
			ep->cntr[k] = c;
	return 0;
}

void mrp_cntr_unbind(struct mrp_ep *ep)
{
	for (int k = 0; k < MRP_CNTR_KINDS; k++) {
		struct mrp_cntr *c = ep->cntr[k];
		if (!c)
			continue;
		for (size_t i = 0; i < c->neps; i++)
			if (c->eps[i] == ep) {
				c->eps[i] = c->eps[--c->neps];
				break;
			}
		for (int j = k; j < MRP_CNTR_KINDS; j++)
			if (ep->cntr[j] == c)
				ep->cntr[j] = NULL;
	}
}

void mrp_count(struct mrp_ep *ep, uint64_t flags, int err)
{
	/* A completion's flags name one direction: FI_SEND or FI_RECV for
	 * messages, FI_READ or FI_WRITE for RMA and atomics (fi_cq(3)). */
	int k = (flags & FI_SEND) ? MRP_CNTR_SEND
		: (flags & FI_RECV) ? MRP_CNTR_RECV
		: (flags & FI_READ) ? MRP_CNTR_READ
		: (flags & FI_WRITE) ? MRP_CNTR_WRITE
				     : -1;
	if (k < 0 || !ep->cntr[k])
		return;
	if (err)
		ep->cntr[k]->err++;
	else
		ep->cntr[k]->value++;
}

int mrp_is_cntr(const struct fid *f) { return f && f->fclass == FI_CLASS_CNTR && f->ops == &cntr_fi_ops; }

uint64_t mrp_cntr_events(struct fid_cntr *f)
{
	struct mrp_cntr *c = (struct mrp_cntr *)f;
	progress_all(c);
	return c->value + c->err;
}
