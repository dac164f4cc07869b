/* recv.c: where arriving messages go. A message's first segment (or a
 * message sent to this endpoint itself, whole) is matched against the
 * posted receives of its kind in order: a receive takes it if its source
 * is FI_ADDR_UNSPEC or the sender's fi_addr_t (FI_DIRECTED_RECV) and,
 * tagged, if the tags agree outside the receive's ignore bits. What
 * matches nothing is copied onto the unexpected queue of its kind, whole
 * (its continuation segments land there too), which receives search
 * first, in order, and which FI_PEEK, FI_CLAIM and FI_DISCARD look into;
 * the queue is bounded in messages (MRP_UX_MAX) and bytes (MRP_UX_BYTES,
 * which a message alone in the queue may exceed, so any message can be
 * peeked at): past it the arrival stays in its receive slot (ep.c holds
 * it, in order) and the sender waits.
 *
 * A message of several segments is placed by its connection's mrp_part:
 * each continuation carries the message's number and its offset, and is
 * copied to that offset of the receive's iovs (up to MRP_RX_IOV of them)
 * or of the unexpected copy, bytes past a short receive dropped; the
 * receive completes when every byte has come, with FI_ETRUNC and olen if
 * it was short. A receive that takes an unexpected message still coming
 * takes its place: what came is copied over, the rest lands in the
 * receive. A connection that ends mid-message fails the receive (or the
 * unexpected copy, which then fails the receive that takes it).
 *
 * FI_MULTI_RECV (FI_MSG): one buffer that messages take back to back,
 * each its own completion, until less than FI_OPT_MIN_MULTI_RECV (or
 * nothing) is left; the completion of the last message landing in it
 * after that carries FI_MULTI_RECV: the buffer is the application's
 * again. */
#include <stdlib.h>
#include <string.h>

#include "prov.h"

fi_addr_t mrp_src(struct mrp_ep *ep, struct mrp_in *in)
{
	if (in->addr != FI_ADDR_NOTAVAIL || !in->named || !ep->av)
		return in->addr;
	/* Look only at entries inserted since the last look. */
	for (size_t i = in->av_seen; i < ep->av->n; i++) {
		const struct mrp_name *p = &ep->av->peers[i];
		if (p->service == in->name.service && strcmp(p->ip, in->name.ip) == 0) {
			in->addr = (fi_addr_t)i;
			break;
		}
	}
	in->av_seen = ep->av->n;
	return in->addr;
}

static fi_addr_t ux_src(struct mrp_ep *ep, const struct mrp_ux *u) { return u->from ? mrp_src(ep, u->from) : u->self; }

static int matches(const struct mrp_rx *r, int tagged, fi_addr_t src, uint64_t tag)
{
	if (r->src != FI_ADDR_UNSPEC && r->src != src)
		return 0;
	return !tagged || ((r->tag ^ tag) & ~r->ignore) == 0;
}

/* ---- receive records ---- */

static struct mrp_rx *rx_take(struct mrp_ep *ep, const struct mrp_rx *want)
{
	struct mrp_rx *r = ep->rx_free;
	if (!r)
		return NULL;
	ep->rx_free = r->next;
	ep->rx_inuse++;
	*r = *want;
	r->next = NULL;
	r->used = 0;
	r->refs = 0;
	r->released = 0;
	return r;
}

static void rx_give(struct mrp_ep *ep, struct mrp_rx *r)
{
	r->next = ep->rx_free;
	ep->rx_free = r;
	ep->rx_inuse--;
}

static void rx_append(struct mrp_ep *ep, int tagged, struct mrp_rx *r)
{
	struct mrp_rx **head = tagged ? &ep->tag_head : &ep->msg_head;
	struct mrp_rx **tail = tagged ? &ep->tag_tail : &ep->msg_tail;
	r->next = NULL;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
}

static void rx_unlink(struct mrp_ep *ep, int tagged, struct mrp_rx *r, struct mrp_rx *prev)
{
	struct mrp_rx **head = tagged ? &ep->tag_head : &ep->msg_head;
	struct mrp_rx **tail = tagged ? &ep->tag_tail : &ep->msg_tail;
	if (prev)
		prev->next = r->next;
	else
		*head = r->next;
	if (*tail == r)
		*tail = prev;
	r->next = NULL;
}

/* ---- completions ---- */

/* report ends message p in receive r: its completion, or an error entry
 * (err). 1 if that gave the record back (r is gone). */
