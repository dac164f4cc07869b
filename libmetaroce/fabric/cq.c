/* cq.c: completion queues and their wait object.
 *
 * A CQ is a ring of entries the endpoint's progress fills. Progress is
 * manual: reading a CQ drives the endpoint bound to it. A CQ opened with
 * FI_WAIT_FD (or FI_WAIT_UNSPEC) has an epoll descriptor as its wait
 * object (fi_control FI_GETWAIT): it holds three descriptors however many
 * peers the bound endpoint has: the doorbell end of the endpoint's shared
 * completion queue (every queue pair of the endpoint completes into it),
 * a timerfd and an eventfd (fi_cq_signal). fi_trywait arms the shared
 * CQ (its need-wakeup flag, docs/api.md Shared completion queues) and the
 * timer for the endpoint's next listener poll, since a peer's first
 * connection rings no doorbell here: a sleeping endpoint wakes at most
 * every MRP_LISTEN_MAX_US to take it. The next read disarms them. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "prov.h"

int mrp_cq_push(struct mrp_cq *cq, const struct mrp_cqe *e)
{
	if (!cq)
		return 0;
	if (cq->tail - cq->head >= MRP_CQ_LEN)
		return -FI_EOVERRUN; /* not reached: the endpoint bounds what it has in flight below this */
	cq->e[cq->tail++ % MRP_CQ_LEN] = *e;
	return 0;
}

void mrp_cq_watch(struct mrp_cq *cq, int fd)
{
	if (!cq || cq->epfd < 0 || fd < 0)
		return;
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
	epoll_ctl(cq->epfd, EPOLL_CTL_ADD, fd, &ev); /* EEXIST: tx and rx are the same CQ */
}

void mrp_cq_unwatch(struct mrp_cq *cq, int fd)
{
	if (!cq || cq->epfd < 0 || fd < 0)
		return;
	epoll_ctl(cq->epfd, EPOLL_CTL_DEL, fd, NULL); /* ENOENT: tx and rx are the same CQ */
}

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
		*d = (struct fi_cq_data_entry){e->ctx, e->flags, e->len, e->buf, e->data};
		break;
	}
	case FI_CQ_FORMAT_TAGGED: {
		struct fi_cq_tagged_entry *t = dst;
		*t = (struct fi_cq_tagged_entry){e->ctx, e->flags, e->len, e->buf, e->data, e->tag};
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

static ssize_t take(struct mrp_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
	size_t n = 0;
	while (n < count && cq->head != cq->tail) {
		struct mrp_cqe *e = &cq->e[cq->head % MRP_CQ_LEN];
		if (e->err)
			break;
		cqe_write(cq, e, (char *)buf + n * cqe_size(cq->format));
		if (src)
			src[n] = e->src;
		cq->head++;
		n++;
	}
	if (n)
		return (ssize_t)n;
	/* An error entry first in line is fi_cq_readerr's; entries behind a
	 * read of none (progress only) are still there. */
	if (cq->head != cq->tail)
		return cq->e[cq->head % MRP_CQ_LEN].err ? -FI_EAVAIL : 0;
	if (cq->ep && cq->ep->failed)
		return -FI_ESHUTDOWN;
	return -FI_EAGAIN;
}

static ssize_t readfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src)
{
	struct mrp_cq *cq = (struct mrp_cq *)fcq;
	if (cq->ep)
		mrp_progress(cq->ep);
	ssize_t n = take(cq, buf, count, src);
	if (n == -FI_EAGAIN) {
		/* Nothing yet: give the core away. Applications spin on
		 * fi_cq_read, and on a host where the daemon's engine shares
		 * their cores a spinner that never yields keeps the engine,
		 * which moves the bytes, off the CPU for a whole time slice. */
		sched_yield();
	}
	return n;
}

static ssize_t cq_read(struct fid_cq *fcq, void *buf, size_t count)
{
	return readfrom(fcq, buf, count, NULL);
}

static ssize_t cq_readerr(struct fid_cq *fcq, struct fi_cq_err_entry *buf, uint64_t flags)
{
	(void)flags;
	struct mrp_cq *cq = (struct mrp_cq *)fcq;
	if (cq->head == cq->tail || !cq->e[cq->head % MRP_CQ_LEN].err)
		return -FI_EAGAIN;
	struct mrp_cqe *e = &cq->e[cq->head++ % MRP_CQ_LEN];
	/* err_data and err_data_size are the caller's (API >= 1.5): no
	 * provider data is written there. */
	buf->op_context = e->ctx;
	buf->flags = e->flags;
	buf->len = e->len;
	buf->buf = e->buf;
	buf->data = e->data;
	buf->tag = e->tag;
	buf->olen = e->olen;
	buf->err = e->err;
	buf->prov_errno = e->prov_errno;
	buf->err_data_size = 0;
	return 1;
}

int mrp_cq_trywait(struct mrp_cq *cq)
{
	if (!cq->ep)
		return cq->head != cq->tail ? -FI_EAGAIN : 0;
	mrp_progress(cq->ep);
	if (cq->head != cq->tail)
		return -FI_EAGAIN;
	int r = mrp_arm(cq->ep);
	if (r)
		return r;
	if (cq->timerfd >= 0) {
		int64_t us = mrp_listen_due_us(cq->ep);
		if (us <= 0)
			us = 1;
		struct itimerspec it = {.it_value = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000}};
		timerfd_settime(cq->timerfd, 0, &it, NULL);
	}
	return 0;
}

