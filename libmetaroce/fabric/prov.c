/* prov.c: the libfabric provider "metaroce" (libmetaroce-fi.so), an
 * external DL provider on libmetaroce. docs/libfabric.md has the design:
 *
 * An FI_EP_RDM endpoint is one session with the local metaroced and one
 * "inbound" queue pair, idle, whose number with the engine's address is
 * the endpoint's name (fi_getname). A queue pair carries one connection,
 * so each peer in the address vector gets an "outbound" queue pair of its
 * own, connected on the first send to that peer's inbound queue pair:
 * traffic from A to B rides A's outbound to B's inbound. Messages go
 * through bounce buffers registered once (the daemon moves bytes only
 * between registered memfds, and an application's buffers are not): a
 * send copies into a free transmit slot and posts a SEND; the inbound
 * queue pair keeps a receive posted on every receive slot, and each
 * arriving message is copied into the oldest fi_recv buffer, or kept as
 * unexpected until one is posted. Progress is manual: fi_cq_read (either
 * queue) drives the endpoint's queue pairs.
 *
 * Limits, stated in fi_info: FI_MSG only, messages up to MRP_SLOT bytes,
 * one iov, no FI_SOURCE, and one peer may send to an endpoint (its
 * inbound queue pair accepts one connection). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/providers/fi_prov.h>

#include "metaroce.h"

/* MRP_SLOT is the largest message: one bounce slot. 64 KiB keeps the
 * endpoint's registered memory at (RX + TX) x 64 KiB = 3 MiB. */
#define MRP_SLOT (64u << 10)
#define MRP_RX 32 /* receive slots kept posted on the inbound queue pair */
#define MRP_TX 16 /* transmit slots: sends in flight per endpoint */
#define MRP_MAX_PEERS 64
#define MRP_CQ_LEN 1024
#define MRP_PROV_VERSION FI_VERSION(0, 1)

/* The endpoint's name: the engine's address and the inbound queue pair. */
struct mrp_name {
	char ip[46];
	uint8_t pad[2];
	uint32_t qpn;
};

struct mrp_ep;

struct mrp_cqe {
	void *ctx;
	uint64_t flags;
	size_t len;
	void *buf;
	int err; /* positive FI_ errno, 0: success */
	int prov_errno;
};

struct mrp_cq {
	struct fid_cq cq;
	struct mrp_ep *ep;
	int format;
	struct mrp_cqe e[MRP_CQ_LEN];
	unsigned head, tail;
};

struct mrp_av {
	struct fid_av av;
	struct mrp_name peers[MRP_MAX_PEERS];
	int n;
};

struct mrp_recv {
	void *buf;
	size_t len;
	void *ctx;
};

struct mrp_unexp {
	size_t len;
	uint8_t *data;
};

struct mrp_ep {
	struct fid_ep ep;
	struct mrp_cq *tx, *rx;
	struct mrp_av *av;
	struct mr_ctx *ctx;
	struct mr_mem *mem;
	struct mr_mr *mr;
	struct mr_qp *in;
	struct mr_qp *out[MRP_MAX_PEERS];
	struct mrp_name name;
	void *tx_ctx[MRP_TX];
	int tx_busy[MRP_TX];
	uint64_t tx_flags[MRP_TX];
	struct mrp_recv posted[MRP_CQ_LEN];
	unsigned ph, pt;
	struct mrp_unexp unexp[MRP_CQ_LEN];
	unsigned uh, ut;
	int enabled;
};

static struct fi_provider mrp_prov;

/* ---- completion queues ---- */

static int cq_push(struct mrp_cq *cq, struct mrp_cqe e)
{
	if (!cq)
		return 0;
	if (cq->tail - cq->head >= MRP_CQ_LEN)
		return -FI_EOVERRUN;
	cq->e[cq->tail++ % MRP_CQ_LEN] = e;
	return 0;
}

static void ep_progress(struct mrp_ep *ep);

