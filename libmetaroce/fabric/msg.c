/* msg.c: FI_MSG and FI_TAGGED. A send writes the header into a transmit
 * slot and posts a SEND on the peer's outbound queue pair (a send to this
 * endpoint itself is matched here, with no daemon): a payload iov lying in
 * the region its desc names goes as it is, an entry of the SEND's
 * scatter-gather list after the header (mr_wr.sg_list), the others are
 * copied into the slot behind the header; if the list would be longer
 * than the daemon's max_sge, everything is copied. The receiver sees one
 * message either way. An
 * arrival is matched against the posted receives of its kind in order:
 * a receive takes it if its source is FI_ADDR_UNSPEC or the sender's
 * fi_addr_t (FI_DIRECTED_RECV), and, tagged, if the tags agree outside the
 * receive's ignore bits. What matches nothing is copied onto the
 * unexpected queue of its kind, which fi_recv/fi_trecv search first, in
 * order, and which FI_PEEK, FI_CLAIM and FI_DISCARD look into. */
#include <stdlib.h>
#include <string.h>

#include "prov.h"

/* want: whether a successful operation reports a completion (fi_endpoint(3),
 * FI_SELECTIVE_COMPLETION: only those with FI_COMPLETION, per direction). */
static int want(int selective, uint64_t flags) { return !selective || (flags & FI_COMPLETION); }

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

/* complete_rx copies an arrived message into a receive's buffer and
 * reports it. */
static void complete_rx(struct mrp_ep *ep, void *buf, size_t blen, void *ctx, uint64_t rflags, int tagged,
			const struct mrp_hdr *h, const uint8_t *data, size_t len, fi_addr_t src)
{
	size_t n = len < blen ? len : blen;
	if (n)
		memcpy(buf, data, n);
	struct mrp_cqe e = {.ctx = ctx, .flags = FI_RECV | (tagged ? FI_TAGGED : FI_MSG), .len = n, .buf = buf,
			    .tag = tagged ? h->tag : 0, .src = src};
	if (h->flags & MRP_F_DATA) {
		e.flags |= FI_REMOTE_CQ_DATA;
		e.data = h->data;
	}
	if (n < len) {
		e.err = FI_ETRUNC;
		e.olen = len - n;
	}
	if (e.err || want(ep->rx_sel, rflags))
		mrp_cq_push(ep->rx, &e);
}

int mrp_ux_room(struct mrp_ep *ep) { return ep->nux < MRP_UX_MAX; }

void mrp_arrived(struct mrp_ep *ep, struct mrp_in *from, fi_addr_t self, const struct mrp_hdr *h,
		 const uint8_t *data, size_t len, int *kept)
{
	int tagged = h->kind == MRP_K_TAGGED;
	fi_addr_t src = from ? mrp_src(ep, from) : self;
	MRP_DBG("arrived: %s tag %#llx data %u len %zu from %lld", tagged ? "tagged" : "msg",
		(unsigned long long)h->tag, h->data, len, (long long)src);
	struct mrp_rx **head = tagged ? &ep->tag_head : &ep->msg_head;
	struct mrp_rx **tail = tagged ? &ep->tag_tail : &ep->msg_tail;
	for (struct mrp_rx *prev = NULL, *r = *head; r; prev = r, r = r->next) {
		if (!matches(r, tagged, src, h->tag))
			continue;
		if (prev)
			prev->next = r->next;
		else
			*head = r->next;
		if (*tail == r)
			*tail = prev;
		complete_rx(ep, r->buf, r->len, r->ctx, r->flags, tagged, h, data, len, src);
		r->next = ep->rx_free;
		ep->rx_free = r;
		*kept = 1;
		return;
	}
	*kept = 0;
	if (!mrp_ux_room(ep))
		return;
	struct mrp_ux *u = calloc(1, sizeof *u);
	if (!u)
		return;
	u->data = malloc(len ? len : 1);
	if (!u->data) {
		free(u);
		return;
	}
	memcpy(u->data, data, len);
	u->from = from;
	u->self = self;
	u->h = *h;
	u->len = len;
	struct mrp_ux **uh = tagged ? &ep->uxt_head : &ep->uxm_head;
	struct mrp_ux **ut = tagged ? &ep->uxt_tail : &ep->uxm_tail;
	if (*ut)
		(*ut)->next = u;
	else
		*uh = u;
	*ut = u;
	ep->nux++;
	*kept = 1;
}

static void ux_free_list(struct mrp_ux *u)
{
	while (u) {
		struct mrp_ux *n = u->next;
		free(u->data);
		free(u);
		u = n;
	}
}

