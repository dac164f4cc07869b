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
 * inbound queue pair accepts one connection). Every other call libfabric
 * has on these objects is there and fails with -FI_ENOSYS ("what the
 * provider does not do" below), but fi_mr_reg, which succeeds without
 * registering anything ("memory registration"). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
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

/* The endpoint's name: the engine's address, the inbound queue pair and
 * its token (a peer's connect must present it, docs/spec.md §7.3; the
 * name travels out of band, as fi_getname's output always does). */
struct mrp_name {
	char ip[46];
	uint8_t pad[2];
	uint32_t qpn;
	uint32_t pad2;
	uint64_t token;
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

/* ---- what the provider does not do ----
 *
 * libfabric's calls are inline functions that jump through the object's
 * ops tables without checking them (fi_mr_reg is domain->mr->reg(...)), so
 * a table left NULL, or a NULL member, crashes the application instead of
 * failing the call. Every table of every object made here is therefore
 * complete, and what is not implemented says so: -FI_ENOSYS, the code that
 * the inlines return themselves where they do check (FI_CHECK_OP) and that
 * libfabric's own providers return (its internal fi_no_* helpers, which a
 * DL provider cannot link to). fi_getopt and fi_setopt know no option:
 * -FI_ENOPROTOOPT, as libfabric's udp provider, the code applications test
 * for an option a provider lacks. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"

#define MRP_NOSYS(type, name, params)                                                                          \
	static type name params { return -FI_ENOSYS; }

/* struct fi_ops: every fid */
MRP_NOSYS(int, no_bind, (struct fid *fid, struct fid *bfid, uint64_t flags))
MRP_NOSYS(int, no_control, (struct fid *fid, int command, void *arg))
MRP_NOSYS(int, no_ops_open, (struct fid *fid, const char *name, uint64_t flags, void **ops, void *context))
MRP_NOSYS(int, no_tostr, (const struct fid *fid, char *buf, size_t len))
MRP_NOSYS(int, no_ops_set, (struct fid *fid, const char *name, uint64_t flags, void *ops, void *context))

/* fabric: no passive endpoints (FI_EP_RDM only), no wait sets */
MRP_NOSYS(int, no_passive_ep, (struct fid_fabric *fab, struct fi_info *info, struct fid_pep **pep, void *context))
MRP_NOSYS(int, no_wait_open, (struct fid_fabric *fab, struct fi_wait_attr *attr, struct fid_wait **waitset))
MRP_NOSYS(int, no_trywait, (struct fid_fabric *fab, struct fid **fids, int count))
MRP_NOSYS(int, no_domain2, (struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom, uint64_t flags,
			    void *context))

/* domain: one endpoint kind, no counters, poll sets, shared contexts,
 * atomics or collectives */
MRP_NOSYS(int, no_scalable_ep, (struct fid_domain *dom, struct fi_info *info, struct fid_ep **sep, void *context))
MRP_NOSYS(int, no_cntr_open, (struct fid_domain *dom, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
			      void *context))
MRP_NOSYS(int, no_poll_open, (struct fid_domain *dom, struct fi_poll_attr *attr, struct fid_poll **pollset))
MRP_NOSYS(int, no_stx_ctx, (struct fid_domain *dom, struct fi_tx_attr *attr, struct fid_stx **stx, void *context))
MRP_NOSYS(int, no_srx_ctx, (struct fid_domain *dom, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context))
MRP_NOSYS(int, no_query_atomic, (struct fid_domain *dom, enum fi_datatype datatype, enum fi_op op,
				 struct fi_atomic_attr *attr, uint64_t flags))
MRP_NOSYS(int, no_query_collective, (struct fid_domain *dom, enum fi_collective_op coll,
				     struct fi_collective_attr *attr, uint64_t flags))
MRP_NOSYS(int, no_endpoint2, (struct fid_domain *dom, struct fi_info *info, struct fid_ep **ep, uint64_t flags,
			      void *context))

/* event queue: nothing is written to it, nor waited on */
MRP_NOSYS(ssize_t, no_eq_write, (struct fid_eq *eq, uint32_t event, const void *buf, size_t len, uint64_t flags))
MRP_NOSYS(ssize_t, no_eq_sread, (struct fid_eq *eq, uint32_t *event, void *buf, size_t len, int timeout,
				 uint64_t flags))

/* completion queue: no wait object to signal */
MRP_NOSYS(int, no_cq_signal, (struct fid_cq *cq))

/* address vector: entries by address only, never removed (an index is
 * a peer's outbound queue pair in every endpoint bound to it) */
MRP_NOSYS(int, no_av_insertsvc, (struct fid_av *av, const char *node, const char *service, fi_addr_t *fi_addr,
				 uint64_t flags, void *context))
MRP_NOSYS(int, no_av_insertsym, (struct fid_av *av, const char *node, size_t nodecnt, const char *service,
				 size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context))
MRP_NOSYS(int, no_av_remove, (struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags))
MRP_NOSYS(int, no_av_set, (struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **av_set,
			   void *context))

/* endpoint */
MRP_NOSYS(ssize_t, no_cancel, (fid_t fid, void *context))
MRP_NOSYS(int, no_tx_ctx, (struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx_ep,
			   void *context))
MRP_NOSYS(int, no_rx_ctx, (struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
			   void *context))
MRP_NOSYS(ssize_t, no_rx_size_left, (struct fid_ep *ep))
MRP_NOSYS(ssize_t, no_tx_size_left, (struct fid_ep *ep))

static int ep_getopt(fid_t fid, int level, int optname, void *optval, size_t *optlen)
{
	return -FI_ENOPROTOOPT;
}

static int ep_setopt(fid_t fid, int level, int optname, const void *optval, size_t optlen)
{
	return -FI_ENOPROTOOPT;
}

/* connection management: FI_EP_RDM connects by itself */
MRP_NOSYS(int, no_setname, (fid_t fid, void *addr, size_t addrlen))
MRP_NOSYS(int, no_getpeer, (struct fid_ep *ep, void *addr, size_t *addrlen))
MRP_NOSYS(int, no_connect, (struct fid_ep *ep, const void *addr, const void *param, size_t paramlen))
MRP_NOSYS(int, no_listen, (struct fid_pep *pep))
MRP_NOSYS(int, no_accept, (struct fid_ep *ep, const void *param, size_t paramlen))
MRP_NOSYS(int, no_reject, (struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen))
MRP_NOSYS(int, no_shutdown, (struct fid_ep *ep, uint64_t flags))
MRP_NOSYS(int, no_join, (struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context))

/* messages: no remote CQ data (cq_data_size 0) */
MRP_NOSYS(ssize_t, no_senddata, (struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
				 fi_addr_t dest_addr, void *context))
MRP_NOSYS(ssize_t, no_injectdata, (struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				   fi_addr_t dest_addr))

/* FI_RMA */
MRP_NOSYS(ssize_t, no_rma_read, (struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
				 uint64_t addr, uint64_t key, void *context))
MRP_NOSYS(ssize_t, no_rma_readv, (struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
				  fi_addr_t src_addr, uint64_t addr, uint64_t key, void *context))
MRP_NOSYS(ssize_t, no_rma_readmsg, (struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags))
MRP_NOSYS(ssize_t, no_rma_write, (struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr,
				  uint64_t addr, uint64_t key, void *context))
MRP_NOSYS(ssize_t, no_rma_writev, (struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
				   fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context))
MRP_NOSYS(ssize_t, no_rma_writemsg, (struct fid_ep *ep, const struct fi_msg_rma *msg, uint64_t flags))
MRP_NOSYS(ssize_t, no_rma_inject, (struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr,
				   uint64_t addr, uint64_t key))
MRP_NOSYS(ssize_t, no_rma_writedata, (struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
				      fi_addr_t dest_addr, uint64_t addr, uint64_t key, void *context))
MRP_NOSYS(ssize_t, no_rma_injectdata, (struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
				       fi_addr_t dest_addr, uint64_t addr, uint64_t key))

/* FI_TAGGED */
MRP_NOSYS(ssize_t, no_tagged_recv, (struct fid_ep *ep, void *buf, size_t len, void *desc, fi_addr_t src_addr,
				    uint64_t tag, uint64_t ignore, void *context))
MRP_NOSYS(ssize_t, no_tagged_recvv, (struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
				     fi_addr_t src_addr, uint64_t tag, uint64_t ignore, void *context))
MRP_NOSYS(ssize_t, no_tagged_recvmsg, (struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags))
MRP_NOSYS(ssize_t, no_tagged_send, (struct fid_ep *ep, const void *buf, size_t len, void *desc, fi_addr_t dest_addr,
				    uint64_t tag, void *context))
MRP_NOSYS(ssize_t, no_tagged_sendv, (struct fid_ep *ep, const struct iovec *iov, void **desc, size_t count,
				     fi_addr_t dest_addr, uint64_t tag, void *context))
MRP_NOSYS(ssize_t, no_tagged_sendmsg, (struct fid_ep *ep, const struct fi_msg_tagged *msg, uint64_t flags))
MRP_NOSYS(ssize_t, no_tagged_inject, (struct fid_ep *ep, const void *buf, size_t len, fi_addr_t dest_addr,
				      uint64_t tag))
MRP_NOSYS(ssize_t, no_tagged_senddata, (struct fid_ep *ep, const void *buf, size_t len, void *desc, uint64_t data,
					fi_addr_t dest_addr, uint64_t tag, void *context))
MRP_NOSYS(ssize_t, no_tagged_injectdata, (struct fid_ep *ep, const void *buf, size_t len, uint64_t data,
					  fi_addr_t dest_addr, uint64_t tag))

/* FI_ATOMIC */
MRP_NOSYS(ssize_t, no_atomic_write, (struct fid_ep *ep, const void *buf, size_t count, void *desc,
				     fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
				     enum fi_op op, void *context))
MRP_NOSYS(ssize_t, no_atomic_writev, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
				      fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
				      enum fi_op op, void *context))
MRP_NOSYS(ssize_t, no_atomic_writemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags))
MRP_NOSYS(ssize_t, no_atomic_inject, (struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest_addr,
				      uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op))