static void cqe_write(const struct mrp_cq *cq, const struct mrp_cqe *e, void *dst)
{
	switch (cq->format) {
	case FI_CQ_FORMAT_MSG: {
		struct fi_cq_msg_entry *m = dst;
		*m = (struct fi_cq_msg_entry){e->ctx, e->flags, e->len};
		break;
	}
	case FI_CQ_FORMAT_DATA: {
		struct fi_cq_data_entry *d = dst;
		*d = (struct fi_cq_data_entry){e->ctx, e->flags, e->len, e->buf, 0};
		break;
	}
	case FI_CQ_FORMAT_TAGGED: {
		struct fi_cq_tagged_entry *t = dst;
		*t = (struct fi_cq_tagged_entry){e->ctx, e->flags, e->len, e->buf, 0, 0};
		break;
	}
	default: {
		struct fi_cq_entry *c = dst;
		c->op_context = e->ctx;
	}
	}
}

static size_t cqe_size(int format)
{
	switch (format) {
	case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED: return sizeof(struct fi_cq_tagged_entry);
	}
	return sizeof(struct fi_cq_entry);
}

static ssize_t cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
	struct mrp_cq *cq = (struct mrp_cq *)fcq;
	if (cq->ep)
		ep_progress(cq->ep);
	size_t n = 0;
	while (n < count && cq->head != cq->tail) {
		struct mrp_cqe *e = &cq->e[cq->head % MRP_CQ_LEN];
		if (e->err)
			break;
		cqe_write(cq, e, (char *)buf + n * cqe_size(cq->format));
		cq->head++;
		n++;
	}
	if (n)
		return (ssize_t)n;
	if (cq->head != cq->tail)
		return -FI_EAVAIL;
	/* Nothing yet: give the core away. Applications spin on
	 * fi_cq_read, and on a host where the daemon's engine shares their
	 * cores a spinner that never yields keeps the engine, which moves
	 * the bytes, off the CPU for a whole time slice. */
	sched_yield();
	return -FI_EAGAIN;
}

static ssize_t cq_readfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src)
{
	ssize_t n = cq_read(fcq, buf, count);
	for (ssize_t i = 0; src && i < n; i++)
		src[i] = FI_ADDR_NOTAVAIL;
	return n;
}

static ssize_t cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	(void)flags;
	struct mrp_cq *cq = (struct mrp_cq *)fcq;
	if (cq->head == cq->tail || !cq->e[cq->head % MRP_CQ_LEN].err)
		return -FI_EAGAIN;
	struct mrp_cqe *e = &cq->e[cq->head++ % MRP_CQ_LEN];
	memset(buf, 0, sizeof *buf);
	buf->op_context = e->ctx;
	buf->flags = e->flags;
	buf->len = e->len;
	buf->buf = e->buf;
	buf->err = e->err;
	buf->prov_errno = e->prov_errno;
	return 1;
}

static ssize_t cq_sread(struct fid_cq *fcq, void *buf, size_t count, const void *cond, int timeout)
{
	(void)cond;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		ssize_t n = cq_read(fcq, buf, count);
		if (n != -FI_EAGAIN)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (timeout >= 0 && (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= timeout)
			return -FI_EAGAIN;
		sched_yield();
	}
}

static ssize_t cq_sreadfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src, const void *cond,
			    int timeout)
{
	ssize_t n = cq_sread(fcq, buf, count, cond, timeout);
	for (ssize_t i = 0; src && i < n; i++)
		src[i] = FI_ADDR_NOTAVAIL;
	return n;
}