static int report(struct mrp_ep *ep, struct mrp_rx *r, const struct mrp_part *p, fi_addr_t src, int err)
{
	int tagged = p->h.kind == MRP_K_TAGGED;
	size_t n = p->h.len < p->cap ? (size_t)p->h.len : p->cap;
	struct mrp_cqe e = {.ctx = r->ctx, .flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG), .len = err ? 0 : n,
			    .buf = p->niov ? p->iov[0].iov_base : NULL, .tag = tagged ? p->h.tag : 0, .src = src,
			    .err = err};
	if (p->h.flags & MRP_F_DATA) {
		e.flags |= FI_REMOTE_CQ_DATA;
		e.data = p->h.data;
	}
	if (!err && n < p->h.len) {
		e.err = FI_ETRUNC;
		e.olen = p->h.len - n;
	}
	mrp_count(ep, e.flags, e.err != 0);
	int show = e.err || mrp_want(ep->rx_sel, r->flags), gone = 1;
	if (r->flags & FI_MULTI_RECV) {
		gone = --r->refs == 0 && r->released;
		if (gone) {
			e.flags |= FI_MULTI_RECV; /* the buffer is the application's again */
			show = 1;
		}
	}
	if (gone)
		rx_give(ep, r);
	if (show)
		mrp_cq_push(ep->rx, &e);
	return gone;
}

static void ux_fail(struct mrp_ep *ep, struct mrp_ux *u, int err)
{
	ep->ux_bytes -= u->bytes;
	u->bytes = 0;
	free(u->data);
	u->data = NULL;
	u->err = err;
	u->filling = 0;
}

/* part_fail ends message p, not all of whose bytes came. */
static void part_fail(struct mrp_ep *ep, struct mrp_in *from, struct mrp_part *p, int err)
{
	MRP_DBG("message %u of %zu bytes fails after %llu: %s", p->h.msgno, (size_t)p->h.len,
		(unsigned long long)p->got, fi_strerror(err));
	p->active = 0;
	if (p->ux)
		ux_fail(ep, p->ux, err);
	else if (p->rx)
		report(ep, p->rx, p, from ? mrp_src(ep, from) : FI_ADDR_NOTAVAIL, err);
}

/* part_done ends message p, every byte of which came. */
static void part_done(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, struct mrp_part *p)
{
	p->active = 0;
	if (p->ux)
		p->ux->filling = 0;
	else if (p->rx)
		report(ep, p->rx, p, from ? mrp_src(ep, from) : self, 0);
}

/* ---- binding a message to a receive ---- */

/* bind_rx aims message p at receive r: at its iovs, or at the next slice
 * of a multi-receive buffer, which may leave less than the minimum (the
 * caller takes it off the posted list then: r->released). */
static void bind_rx(struct mrp_ep *ep, struct mrp_rx *r, struct mrp_part *p)
{
	p->rx = r;
	p->ux = NULL;
	if (!(r->flags & FI_MULTI_RECV)) {
		memcpy(p->iov, r->iov, sizeof p->iov);
		p->niov = r->niov;
		p->cap = r->len;
		return;
	}
	size_t left = r->len - r->used;
	size_t take = p->h.len < left ? (size_t)p->h.len : left;
	p->iov[0] = (struct iovec){.iov_base = (uint8_t *)r->iov[0].iov_base + r->used, .iov_len = take};
	p->niov = 1;
	p->cap = take;
	r->used += take;
	r->refs++;
	left = r->len - r->used;
	if (left == 0 || left < mrp_min_multi_recv(ep))
		r->released = 1;
}

/* place copies n bytes of src (nsrc iovs) to offset off of message p. */
static void place(struct mrp_part *p, uint64_t off, const struct iovec *src, int nsrc, size_t n)
{
	if (off + n > p->hi)
		p->hi = off + n;
	p->got += n;
	for (int i = 0; i < nsrc && n; i++) {
		size_t k = src[i].iov_len < n ? src[i].iov_len : n;
		if (off < p->cap)
			mrp_iov_scatter(p->iov, p->niov, off, src[i].iov_base, k);
		off += k;
		n -= k;
	}
}

/* settle ends message p if every byte came; else its connection's
 * continuations place the rest. */
static void settle(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, struct mrp_part *p)
{
	if (p->got >= p->h.len) {
		part_done(ep, from, self, p);
		return;
	}
	if (from->dead) {
		part_fail(ep, from, p, from->dead);
		return;
	}
	p->active = 1;
	if (p->ux)
		p->ux->filling = 1;
	from->part = *p;
}

/* ---- the unexpected queue ---- */

