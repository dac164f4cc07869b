/* prov.c: the libfabric provider "metaroce" (libmetaroce-fi.so), an
 * external DL provider on libmetaroce: fi_getinfo's answer, the fabric,
 * its event queue and fi_trywait, and the domain. prov.h has the design;
 * docs/libfabric.md says what the provider is and is not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov.h"

/* ---- the domain ---- */

static int domain_close(struct fid *fid)
{
	struct mrp_domain *d = (struct mrp_domain *)fid;
	if (d->mrs || d->eps)
		return -FI_EBUSY;
	if (d->ctx)
		mr_close(d->ctx);
	free(d);
	return 0;
}

/* fi_domain_bind (an EQ for FI_REG_MR events: registration here is
 * synchronous), fi_mr_map_raw and fi_mr_unmap_key (fi_control: no raw
 * keys) are not there. */
static struct fi_ops dom_fi_ops = {.size = sizeof(struct fi_ops), .close = domain_close, .bind = no_bind,
				   .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				   .ops_set = no_ops_set};
static struct fi_ops_domain dom_ops = {.size = sizeof(struct fi_ops_domain), .av_open = mrp_av_open,
				       .cq_open = mrp_cq_open, .endpoint = mrp_ep_open,
				       .scalable_ep = no_scalable_ep, .cntr_open = mrp_cntr_open,
				       .poll_open = mrp_poll_open, .stx_ctx = no_stx_ctx, .srx_ctx = no_srx_ctx,
				       .query_atomic = mrp_query_atomic, .query_collective = no_query_collective,
				       .endpoint2 = no_endpoint2};

/* Every tag bit matches (libfabric's internal FI_TAG_GENERIC, not in its
 * public headers). */
#define MRP_TAG_GENERIC 0xAAAAAAAAAAAAAAAAULL

#define MRP_RMA_MR (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED)

static int domain_open(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **out, void *context)
{
	(void)fab;
	struct mrp_domain *d = calloc(1, sizeof *d);
	if (!d)
		return -FI_ENOMEM;
	d->dom.fid.fclass = FI_CLASS_DOMAIN;
	d->dom.fid.context = context;
	d->dom.fid.ops = &dom_fi_ops;
	d->dom.ops = &dom_ops;
	d->dom.mr = &mrp_mr_ops;
	d->addr_format = info ? (int)info->addr_format : FI_FORMAT_UNSPEC;
	if (d->addr_format != FI_FORMAT_UNSPEC && d->addr_format != FI_SOCKADDR_IN) {
		free(d);
		return -FI_EINVAL;
	}
	/* Registrations are real when the info says RMA and the modes it
	 * needs (getinfo offers FI_RMA only with them). */
	d->rma = info && (info->caps & FI_RMA) && info->domain_attr &&
		 ((info->domain_attr->mr_mode & MRP_RMA_MR) == MRP_RMA_MR || info->domain_attr->mr_mode == FI_MR_BASIC);
	*out = &d->dom;
	return 0;
}

static int simple_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static struct fi_ops simple_fi_ops = {.size = sizeof(struct fi_ops), .close = simple_close, .bind = no_bind,
				      .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				      .ops_set = no_ops_set};

/* ---- the fabric ---- */

/* trywait: every fid must be a CQ of this provider with a wait object,
 * or one of its event queues. */
static int fab_trywait(struct fid_fabric *fab, struct fid **fids, int count)
{
	(void)fab;
	for (int i = 0; i < count; i++) {
		if (fids[i] && fids[i]->fclass == FI_CLASS_EQ) {
			int r = mrp_eq_trywait((struct fid_eq *)fids[i]);
			if (r)
				return r;
			continue;
		}
		if (!fids[i] || fids[i]->fclass != FI_CLASS_CQ)
			return -FI_EINVAL;
		struct mrp_cq *cq = (struct mrp_cq *)fids[i];
		if (cq->epfd < 0)
			return -FI_EINVAL;
		int r = mrp_cq_trywait(cq);
		if (r)
			return r;
	}
	return 0;
}

static struct fi_ops_fabric fab_ops = {.size = sizeof(struct fi_ops_fabric), .domain = domain_open,
				       .passive_ep = no_passive_ep, .eq_open = mrp_eq_open, .wait_open = no_wait_open,
				       .trywait = fab_trywait, .domain2 = no_domain2};

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

/* ---- fi_getinfo ---- */

/* FI_ATOMIC rides messages (atomic.c), in either registration mode. */
#define MRP_MSG_CAPS (FI_MSG | FI_TAGGED | FI_ATOMIC | FI_SEND | FI_RECV)
#define MRP_RMA_CAPS (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define MRP_SEC_CAPS (FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM | FI_MULTI_RECV)
#define MRP_TX_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_SEND | FI_READ | FI_WRITE)
#define MRP_DOM_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define MRP_RX_CAPS \
	(FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV)

/* rma_modes says whether the application takes the registration modes
 * RMA needs here: virtual addresses, provider keys, allocated memory. */
