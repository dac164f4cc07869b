/* nosys.h: every call libfabric has on the provider's objects that the
 * provider does not implement, as MRP_NOSYS_DECL(type, name, params)
 * entries: prov.h declares them, nosys.c defines each to return
 * -FI_ENOSYS (see there for why every table is complete). No include
 * guard: it is expanded once per meaning of the macro. */

/* struct fi_ops: every fid */
MRP_NOSYS_DECL(int, no_bind, (struct fid *fid, struct fid *bfid, uint64_t flags))
MRP_NOSYS_DECL(int, no_control, (struct fid *fid, int command, void *arg))
MRP_NOSYS_DECL(int, no_ops_open, (struct fid *fid, const char *name, uint64_t flags, void **ops, void *context))
MRP_NOSYS_DECL(int, no_tostr, (const struct fid *fid, char *buf, size_t len))
MRP_NOSYS_DECL(int, no_ops_set, (struct fid *fid, const char *name, uint64_t flags, void *ops, void *context))

/* fabric: no passive endpoints (FI_EP_RDM only), no wait sets (a CQ's
 * wait object is its own) */
MRP_NOSYS_DECL(int, no_passive_ep, (struct fid_fabric *fab, struct fi_info *info, struct fid_pep **pep, void *context))
MRP_NOSYS_DECL(int, no_wait_open, (struct fid_fabric *fab, struct fi_wait_attr *attr, struct fid_wait **waitset))
MRP_NOSYS_DECL(int, no_domain2, (struct fid_fabric *fab, struct fi_info *info, struct fid_domain **dom, uint64_t flags,
			    void *context))

/* domain: one endpoint kind, no counters, poll sets, shared contexts,
 * atomics or collectives */
MRP_NOSYS_DECL(int, no_scalable_ep, (struct fid_domain *dom, struct fi_info *info, struct fid_ep **sep, void *context))
MRP_NOSYS_DECL(int, no_cntr_open, (struct fid_domain *dom, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
			      void *context))
MRP_NOSYS_DECL(int, no_poll_open, (struct fid_domain *dom, struct fi_poll_attr *attr, struct fid_poll **pollset))
MRP_NOSYS_DECL(int, no_stx_ctx, (struct fid_domain *dom, struct fi_tx_attr *attr, struct fid_stx **stx, void *context))
MRP_NOSYS_DECL(int, no_srx_ctx, (struct fid_domain *dom, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context))
MRP_NOSYS_DECL(int, no_query_atomic, (struct fid_domain *dom, enum fi_datatype datatype, enum fi_op op,
				 struct fi_atomic_attr *attr, uint64_t flags))
MRP_NOSYS_DECL(int, no_query_collective, (struct fid_domain *dom, enum fi_collective_op coll,
				     struct fi_collective_attr *attr, uint64_t flags))
MRP_NOSYS_DECL(int, no_endpoint2, (struct fid_domain *dom, struct fi_info *info, struct fid_ep **ep, uint64_t flags,
			      void *context))

/* event queue: nothing is written to it, nor waited on */
MRP_NOSYS_DECL(ssize_t, no_eq_write, (struct fid_eq *eq, uint32_t event, const void *buf, size_t len, uint64_t flags))
MRP_NOSYS_DECL(ssize_t, no_eq_sread, (struct fid_eq *eq, uint32_t *event, void *buf, size_t len, int timeout,
				 uint64_t flags))

/* address vector: entries by address only, never removed (an index is
 * a peer's outbound queue pair in every endpoint bound to it) */
MRP_NOSYS_DECL(int, no_av_insertsvc, (struct fid_av *av, const char *node, const char *service, fi_addr_t *fi_addr,
				 uint64_t flags, void *context))
MRP_NOSYS_DECL(int, no_av_insertsym, (struct fid_av *av, const char *node, size_t nodecnt, const char *service,
				 size_t svccnt, fi_addr_t *fi_addr, uint64_t flags, void *context))
MRP_NOSYS_DECL(int, no_av_remove, (struct fid_av *av, fi_addr_t *fi_addr, size_t count, uint64_t flags))
MRP_NOSYS_DECL(int, no_av_set, (struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **av_set,
			   void *context))

/* endpoint */
MRP_NOSYS_DECL(ssize_t, no_cancel, (fid_t fid, void *context))
MRP_NOSYS_DECL(int, no_tx_ctx, (struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx_ep,
			   void *context))
MRP_NOSYS_DECL(int, no_rx_ctx, (struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
			   void *context))
MRP_NOSYS_DECL(ssize_t, no_rx_size_left, (struct fid_ep *ep))
MRP_NOSYS_DECL(ssize_t, no_tx_size_left, (struct fid_ep *ep))