static ssize_t sreadfrom(struct fid_cq *fcq, void *buf, size_t count, fi_addr_t *src, const void *cond,
			 int timeout)
{
	(void)cond;
	struct mrp_cq *cq = (struct mrp_cq *)fcq;
	int64_t start = mrp_now_us();
	int64_t deadline = timeout >= 0 ? start + (int64_t)timeout * 1000 : 0;
	for (int i = 0;; i++) {
		ssize_t n = readfrom(fcq, buf, count, src);
		if (n != -FI_EAGAIN)
			return n;
		int64_t now = mrp_now_us();
		if (deadline && now >= deadline)
			return -FI_EAGAIN;
		/* Spin for a round trip's worth, as mr_wait_cq does, then
		 * sleep on the wait object if there is one. */
		if (cq->epfd < 0 || now - start < 200)
			continue;
		if (mrp_cq_trywait(cq) != 0)
			continue;
		int ms = -1;
		if (deadline)
			ms = (int)((deadline - now + 999) / 1000);
		struct epoll_event ev[8];
		int r = epoll_wait(cq->epfd, ev, 8, ms);
		for (int k = 0; k < r; k++)
			if (ev[k].data.fd == cq->sigfd) {
				uint64_t v;
				if (read(cq->sigfd, &v, sizeof v) < 0) {
				}
				return -FI_EAGAIN; /* fi_cq_signal */
			}
	}
}

static ssize_t cq_sread(struct fid_cq *fcq, void *buf, size_t count, const void *cond, int timeout)
{
	return sreadfrom(fcq, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *fcq)
{
	struct mrp_cq *cq = (struct mrp_cq *)fcq;
	if (cq->sigfd < 0)
		return -FI_ENOSYS;
	uint64_t one = 1;
	return write(cq->sigfd, &one, sizeof one) == sizeof one ? 0 : -FI_EIO;
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
	struct mrp_cq *cq = (struct mrp_cq *)fid;
	if (cq->ep)
		return -FI_EBUSY;
	if (cq->epfd >= 0)
		close(cq->epfd);
	if (cq->timerfd >= 0)
		close(cq->timerfd);
	if (cq->sigfd >= 0)
		close(cq->sigfd);
	free(cq->e);
	free(cq);
	return 0;
}

static int cq_control(struct fid *fid, int cmd, void *arg)
{
	struct mrp_cq *cq = (struct mrp_cq *)fid;
	switch (cmd) {
	case FI_GETWAIT:
		if (cq->epfd < 0)
			return -FI_ENODATA;
		*(int *)arg = cq->epfd;
		return 0;
	case FI_GETWAITOBJ:
		*(enum fi_wait_obj *)arg = cq->epfd < 0 ? FI_WAIT_NONE : FI_WAIT_FD;
		return 0;
	}
	return -FI_ENOSYS;
}

static struct fi_ops cq_fi_ops = {.size = sizeof(struct fi_ops), .close = cq_close, .bind = no_bind,
				  .control = cq_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
int mrp_is_cq(const struct fid *f) { return f && f->fclass == FI_CLASS_CQ && f->ops == &cq_fi_ops; }

int mrp_cq_ready(struct mrp_cq *cq)
{
	if (cq->ep)
		mrp_progress(cq->ep);
	return cq->head != cq->tail;
}

static struct fi_ops_cq cq_ops = {.size = sizeof(struct fi_ops_cq), .read = cq_read, .readfrom = readfrom,
				  .readerr = cq_readerr, .sread = cq_sread, .sreadfrom = sreadfrom,
				  .signal = cq_signal, .strerror = cq_strerror};

int mrp_cq_open(struct fid_domain *dom, struct fi_cq_attr *attr, struct fid_cq **out, void *context)
{
	(void)dom;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE: case FI_WAIT_UNSPEC: case FI_WAIT_FD:
		break;
	default:
		return -FI_ENOSYS; /* no wait sets, mutexes or yield */
	}
	if (attr->flags & FI_AFFINITY)
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
	cq->epfd = cq->timerfd = cq->sigfd = -1;
	cq->e = calloc(MRP_CQ_LEN, sizeof *cq->e);
	if (!cq->e) {
		free(cq);
		return -FI_ENOMEM;
	}
	cq->cq.fid.fclass = FI_CLASS_CQ;
	cq->cq.fid.context = context;
	cq->cq.fid.ops = &cq_fi_ops;
	cq->cq.ops = &cq_ops;
	cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
	if (attr->wait_obj != FI_WAIT_NONE) {
		cq->epfd = epoll_create1(EPOLL_CLOEXEC);
		cq->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
		cq->sigfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (cq->epfd < 0 || cq->timerfd < 0 || cq->sigfd < 0) {
			cq_close(&cq->cq.fid);
			return -FI_EMFILE;
		}
		mrp_cq_watch(cq, cq->timerfd);
		mrp_cq_watch(cq, cq->sigfd);
	}
	*out = &cq->cq;
	return 0;
}