void mrp_rx_close(struct mrp_ep *ep)
{
	ux_free_list(ep->uxm_head);
	ux_free_list(ep->uxt_head);
	ep->uxm_head = ep->uxm_tail = ep->uxt_head = ep->uxt_tail = NULL;
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

static ssize_t do_recv(struct mrp_ep *ep, int tagged, const struct iovec *iov, size_t count, fi_addr_t src,
		       uint64_t tag, uint64_t ignore, void *ctx, uint64_t flags)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	MRP_DBG("recv: %s tag %#llx ignore %#llx src %lld flags %#llx", tagged ? "tagged" : "msg",
		(unsigned long long)tag, (unsigned long long)ignore, (long long)src, (unsigned long long)flags);
	if (count > 1)
		return -FI_EINVAL; /* rx iov_limit 1 */
	void *buf = count ? iov[0].iov_base : NULL;
	size_t blen = count ? iov[0].iov_len : 0;
	if (!(ep->caps & FI_DIRECTED_RECV))
		src = FI_ADDR_UNSPEC; /* fi_recv(3): the source is ignored without FI_DIRECTED_RECV */
	if (src != FI_ADDR_UNSPEC && (!ep->av || src >= (fi_addr_t)ep->av->n))
		return -FI_EINVAL;
	if (flags & (FI_PEEK | FI_CLAIM)) {
		if (!tagged)
			return -FI_EBADFLAGS;
		struct mrp_ux *prev = NULL;
		struct mrp_ux *u = ux_find(ep, 1, src, tag, ignore, (flags & FI_PEEK) ? NULL : ctx, &prev);
		if (flags & FI_PEEK) {
			mrp_progress(ep);
			u = ux_find(ep, 1, src, tag, ignore, NULL, &prev);
			struct mrp_cqe e = {.ctx = ctx, .flags = FI_RECV | FI_TAGGED, .src = FI_ADDR_NOTAVAIL};
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
			if (flags & FI_DISCARD) {
				ux_unlink(ep, 1, u, prev);
				free(u->data);
				free(u);
			} else if (flags & FI_CLAIM) {
				u->claim = ctx;
			}
			mrp_cq_push(ep->rx, &e);
			return 0;
		}
		/* FI_CLAIM: the message an earlier FI_PEEK|FI_CLAIM with this
		 * context set aside. */
		if (!u)
			return -FI_EINVAL;
		ux_unlink(ep, 1, u, prev);
		if (flags & FI_DISCARD) {
			struct mrp_cqe e = {.ctx = ctx, .flags = FI_RECV | FI_TAGGED, .tag = u->h.tag,
					    .src = ux_src(ep, u)};
			mrp_cq_push(ep->rx, &e);
		} else {
			complete_rx(ep, buf, blen, ctx, flags | FI_COMPLETION, 1, &u->h, u->data, u->len, ux_src(ep, u));
		}
		free(u->data);
		free(u);
		return 0;
	}
	struct mrp_ux *prev = NULL;
	struct mrp_ux *u = ux_find(ep, tagged, src, tag, ignore, NULL, &prev);
	if (u) {
		ux_unlink(ep, tagged, u, prev);
		complete_rx(ep, buf, blen, ctx, flags, tagged, &u->h, u->data, u->len, ux_src(ep, u));
		free(u->data);
		free(u);
		return 0;
	}
	struct mrp_rx *r = ep->rx_free;
	if (!r) {
		mrp_progress(ep);
		return -FI_EAGAIN;
	}
	ep->rx_free = r->next;
	*r = (struct mrp_rx){.buf = buf, .len = blen, .ctx = ctx, .src = src, .tag = tag, .ignore = ignore,
			     .flags = flags};
	struct mrp_rx **head = tagged ? &ep->tag_head : &ep->msg_head;
	struct mrp_rx **tail = tagged ? &ep->tag_tail : &ep->msg_tail;
	if (*tail)
		(*tail)->next = r;
	else
		*head = r;
	*tail = r;
	return 0;
}