static void ux_free(struct mrp_ep *ep, struct mrp_ux *u)
{
	ep->ux_bytes -= u->bytes;
	free(u->data);
	free(u);
}

static void ux_unlink(struct mrp_ep *ep, int tagged, struct mrp_ux *u, struct mrp_ux *prev)
{
	struct mrp_ux **uh = tagged ? &ep->uxt_head : &ep->uxm_head;
	struct mrp_ux **ut = tagged ? &ep->uxt_tail : &ep->uxm_tail;
	if (prev)
		prev->next = u->next;
	else
		*uh = u->next;
	if (*ut == u)
		*ut = prev;
	ep->nux--;
}

/* ux_discard drops an unlinked unexpected message: what of it is still
 * coming is drained. */
static void ux_discard(struct mrp_ep *ep, struct mrp_ux *u)
{
	if (u->filling) {
		struct mrp_part *p = &u->from->part;
		p->ux = NULL;
		p->rx = NULL;
		p->niov = 0;
		p->cap = 0;
	}
	ux_free(ep, u);
}

/* keep_ux copies message p onto the unexpected queue, if there is room. */
static int keep_ux(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, struct mrp_part *p)
{
	size_t len = (size_t)p->h.len;
	if (ep->nux >= MRP_UX_MAX || (ep->ux_bytes && ep->ux_bytes + len > MRP_UX_BYTES))
		return 0;
	struct mrp_ux *u = calloc(1, sizeof *u);
	if (!u)
		return 0;
	u->data = malloc(len ? len : 1);
	if (!u->data) {
		free(u);
		return 0;
	}
	u->from = from;
	u->self = self;
	u->h = p->h;
	u->len = len;
	u->bytes = len;
	int tagged = p->h.kind == MRP_K_TAGGED;
	struct mrp_ux **uh = tagged ? &ep->uxt_head : &ep->uxm_head;
	struct mrp_ux **ut = tagged ? &ep->uxt_tail : &ep->uxm_tail;
	if (*ut)
		(*ut)->next = u;
	else
		*uh = u;
	*ut = u;
	ep->nux++;
	ep->ux_bytes += len;
	p->iov[0] = (struct iovec){.iov_base = u->data, .iov_len = len};
	p->niov = 1;
	p->cap = len;
	p->ux = u;
	p->rx = NULL;
	return 1;
}

/* ux_find finds the first unexpected message a receive would take (claim:
 * only the one claimed by that context), and its predecessor. */
static struct mrp_ux *ux_find(struct mrp_ep *ep, int tagged, fi_addr_t src, uint64_t tag, uint64_t ignore,
			      void *claim, struct mrp_ux **prevp)
{
	struct mrp_rx probe = {.src = src, .tag = tag, .ignore = ignore};
	struct mrp_ux *prev = NULL;
	for (struct mrp_ux *u = tagged ? ep->uxt_head : ep->uxm_head; u; prev = u, u = u->next) {
		if (claim ? u->claim != claim : u->claim != NULL)
			continue;
		if (!claim && !matches(&probe, tagged, ux_src(ep, u), u->h.tag))
			continue;
		*prevp = prev;
		return u;
	}
	return NULL;
}

/* ux_take hands unexpected message u (unlinked) to receive r: at once if
 * it is whole (or failed), else r takes its place for the segments still
 * coming. 1 if r is gone (completed, its record given back). */
static int ux_take(struct mrp_ep *ep, struct mrp_ux *u, struct mrp_rx *r)
{
	fi_addr_t src = ux_src(ep, u);
	struct mrp_part p = {.h = u->h};
	bind_rx(ep, r, &p);
	int gone = 0;
	if (u->err) {
		gone = report(ep, r, &p, src, u->err);
	} else if (u->filling) {
		struct mrp_part *q = &u->from->part;
		size_t n = q->hi < p.cap ? (size_t)q->hi : p.cap;
		mrp_iov_scatter(p.iov, p.niov, 0, u->data, n);
		p.got = q->got;
		p.hi = q->hi;
		p.active = 1;
		*q = p;
	} else {
		place(&p, 0, &(struct iovec){.iov_base = u->data, .iov_len = u->len}, 1, u->len);
		gone = report(ep, r, &p, src, 0);
	}
	ux_free(ep, u);
	return gone;
}

/* ---- arrivals ---- */

/* rx_cq_full: the receive CQ has no room beyond what is owed already
 * (MRP_CQ_RESERVE): an arrival waits in its slot. */
static int rx_cq_full(const struct mrp_ep *ep)
{
	const struct mrp_cq *cq = ep->rx;
	return cq && MRP_CQ_LEN - (cq->tail - cq->head) <= MRP_CQ_RESERVE;
}

