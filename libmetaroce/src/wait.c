/* The wait both kinds of completion queue share: a queue pair's own
 * (mr_wait_cq) and a shared one (mr_cq_wait). */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <time.h>

#include "internal.h"

static int64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* terminal reports whether nothing more can complete (w->terminal set). */
static int terminal(const struct mr_waiter *w)
{
	return w->terminal && *w->terminal;
}

/* mr_wait spins (yielding the CPU between looks) for w->spin_us, then
 * sleeps on the doorbell armed by w->arm, until w->poll finds entries,
 * the timeout passes, or the daemon goes. Sleeping needs the doorbell
 * armed first and the ring looked at again after (a completion committed
 * between the last look and the arming would ring no one); the control
 * socket is polled beside it because it turns readable (EOF) when the
 * daemon goes, which the doorbell does not say. */
int mr_wait(const struct mr_waiter *w, struct mr_wc *wcs, int n, int timeout_ms)
{
	int64_t start = now_us();
	int64_t deadline = timeout_ms >= 0 ? start + (int64_t)timeout_ms * 1000 : 0;
	for (int i = 0;; i++) {
		int got = w->poll(w->obj, wcs, n);
		if (got != 0)
			return got;
		if (terminal(w))
			return MR_ERR_CONN_CLOSED;
		if (i < 8)
			continue;
		int64_t t = now_us();
		if (deadline && t >= deadline)
			return MR_ERR_TIMEOUT;
		if (w->spin_us >= 0 && t - start >= w->spin_us)
			break;
		if (i % 1024 == 0 && mr_ctx_alive(w->ctx) != MR_OK)
			return w->poll(w->obj, wcs, n); /* what is left, the gone event, or MR_ERR_DAEMON_GONE */
		sched_yield();
	}
	for (;;) {
		if (terminal(w))
			return MR_ERR_CONN_CLOSED;
		int ready = w->arm(w->obj);
		if (ready != 0) {
			w->disarm(w->obj);
			if (ready < 0)
				return ready;
			int got = w->poll(w->obj, wcs, n);
			if (got != 0)
				return got;
			continue;
		}
		int wait = -1;
		if (deadline) {
			int64_t rem = deadline - now_us();
			if (rem <= 0) {
				w->disarm(w->obj);
				return MR_ERR_TIMEOUT;
			}
			wait = (int)((rem + 999) / 1000);
		}
		struct pollfd p[2] = {{w->bell, POLLIN, 0}, {w->ctx->fd, POLLIN, 0}};
		int r = poll(p, 2, wait);
		w->disarm(w->obj);
		if (r < 0 && errno != EINTR)
			return MR_ERR_SYS;
		if (p[1].revents && mr_ctx_alive(w->ctx) != MR_OK)
			return w->poll(w->obj, wcs, n); /* never 0 once the daemon is gone */
		if (p[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
			if (mr_ctx_alive(w->ctx) != MR_OK)
				return w->poll(w->obj, wcs, n);
			int got = w->poll(w->obj, wcs, n);
			return got != 0 ? got : MR_ERR_DAEMON_GONE;
		}
		int got = w->poll(w->obj, wcs, n);
		if (got != 0)
			return got;
		if (r == 0 && deadline && now_us() >= deadline)
			return MR_ERR_TIMEOUT;
	}
}