static ssize_t do_send(struct mrp_ep *ep, int kind, const struct iovec *iov, void **desc, size_t count,
		       int has_data, uint64_t data, uint64_t tag, fi_addr_t dest, void *ctx, uint64_t flags, int inject)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (ep->failed)
		return -FI_ESHUTDOWN;
	if (count > MRP_IOV)
		return -FI_EINVAL;
	size_t len = 0;
	for (size_t i = 0; i < count; i++)
		len += iov[i].iov_len;
	if (len > MRP_MAX_MSG || (inject && len > MRP_INJECT))
		return -FI_EMSGSIZE;
	if (!ep->av || dest >= (fi_addr_t)ep->av->n)
		return -FI_EINVAL;
	struct mrp_hdr h = {.kind = (uint8_t)kind, .flags = has_data ? MRP_F_DATA : 0, .data = (uint32_t)data,
			    .tag = kind == MRP_K_TAGGED ? tag : 0};
	uint64_t cflags = FI_SEND | (kind == MRP_K_TAGGED ? FI_TAGGED : FI_MSG);
	int signal = !inject && want(ep->tx_sel, flags);
	if (mrp_is_self(ep, dest)) {
		/* To ourselves: matched here, as if it had arrived. */
		uint8_t *tmp = NULL;
		const uint8_t *p = count ? iov[0].iov_base : NULL;
		if (count > 1) {
			tmp = malloc(len ? len : 1);
			if (!tmp)
				return -FI_ENOMEM;
			for (size_t i = 0, off = 0; i < count; off += iov[i].iov_len, i++)
				memcpy(tmp + off, iov[i].iov_base, iov[i].iov_len);
			p = tmp;
		}
		int kept = 0;
		mrp_arrived(ep, NULL, dest, &h, p, len, &kept);
		free(tmp);
		if (!kept) {
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		if (signal) {
			struct mrp_cqe e = {.ctx = ctx, .flags = cflags, .src = FI_ADDR_NOTAVAIL};
			mrp_cq_push(ep->tx, &e);
		}
		return 0;
	}
	struct mrp_out *o;
	int e = mrp_peer(ep, dest, &o);
	if (e == -FI_EAGAIN)
		mrp_progress(ep);
	if (e)
		return e;
	int slot = mrp_slot_get(ep);
	struct mrp_op *op = slot >= 0 ? mrp_op_get(ep) : NULL;
	if (!op) {
		mrp_progress(ep);
		return -FI_EAGAIN;
	}
	uint8_t *s = mrp_slot_ptr(ep, slot);
	uint64_t sa = mrp_slot_addr(ep, slot);
	memcpy(s, &h, sizeof h);
	/* The list: the header (and what is copied behind it) in the slot,
	 * registered iovs in place. Adjacent copies share one entry. */
	struct mr_sge sg[MRP_IOV + 1];
	int nsg = 1;
	sg[0] = (struct mr_sge){.addr = sa, .length = MRP_HDR, .lkey = ep->mr->key};
	size_t off = MRP_HDR;
	for (size_t i = 0; i < count && nsg <= ep->max_sge; i++) {
		size_t l = iov[i].iov_len;
		if (!l)
			continue;
		struct mrp_mr *m = inject ? NULL : mrp_mr_of(ep->dom, desc ? desc[i] : NULL, iov[i].iov_base, l);
		if (m) {
			sg[nsg++] = (struct mr_sge){.addr = (uint64_t)(uintptr_t)iov[i].iov_base, .length = (uint32_t)l,
						    .lkey = m->reg->key};
			continue;
		}
		memcpy(s + off, iov[i].iov_base, l);
		struct mr_sge *last = &sg[nsg - 1];
		if (last->lkey == ep->mr->key && last->addr + last->length == sa + off)
			last->length += (uint32_t)l;
		else
			sg[nsg++] = (struct mr_sge){.addr = sa + off, .length = (uint32_t)l, .lkey = ep->mr->key};
		off += l;
	}
	if (nsg > ep->max_sge) {
		/* Too many entries (or no lists at this daemon): all copied. */
		nsg = 1;
		off = MRP_HDR;
		for (size_t i = 0; i < count; off += iov[i].iov_len, i++)
			if (iov[i].iov_len)
				memcpy(s + off, iov[i].iov_base, iov[i].iov_len);
		sg[0].length = (uint32_t)off;
	}
	struct mr_wr w = {.op = MR_WR_SEND, .wr_id = (uint64_t)(op - ep->ops), .lkey = ep->mr->key,
			  .laddr = sa, .length = (uint32_t)(MRP_HDR + len)};
	if (nsg > 1) {
		w.sg_list = sg;
		w.num_sge = nsg;
	}
	int n = mr_post(o->qp, &w, 1);
	if (n < 0) {
		mrp_op_put(ep, op);
		if (n == MR_ERR_SQ_FULL) {
			mrp_progress(ep);
			return -FI_EAGAIN;
		}
		return -mrp_errno(n);
	}
	ep->slot_busy[slot] = 1;
	op->kind = MRP_OP_SEND;
	op->slot = slot;
	op->complete = signal;
	op->ctx = ctx;
	op->flags = cflags;
	return 0;
}

#define EP(f) ((struct mrp_ep *)(f))
#define IOV1(b, l) (&(struct iovec){.iov_base = (void *)(b), .iov_len = (l)})
#define DESC1(d) (&(void *){(d)})