static const char *cq_strerror(struct fid_cq *cq, int prov_errno, const void *data, char *buf, size_t len)
{
	(void)cq;
	(void)data;
	const char *s = mr_wc_status_str(prov_errno);
	if (buf && len) {
		snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

static int cq_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static struct fi_ops cq_fi_ops = {.size = sizeof(struct fi_ops), .close = cq_close};
static struct fi_ops_cq cq_ops = {.size = sizeof(struct fi_ops_cq), .read = cq_read, .readfrom = cq_readfrom,
				  .readerr = cq_readerr, .sread = cq_sread, .sreadfrom = cq_sreadfrom,
				  .strerror = cq_strerror};

static int cq_open(struct fid_domain *dom, struct fi_cq_attr *attr, struct fid_cq **out, void *context)
{
	(void)dom;
	if (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC)
		return -FI_ENOSYS;
	switch (attr->format) {
	case FI_CQ_FORMAT_UNSPEC: case FI_CQ_FORMAT_CONTEXT: case FI_CQ_FORMAT_MSG: case FI_CQ_FORMAT_DATA:
	case FI_CQ_FORMAT_TAGGED:
		break;
	default:
		return -FI_ENOSYS;
	}
	struct mrp_cq *cq = calloc(1, sizeof *cq);
	if (!cq)
		return -FI_ENOMEM;
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	*out = &cq->cq;
	return 0;
}

/* ---- address vectors ---- */

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	(void)flags;
	(void)context;
	struct mrp_av *av = (struct mrp_av *)fav;
	const struct mrp_name *names = addr;
	size_t done = 0;
	for (size_t i = 0; i < count; i++) {
		struct mrp_name nm = names[i];
		nm.ip[sizeof nm.ip - 1] = 0;
		if (av->n >= MRP_MAX_PEERS || nm.qpn == 0) {
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
			continue;
		}
		av->peers[av->n] = nm;
		if (fi_addr)
			fi_addr[i] = (fi_addr_t)av->n;
		av->n++;
		done++;
	}
	return (int)done;
}

static int av_lookup(struct fid_av *fav, fi_addr_t a, void *addr, size_t *len)
{
	struct mrp_av *av = (struct mrp_av *)fav;
	if (a >= (fi_addr_t)av->n)
		return -FI_EINVAL;
	size_t n = *len < sizeof(struct mrp_name) ? *len : sizeof(struct mrp_name);
	memcpy(addr, &av->peers[a], n);
	*len = sizeof(struct mrp_name);
	return 0;
}

static const char *av_straddr(struct fid_av *av, const void *addr, char *buf, size_t *len)
{
	(void)av;
	const struct mrp_name *nm = addr;
	int n = snprintf(buf, *len, "metaroce://%.46s/%u", nm->ip, nm->qpn);
	*len = (size_t)n + 1;
	return buf;
}

static int av_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static struct fi_ops av_fi_ops = {.size = sizeof(struct fi_ops), .close = av_close};
static struct fi_ops_av av_ops = {.size = sizeof(struct fi_ops_av), .insert = av_insert, .lookup = av_lookup,
				  .straddr = av_straddr};

static int av_open(struct fid_domain *dom, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	(void)dom;
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE && attr->type != FI_AV_MAP)
		return -FI_ENOSYS;
	struct mrp_av *av = calloc(1, sizeof *av);
	if (!av)
		return -FI_ENOMEM;
	av->av.fid.fclass = FI_CLASS_AV;
	av->av.fid.context = context;
	av->av.fid.ops = &av_fi_ops;
	av->av.ops = &av_ops;
	*out = &av->av;
	return 0;
}

/* ---- endpoints ---- */

static uint8_t *rx_slot(struct mrp_ep *ep, unsigned i) { return (uint8_t *)ep->mr->buf + (size_t)i * MRP_SLOT; }
static uint8_t *tx_slot(struct mrp_ep *ep, unsigned i) { return rx_slot(ep, MRP_RX + i); }

static int post_rx(struct mrp_ep *ep, unsigned i)
{
	struct mr_wr w = {.op = MR_WR_RECV, .wr_id = i, .lkey = ep->mr->key,
			  .laddr = ep->mr->addr + (uint64_t)i * MRP_SLOT, .length = MRP_SLOT};
	return mr_post(ep->in, &w, 1);
}

static int errno_of(int mr_err)
{
	switch (mr_err) {
	case MR_ERR_SQ_FULL: return FI_EAGAIN;
	case MR_ERR_DAEMON_GONE: return FI_ESHUTDOWN;
	case MR_ERR_CONNECT: return FI_ECONNREFUSED;
	case MR_ERR_TIMEOUT: return FI_ETIMEDOUT;
	case MR_ERR_LIMIT: return FI_ENOSPC;
	case MR_ERR_INVAL: case MR_ERR_BAD_REQUEST: return FI_EINVAL;
	}
	return FI_EIO;
}

static int wc_errno(int status)
{
	switch (status) {
	case MR_WC_LOCAL_LENGTH: return FI_ETRUNC;
	case MR_WC_REMOTE_ACCESS: case MR_WC_LOCAL_PROTECTION: return FI_EACCES;
	case MR_WC_RNR: case MR_WC_RETRY_EXCEEDED: return FI_ETIMEDOUT;
	case MR_WC_FLUSHED: return FI_ECANCELED;
	case MR_WC_RESET: case MR_WC_REJECTED: case MR_WC_NOT_CONNECTED: return FI_ECONNRESET;
	}
	return FI_EIO;
}