static int rma_modes(uint32_t version, const struct fi_info *hints)
{
	if (!hints || !hints->domain_attr)
		return 1;
	int mode = hints->domain_attr->mr_mode;
	if (FI_VERSION_LT(version, FI_VERSION(1, 5)))
		return mode == FI_MR_UNSPEC || mode == FI_MR_BASIC;
	return mode == FI_MR_BASIC || (mode & MRP_RMA_MR) == MRP_RMA_MR;
}

/* addresses works out an info's addressing. The format is the
 * provider's own name (FI_FORMAT_UNSPEC: address, service and the
 * listener's token, which keeps an endpoint that never listens publicly
 * out of reach of those not given its name), or FI_SOCKADDR_IN when the
 * application asks for sockaddrs (FI_SOCKADDR or FI_SOCKADDR_IN): an IPv4
 * address and a 16-bit port, every endpoint then listening publicly at
 * that port. node and service name an endpoint in band (fi_getinfo(3)):
 * with FI_SOURCE our own, whose endpoint then listens at that service,
 * else the peer's, given back as dest_addr. A service that is no number
 * (or past the format's range), a node that does not resolve, or an
 * address of another format or length matches nothing here. */
static int addresses(const char *node, const char *service, uint64_t flags, const struct fi_info *hints, int *fmt,
		     struct mrp_name *src, struct mrp_name *dst, int *have_dst)
{
	memset(src, 0, sizeof *src);
	memset(dst, 0, sizeof *dst);
	*have_dst = 0;
	*fmt = FI_FORMAT_UNSPEC;
	if (hints) {
		switch (hints->addr_format) {
		case FI_FORMAT_UNSPEC:
			break;
		case FI_SOCKADDR:
		case FI_SOCKADDR_IN:
			*fmt = FI_SOCKADDR_IN;
			break;
		default:
			return -FI_ENODATA;
		}
	}
	size_t alen = mrp_addrlen(*fmt);
	int have_src = 0;
	if (node || service) {
		struct mrp_name *n = (flags & FI_SOURCE) ? src : dst;
		if (mrp_name_parse(node, service, n) || !mrp_name_fits(*fmt, n))
			return -FI_ENODATA;
		if (flags & FI_SOURCE)
			have_src = 1;
		else
			*have_dst = dst->ip[0] && dst->service;
	}
	if (hints && hints->src_addr && !have_src) {
		if (hints->src_addrlen != alen || mrp_addr_to_name(*fmt, hints->src_addr, src))
			return -FI_ENODATA;
	}
	if (hints && hints->dest_addr && !*have_dst) {
		if (hints->dest_addrlen != alen || mrp_addr_to_name(*fmt, hints->dest_addr, dst))
			return -FI_ENODATA;
		*have_dst = 1;
	}
	return 0;
}