/* take_posted finds the first posted receive that message p matches and
 * binds it. */
static int take_posted(struct mrp_ep *ep, int tagged, fi_addr_t src, struct mrp_part *p)
{
	for (struct mrp_rx *prev = NULL, *r = tagged ? ep->tag_head : ep->msg_head; r; prev = r, r = r->next) {
		if (!matches(r, tagged, src, p->h.tag))
			continue;
		bind_rx(ep, r, p);
		if (!(r->flags & FI_MULTI_RECV) || r->released)
			rx_unlink(ep, tagged, r, prev);
		return 1;
	}
	return 0;
}

/* first takes a message's first segment: n bytes in src. 0 if it must
 * wait in its slot (no room to keep it). */
static int first(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, const struct mrp_hdr *h,
		 const struct iovec *src, int nsrc, size_t n)
{
	if (h->len > MRP_MAX_MSG || n > h->len || (!from && n != h->len))
		return 1; /* no message this provider sends: dropped */
	if (from && from->part.active) {
		/* The sender moved on: it gave that message up (a failed
		 * segment whose abort comes later, if at all). */
		part_fail(ep, from, &from->part, FI_EIO);
	}
	if (rx_cq_full(ep))
		return 0;
	int tagged = h->kind == MRP_K_TAGGED;
	fi_addr_t sa = from ? mrp_src(ep, from) : self;
	MRP_DBG("arrived: %s tag %#llx data %u len %llu (%zu here) from %lld", tagged ? "tagged" : "msg",
		(unsigned long long)h->tag, h->data, (unsigned long long)h->len, n, (long long)sa);
	struct mrp_part p = {.h = *h};
	if (!take_posted(ep, tagged, sa, &p) && !keep_ux(ep, from, self, &p))
		return 0;
	place(&p, 0, src, nsrc, n);
	settle(ep, from, self, &p);
	return 1;
}

/* cont takes a continuation segment. */
static void cont(struct mrp_ep *ep, struct mrp_in *from, const struct mrp_hdr *h, const struct iovec *src)
{
	struct mrp_part *p = from ? &from->part : NULL;
	if (!p || !p->active || h->msgno != p->h.msgno)
		return; /* of a message given up (its first failed, or a later first came) */
	size_t n = src->iov_len;
	if (h->flags & MRP_F_ABORT) {
		part_fail(ep, from, p, FI_EIO);
		return;
	}
	if (h->kind != p->h.kind || h->len != p->h.len || h->off > p->h.len || n > p->h.len - h->off || n == 0) {
		part_fail(ep, from, p, FI_EIO); /* not what this provider sends */
		return;
	}
	place(p, h->off, src, 1, n);
	if (p->got >= p->h.len)
		part_done(ep, from, FI_ADDR_NOTAVAIL, p);
}

void mrp_arrived(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, const struct mrp_hdr *h,
		 const uint8_t *data, size_t len, int *kept)
{
	struct iovec v = {.iov_base = (void *)(uintptr_t)data, .iov_len = len};
	*kept = 1;
	if (h->off)
		cont(ep, from, h, &v);
	else
		*kept = first(ep, from, self, h, &v, 1, len);
}

int mrp_deliver_self(struct mrp_ep *ep, fi_addr_t self, const struct mrp_hdr *h, const struct iovec *iov,
		     size_t count)
{
	return first(ep, NULL, self, h, iov, (int)count, (size_t)h->len);
}

void mrp_in_failed(struct mrp_ep *ep, struct mrp_in *in, int err)
{
	in->dead = err ? err : FI_ECONNRESET;
	if (in->part.active)
		part_fail(ep, in, &in->part, in->dead);
}

/* ---- receives the application posts ---- */

/* post_multi posts a multi-receive buffer: unexpected messages first, in
 * order, while it has room. */
static ssize_t post_multi(struct mrp_ep *ep, const struct mrp_rx *want)
{
	struct mrp_rx *r = rx_take(ep, want);
	if (!r)
		return -FI_EAGAIN;
	while (!r->released) {
		struct mrp_ux *prev = NULL;
		struct mrp_ux *u = ux_find(ep, 0, r->src, 0, 0, NULL, &prev);
		if (!u)
			break;
		ux_unlink(ep, 0, u, prev);
		if (ux_take(ep, u, r))
			return 0;
	}
	if (!r->released)
		rx_append(ep, 0, r);
	return 0;
}