MRP_NOSYS(ssize_t, no_atomic_readwrite, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
					 void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
					 enum fi_datatype datatype, enum fi_op op, void *context))
MRP_NOSYS(ssize_t, no_atomic_readwritev, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
					  struct fi_ioc *resultv, void **result_desc, size_t result_count,
					  fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
					  enum fi_op op, void *context))
MRP_NOSYS(ssize_t, no_atomic_readwritemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
					    struct fi_ioc *resultv, void **result_desc, size_t result_count,
					    uint64_t flags))
MRP_NOSYS(ssize_t, no_atomic_compwrite, (struct fid_ep *ep, const void *buf, size_t count, void *desc,
					 const void *compare, void *compare_desc, void *result, void *result_desc,
					 fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
					 enum fi_op op, void *context))
MRP_NOSYS(ssize_t, no_atomic_compwritev, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
					  const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
					  struct fi_ioc *resultv, void **result_desc, size_t result_count,
					  fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
					  enum fi_op op, void *context))
MRP_NOSYS(ssize_t, no_atomic_compwritemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
					    const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
					    struct fi_ioc *resultv, void **result_desc, size_t result_count,
					    uint64_t flags))
MRP_NOSYS(int, no_atomic_valid, (struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op, size_t *count))

/* FI_COLLECTIVE */
MRP_NOSYS(ssize_t, no_barrier, (struct fid_ep *ep, fi_addr_t coll_addr, void *context))
MRP_NOSYS(ssize_t, no_broadcast, (struct fid_ep *ep, void *buf, size_t count, void *desc, fi_addr_t coll_addr,
				  fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags, void *context))
