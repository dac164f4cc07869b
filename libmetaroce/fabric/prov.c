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
				       .scalable_ep = no_scalable_ep, .cntr_open = no_cntr_open,
				       .poll_open = no_poll_open, .stx_ctx = no_stx_ctx, .srx_ctx = no_srx_ctx,
				       .query_atomic = no_query_atomic, .query_collective = no_query_collective,
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
	/* Registrations are real when the info says RMA and the modes it
	 * needs (getinfo offers FI_RMA only with them). */
	d->rma = info && (info->caps & FI_RMA) && info->domain_attr &&
		 ((info->domain_attr->mr_mode & MRP_RMA_MR) == MRP_RMA_MR || info->domain_attr->mr_mode == FI_MR_BASIC);
	*out = &d->dom;
	return 0;
}

/* ---- the event queue ----
 * fi_pingpong opens one even for RDM; nothing is ever reported on it (no
 * connection management is visible to the application). */

static int simple_close(struct fid *fid)
{
	free(fid);
	return 0;
}

static struct fi_ops simple_fi_ops = {.size = sizeof(struct fi_ops), .close = simple_close, .bind = no_bind,
				      .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				      .ops_set = no_ops_set};

static ssize_t eq_read(struct fid_eq *eq, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	(void)eq; (void)event; (void)buf; (void)len; (void)flags;
	return -FI_EAGAIN;
}

static ssize_t eq_readerr(struct fid_eq *eq, struct fi_eq_err_entry *buf, uint64_t flags)
{
	(void)eq; (void)buf; (void)flags;
	return -FI_EAGAIN;
}

static const char *eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data, char *buf, size_t len)
{
	(void)eq;
	(void)err_data;
	/* Never asked in practice: no error entry is ever reported. */
	if (buf && len) {
		snprintf(buf, len, "metaroce: error %d", prov_errno);
		return buf;
	}
	return "metaroce: error";
}

static struct fi_ops_eq eq_ops = {.size = sizeof(struct fi_ops_eq), .read = eq_read, .readerr = eq_readerr,
				  .write = no_eq_write, .sread = no_eq_sread, .strerror = eq_strerror};

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

/* ---- the fabric ---- */

/* trywait: every fid must be a CQ of this provider with a wait object. */
static int fab_trywait(struct fid_fabric *fab, struct fid **fids, int count)
{
	(void)fab;
	for (int i = 0; i < count; i++) {
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
				       .passive_ep = no_passive_ep, .eq_open = eq_open, .wait_open = no_wait_open,
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

#define MRP_MSG_CAPS (FI_MSG | FI_TAGGED | FI_SEND | FI_RECV)
#define MRP_RMA_CAPS (FI_RMA | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define MRP_SEC_CAPS (FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM)
#define MRP_TX_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_SEND | FI_READ | FI_WRITE)
#define MRP_RX_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_DIRECTED_RECV | FI_SOURCE)

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

static int getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
		   const struct fi_info *hints, struct fi_info **info)
{
	(void)node;
	(void)service;
	(void)flags;
	uint64_t caps = MRP_MSG_CAPS | MRP_RMA_CAPS | MRP_SEC_CAPS;
	enum fi_av_type av = FI_AV_TABLE;
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
	int mr_mode = rma ? (FI_VERSION_GE(version, FI_VERSION(1, 5)) ? MRP_RMA_MR : FI_MR_BASIC)
			  : (FI_VERSION_GE(version, FI_VERSION(1, 5)) ? 0 : FI_MR_SCALABLE);
	struct fi_info t = {0};
	/* op_flags are the application's defaults for calls without flags
	 * (FI_COMPLETION with FI_SELECTIVE_COMPLETION): kept as asked. */
	uint64_t txf = hints && hints->tx_attr ? hints->tx_attr->op_flags : 0;
	uint64_t rxf = hints && hints->rx_attr ? hints->rx_attr->op_flags : 0;
	struct fi_tx_attr tx = {.caps = caps & MRP_TX_CAPS, .op_flags = txf, .msg_order = FI_ORDER_SAS, .size = MRP_TX,
				.iov_limit = MRP_IOV, .rma_iov_limit = 1, .inject_size = MRP_INJECT};
	/* tx iov_limit: local iovs of a send or an RMA operation (a list of
	 * the daemon's when they are registered, else copied through a slot);
	 * rma_iov_limit 1: one remote range per operation (nothing is split
	 * into several requests behind the application's back). rx
	 * iov_limit 1: a receive takes one buffer. */
	struct fi_rx_attr rx = {.caps = caps & MRP_RX_CAPS, .op_flags = rxf, .msg_order = FI_ORDER_SAS, .size = MRP_POSTED,
				.iov_limit = 1, .total_buffered_recv = 0};
	struct fi_ep_attr ep = {.type = FI_EP_RDM, .protocol = FI_PROTO_UNSPEC, .max_msg_size = MRP_MAX_MSG,
				.mem_tag_format = hints && hints->ep_attr && hints->ep_attr->mem_tag_format
							  ? hints->ep_attr->mem_tag_format
							  : MRP_TAG_GENERIC,
				.tx_ctx_cnt = 1, .rx_ctx_cnt = 1};
	struct fi_domain_attr dom = {.name = "metaroce", .threading = FI_THREAD_DOMAIN,
				     .control_progress = FI_PROGRESS_MANUAL, .data_progress = FI_PROGRESS_MANUAL,
				     .resource_mgmt = FI_RM_ENABLED, .av_type = av, .mr_mode = mr_mode,
				     .cq_cnt = 64, .ep_cnt = 64, .tx_ctx_cnt = 1, .rx_ctx_cnt = 1, .max_ep_tx_ctx = 1,
				     .max_ep_rx_ctx = 1, .cq_data_size = MRP_CQ_DATA,
				     .mr_key_size = rma ? sizeof(uint32_t) : sizeof(uint64_t), .mr_iov_limit = 1,
				     .caps = FI_LOCAL_COMM | FI_REMOTE_COMM, .mr_cnt = 4096};
	struct fi_fabric_attr fab = {.name = "metaroce", .prov_version = MRP_PROV_VERSION,
				     .api_version = FI_VERSION(1, 17)};
	t.caps = caps;
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