/* deliver hands an arrived message to the oldest posted receive. */
static void deliver(struct mrp_ep *ep, const uint8_t *data, size_t len)
{
	struct mrp_recv r = ep->posted[ep->ph++ % MRP_CQ_LEN];
	size_t n = len < r.len ? len : r.len;
	memcpy(r.buf, data, n);
	struct mrp_cqe e = {.ctx = r.ctx, .flags = FI_RECV | FI_MSG, .len = n, .buf = r.buf};
	if (n < len)
		e.err = FI_ETRUNC;
	cq_push(ep->rx, e);
}

static void ep_progress(struct mrp_ep *ep)
{
	struct mr_wc wc[16];
	if (!ep->enabled)
		return;
	int n = mr_poll_cq(ep->in, wc, 16);
	for (int i = 0; i < n; i++) {
		unsigned slot = (unsigned)wc[i].wr_id;
		if (wc[i].op != MR_WC_RECV || slot >= MRP_RX)
			continue;
		if (wc[i].status == MR_WC_SUCCESS) {
			size_t len = wc[i].bytes <= MRP_SLOT ? wc[i].bytes : MRP_SLOT;
			if (ep->ph != ep->pt) {
				deliver(ep, rx_slot(ep, slot), len);
			} else if (ep->ut - ep->uh < MRP_CQ_LEN) {
				struct mrp_unexp *u = &ep->unexp[ep->ut++ % MRP_CQ_LEN];
				u->len = len;
				u->data = malloc(len ? len : 1);
				if (u->data)
					memcpy(u->data, rx_slot(ep, slot), len);
			}
		}
		if (wc[i].status != MR_WC_FLUSHED)
			post_rx(ep, slot);
	}
	for (int p = 0; p < MRP_MAX_PEERS; p++) {
		if (!ep->out[p])
			continue;
		n = mr_poll_cq(ep->out[p], wc, 16);
		for (int i = 0; i < n; i++) {
			unsigned slot = (unsigned)wc[i].wr_id;
			if (slot >= MRP_TX || !ep->tx_busy[slot])
				continue;
			int injected = ep->tx_busy[slot] == 2;
			ep->tx_busy[slot] = 0;
			if (injected && wc[i].status == MR_WC_SUCCESS)
				continue; /* fi_inject asks for no completion */
			struct mrp_cqe e = {.ctx = ep->tx_ctx[slot], .flags = FI_SEND | FI_MSG};
			if (wc[i].status != MR_WC_SUCCESS) {
				e.err = wc_errno(wc[i].status);
				e.prov_errno = wc[i].status;
			}
			cq_push(ep->tx, e);
		}
	}
}

static ssize_t ep_recv(struct fid_ep *fep, void *buf, size_t len, void *desc, fi_addr_t src, void *context)
{
	(void)desc;
	(void)src;
	struct mrp_ep *ep = (struct mrp_ep *)fep;
	if (ep->pt - ep->ph >= MRP_CQ_LEN)
		return -FI_EAGAIN;
	ep->posted[ep->pt++ % MRP_CQ_LEN] = (struct mrp_recv){buf, len, context};
	if (ep->uh != ep->ut) {
		struct mrp_unexp *u = &ep->unexp[ep->uh++ % MRP_CQ_LEN];
		deliver(ep, u->data, u->data ? u->len : 0);
		free(u->data);
	}
	return 0;
}

static ssize_t ep_recvv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t src,
			void *context)
{
	if (count > 1)
		return -FI_EINVAL;
	return ep_recv(fep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, desc ? desc[0] : NULL, src,
		       context);
}

static ssize_t ep_recvmsg(struct fid_ep *fep, const struct fi_msg *m, uint64_t flags)
{
	(void)flags;
	return ep_recvv(fep, m->msg_iov, m->desc, m->iov_count, m->addr, m->context);
}

