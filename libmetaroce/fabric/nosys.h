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

/* domain: one endpoint kind, no shared contexts or
 * collectives */
MRP_NOSYS_DECL(int, no_scalable_ep, (struct fid_domain *dom, struct fi_info *info, struct fid_ep **sep, void *context))
MRP_NOSYS_DECL(int, no_stx_ctx, (struct fid_domain *dom, struct fi_tx_attr *attr, struct fid_stx **stx, void *context))
MRP_NOSYS_DECL(int, no_srx_ctx, (struct fid_domain *dom, struct fi_rx_attr *attr, struct fid_ep **rx_ep, void *context))
MRP_NOSYS_DECL(int, no_query_collective, (struct fid_domain *dom, enum fi_collective_op coll,
				     struct fi_collective_attr *attr, uint64_t flags))
MRP_NOSYS_DECL(int, no_endpoint2, (struct fid_domain *dom, struct fi_info *info, struct fid_ep **ep, uint64_t flags,
			      void *context))


/* address vector: no AV sets (collectives) */
MRP_NOSYS_DECL(int, no_av_set, (struct fid_av *av, struct fi_av_set_attr *attr, struct fid_av_set **av_set,
			   void *context))

/* endpoint: no scalable contexts */
MRP_NOSYS_DECL(int, no_tx_ctx, (struct fid_ep *sep, int index, struct fi_tx_attr *attr, struct fid_ep **tx_ep,
			   void *context))
MRP_NOSYS_DECL(int, no_rx_ctx, (struct fid_ep *sep, int index, struct fi_rx_attr *attr, struct fid_ep **rx_ep,
			   void *context))

/* connection management: FI_EP_RDM connects by itself */
MRP_NOSYS_DECL(int, no_setname, (fid_t fid, void *addr, size_t addrlen))
MRP_NOSYS_DECL(int, no_getpeer, (struct fid_ep *ep, void *addr, size_t *addrlen))
MRP_NOSYS_DECL(int, no_connect, (struct fid_ep *ep, const void *addr, const void *param, size_t paramlen))
MRP_NOSYS_DECL(int, no_listen, (struct fid_pep *pep))
MRP_NOSYS_DECL(int, no_accept, (struct fid_ep *ep, const void *param, size_t paramlen))
MRP_NOSYS_DECL(int, no_reject, (struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen))
MRP_NOSYS_DECL(int, no_shutdown, (struct fid_ep *ep, uint64_t flags))
MRP_NOSYS_DECL(int, no_join, (struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc, void *context))

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
