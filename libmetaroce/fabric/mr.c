/* mr.c: memory registration, two ways, chosen when the domain opens.
 *
 * With FI_RMA (the application accepted FI_MR_VIRT_ADDR, FI_MR_PROV_KEY and
 * FI_MR_ALLOCATED): a registration is real. The daemon moves bytes only
 * between memfds it has mapped, and an application's buffer is anonymous
 * memory, so the pages under the buffer are made memfd-backed in place
 * (mr_mem_adopt: same addresses, same bytes) and registered with the
 * daemon: the key is the daemon's (FI_MR_PROV_KEY, 32 bits), the address a
 * peer names is the buffer's virtual address (FI_MR_VIRT_ADDR), and a
 * peer's WRITE lands in the application's own memory. Pages already
 * adopted for a live registration are reused (an "area"); a buffer that
 * covers part of an area and pages beyond it cannot be one region
 * (-FI_EBUSY: one region is one memfd). An area is forgotten with its last
 * registration; its pages stay mapped, the application's memory.
 *
 * Without FI_RMA nothing needs registering (no FI_MR_LOCAL: sends and
 * receives go through the endpoint's own bounce slots, desc is ignored),
 * yet generic code registers anyway (fi_mr(3) lets it), so fi_mr_reg
 * succeeds with an fid_mr that names the buffer and nothing more, with the
 * key the application asked for (unique in the domain: -FI_ENOKEY), as
 * libfabric's udp provider does.
 *
 * Either way: one buffer (mr_iov_limit 1), no flags (FI_RMA_EVENT, the
 * FI_HMEM ones: -FI_EBADFLAGS), not empty. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prov.h"

#define MRP_MR_MAGIC 0x6d726d72u

struct mrp_area {
	struct mrp_area *next;
	struct mr_mem *mem;
	uintptr_t lo, hi;
	int refs;
};

/* The magic tells a desc of ours from whatever else an application passes. */
struct mrp_mr_magic {
	struct mrp_mr m;
	uint32_t magic;
};

static int fmr_close(struct fid *fid)
{
	struct mrp_mr *mr = (struct mrp_mr *)fid;
	struct mrp_domain *d = mr->dom;
	for (struct mrp_mr **p = &d->mrs; *p; p = &(*p)->next)
		if (*p == mr) {
			*p = mr->next;
			break;
		}
	if (mr->reg)
		mr_dereg(mr->reg);
	if (mr->area && --mr->area->refs == 0) {
		for (struct mrp_area **p = &d->areas; *p; p = &(*p)->next)
			if (*p == mr->area) {
				*p = mr->area->next;
				break;
			}
		mr_mem_free(mr->area->mem);
		free(mr->area);
	}
	((struct mrp_mr_magic *)mr)->magic = 0;
	free(mr);
	return 0;
}

/* fi_mr_bind (no events on access, fi_mr(3)), fi_mr_enable, fi_mr_refresh
 * and fi_mr_raw_attr (fi_control) have nothing to do here. */
static struct fi_ops fmr_fi_ops = {.size = sizeof(struct fi_ops), .close = fmr_close, .bind = no_bind,
				  .control = no_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};

/* area_for finds or makes the adopted pages under [lo, hi). */
static int area_for(struct mrp_domain *d, uintptr_t lo, uintptr_t hi, struct mrp_area **out)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t plo = lo & ~(page - 1), phi = (hi + page - 1) & ~(page - 1);
	for (struct mrp_area *a = d->areas; a; a = a->next) {
		if (a->lo <= plo && phi <= a->hi) {
			*out = a;
			return 0;
		}
		if (plo < a->hi && a->lo < phi)
			return -FI_EBUSY;
	}
	struct mrp_area *a = calloc(1, sizeof *a);
	if (!a)
		return -FI_ENOMEM;
	int e = mr_mem_adopt((void *)lo, hi - lo, &a->mem);
	if (e) {
		free(a);
		return e == MR_ERR_INVAL ? -FI_EINVAL : -FI_ENOMEM;
	}
	a->lo = (uintptr_t)mr_mem_ptr(a->mem);
	a->hi = a->lo + mr_mem_size(a->mem);
	a->next = d->areas;
	d->areas = a;
	*out = a;
	return 0;
}

static int fmr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags, struct fid_mr **out)
{
	if (!fid || fid->fclass != FI_CLASS_DOMAIN || !attr || !out)
		return -FI_EINVAL;
	if (flags)
		return -FI_EBADFLAGS;
	if (attr->iov_count != 1 || !attr->mr_iov || !attr->mr_iov[0].iov_len)
		return -FI_EINVAL;
	struct mrp_domain *d = (struct mrp_domain *)fid;
	uintptr_t lo = (uintptr_t)attr->mr_iov[0].iov_base, hi = lo + attr->mr_iov[0].iov_len;
	if (!d->rma)
		for (struct mrp_mr *m = d->mrs; m; m = m->next)
			if (m->mr.key == attr->requested_key)
				return -FI_ENOKEY;
	struct mrp_mr_magic *mm = calloc(1, sizeof *mm);
	if (!mm)
		return -FI_ENOMEM;
	struct mrp_mr *mr = &mm->m;
	mr->mr.fid.fclass = FI_CLASS_MR;
	mr->mr.fid.context = attr->context;
	mr->mr.fid.ops = &fmr_fi_ops;
	mr->mr.mem_desc = mr;
	mr->dom = d;
	mr->lo = lo;
	mr->hi = hi;
	/* What a peer's atomics may do here (atomic.c checks it); 0 asks
	 * for everything, as below. */
	mr->access = attr->access ? attr->access : FI_REMOTE_READ | FI_REMOTE_WRITE;
	if (d->rma) {
		int e = mrp_session(d);
		if (!e)
			e = area_for(d, lo, hi, &mr->area);
		if (e) {
			free(mm);
			return e;
		}
		mr->area->refs++;
		/* Local write always: a region is also where READs land. An
		 * access of 0 asks for everything (fi_mr(3) lists no default). */
		uint64_t acc = attr->access ? attr->access : FI_REMOTE_READ | FI_REMOTE_WRITE;
		int access = MR_ACCESS_LOCAL_WRITE | (acc & FI_REMOTE_READ ? MR_ACCESS_REMOTE_READ : 0) |
			     (acc & FI_REMOTE_WRITE ? MR_ACCESS_REMOTE_WRITE : 0);
		e = mr_reg(d->ctx, mr->area->mem, lo - mr->area->lo, hi - lo, access, &mr->reg);
		if (e) {
			mm->magic = MRP_MR_MAGIC;
			fmr_close(&mr->mr.fid);
			return -mrp_errno(e);
		}
		mr->mr.key = mr->reg->key;
	} else {
		mr->mr.key = attr->requested_key;
	}
	mm->magic = MRP_MR_MAGIC;
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

struct fi_ops_mr mrp_mr_ops = {.size = sizeof(struct fi_ops_mr), .reg = fmr_reg, .regv = fmr_regv,
			       .regattr = fmr_regattr};

struct mrp_mr *mrp_mr_of(struct mrp_domain *d, void *desc, const void *buf, size_t len)
{
	struct mrp_mr_magic *mm = desc;
	if (!mm || mm->magic != MRP_MR_MAGIC || mm->m.dom != d || !mm->m.reg)
		return NULL;
	uintptr_t p = (uintptr_t)buf;
	if (p < mm->m.lo || p + len > mm->m.hi)
		return NULL;
	return &mm->m;
}