/* connection management: FI_EP_RDM connects by itself */
MRP_NOSYS_DECL(int, no_setname, (fid_t fid, void *addr, size_t addrlen))
MRP_NOSYS_DECL(int, no_getpeer, (struct fid_ep *ep, void *addr, size_t *addrlen))
MRP_NOSYS_DECL(int, no_connect, (struct fid_ep *ep, const void *addr, const void *param, size_t paramlen))
MRP_NOSYS_DECL(int, no_listen, (struct fid_pep *pep))
MRP_NOSYS_DECL(int, no_accept, (struct fid_ep *ep, const void *param, size_t paramlen))
MRP_NOSYS_DECL(int, no_reject, (struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen))
MRP_NOSYS_DECL(int, no_shutdown, (struct fid_ep *ep, uint64_t flags))
MRP_NOSYS_DECL(int, no_join, (struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context))

/* FI_ATOMIC */
MRP_NOSYS_DECL(ssize_t, no_atomic_write, (struct fid_ep *ep, const void *buf, size_t count, void *desc,
				     fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
				     enum fi_op op, void *context))
MRP_NOSYS_DECL(ssize_t, no_atomic_writev, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
				      fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
				      enum fi_op op, void *context))
MRP_NOSYS_DECL(ssize_t, no_atomic_writemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg, uint64_t flags))
MRP_NOSYS_DECL(ssize_t, no_atomic_inject, (struct fid_ep *ep, const void *buf, size_t count, fi_addr_t dest_addr,
				      uint64_t addr, uint64_t key, enum fi_datatype datatype, enum fi_op op))
MRP_NOSYS_DECL(ssize_t, no_atomic_readwrite, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
					 void *result_desc, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
					 enum fi_datatype datatype, enum fi_op op, void *context))
MRP_NOSYS_DECL(ssize_t, no_atomic_readwritev, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
					  struct fi_ioc *resultv, void **result_desc, size_t result_count,
					  fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
					  enum fi_op op, void *context))
MRP_NOSYS_DECL(ssize_t, no_atomic_readwritemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
					    struct fi_ioc *resultv, void **result_desc, size_t result_count,
					    uint64_t flags))
MRP_NOSYS_DECL(ssize_t, no_atomic_compwrite, (struct fid_ep *ep, const void *buf, size_t count, void *desc,
					 const void *compare, void *compare_desc, void *result, void *result_desc,
					 fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
					 enum fi_op op, void *context))
MRP_NOSYS_DECL(ssize_t, no_atomic_compwritev, (struct fid_ep *ep, const struct fi_ioc *iov, void **desc, size_t count,
					  const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
					  struct fi_ioc *resultv, void **result_desc, size_t result_count,
					  fi_addr_t dest_addr, uint64_t addr, uint64_t key, enum fi_datatype datatype,
					  enum fi_op op, void *context))
MRP_NOSYS_DECL(ssize_t, no_atomic_compwritemsg, (struct fid_ep *ep, const struct fi_msg_atomic *msg,
					    const struct fi_ioc *comparev, void **compare_desc, size_t compare_count,
					    struct fi_ioc *resultv, void **result_desc, size_t result_count,
					    uint64_t flags))
MRP_NOSYS_DECL(int, no_atomic_valid, (struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op, size_t *count))

/* FI_COLLECTIVE */
MRP_NOSYS_DECL(ssize_t, no_barrier, (struct fid_ep *ep, fi_addr_t coll_addr, void *context))
MRP_NOSYS_DECL(ssize_t, no_broadcast, (struct fid_ep *ep, void *buf, size_t count, void *desc, fi_addr_t coll_addr,
				  fi_addr_t root_addr, enum fi_datatype datatype, uint64_t flags, void *context))
MRP_NOSYS_DECL(ssize_t, no_alltoall, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				 void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, uint64_t flags,
				 void *context))
MRP_NOSYS_DECL(ssize_t, no_allreduce, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				  void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, enum fi_op op,
				  uint64_t flags, void *context))
MRP_NOSYS_DECL(ssize_t, no_allgather, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				  void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype, uint64_t flags,
				  void *context))
MRP_NOSYS_DECL(ssize_t, no_reduce_scatter, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				       void *result_desc, fi_addr_t coll_addr, enum fi_datatype datatype,
				       enum fi_op op, uint64_t flags, void *context))
MRP_NOSYS_DECL(ssize_t, no_reduce, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
			       void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
			       enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context))
MRP_NOSYS_DECL(ssize_t, no_scatter, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
				void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
				enum fi_datatype datatype, uint64_t flags, void *context))
MRP_NOSYS_DECL(ssize_t, no_gather, (struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
			       void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
			       enum fi_datatype datatype, uint64_t flags, void *context))
MRP_NOSYS_DECL(ssize_t, no_coll_msg, (struct fid_ep *ep, const struct fi_msg_collective *msg, struct fi_ioc *resultv,
				 void **result_desc, size_t result_count, uint64_t flags))
MRP_NOSYS_DECL(ssize_t, no_barrier2, (struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags, void *context))