MRP_NOSYS(ssize_t, no_alltoall, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				 void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, uint64_t flags,
				 void *context))
MRP_NOSYS(ssize_t, no_allreduce, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				  void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, enum fi_op op,
				  uint64_t flags, void *context))
MRP_NOSYS(ssize_t, no_allgather, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				  void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, uint64_t flags,
				  void *context))
MRP_NOSYS(ssize_t, no_reduce_scatter, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				       void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype,
				       enum fi_op op, uint64_t flags, void *context))
MRP_NOSYS(ssize_t, no_reduce, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
			       void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
			       enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context))
MRP_NOSYS(ssize_t, no_scatter, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
				enum fi_datatype datatype, uint64_t flags, void *context))
MRP_NOSYS(ssize_t, no_gather, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
			       void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
			       enum fi_datatype datatype, uint64_t flags, void *context))
MRP_NOSYS(ssize_t, no_coll_msg, (struct fid_ep *ep, const struct fi_msg_collective *msg, struct fi_ioc *resultv,
				 void **result_desc, size_t result_count, uint64_t flags))
MRP_NOSYS(ssize_t, no_barrier2, (struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags, void *context))

#pragma GCC diagnostic pop

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

static struct fi_ops cq_fi_ops = {.size = sizeof(struct fi_ops), .close = cq_close, .bind = no_bind,
				  .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_cq cq_ops = {.size = sizeof(struct fi_ops_cq), .read = cq_read, .readfrom = cq_readfrom,
				  .readerr = cq_readerr, .sread = cq_sread, .sreadfrom = cq_sreadfrom,
				  .signal = no_cq_signal, .strerror = cq_strerror};

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

static struct fi_ops av_fi_ops = {.size = sizeof(struct fi_ops), .close = av_close, .bind = no_bind,
				  .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_av av_ops = {.size = sizeof(struct fi_ops_av), .insert = av_insert,
				  .insertsvc = no_av_insertsvc, .insertsym = no_av_insertsym, .remove = no_av_remove,
				  .lookup = av_lookup, .straddr = av_straddr, .av_set = no_av_set};

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
	e = mr_connect_token(qp, ep->av->peers[dest].ip, ep->av->peers[dest].qpn, ep->av->peers[dest].token, 10000);
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
				  .control = ep_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_ep ep_ops = {.size = sizeof(struct fi_ops_ep), .cancel = no_cancel, .getopt = ep_getopt,
				  .setopt = ep_setopt, .tx_ctx = no_tx_ctx, .rx_ctx = no_rx_ctx,
				  .rx_size_left = no_rx_size_left, .tx_size_left = no_tx_size_left};
static struct fi_ops_cm ep_cm = {.size = sizeof(struct fi_ops_cm), .setname = no_setname, .getname = ep_getname,
				 .getpeer = no_getpeer, .connect = no_connect, .listen = no_listen,
				 .accept = no_accept, .reject = no_reject, .shutdown = no_shutdown, .join = no_join};
static struct fi_ops_msg ep_msg = {.size = sizeof(struct fi_ops_msg), .recv = ep_recv, .recvv = ep_recvv,
				   .recvmsg = ep_recvmsg, .send = ep_send, .sendv = ep_sendv,
				   .sendmsg = ep_sendmsg, .inject = ep_inject, .senddata = no_senddata,
				   .injectdata = no_injectdata};
static struct fi_ops_rma ep_rma = {.size = sizeof(struct fi_ops_rma), .read = no_rma_read, .readv = no_rma_readv,
				   .readmsg = no_rma_readmsg, .write = no_rma_write, .writev = no_rma_writev,
				   .writemsg = no_rma_writemsg, .inject = no_rma_inject,
				   .writedata = no_rma_writedata, .injectdata = no_rma_injectdata};
static struct fi_ops_tagged ep_tagged = {.size = sizeof(struct fi_ops_tagged), .recv = no_tagged_recv,
					 .recvv = no_tagged_recvv, .recvmsg = no_tagged_recvmsg,
					 .send = no_tagged_send, .sendv = no_tagged_sendv,
					 .sendmsg = no_tagged_sendmsg, .inject = no_tagged_inject,
					 .senddata = no_tagged_senddata, .injectdata = no_tagged_injectdata};
static struct fi_ops_atomic ep_atomic = {
	.size = sizeof(struct fi_ops_atomic), .write = no_atomic_write, .writev = no_atomic_writev,
	.writemsg = no_atomic_writemsg, .inject = no_atomic_inject, .readwrite = no_atomic_readwrite,
	.readwritev = no_atomic_readwritev, .readwritemsg = no_atomic_readwritemsg,
	.compwrite = no_atomic_compwrite, .compwritev = no_atomic_compwritev,
	.compwritemsg = no_atomic_compwritemsg, .writevalid = no_atomic_valid, .readwritevalid = no_atomic_valid,
	.compwritevalid = no_atomic_valid};
static struct fi_ops_collective ep_collective = {
	.size = sizeof(struct fi_ops_collective), .barrier = no_barrier, .broadcast = no_broadcast,
	.alltoall = no_alltoall, .allreduce = no_allreduce, .allgather = no_allgather,
	.reduce_scatter = no_reduce_scatter, .reduce = no_reduce, .scatter = no_scatter, .gather = no_gather,
	.msg = no_coll_msg, .barrier2 = no_barrier2};

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
	ep->ep.rma = &ep_rma;
	ep->ep.tagged = &ep_tagged;
	ep->ep.atomic = &ep_atomic;
	ep->ep.collective = &ep_collective;
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
	ep->name.token = mr_qp_token(ep->in);
	*out = &ep->ep;
	return 0;
}

/* ---- memory registration ----
 *
 * The provider needs none: getinfo leaves FI_MR_LOCAL clear (mr_mode 0 for
 * API 1.5 and later, FI_MR_SCALABLE without the FI_LOCAL_MR mode bit
 * before), so sends and receives take ordinary memory and ignore desc (it
 * is copied through the endpoint's own registered bounce slots), and
 * without FI_RMA or FI_ATOMIC no peer ever reaches memory by key. Still,
 * fi_mr_reg belongs to every domain: libfabric lets applications that
 * manage their own registrations register buffers when the provider does
 * not require it (fi_mr(3), FI_MR_LOCAL), and generic code registers
 * without looking at mr_mode (fi_pingpong does look: it registers only
 * under the FI_LOCAL_MR mode bit, so it never calls this). Failing those
 * calls would refuse programs that do nothing wrong, so registration
 * succeeds, as with libfabric's own udp provider (FI_MSG only, its util
 * MR map): an fid_mr that names the buffer and nothing more. Its desc
 * is the fid_mr itself, never looked at; its key is the requested key,
 * because without FI_MR_PROV_KEY the application chooses keys (fi_mr(3)),
 * unique in the domain (-FI_ENOKEY otherwise); mr_key_size says keys are
 * 8 bytes. Memory registered for remote access is accepted the same way,
 * and no peer can reach it. No daemon is asked: none of this moves bytes.
 * What a registration here cannot be: a device buffer (no FI_HMEM, so the
 * attr's iface is not read, as libfabric does for such domains), flags
 * (FI_RMA_EVENT, the FI_HMEM ones: -FI_EBADFLAGS), empty, or more than
 * mr_iov_limit (1) buffers (-FI_EINVAL). */
struct mrp_domain;

struct mrp_mr {
	struct fid_mr mr;
	struct mrp_domain *dom;
	struct mrp_mr *next;
};

struct mrp_domain {
	struct fid_domain dom;
	struct mrp_mr *mrs; /* open memory regions: the domain outlives them */
};

static int fmr_close(struct fid *fid)
{
	struct mrp_mr *mr = (struct mrp_mr *)fid;
	for (struct mrp_mr **p = &mr->dom->mrs; *p; p = &(*p)->next)
		if (*p == mr) {
			*p = mr->next;
			break;
		}
	free(mr);
	return 0;
}

/* fi_mr_bind (-FI_ENOSYS: no events on access, fi_mr(3)), fi_mr_enable,
 * fi_mr_refresh and fi_mr_raw_attr (fi_control) have nothing to do here. */
static struct fi_ops fmr_fi_ops = {.size = sizeof(struct fi_ops), .close = fmr_close, .bind = no_bind,
				  .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};

static int fmr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **out)
{
	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !out)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	if (attr->iov_count != 1 || !attr->mr_iov || !attr->mr_iov[0].iov_len)
		return -FI_EINVAL;
	struct mrp_domain *d = (struct mrp_domain *)fid;
	for (struct mrp_mr *m = d->mrs; m; m = m->next)
		if (m->mr.key == attr->requested_key)
			return -FI_ENOKEY;
	struct mrp_mr *mr = calloc(1, sizeof *mr);
	if (!mr)
		return -FI_ENOMEM;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = attr->context;
	mr->mr.fid.ops = &fmr_fi_ops;
	mr->mr.mem_desc = &mr->mr;
	mr->mr.key = attr->requested_key;
	mr->dom = d;
	mr->next = d->mrs;
	d->mrs = mr;
	*out = &mr->mr;
	return 0;
}

