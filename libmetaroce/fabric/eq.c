/* eq.c: event queues. An RDM endpoint here makes no connection events,
 * so what lands in an EQ is what the application writes itself
 * (fi_eq_write) and the address vector's FI_AV_COMPLETE for inserts on a
 * vector opened with FI_EVENT (and an error entry per address refused).
 * Entries are copied into a ring of fixed slots sized when the queue is
 * opened; an eventfd is readable exactly while entries wait, so
 * fi_eq_sread sleeps in poll and FI_WAIT_FD hands the descriptor out.
 * fi_eq_write may come from any thread (fi_eq(3)): a mutex guards the
 * ring, uncontended in the usual single thread. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "prov.h"

/* MRP_EQ_ENTRY bounds one entry's bytes: every event structure of
 * fi_eq(3) (a CM entry with its private data included) fits. */
#define MRP_EQ_ENTRY 256
#define MRP_EQ_DEFAULT 1024
#define MRP_EQ_MAX (1u << 20)

struct mrp_eqe {
	uint32_t event;
	int is_err;
	size_t len;
	struct fi_eq_err_entry err;
	uint8_t data[MRP_EQ_ENTRY];
};

struct mrp_eq {
	struct fid_eq eq;
	pthread_mutex_t mu;
	int wait; /* FI_WAIT_FD or FI_WAIT_UNSPEC: efd is the wait object */
	int efd;  /* readable while entries wait */
	size_t size;
	struct mrp_eqe *e;
	size_t head, tail; /* tail - head entries wait */
};

/* signal_state keeps efd readable exactly while entries wait (mu held). */
static void signal_state(struct mrp_eq *q)
{
	uint64_t v;
	if (q->head == q->tail) {
		if (read(q->efd, &v, sizeof v) < 0) {
			/* EAGAIN: it was not signalled */
		}
	} else if (q->tail - q->head == 1) {
		v = 1;
		if (write(q->efd, &v, sizeof v) < 0) {
			/* EAGAIN: it is signalled already */
		}
	}
}

static ssize_t push(struct mrp_eq *q, uint32_t event, const void *buf, size_t len, const struct fi_eq_err_entry *err)
{
	if (len > MRP_EQ_ENTRY || (len && !buf))
		return -FI_EINVAL;
	pthread_mutex_lock(&q->mu);
	if (q->tail - q->head == q->size) {
		pthread_mutex_unlock(&q->mu);
		return -FI_EAGAIN;
	}
	struct mrp_eqe *e = &q->e[q->tail % q->size];
	e->event = event;
	e->len = len;
	e->is_err = err != NULL;
	if (err)
		e->err = *err;
	if (len)
		memcpy(e->data, buf, len);
	q->tail++;
	signal_state(q);
	pthread_mutex_unlock(&q->mu);
	return (ssize_t)len;
}

int mrp_eq_report(struct fid_eq *eq, uint32_t event, const void *buf, size_t len)
{
	ssize_t n = push((struct mrp_eq *)eq, event, buf, len, NULL);
	return n < 0 ? (int)n : 0;
}

int mrp_eq_report_err(struct fid_eq *eq, const struct fi_eq_err_entry *err)
{
	ssize_t n = push((struct mrp_eq *)eq, 0, NULL, 0, err);
	return n < 0 ? (int)n : 0;
}

static ssize_t eq_read(struct fid_eq *feq, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
	struct mrp_eq *q = (struct mrp_eq *)feq;
	if (flags & ~(uint64_t)FI_PEEK)
		return -FI_EBADFLAGS;
	pthread_mutex_lock(&q->mu);
	ssize_t r;
	if (q->head == q->tail) {
		r = -FI_EAGAIN;
	} else {
		struct mrp_eqe *e = &q->e[q->head % q->size];
		if (e->is_err) {
			r = -FI_EAVAIL;
		} else if (e->len > len || (e->len && !buf)) {
			r = -FI_ETOOSMALL;
		} else {
			if (event)
				*event = e->event;
			if (e->len)
				memcpy(buf, e->data, e->len);
			r = (ssize_t)e->len;
			if (!(flags & FI_PEEK)) {
				q->head++;
				signal_state(q);
			}
		}
	}
	pthread_mutex_unlock(&q->mu);
	return r;
}

static ssize_t eq_readerr(struct fid_eq *feq, struct fi_eq_err_entry *buf, uint64_t flags)
{
	struct mrp_eq *q = (struct mrp_eq *)feq;
	if (!buf)
		return -FI_EINVAL;
	if (flags & ~(uint64_t)FI_PEEK)
		return -FI_EBADFLAGS;
	pthread_mutex_lock(&q->mu);
	ssize_t r = -FI_EAGAIN;
	if (q->head != q->tail && q->e[q->head % q->size].is_err) {
		/* No provider error data: err_data is left as the application
		 * set it, with err_data_size 0 (fi_eq(3) for API 1.5 on). */
		const struct fi_eq_err_entry *e = &q->e[q->head % q->size].err;
		buf->fid = e->fid;
		buf->context = e->context;
		buf->data = e->data;
		buf->err = e->err;
		buf->prov_errno = e->prov_errno;
		buf->err_data_size = 0;
		r = (ssize_t)sizeof *buf;
		if (!(flags & FI_PEEK)) {
			q->head++;
			signal_state(q);
		}
	}
	pthread_mutex_unlock(&q->mu);
	return r;
}