/* peer_qp returns the outbound queue pair to dest, connecting it first. */
static int peer_qp(struct mrp_ep *ep, fi_addr_t dest, struct mr_qp **out)
{
	if (!ep->av || dest >= (fi_addr_t)ep->av->n)
		return -FI_EINVAL;
	if (ep->out[dest]) {
		*out = ep->out[dest];
		return 0;
	}
	struct mr_qp *qp;
	int e = mr_create_qp(ep->ctx, &(struct mr_qp_attr){.sq_slots = 64, .cq_slots = 256}, &qp);
	if (e)
		return -errno_of(e);
	e = mr_connect(qp, ep->av->peers[dest].ip, ep->av->peers[dest].qpn, 10000);
	if (e) {
		mr_destroy_qp(qp);
		return -errno_of(e);
	}
	ep->out[dest] = *out = qp;
	return 0;
}

static ssize_t send_common(struct mrp_ep *ep, const void *buf, size_t len, fi_addr_t dest, void *context,
			   int complete)
{
	if (!ep->enabled)
		return -FI_EOPBADSTATE;
	if (len > MRP_SLOT)
		return -FI_EMSGSIZE;
	struct mr_qp *qp;
	int e = peer_qp(ep, dest, &qp);
	if (e)
		return e;
	unsigned slot = MRP_TX;
	for (unsigned i = 0; i < MRP_TX; i++)
		if (!ep->tx_busy[i]) {
			slot = i;
			break;
		}
	if (slot == MRP_TX) {
		ep_progress(ep);
		return -FI_EAGAIN;
	}
	memcpy(tx_slot(ep, slot), buf, len);
	struct mr_wr w = {.op = MR_WR_SEND, .wr_id = slot, .lkey = ep->mr->key,
			  .laddr = ep->mr->addr + (uint64_t)(MRP_RX + slot) * MRP_SLOT, .length = (uint32_t)len};
	int n = mr_post(qp, &w, 1);
	if (n < 0)
		return -errno_of(n);
	ep->tx_busy[slot] = 1;
	ep->tx_ctx[slot] = context;
	if (!complete) {
		/* fi_inject: no completion; the slot frees when the SEND does. */
		ep->tx_busy[slot] = 2;
	}
	return 0;
}

static ssize_t ep_send(struct fid_ep *fep, const void *buf, size_t len, void *desc, fi_addr_t dest, void *context)
{
	(void)desc;
	return send_common((struct mrp_ep *)fep, buf, len, dest, context, 1);
}

static ssize_t ep_sendv(struct fid_ep *fep, const struct iovec *iov, void **desc, size_t count, fi_addr_t dest,
			void *context)
{
	(void)desc;
	if (count > 1)
		return -FI_EINVAL;
	return send_common((struct mrp_ep *)fep, count ? iov[0].iov_base : NULL, count ? iov[0].iov_len : 0, dest,
			   context, 1);
}

static ssize_t ep_sendmsg(struct fid_ep *fep, const struct fi_msg *m, uint64_t flags)
{
	(void)flags; /* FI_INJECT: the bounce copy already frees the buffer */
	return ep_sendv(fep, m->msg_iov, m->desc, m->iov_count, m->addr, m->context);
}

static ssize_t ep_inject(struct fid_ep *fep, const void *buf, size_t len, fi_addr_t dest)
{
	return send_common((struct mrp_ep *)fep, buf, len, dest, NULL, 0);
}

static int ep_getname(fid_t fid, void *addr, size_t *len)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	size_t want = sizeof ep->name;
	if (*len < want) {
		*len = want;
		return -FI_ETOOSMALL;
	}
	memcpy(addr, &ep->name, want);
	*len = want;
	return 0;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	switch (bfid->fclass) {
	case FI_CLASS_CQ: {
		struct mrp_cq *cq = (struct mrp_cq *)bfid;
		cq->ep = ep;
		if (flags & FI_TRANSMIT)
			ep->tx = cq;
		if (flags & FI_RECV)
			ep->rx = cq;
		return 0;
	}
	case FI_CLASS_AV:
		ep->av = (struct mrp_av *)bfid;
		return 0;
	case FI_CLASS_EQ:
		return 0;
	}
	return -FI_EINVAL;
}