static int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	struct mrp_name src, dst;
	int fmt, have_dst;
	int e = addresses(node, service, flags, hints, &fmt, &src, &dst, &have_dst);
	if (e)
		return e;
	uint64_t caps = MRP_MSG_CAPS | MRP_RMA_CAPS | MRP_SEC_CAPS;
	/* Either kind is fine here (an fi_addr_t is the index in both): unless
	 * asked, say so, and the application picks (fi_domain(3)). */
	enum fi_av_type av = FI_AV_UNSPEC;
	int rma = rma_modes(version, hints);
	if (hints) {
		const struct fi_domain_attr *hd = hints->domain_attr;
		if (hints->ep_attr && hints->ep_attr->type != FI_EP_UNSPEC && hints->ep_attr->type != FI_EP_RDM)
			return -FI_ENODATA;
		if (hints->caps & ~(MRP_MSG_CAPS | MRP_RMA_CAPS | MRP_SEC_CAPS))
			return -FI_ENODATA;
		if (hints->ep_attr && hints->ep_attr->max_msg_size > MRP_MAX_MSG)
			return -FI_ENODATA;
		if (hd && hd->name && strcmp(hd->name, "metaroce"))
			return -FI_ENODATA;
		/* One thread per domain, progress by the application's calls. */
		if (hd && (hd->threading == FI_THREAD_SAFE || hd->threading == FI_THREAD_FID ||
			   hd->threading == FI_THREAD_ENDPOINT || hd->threading == FI_THREAD_COMPLETION))
			return -FI_ENODATA;
		if (hd && (hd->control_progress == FI_PROGRESS_AUTO || hd->data_progress == FI_PROGRESS_AUTO))
			return -FI_ENODATA;
		if (hd && hd->cq_data_size > MRP_CQ_DATA)
			return -FI_ENODATA;
		/* Domain capabilities asked for must be there (fi_domain(3)):
		 * no shared address vectors across processes. */
		if (hd && (hd->caps & ~(uint64_t)MRP_DOM_CAPS))
			return -FI_ENODATA;
		/* Ordering: send after send, per peer (one queue pair carries a
		 * peer's messages in order, segments included); nothing else is
		 * promised, so asking for more matches nothing. */
		if ((hints->tx_attr && (hints->tx_attr->msg_order & ~(uint64_t)FI_ORDER_SAS)) ||
		    (hints->rx_attr && (hints->rx_attr->msg_order & ~(uint64_t)FI_ORDER_SAS)))
			return -FI_ENODATA;
		if (hd && hd->av_type != FI_AV_UNSPEC)
			av = hd->av_type;
		if (hints->caps) {
			if ((hints->caps & FI_RMA) && !rma)
				return -FI_ENODATA;
			caps = hints->caps;
			if ((caps & (FI_MSG | FI_TAGGED)) && !(caps & (FI_SEND | FI_RECV)))
				caps |= FI_SEND | FI_RECV;
			if ((caps & FI_RMA) && !(caps & (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)))
				caps |= FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
		} else if (!rma) {
			caps &= ~(uint64_t)MRP_RMA_CAPS;
		}
	}
	rma = rma && (caps & FI_RMA);
	/* FI_MR_BASIC, asked for by name, is the same three bits (fi_mr(3)):
	 * answered as asked. */
	int basic = hints && hints->domain_attr && hints->domain_attr->mr_mode == FI_MR_BASIC;
	int mr_mode = rma ? (FI_VERSION_GE(version, FI_VERSION(1, 5)) && !basic ? MRP_RMA_MR : FI_MR_BASIC)
			  : (FI_VERSION_GE(version, FI_VERSION(1, 5)) ? 0 : FI_MR_SCALABLE);
	struct fi_info t = {0};
	/* op_flags are the application's defaults for calls without flags
	 * (FI_COMPLETION with FI_SELECTIVE_COMPLETION): kept as asked. */
	uint64_t txf = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
	uint64_t rxf = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
	struct fi_tx_attr tx = {.caps = caps & MRP_TX_CAPS, .op_flags = txf, .msg_order = FI_ORDER_SAS, .size = MRP_XFERS,
				.iov_limit = MRP_IOV, .rma_iov_limit = 1, .inject_size = MRP_INJECT};
	/* tx iov_limit: local iovs of a send or an RMA operation (a list of
	 * the daemon's when they are registered, else copied through a slot);
	 * rma_iov_limit 1: one remote range per operation (nothing is split
	 * into several requests behind the application's back). rx
	 * iov_limit MRP_RX_IOV: arrivals are copied out of the receive slots
	 * anyway, into up to that many iovs. */
	struct fi_rx_attr rx = {.caps = caps & MRP_RX_CAPS, .op_flags = rxf, .msg_order = FI_ORDER_SAS, .size = MRP_POSTED,
				.iov_limit = MRP_RX_IOV, .total_buffered_recv = 0};
	struct fi_ep_attr ep = {.type = FI_EP_RDM, .protocol = FI_PROTO_UNSPEC, .max_msg_size = MRP_MAX_MSG,
				.mem_tag_format = hints && hints->ep_attr && hints->ep_attr->mem_tag_format
							  ? hints->ep_attr->mem_tag_format
							  : MRP_TAG_GENERIC,
				.tx_ctx_cnt = 1, .rx_ctx_cnt = 1};
	struct fi_domain_attr dom = {.name = "metaroce", .threading = FI_THREAD_DOMAIN,
				     .control_progress = FI_PROGRESS_MANUAL, .data_progress = FI_PROGRESS_MANUAL,
				     .resource_mgmt = FI_RM_ENABLED, .av_type = av, .mr_mode = mr_mode,
				     .cq_cnt = 64, .cntr_cnt = 1024, .ep_cnt = 64, .tx_ctx_cnt = 1, .rx_ctx_cnt = 1, .max_ep_tx_ctx = 1,
				     .max_ep_rx_ctx = 1, .cq_data_size = MRP_CQ_DATA,
				     .mr_key_size = rma ? sizeof(uint32_t) : sizeof(uint64_t), .mr_iov_limit = 1,
				     .caps = MRP_DOM_CAPS, .mr_cnt = 4096};
	struct fi_fabric_attr fab = {.name = "metaroce", .prov_version = MRP_PROV_VERSION,
				     .api_version = FI_VERSION(1, 17)};
	t.caps = caps;
	t.addr_format = (uint32_t)fmt;
	t.tx_attr = &tx;
	t.rx_attr = &rx;
	t.ep_attr = &ep;
	t.domain_attr = &dom;
	t.fabric_attr = &fab;
	/* Every info names a source (fi_getinfo(3)): with no address asked
	 * for, the host's daemon's, whose engine address and service the
	 * endpoint learns when it listens (all zero here). */
	uint8_t srcb[MRP_ADDR_MAX], dstb[MRP_ADDR_MAX];
	size_t alen = mrp_addrlen(fmt);
	mrp_name_to_addr(fmt, &src, srcb);
	t.src_addr = srcb;
	t.src_addrlen = alen;
	if (have_dst) {
		mrp_name_to_addr(fmt, &dst, dstb);
		t.dest_addr = dstb;
		t.dest_addrlen = alen;
	}
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