static ssize_t eq_write(struct fid_eq *feq, uint32_t event, const void *buf, size_t len, uint64_t flags)
{
	(void)flags; /* no flags are defined for fi_eq_write */
	return push((struct mrp_eq *)feq, event, buf, len, NULL);
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* eq_sread: eq_read, waiting up to timeout ms (negative: for ever) for an
 * entry; -FI_EAGAIN if none came. */
static ssize_t eq_sread(struct fid_eq *feq, uint32_t *event, void *buf, size_t len, int timeout, uint64_t flags)
{
	struct mrp_eq *q = (struct mrp_eq *)feq;
	int64_t deadline = timeout >= 0 ? now_ms() + timeout : 0;
	for (;;) {
		ssize_t r = eq_read(feq, event, buf, len, flags);
		if (r != -FI_EAGAIN)
			return r;
		int wait = -1;
		if (timeout >= 0) {
			int64_t left = deadline - now_ms();
			if (left <= 0)
				return -FI_EAGAIN;
			wait = (int)left;
		}
		struct pollfd p = {.fd = q->efd, .events = POLLIN};
		if (poll(&p, 1, wait) < 0 && errno != EINTR)
			return -FI_EIO;
	}
}

static const char *eq_strerror(struct fid_eq *eq, int prov_errno, const void *err_data, char *buf, size_t len)
{
	(void)eq;
	(void)err_data;
	const char *s = fi_strerror(prov_errno < 0 ? -prov_errno : prov_errno);
	if (buf && len) {
		snprintf(buf, len, "metaroce: %s", s);
		return buf;
	}
	return s;
}

int mrp_eq_trywait(struct fid_eq *feq)
{
	struct mrp_eq *q = (struct mrp_eq *)feq;
	pthread_mutex_lock(&q->mu);
	int busy = q->head != q->tail;
	pthread_mutex_unlock(&q->mu);
	return busy ? -FI_EAGAIN : 0;
}

static int eq_control(struct fid *fid, int cmd, void *arg)
{
	struct mrp_eq *q = (struct mrp_eq *)fid;
	if (cmd != FI_GETWAIT)
		return -FI_ENOSYS;
	if (q->wait != FI_WAIT_FD && q->wait != FI_WAIT_UNSPEC)
		return -FI_ENODATA;
	if (!arg)
		return -FI_EINVAL;
	*(int *)arg = q->efd;
	return 0;
}

static int eq_close(struct fid *fid)
{
	struct mrp_eq *q = (struct mrp_eq *)fid;
	close(q->efd);
	pthread_mutex_destroy(&q->mu);
	free(q->e);
	free(q);
	return 0;
}

static struct fi_ops eq_fi_ops = {.size = sizeof(struct fi_ops), .close = eq_close, .bind = no_bind,
				  .control = eq_control, .ops_open = no_ops_open, .tostr = no_tostr,
				  .ops_set = no_ops_set};
static struct fi_ops_eq eq_ops = {.size = sizeof(struct fi_ops_eq), .read = eq_read, .readerr = eq_readerr,
				  .write = eq_write, .sread = eq_sread, .strerror = eq_strerror};

int mrp_eq_open(struct fid_fabric *fab, struct fi_eq_attr *attr, struct fid_eq **out, void *context)
{
	(void)fab;
	if (!out)
		return -FI_EINVAL;
	size_t size = attr && attr->size ? attr->size : MRP_EQ_DEFAULT;
	enum fi_wait_obj wait = attr ? attr->wait_obj : FI_WAIT_NONE;
	if (size > MRP_EQ_MAX)
		return -FI_EINVAL;
	if (wait != FI_WAIT_NONE && wait != FI_WAIT_UNSPEC && wait != FI_WAIT_FD)
		return -FI_ENOSYS; /* no wait sets, mutexes or pollfd lists */
	if (attr && attr->wait_set)
		return -FI_ENOSYS;
	struct mrp_eq *q = calloc(1, sizeof *q);
	if (!q)
		return -FI_ENOMEM;
	q->e = calloc(size, sizeof *q->e);
	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (!q->e || q->efd < 0) {
		if (q->efd >= 0)
			close(q->efd);
		free(q->e);
		free(q);
		return -FI_ENOMEM;
	}
	pthread_mutex_init(&q->mu, NULL);
	q->size = size;
	q->wait = wait;
	q->eq.fid.fclass = FI_CLASS_EQ;
	q->eq.fid.context = context;
	q->eq.fid.ops = &eq_fi_ops;
	q->eq.ops = &eq_ops;
	*out = &q->eq;
	return 0;
}