static int ep_control(struct fid *fid, int cmd, void *arg)
{
	(void)arg;
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	if (cmd != FI_ENABLE)
		return -FI_ENOSYS;
	if (!ep->rx || !ep->tx || !ep->av)
		return -FI_ENOCQ;
	for (unsigned i = 0; i < MRP_RX; i++) {
		int e = post_rx(ep, i);
		if (e < 0)
			return -errno_of(e);
	}
	ep->enabled = 1;
	return 0;
}

static int ep_close(struct fid *fid)
{
	struct mrp_ep *ep = (struct mrp_ep *)fid;
	for (int p = 0; p < MRP_MAX_PEERS; p++)
		if (ep->out[p])
			mr_destroy_qp(ep->out[p]);
	if (ep->in)
		mr_destroy_qp(ep->in);
	if (ep->mr)
		mr_dereg(ep->mr);
	mr_mem_free(ep->mem);
	while (ep->uh != ep->ut)
		free(ep->unexp[ep->uh++ % MRP_CQ_LEN].data);
	mr_close(ep->ctx);
	free(ep);
	return 0;
}

static struct fi_ops ep_fi_ops = {.size = sizeof(struct fi_ops), .close = ep_close, .bind = ep_bind,
				  .control = ep_control};
static struct fi_ops_cm ep_cm = {.size = sizeof(struct fi_ops_cm), .getname = ep_getname};
static struct fi_ops_msg ep_msg = {.size = sizeof(struct fi_ops_msg), .recv = ep_recv, .recvv = ep_recvv,
				   .recvmsg = ep_recvmsg, .send = ep_send, .sendv = ep_sendv,
				   .sendmsg = ep_sendmsg, .inject = ep_inject};
static struct fi_ops_ep ep_ops = {.size = sizeof(struct fi_ops_ep)};

static const char *socket_path(void)
{
	const char *s = getenv("METAROCE_SOCKET");
	return s && *s ? s : MR_DEFAULT_SOCKET;
}

static int ep_open(struct fid_domain *dom, struct fi_info *info, struct fid_ep **out, void *context)
{
	(void)dom;
	if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM && info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_ENOPROTOOPT;
	struct mrp_ep *ep = calloc(1, sizeof *ep);
	if (!ep)
		return -FI_ENOMEM;
	ep->ep.fid.fclass = FI_CLASS_EP;
	ep->ep.fid.context = context;
	ep->ep.fid.ops = &ep_fi_ops;
	ep->ep.ops = &ep_ops;
	ep->ep.cm = &ep_cm;
	ep->ep.msg = &ep_msg;
	int e = mr_open(socket_path(), &ep->ctx);
	if (!e)
		e = mr_mem_alloc((size_t)(MRP_RX + MRP_TX) * MRP_SLOT, &ep->mem);
	if (!e)
		e = mr_reg(ep->ctx, ep->mem, 0, (size_t)(MRP_RX + MRP_TX) * MRP_SLOT, MR_ACCESS_LOCAL_WRITE, &ep->mr);
	if (!e)
		e = mr_create_qp(ep->ctx, &(struct mr_qp_attr){.sq_slots = 64, .cq_slots = 256}, &ep->in);
	if (e) {
		ep_close(&ep->ep.fid);
		return -errno_of(e);
	}
	snprintf(ep->name.ip, sizeof ep->name.ip, "%s", mr_qp_local(ep->in));
	ep->name.qpn = mr_qp_num(ep->in);
	*out = &ep->ep;
	return 0;
}

/* ---- domain, fabric, provider ---- */

static int simple_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static struct fi_ops simple_fi_ops = {.size = sizeof(struct fi_ops), .close = simple_close};
static struct fi_ops_domain dom_ops = {.size = sizeof(struct fi_ops_domain), .av_open = av_open,
				       .cq_open = cq_open, .endpoint = ep_open};

static int domain_open(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **out, void *context)
{
	(void)fab;
	(void)info;
	struct fid_domain *d = calloc(1, sizeof *d);
	if (!d)
		return -FI_ENOMEM;
	d->fid.fclass = FI_CLASS_DOMAIN;
	d->fid.context = context;
	d->fid.ops = &simple_fi_ops;
	d->ops = &dom_ops;
	*out = d;
	return 0;
}

/* An event queue: fi_pingpong opens one even for RDM; nothing is ever
 * reported on it (no connection management is visible to the application). */
static ssize_t eq_read(struct fid_eq *eq, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	(void)eq; (void)event; (void)buf; (void)len; (void)flags;
	return -FI_EAGAIN;
}

