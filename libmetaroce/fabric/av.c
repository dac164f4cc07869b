/* av.c: address vectors. An entry is a peer endpoint's name (its engine's
 * address and its listener's service); fi_addr_t is the entry's index,
 * for FI_AV_TABLE and FI_AV_MAP alike. The vector grows as needed;
 * entries are never removed (an index names a peer's outbound connection
 * in every endpoint bound to the vector). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prov.h"

/* MRP_AV_MAX bounds a vector: far more peers than queue pairs a daemon
 * gives one session. */
#define MRP_AV_MAX (1u << 20)

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr, uint64_t flags,
		     void *context)
{
	(void)context;
	struct mrp_av *av = (struct mrp_av *)fav;
	if (flags & ~(uint64_t)FI_MORE)
		return -FI_EBADFLAGS;
	const struct mrp_name *names = addr;
	size_t done = 0;
	for (size_t i = 0; i < count; i++) {
		struct mrp_name nm = names[i];
		nm.ip[sizeof nm.ip - 1] = 0;
		memset(nm.pad, 0, sizeof nm.pad);
		if (nm.service == 0 || !nm.ip[0] || av->n >= MRP_AV_MAX) {
			if (fi_addr)
				fi_addr[i] = FI_ADDR_NOTAVAIL;
			continue;
		}
		if (av->n == av->cap) {
			size_t cap = av->cap ? av->cap * 2 : 64;
			struct mrp_name *p = realloc(av->peers, cap * sizeof *p);
			if (!p) {
				if (fi_addr)
					fi_addr[i] = FI_ADDR_NOTAVAIL;
				continue;
			}
			av->peers = p;
			av->cap = cap;
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
	int n = snprintf(buf, *len, "metaroce://%.46s/%u", nm->ip, nm->service);
	*len = (size_t)n + 1;
	return buf;
}

static int av_close(struct fid *fid)
{
	struct mrp_av *av = (struct mrp_av *)fid;
	free(av->peers);
	free(av);
	return 0;
}

static struct fi_ops av_fi_ops = {.size = sizeof(struct fi_ops), .close = av_close, .bind = no_bind,
				  .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_av av_ops = {.size = sizeof(struct fi_ops_av), .insert = av_insert,
				  .insertsvc = no_av_insertsvc, .insertsym = no_av_insertsym, .remove = no_av_remove,
				  .lookup = av_lookup, .straddr = av_straddr, .av_set = no_av_set};

int mrp_av_open(struct fid_domain *dom, struct fi_av_attr *attr, struct fid_av **out, void *context)
{
	(void)dom;
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_TABLE && attr->type != FI_AV_MAP)
		return -FI_ENOSYS;
	if (attr->flags & (FI_EVENT | FI_READ))
		return -FI_ENOSYS; /* no asynchronous inserts, no shared vectors */
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