static int fmr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access, uint64_t offset,
		   uint64_t requested_key, uint64_t flags, struct fid_mr **out, void *context)
{
	(void)offset; /* reserved, "must be 0" (fi_mr(3)); libfabric's own MR code ignores it too */
	struct fi_mr_attr attr = {.mr_iov = iov, .iov_count = count, .access = access,
				  .requested_key = requested_key, .context = context};
	return fmr_regattr(fid, &attr, flags, out);
}

static int fmr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
		  uint64_t requested_key, uint64_t flags, struct fid_mr **out, void *context)
{
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	return fmr_regv(fid, &iov, 1, access, offset, requested_key, flags, out, context);
}

static struct fi_ops_mr fmr_ops = {.size = sizeof(struct fi_ops_mr), .reg = fmr_reg, .regv = fmr_regv,
				  .regattr = fmr_regattr};

/* ---- domain, fabric, provider ---- */

static int simple_close(struct fid *fid)
{
	free(fid);
	return 0;
}

/* The fabric and the event queue: nothing to bind to them or control. */
static struct fi_ops simple_fi_ops = {.size = sizeof(struct fi_ops), .close = simple_close, .bind = no_bind,
				      .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				      .ops_set = no_ops_set};

static int domain_close(struct fid *fid)
{
	struct mrp_domain *d = (struct mrp_domain *)fid;
	if (d->mrs)
		return -FI_EBUSY;
	free(d);
	return 0;
}