ssize_t mrp_recv_post(struct mrp_ep *ep, int tagged, const struct mrp_rx *want)
{
	if (!tagged && (want->flags & FI_MULTI_RECV))
		return post_multi(ep, want);
	struct mrp_rx *r = rx_take(ep, want);
	if (!r)
		return -FI_EAGAIN;
	r->flags &= ~(uint64_t)FI_MULTI_RECV;
	struct mrp_ux *prev = NULL;
	struct mrp_ux *u = ux_find(ep, tagged, r->src, r->tag, r->ignore, NULL, &prev);
	if (u) {
		ux_unlink(ep, tagged, u, prev);
		ux_take(ep, u, r);
		return 0;
	}
	rx_append(ep, tagged, r);
	return 0;
}

ssize_t mrp_recv_peek(struct mrp_ep *ep, const struct mrp_rx *want)
{
	struct mrp_ux *prev = NULL;
	struct mrp_ux *u = ux_find(ep, 1, want->src, want->tag, want->ignore, NULL, &prev);
	struct mrp_cqe e = {.ctx = want->ctx, .flags = FI_RECV | FI_TAGGED, .src = FI_ADDR_NOTAVAIL};
	if (!u) {
		e.err = FI_ENOMSG;
		mrp_cq_push(ep->rx, &e);
		return 0;
	}
	e.len = u->len;
	e.tag = u->h.tag;
	e.src = ux_src(ep, u);
	if (u->h.flags & MRP_F_DATA) {
		e.flags |= FI_REMOTE_CQ_DATA;
		e.data = u->h.data;
	}
	if (want->flags & FI_DISCARD) {
		ux_unlink(ep, 1, u, prev);
		ux_discard(ep, u);
	} else if (want->flags & FI_CLAIM) {
		u->claim = want->ctx;
	}
	mrp_cq_push(ep->rx, &e);
	return 0;
}

ssize_t mrp_recv_claim(struct mrp_ep *ep, const struct mrp_rx *want)
{
	struct mrp_ux *prev = NULL;
	struct mrp_ux *u = ux_find(ep, 1, want->src, want->tag, want->ignore, want->ctx, &prev);
	if (!u)
		return -FI_EINVAL; /* nothing this context claimed */
	if (want->flags & FI_DISCARD) {
		struct mrp_cqe e = {.ctx = want->ctx, .flags = FI_RECV | FI_TAGGED, .tag = u->h.tag, .src = ux_src(ep, u)};
		ux_unlink(ep, 1, u, prev);
		ux_discard(ep, u);
		mrp_cq_push(ep->rx, &e);
		return 0;
	}
	struct mrp_rx *r = rx_take(ep, want);
	if (!r)
		return -FI_EAGAIN;
	r->flags = (r->flags & ~(uint64_t)FI_MULTI_RECV) | FI_COMPLETION;
	ux_unlink(ep, 1, u, prev);
	ux_take(ep, u, r);
	return 0;
}

int mrp_recv_cancel(struct mrp_ep *ep, void *ctx)
{
	for (int tagged = 0; tagged < 2; tagged++) {
		for (struct mrp_rx *prev = NULL, *r = tagged ? ep->tag_head : ep->msg_head; r; prev = r, r = r->next) {
			if (r->ctx != ctx)
				continue;
			rx_unlink(ep, tagged, r, prev);
			struct mrp_cqe e = {.ctx = ctx, .flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG),
					    .buf = r->niov ? r->iov[0].iov_base : NULL, .tag = tagged ? r->tag : 0,
					    .src = FI_ADDR_NOTAVAIL, .err = FI_ECANCELED};
			int gone = 1;
			if (r->flags & FI_MULTI_RECV) {
				/* Messages still landing in it complete as they
				 * would, the last of them releasing it. */
				r->released = 1;
				gone = r->refs == 0;
				if (gone)
					e.flags |= FI_MULTI_RECV;
			}
			if (gone)
				rx_give(ep, r);
			mrp_cq_push(ep->rx, &e);
			return 0;
		}
	}
	return -FI_ENOENT;
}

static void ux_free_list(struct mrp_ep *ep, struct mrp_ux *u)
{
	while (u) {
		struct mrp_ux *n = u->next;
		ux_free(ep, u);
		u = n;
	}
}

void mrp_rx_close(struct mrp_ep *ep)
{
	ux_free_list(ep, ep->uxm_head);
	ux_free_list(ep, ep->uxt_head);
	ep->uxm_head = ep->uxm_tail = ep->uxt_head = ep->uxt_tail = NULL;
	ep->nux = 0;
}