static struct fi_ops_eq eq_ops = {.size = sizeof(struct fi_ops_eq), .read = eq_read};

static int eq_open(struct fid_fabric *fab, struct fi_eq_attr *attr, struct fid_eq **out, void *context)
{
	(void)fab;
	(void)attr;
	struct fid_eq *q = calloc(1, sizeof *q);
	if (!q)
		return -FI_ENOMEM;
	q->fid.fclass = FI_CLASS_EQ;
	q->fid.context = context;
	q->fid.ops = &simple_fi_ops;
	q->ops = &eq_ops;
	*out = q;
	return 0;
}

static struct fi_ops_fabric fab_ops = {.size = sizeof(struct fi_ops_fabric), .domain = domain_open,
				       .eq_open = eq_open};

static int fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **out, void *context)
{
	(void)attr;
	struct fid_fabric *f = calloc(1, sizeof *f);
	if (!f)
		return -FI_ENOMEM;
	f->fid.fclass = FI_CLASS_FABRIC;
	f->fid.context = context;
	f->fid.ops = &simple_fi_ops;
	f->ops = &fab_ops;
	*out = f;
	return 0;
}

#define MRP_CAPS (FI_MSG | FI_SEND | FI_RECV)

static int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	(void)node;
	(void)service;
	(void)flags;
	if (hints) {
		if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != FI_EP_RDM)
			return -FI_ENODATA;
		if (hints->caps & ~(MRP_CAPS | FI_LOCAL_COMM | FI_REMOTE_COMM))
			return -FI_ENODATA;
		if (hints->ep_attr && hints->ep_attr->max_msg_size > MRP_SLOT)
			return -FI_ENODATA;
		if (hints->domain_attr && hints->domain_attr->name && strcmp(hints->domain_attr->name, "metaroce"))
			return -FI_ENODATA;
	}
	struct fi_info t = {0};
	struct fi_tx_attr tx = {.caps = MRP_CAPS & ~FI_RECV, .msg_order = FI_ORDER_SAS, .size = MRP_TX,
				.iov_limit = 1, .inject_size = 0};
	struct fi_rx_attr rx = {.caps = MRP_CAPS & ~FI_SEND, .msg_order = FI_ORDER_SAS, .size = MRP_CQ_LEN,
				.iov_limit = 1};
	struct fi_ep_attr ep = {.type = FI_EP_RDM, .protocol = FI_PROTO_UNSPEC, .max_msg_size = MRP_SLOT,
				.tx_ctx_cnt = 1, .rx_ctx_cnt = 1};
	struct fi_domain_attr dom = {.name = "metaroce", .threading = FI_THREAD_DOMAIN,
				     .control_progress = FI_PROGRESS_MANUAL, .data_progress = FI_PROGRESS_MANUAL,
				     .resource_mgmt = FI_RM_DISABLED, .av_type = FI_AV_TABLE,
				     .mr_mode = FI_VERSION_GE(version, FI_VERSION(1, 5)) ? 0 : FI_MR_SCALABLE,
				     .cq_cnt = 64, .ep_cnt = 64, .tx_ctx_cnt = 1, .rx_ctx_cnt = 1, .max_ep_tx_ctx = 1,
				     .max_ep_rx_ctx = 1, .cq_data_size = 0};
	struct fi_fabric_attr fab = {.name = "metaroce", .prov_version = MRP_PROV_VERSION,
				     .api_version = FI_VERSION(1, 17)};
	t.caps = MRP_CAPS;
	t.addr_format = FI_FORMAT_UNSPEC;
	t.tx_attr = &tx;
	t.rx_attr = &rx;
	t.ep_attr = &ep;
	t.domain_attr = &dom;
	t.fabric_attr = &fab;
	*info = fi_dupinfo(&t);
	return *info ? 0 : -FI_ENOMEM;
}

static void cleanup(void) {}

static struct fi_provider mrp_prov = {
	.version = MRP_PROV_VERSION,
	.fi_version = FI_VERSION(1, 17),
	.name = "metaroce",
	.getinfo = getinfo,
	.fabric = fabric_open,
	.cleanup = cleanup,
};

FI_EXT_INI
{
	return &mrp_prov;
}