/* fi_domain_bind (an EQ for FI_REG_MR events: registration here is
 * synchronous), fi_mr_map_raw and fi_mr_unmap_key (fi_control: no raw
 * keys) are not there. */
static struct fi_ops dom_fi_ops = {.size = sizeof(struct fi_ops), .close = domain_close, .bind = no_bind,
				   .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				   .ops_set = no_ops_set};
static struct fi_ops_domain dom_ops = {.size = sizeof(struct fi_ops_domain), .av_open = av_open,
				       .cq_open = cq_open, .endpoint = ep_open, .scalable_ep = no_scalable_ep,
				       .cntr_open = no_cntr_open, .poll_open = no_poll_open, .stx_ctx = no_stx_ctx,
				       .srx_ctx = no_srx_ctx, .query_atomic = no_query_atomic,
				       .query_collective = no_query_collective, .endpoint2 = no_endpoint2};

static int domain_open(struct fid_fabric *fab, struct fi_info *info, struct fid_domain **out, void *context)
{
	(void)fab;
	(void)info;
	struct mrp_domain *d = calloc(1, sizeof *d);
	if (!d)
		return -FI_ENOMEM;
	d->dom.fid.fclass = FI_CLASS_DOMAIN;
	d->dom.fid.context = context;
	d->dom.fid.ops = &dom_fi_ops;
	d->dom.ops = &dom_ops;
	d->dom.mr = &fmr_ops;
	*out = &d->dom;
	return 0;
}

/* An event queue: fi_pingpong opens one even for RDM; nothing is ever
 * reported on it (no connection management is visible to the application). */
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

static struct fi_ops_fabric fab_ops = {.size = sizeof(struct fi_ops_fabric), .domain = domain_open,
				       .passive_ep = no_passive_ep, .eq_open = eq_open, .wait_open = no_wait_open,
				       .trywait = no_trywait, .domain2 = no_domain2};

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
				     .max_ep_rx_ctx = 1, .cq_data_size = 0, .mr_key_size = sizeof(uint64_t),
				     .mr_iov_limit = 1};
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