/* ---- FI_MSG ---- */

static ssize_t m_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 0, IOV1(buf, len), 1, src, 0, 0, ctx, EP(f)->rx_flags);
}

static ssize_t m_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 0, iov, count, src, 0, 0, ctx, EP(f)->rx_flags);
}

static ssize_t m_recvmsg(struct fid_ep *f, const struct fi_msg *m, uint64_t flags)
{
	return do_recv(EP(f), 0, m->msg_iov, m->iov_count, m->addr, 0, 0, m->context, flags);
}

static ssize_t m_send(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, void *ctx)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), DESC1(desc), 1, 0, 0, 0, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t m_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       void *ctx)
{
	return do_send(EP(f), MRP_K_MSG, iov, desc, count, 0, 0, 0, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t m_sendmsg(struct fid_ep *f, const struct fi_msg *m, uint64_t flags)
{
	return do_send(EP(f), MRP_K_MSG, m->msg_iov, m->desc, m->iov_count, !!(flags & FI_REMOTE_CQ_DATA), m->data,
		       0, m->addr, m->context, flags, 0);
}

static ssize_t m_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), NULL, 1, 0, 0, 0, dest, NULL, 0, 1);
}

static ssize_t m_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
			  void *ctx)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), DESC1(desc), 1, 1, data, 0, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t m_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest)
{
	return do_send(EP(f), MRP_K_MSG, IOV1(buf, len), NULL, 1, 1, data, 0, dest, NULL, 0, 1);
}

struct fi_ops_msg mrp_msg_ops = {.size = sizeof(struct fi_ops_msg), .recv = m_recv, .recvv = m_recvv,
				 .recvmsg = m_recvmsg, .send = m_send, .sendv = m_sendv, .sendmsg = m_sendmsg,
				 .inject = m_inject, .senddata = m_senddata, .injectdata = m_injectdata};

/* ---- FI_TAGGED ---- */

static ssize_t t_recv(struct fid_ep *f, void *buf, size_t len, void *desc, fi_addr_t src, uint64_t tag,
		      uint64_t ignore, void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 1, IOV1(buf, len), 1, src, tag, ignore, ctx, EP(f)->rx_flags);
}

static ssize_t t_recvv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
		       uint64_t tag, uint64_t ignore, void *ctx)
{
	(void)desc;
	return do_recv(EP(f), 1, iov, count, src, tag, ignore, ctx, EP(f)->rx_flags);
}

static ssize_t t_recvmsg(struct fid_ep *f, const struct fi_msg_tagged *m, uint64_t flags)
{
	return do_recv(EP(f), 1, m->msg_iov, m->iov_count, m->addr, m->tag, m->ignore, m->context, flags);
}

static ssize_t t_send(struct fid_ep *f, const void *buf, size_t len, void *desc, fi_addr_t dest, uint64_t tag,
		      void *ctx)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), DESC1(desc), 1, 0, 0, tag, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t t_sendv(struct fid_ep *f, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
		       uint64_t tag, void *ctx)
{
	return do_send(EP(f), MRP_K_TAGGED, iov, desc, count, 0, 0, tag, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t t_sendmsg(struct fid_ep *f, const struct fi_msg_tagged *m, uint64_t flags)
{
	return do_send(EP(f), MRP_K_TAGGED, m->msg_iov, m->desc, m->iov_count, !!(flags & FI_REMOTE_CQ_DATA), m->data,
		       m->tag, m->addr, m->context, flags, 0);
}

static ssize_t t_inject(struct fid_ep *f, const void *buf, size_t len, fi_addr_t dest, uint64_t tag)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), NULL, 1, 0, 0, tag, dest, NULL, 0, 1);
}

static ssize_t t_senddata(struct fid_ep *f, const void *buf, size_t len, void *desc, uint64_t data, fi_addr_t dest,
			  uint64_t tag, void *ctx)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), DESC1(desc), 1, 1, data, tag, dest, ctx, EP(f)->tx_flags, 0);
}

static ssize_t t_injectdata(struct fid_ep *f, const void *buf, size_t len, uint64_t data, fi_addr_t dest,
			    uint64_t tag)
{
	return do_send(EP(f), MRP_K_TAGGED, IOV1(buf, len), NULL, 1, 1, data, tag, dest, NULL, 0, 1);
}

struct fi_ops_tagged mrp_tagged_ops = {.size = sizeof(struct fi_ops_tagged), .recv = t_recv, .recvv = t_recvv,
				       .recvmsg = t_recvmsg, .send = t_send, .sendv = t_sendv,
				       .sendmsg = t_sendmsg, .inject = t_inject, .senddata = t_senddata,
				       .injectdata = t_injectdata};
