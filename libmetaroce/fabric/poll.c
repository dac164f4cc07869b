/* poll.c: poll sets (fi_poll(3)). A set holds completion queues and
 * counters of one domain; fi_poll drives each member's endpoint (progress
 * is manual) and answers the contexts of the CQs that hold an entry and
 * of the counters whose count (successes and errors) moved since the
 * previous fi_poll. Nothing sleeps here: a poll set is what an
 * application checks in its own loop. The set is a small array: a member
 * is added once, and fi_poll visits each once. */
#include <stdlib.h>
#include <string.h>

#include "prov.h"

struct mrp_pmember {
	struct fid *fid;
	uint64_t seen; /* a counter's count at the previous fi_poll */
};

struct mrp_poll {
	struct fid_poll poll;
	struct mrp_domain *dom;
	struct mrp_pmember *m;
	size_t n, cap;
};

static int poll_poll(struct fid_poll *fps, void **context, int count)
{
	struct mrp_poll *ps = (struct mrp_poll *)fps;
	if (count < 0 || (count && !context))
		return -FI_EINVAL;
	int got = 0;
	for (size_t i = 0; i < ps->n && got < count; i++) {
		struct mrp_pmember *m = &ps->m[i];
		int ready;
		if (m->fid->fclass == FI_CLASS_CQ) {
			ready = mrp_cq_ready((struct mrp_cq *)m->fid);
		} else {
			uint64_t v = mrp_cntr_events((struct fid_cntr *)m->fid);
			ready = v != m->seen;
			m->seen = v;
		}
		if (ready)
			context[got++] = m->fid->context;
	}
	return got;
}

static int poll_add(struct fid_poll *fps, struct fid *fid, uint64_t flags)
{
	struct mrp_poll *ps = (struct mrp_poll *)fps;
	if (flags)
		return -FI_EBADFLAGS;
	/* Only this provider's CQs and counters: anything else would be read
	 * through as one of ours. */
	if (!mrp_is_cq(fid) && !mrp_is_cntr(fid))
		return -FI_EINVAL;
	for (size_t i = 0; i < ps->n; i++)
		if (ps->m[i].fid == fid)
			return -FI_EALREADY;
	if (ps->n == ps->cap) {
		size_t cap = ps->cap ? 2 * ps->cap : 4;
		struct mrp_pmember *p = realloc(ps->m, cap * sizeof *p);
		if (!p)
			return -FI_ENOMEM;
		ps->m = p;
		ps->cap = cap;
	}
	uint64_t seen = fid->fclass == FI_CLASS_CNTR ? mrp_cntr_events((struct fid_cntr *)fid) : 0;
	ps->m[ps->n++] = (struct mrp_pmember){.fid = fid, .seen = seen};
	return 0;
}

static int poll_del(struct fid_poll *fps, struct fid *fid, uint64_t flags)
{
	struct mrp_poll *ps = (struct mrp_poll *)fps;
	if (flags)
		return -FI_EBADFLAGS;
	for (size_t i = 0; i < ps->n; i++)
		if (ps->m[i].fid == fid) {
			memmove(&ps->m[i], &ps->m[i + 1], (ps->n - i - 1) * sizeof ps->m[0]);
			ps->n--;
			return 0;
		}
	return -FI_ENOENT;
}

static int poll_close(struct fid *fid)
{
	struct mrp_poll *ps = (struct mrp_poll *)fid;
	free(ps->m);
	free(ps);
	return 0;
}

static struct fi_ops poll_fi_ops = {.size = sizeof(struct fi_ops), .close = poll_close, .bind = no_bind,
				    .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				    .ops_set = no_ops_set};
static struct fi_ops_poll poll_ops = {.size = sizeof(struct fi_ops_poll), .poll = poll_poll, .poll_add = poll_add,
				      .poll_del = poll_del};

int mrp_poll_open(struct fid_domain *dom, struct fi_poll_attr *attr, struct fid_poll **out)
{
	if (!dom || !out)
		return -FI_EINVAL;
	if (attr && attr->flags)
		return -FI_EINVAL; /* fi_poll(3): reserved, 0 */
	struct mrp_poll *ps = calloc(1, sizeof *ps);
	if (!ps)
		return -FI_ENOMEM;
	ps->poll.fid.fclass = FI_CLASS_POLL;
	ps->poll.fid.ops = &poll_fi_ops;
	ps->poll.ops = &poll_ops;
	ps->dom = (struct mrp_domain *)dom;
	*out = &ps->poll;
	return 0;
}
