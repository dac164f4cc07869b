/* fitest: the provider's features between one server endpoint and N client
 * endpoints (one process, one domain), run by fabric_test.go through two
 * daemons in two namespaces, fabtests-style:
 *
 *   fitest server SOCK PROVDIR N           prints "READY name addr key", serves N peers
 *   fitest client SOCK PROVDIR N NAME ADDR KEY
 *
 * Many peers per endpoint: every client endpoint connects to the server's.
 * FI_TAGGED with FI_DIRECTED_RECV: receives posted for each source in turn
 * take only that source's message; tag and ignore bits; messages that come
 * before their receive (unexpected); FI_PEEK then FI_CLAIM. FI_SOURCE:
 * fi_cq_readfrom names the sender. Remote CQ data on messages and on RMA
 * writes. FI_RMA: fi_write, fi_writedata, fi_inject_write into a region
 * the server registered from malloc'd memory, fi_read from it, each byte
 * checked; a bad key fails with FI_EACCES. Local iov lists: fi_writev of
 * four iovs from four registrations (in place: a burst of them needs no
 * transmit slot), fi_writemsg with an unregistered iov among them,
 * fi_readv into three iovs, fi_readmsg into two unregistered ones, sends
 * of three and four iovs (tagged) and of registered and unregistered ones
 * alternating (FI_MSG, with data), every byte checked at the other end;
 * the iov limits fi_info gives (tx 4, RMA remote 1, rx 4) refused beyond.
 * The server's CQ has a wait object: fi_cq_sread, and FI_GETWAIT +
 * fi_trywait + poll; its wait set holds three descriptors (the endpoint's
 * one shared CQ, a timer, an eventfd) whatever the number of peers, and
 * each peer costs exactly three descriptors (a doorbell per queue pair
 * each way, the memfd of its receive slots). A send to itself. Exit 0 and
 * "PASS" is a pass. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <dirent.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#define MAXEP 8
#define NAMELEN 64 /* sizeof the provider's name: address, service, token */
#define REGION (128 << 10)
#define WV (REGION / 4 + 8192) /* each client's fi_writev at WV + k * 2048, its fi_writemsg 1024 further */
#define PAGE 4096
#define NB 8 /* client buffers, each its own page and registration */
#define BURST 20 /* registered fi_writev posted at once: more than the provider's 16 transmit slots */
#define CHUNK 4096

#define DIE(...)                                                                                              \
	do {                                                                                                   \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                          \
		fprintf(stderr, __VA_ARGS__);                                                                  \
		fputc('\n', stderr);                                                                           \
		exit(1);                                                                                       \
	} while (0)
#define MUST(call)                                                                                             \
	do {                                                                                                   \
		long e_ = (long)(call);                                                                        \
		if (e_)                                                                                        \
			DIE("%s: %ld (%s)", #call, e_, fi_strerror((int)-e_));                                 \
	} while (0)

static struct fi_info *info;
static struct fid_fabric *fab;
static struct fid_domain *dom;
static struct fid_av *av;

struct ep {
	struct fid_ep *ep;
	struct fid_cq *cq;
	char name[NAMELEN];
};

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* retry posts while the provider says -FI_EAGAIN (it progresses inside). */
#define POST(ep, call)                                                                                         \
	do {                                                                                                   \
		ssize_t r_;                                                                                    \
		int n_ = 0;                                                                                    \
		double t0_ = now_s();                                                                          \
		while ((r_ = (call)) == -FI_EAGAIN) {                                                          \
			struct fi_cq_tagged_entry x_;                                                          \
			if (fi_cq_read((ep)->cq, &x_, 0) < 0 && ++n_ % 1024 == 0 && now_s() > t0_ + 20)       \
				DIE("%s: still -FI_EAGAIN after 20 s", #call);                                 \
		}                                                                                              \
		if (r_)                                                                                        \
			DIE("%s: %zd (%s)", #call, r_, fi_strerror((int)-r_));                                 \
	} while (0)

/* next waits for one completion (sread with a wait object, read else) and
 * returns 0, or the error entry's err (with *e filled as far as it goes). */
static int next(struct ep *e, struct fi_cq_tagged_entry *c, fi_addr_t *src, int wait)
{
	double t0 = now_s();
	for (long spins = 0;; spins++) {
		ssize_t n = wait ? fi_cq_sreadfrom(e->cq, c, 1, src, NULL, 10000) : fi_cq_readfrom(e->cq, c, 1, src);
		if (n == 1)
			return 0;
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			if (fi_cq_readerr(e->cq, &err, 0) != 1)
				DIE("readerr");
			c->op_context = err.op_context;
			c->flags = err.flags;
			c->len = err.len;
			return err.err;
		}
		if (n != -FI_EAGAIN)
			DIE("cq read: %zd (%s)", n, fi_strerror((int)-n));
		if (wait || (spins % 1024 == 0 && now_s() > t0 + 20))
			DIE("no completion in 20 s");
	}
}

static void open_fabric(const char *provdir)
{
	setenv("FI_PROVIDER_PATH", provdir, 1);
	struct fi_info *hints = fi_allocinfo();
	hints->ep_attr->type = FI_EP_RDM;
	hints->caps = FI_TAGGED | FI_MSG | FI_RMA | FI_DIRECTED_RECV | FI_SOURCE;
	hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED;
	hints->domain_attr->cq_data_size = 4;
	hints->fabric_attr->prov_name = strdup("metaroce");
	MUST(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	if (!(info->caps & FI_RMA) || !(info->caps & FI_DIRECTED_RECV) || !(info->caps & FI_SOURCE))
		DIE("caps %#" PRIx64, info->caps);
	if (info->tx_attr->iov_limit != 4 || info->tx_attr->rma_iov_limit != 1 || info->rx_attr->iov_limit != 4)
		DIE("iov_limit tx %zu rma %zu rx %zu", info->tx_attr->iov_limit, info->tx_attr->rma_iov_limit,
		    info->rx_attr->iov_limit);
	if (info->domain_attr->cq_data_size != 4 || info->domain_attr->mr_key_size != 4)
		DIE("cq_data_size %zu mr_key_size %zu", info->domain_attr->cq_data_size, info->domain_attr->mr_key_size);
	MUST(fi_fabric(info->fabric_attr, &fab, NULL));
	MUST(fi_domain(fab, info, &dom, NULL));
	MUST(fi_av_open(dom, &(struct fi_av_attr){.type = FI_AV_TABLE}, &av, NULL));
}

static void open_ep(struct ep *e, enum fi_wait_obj wait)
{
	MUST(fi_cq_open(dom, &(struct fi_cq_attr){.format = FI_CQ_FORMAT_TAGGED, .wait_obj = wait, .size = 1024},
			&e->cq, NULL));
	MUST(fi_endpoint(dom, info, &e->ep, NULL));
	MUST(fi_ep_bind(e->ep, &av->fid, 0));
	MUST(fi_ep_bind(e->ep, &e->cq->fid, FI_TRANSMIT | FI_RECV));
	MUST(fi_enable(e->ep));
	size_t len = NAMELEN;
	MUST(fi_getname(&e->ep->fid, e->name, &len));
	if (len != NAMELEN)
		DIE("name length %zu", len);
}

static void hex(const void *p, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}

static void unhex(const char *s, void *p, size_t n)
{
	if (strlen(s) != 2 * n)
		DIE("hex %s", s);
	for (size_t i = 0; i < n; i++)
		sscanf(s + 2 * i, "%2hhx", (unsigned char *)p + i);
}

static unsigned char pat(int k, size_t i) { return (unsigned char)(k * 37 + i * 11 + 5); }

/* open_fds counts this process's descriptors. */
static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	if (!d)
		DIE("opendir /proc/self/fd");
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* epoll_targets counts the descriptors in epoll set fd (its fdinfo lists
 * one "tfd:" line per target). */
static int epoll_targets(int fd)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
	FILE *f = fopen(path, "r");
	if (!f)
		DIE("open %s", path);
	int n = 0;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "tfd:", 4))
			n++;
	fclose(f);
	return n;
}

/* Lists sent as several iovs: each client endpoint k sends three, whose
 * bytes are pat(base + k, i) over the message. tag 0x40: three
 * registered iovs (a header and three entries: the list as it is); FI_MSG
 * with data 0x5000 + k: registered and unregistered ones alternating
 * (copies behind the header, registered ones in place); tag 0x41: four
 * registered ones (five entries with the header, more than max_sge:
 * copied). */
enum { SV_TAG = 0x40, SV_BASE = 50, SM_BASE = 60, SC_TAG = 0x41, SC_BASE = 70 };
static const size_t sv_len[3] = {700, 1, 2000}, sm_len[4] = {33, 500, 77, 1200}, sc_len[4] = {100, 200, 300, 400};

static size_t sum(const size_t *l, int n)
{
	size_t t = 0;
	for (int i = 0; i < n; i++)
		t += l[i];
	return t;
}

/* The four fi_writev iovs and the three fi_writemsg ones (the middle one
 * unregistered) of client k land at WV + k * 2048 and 1024 further, with
 * bytes pat(80 + k, i) and pat(90 + k, i). */
static const size_t wv_len[4] = {100, 700, 7, 200}, wm_len[3] = {64, 129, 400};

static void close_all(struct ep *e, int n)
{
	for (int i = 0; i < n; i++) {
		MUST(fi_close(&e[i].ep->fid));
		MUST(fi_close(&e[i].cq->fid));
	}
	MUST(fi_close(&av->fid));
}

static int server(int n)
{
	struct ep s;
	open_ep(&s, FI_WAIT_FD);
	int fd = -1;
	MUST(fi_control(&s.cq->fid, FI_GETWAIT, &fd));
	if (fd < 0)
		DIE("no wait fd");
	fi_addr_t self;
	if (fi_av_insert(av, s.name, 1, &self, 0, NULL) != 1)
		DIE("insert self");
	/* The RMA target: ordinary heap memory, registered. */
	unsigned char *region = malloc(REGION);
	memset(region, 0, REGION);
	for (size_t i = REGION / 2; i < REGION; i++)
		region[i] = pat(99, i);
	struct fid_mr *mr;
	MUST(fi_mr_reg(dom, region, REGION, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &mr, NULL));
	char nh[2 * NAMELEN + 1];
	hex(s.name, NAMELEN, nh);
	printf("READY %s %" PRIu64 " %" PRIu64 "\n", nh, (uint64_t)(uintptr_t)region, fi_mr_key(mr));
	fflush(stdout);

	/* The endpoint's descriptors before any peer: what each peer adds is
	 * checked below. */
	int fds0 = open_fds();
	/* Hellos: each client endpoint's name, from any source. */
	fi_addr_t fa[MAXEP];
	char names[MAXEP][NAMELEN];
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	for (int k = 0; k < n; k++) {
		POST(&s, fi_trecv(s.ep, names[k], NAMELEN, NULL, FI_ADDR_UNSPEC, 1, 0, NULL));
		if (next(&s, &c, &src, 1) || c.tag != 1 || c.len != NAMELEN)
			DIE("hello %d: tag %" PRIu64 " len %zu", k, c.tag, c.len);
	}
	/* Inserted now, after their messages came: sources resolve late. */
	if (fi_av_insert(av, names, (size_t)n, fa, 0, NULL) != n)
		DIE("insert clients");
	/* Which name is whose: each client endpoint k says k in its tag-2
	 * message; directed receives, posted in reverse, must each get the
	 * message of their own source. */
	int who[MAXEP];
	for (int k = n - 1; k >= 0; k--)
		POST(&s, fi_trecv(s.ep, &who[k], sizeof who[k], NULL, fa[k], 2, 0, &who[k]));
	for (int got = 0; got < n; got++) {
		if (next(&s, &c, &src, 1) || c.tag != 2)
			DIE("directed: tag %" PRIu64, c.tag);
		int k = (int)((int *)c.op_context - who);
		if (src != fa[k])
			DIE("directed receive %d: FI_SOURCE %" PRIu64 ", want %" PRIu64, k, src, fa[k]);
	}
	int seen[MAXEP] = {0};
	for (int k = 0; k < n; k++) {
		if (who[k] < 0 || who[k] >= n || seen[who[k]]++)
			DIE("directed receive %d took the message of %d", k, who[k]);
	}
	/* Tag and ignore bits: 0x30 with the low 4 ignored takes 0x30|k, with
	 * its remote CQ data 0x1000+k. */
	for (int k = 0; k < n; k++) {
		int v = -1;
		POST(&s, fi_trecv(s.ep, &v, sizeof v, NULL, FI_ADDR_UNSPEC, 0x30, 0xf, NULL));
		if (next(&s, &c, &src, 1))
			DIE("ignore bits: error");
		int from = -1;
		for (int j = 0; j < n; j++)
			if (fa[j] == src)
				from = who[j];
		if (c.tag != (0x30u | (unsigned)v) || v != from || !(c.flags & FI_REMOTE_CQ_DATA) || c.data != 0x1000u + (unsigned)v)
			DIE("ignore bits: tag %#" PRIx64 " value %d from %d data %#" PRIx64 " flags %#" PRIx64, c.tag, v,
			    from, c.data, c.flags);
	}
	/* FI_PEEK until client 0's tag-7 message is there, claiming it, then
	 * FI_CLAIM takes it. */
	struct fi_context claim;
	int v77 = 0;
	struct iovec iov = {&v77, sizeof v77};
	struct fi_msg_tagged tm = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .tag = 7, .context = &claim};
	for (int tries = 0;; tries++) {
		POST(&s, fi_trecvmsg(s.ep, &tm, FI_PEEK | FI_CLAIM));
		int err = next(&s, &c, &src, 1);
		if (!err) {
			if (c.len != sizeof v77 || c.tag != 7)
				DIE("peek: len %zu tag %" PRIu64, c.len, c.tag);
			break;
		}
		if (err != FI_ENOMSG || tries > 100000)
			DIE("peek: %d", err);
	}
	POST(&s, fi_trecvmsg(s.ep, &tm, FI_CLAIM));
	if (next(&s, &c, &src, 1) || v77 != 77 || c.op_context != &claim)
		DIE("claim: %d", v77);
	/* Go: the clients start their RMA now (a writedata completion must not
	 * come among the messages above). */
	for (int k = 0; k < n; k++)
		POST(&s, fi_tsend(s.ep, "go", 3, NULL, fa[k], 3, NULL));
	for (int k = 0; k < n; k++)
		if (next(&s, &c, &src, 1))
			DIE("go: error");
	/* One shared CQ for every peer's queue pairs: the wait set is its
	 * doorbell, the listener timer and the signal eventfd whatever the
	 * number of peers, and each peer costs its queue pairs' doorbell ends
	 * (one each way) and, inbound, the memfd of its receive slots. */
	if (epoll_targets(fd) != 3)
		DIE("the wait set holds %d descriptors with %d peers, want 3", epoll_targets(fd), n);
	int grown = open_fds() - fds0;
	if (grown != 3 * n)
		DIE("%d peers cost %d descriptors, want %d (3 each)", n, grown, 3 * n);
	/* The clients' lists (sent before the go: unexpected by now, or on
	 * their way) and their RMA writes with data, in whatever order: each
	 * client's fi_writedata completes here after its fi_write,
	 * fi_inject_write, fi_writev and fi_writemsg landed. */
	static unsigned char sv[MAXEP][4096], sm[MAXEP][4096], sc[MAXEP][4096];
	for (int k = 0; k < n; k++) {
		POST(&s, fi_trecv(s.ep, sv[k], sizeof sv[k], NULL, FI_ADDR_UNSPEC, SV_TAG, 0, sv[k]));
		POST(&s, fi_recv(s.ep, sm[k], sizeof sm[k], NULL, FI_ADDR_UNSPEC, sm[k]));
		POST(&s, fi_trecv(s.ep, sc[k], sizeof sc[k], NULL, FI_ADDR_UNSPEC, SC_TAG, 0, sc[k]));
	}
	for (int got = 0, wd = 0; got < 3 * n || wd < n;) {
		if (next(&s, &c, &src, 1))
			DIE("lists and writedata: error");
		int from = -1;
		for (int i = 0; i < n; i++)
			if (fa[i] == src)
				from = who[i];
		if (from < 0)
			DIE("a completion from %" PRIu64 ", not a client", src);
		if (!(c.flags & FI_RMA)) {
			const unsigned char *b = c.op_context;
			int base;
			size_t want;
			if (c.flags & FI_TAGGED) {
				base = c.tag == SV_TAG ? SV_BASE : SC_BASE;
				want = c.tag == SV_TAG ? sum(sv_len, 3) : sum(sc_len, 4);
			} else {
				base = SM_BASE;
				want = sum(sm_len, 4);
				if (!(c.flags & FI_REMOTE_CQ_DATA) || c.data != 0x5000u + (unsigned)from)
					DIE("fi_sendmsg of %d: data %#" PRIx64 " flags %#" PRIx64, from, c.data, c.flags);
			}
			if (c.len != want)
				DIE("list %d of %d: %zu bytes, want %zu", base, from, c.len, want);
			for (size_t i = 0; i < want; i++)
				if (b[i] != pat(base + from, i))
					DIE("list %d of %d: byte %zu is %u, want %u", base, from, i, b[i], pat(base + from, i));
			got++;
			continue;
		}
		if (++wd > n)
			DIE("writedata: %d of them", wd);
		if (!(c.flags & FI_REMOTE_CQ_DATA) || c.data < 0x2000 || c.data >= 0x2000u + (unsigned)n)
			DIE("writedata: flags %#" PRIx64 " data %#" PRIx64, c.flags, c.data);
		int j = (int)(c.data - 0x2000);
		if (from != j)
			DIE("writedata from %d says %d", from, j);
		for (size_t i = 0; i < CHUNK; i++)
			if (region[(size_t)j * CHUNK + i] != pat(j, i))
				DIE("fi_write of %d: byte %zu is %u, want %u", j, i, region[(size_t)j * CHUNK + i], pat(j, i));
		for (size_t i = 0; i < 64; i++)
			if (region[REGION / 4 + (size_t)j * 64 + i] != (unsigned char)(j + i))
				DIE("fi_inject_write of %d: byte %zu", j, i);
		for (size_t i = 0; i < 16; i++)
			if (region[REGION / 4 + 4096 + (size_t)j * 16 + i] != (unsigned char)~j)
				DIE("fi_writedata of %d: byte %zu", j, i);
		const unsigned char *w = region + WV + (size_t)j * 2048;
		for (size_t i = 0; i < sum(wv_len, 4); i++)
			if (w[i] != pat(80 + j, i))
				DIE("fi_writev of %d: byte %zu is %u, want %u", j, i, w[i], pat(80 + j, i));
		if (w[sum(wv_len, 4)] != 0)
			DIE("fi_writev of %d: wrote past its end", j);
		for (size_t i = 0; i < sum(wm_len, 3); i++)
			if (w[1024 + i] != pat(90 + j, i))
				DIE("fi_writemsg of %d: byte %zu is %u, want %u", j, i, w[1024 + i], pat(90 + j, i));
	}
	/* The clients' done messages, slept for on the wait object. */
	int done[MAXEP];
	for (int k = 0; k < n; k++)
		POST(&s, fi_trecv(s.ep, &done[k], sizeof done[k], NULL, FI_ADDR_UNSPEC, 8, 0, NULL));
	for (int k = 0; k < n;) {
		int r = fi_trywait(fab, &(struct fid *){&s.cq->fid}, 1);
		if (r == 0) {
			struct pollfd p = {fd, POLLIN, 0};
			if (poll(&p, 1, 10000) != 1)
				DIE("wait fd: nothing in 10 s");
		} else if (r != -FI_EAGAIN) {
			DIE("fi_trywait: %d", r);
		}
		ssize_t m = fi_cq_read(s.cq, &c, 1);
		if (m == 1)
			k++;
		else if (m != -FI_EAGAIN)
			DIE("done: %zd", m);
	}
	/* To itself. */
	char in[8] = "", out[8] = "self";
	POST(&s, fi_trecv(s.ep, in, sizeof in, NULL, self, 10, 0, NULL));
	POST(&s, fi_tsend(s.ep, out, sizeof out, NULL, self, 10, NULL));
	for (int k = 0; k < 2; k++)
		if (next(&s, &c, &src, 1))
			DIE("self: error");
	if (strcmp(in, "self"))
		DIE("self: %s", in);
	/* Bye. */
	for (int k = 0; k < n; k++)
		POST(&s, fi_tsend(s.ep, "bye", 4, NULL, fa[k], 9, NULL));
	for (int k = 0; k < n; k++)
		if (next(&s, &c, &src, 1))
			DIE("bye: error");
	MUST(fi_close(&mr->fid));
	close_all(&s, 1);
	free(region);
	printf("PASS server, %d peers\n", n);
	return 0;
}

static int client(int n, const char *name, uint64_t raddr, uint64_t key)
{
	struct ep e[MAXEP];
	char sname[NAMELEN];
	unhex(name, sname, NAMELEN);
	fi_addr_t srv;
	if (fi_av_insert(av, sname, 1, &srv, 0, NULL) != 1)
		DIE("insert server");
	for (int k = 0; k < n; k++)
		open_ep(&e[k], FI_WAIT_NONE);
	struct fi_cq_tagged_entry c;
	fi_addr_t src;
	for (int k = 0; k < n; k++)
		POST(&e[k], fi_tsend(e[k].ep, e[k].name, NAMELEN, NULL, srv, 1, NULL));
	for (int k = 0; k < n; k++)
		if (next(&e[k], &c, &src, 0))
			DIE("hello %d", k);
	/* Sent in reverse, so directed receives are what orders them. */
	static int ks[MAXEP];
	for (int k = n - 1; k >= 0; k--) {
		ks[k] = k;
		POST(&e[k], fi_tsend(e[k].ep, &ks[k], sizeof ks[k], NULL, srv, 2, NULL));
		POST(&e[k], fi_tsenddata(e[k].ep, &ks[k], sizeof ks[k], NULL, 0x1000u + (unsigned)k, srv,
					 0x30u | (unsigned)k, NULL));
	}
	int v77 = 77;
	POST(&e[0], fi_tinject(e[0].ep, &v77, sizeof v77, srv, 7));
	for (int k = 0; k < n; k++) /* the tag-2 send and the tsenddata (fi_tinject reports none) */
		for (int j = 0; j < 2; j++)
			if (next(&e[k], &c, &src, 0) || !(c.flags & FI_SEND))
				DIE("send %d: flags %#" PRIx64, k, c.flags);
	/* Buffers on pages of their own, each registered: iovs from
	 * different regions. */
	unsigned char *bp[NB];
	struct fid_mr *bm[NB];
	void *bd[NB];
	for (int i = 0; i < NB; i++) {
		bp[i] = aligned_alloc(PAGE, PAGE);
		if (!bp[i])
			DIE("aligned_alloc");
		MUST(fi_mr_reg(dom, bp[i], PAGE, FI_READ | FI_WRITE, 0, 0, 0, &bm[i], NULL));
		bd[i] = fi_mr_desc(bm[i]);
	}
	unsigned char plain[2][PAGE]; /* unregistered */
	/* Lists: three sends of several iovs from each endpoint (the server
	 * checks them). */
	for (int k = 0; k < n; k++) {
		struct iovec iv[4];
		void *ds[4];
		size_t off = 0;
		for (int i = 0; i < 3; i++) {
			for (size_t j = 0; j < sv_len[i]; j++)
				bp[i][j] = pat(SV_BASE + k, off + j);
			iv[i] = (struct iovec){bp[i], sv_len[i]};
			ds[i] = bd[i];
			off += sv_len[i];
		}
		POST(&e[k], fi_tsendv(e[k].ep, iv, ds, 3, srv, SV_TAG, iv));
		/* unregistered, registered, unregistered, registered */
		unsigned char *sm_buf[4] = {plain[0], bp[3], plain[1], bp[4]};
		off = 0;
		for (int i = 0; i < 4; i++) {
			for (size_t j = 0; j < sm_len[i]; j++)
				sm_buf[i][j] = pat(SM_BASE + k, off + j);
			iv[i] = (struct iovec){sm_buf[i], sm_len[i]};
			ds[i] = i % 2 ? bd[3 + i / 2] : NULL;
			off += sm_len[i];
		}
		struct fi_msg m = {.msg_iov = iv, .desc = ds, .iov_count = 4, .addr = srv, .context = sm_buf,
				   .data = 0x5000u + (unsigned)k};
		POST(&e[k], fi_sendmsg(e[k].ep, &m, FI_REMOTE_CQ_DATA));
		/* the plain buffers are the application's again: a send copies
		 * what it does not take in place */
		memset(plain, 0xee, sizeof plain);
		struct iovec iv2[4];
		off = 0;
		for (int i = 0; i < 4; i++) {
			unsigned char *b = i < 3 ? bp[5 + i] : bp[0] + 2048;
			for (size_t j = 0; j < sc_len[i]; j++)
				b[j] = pat(SC_BASE + k, off + j);
			iv2[i] = (struct iovec){b, sc_len[i]};
			ds[i] = i < 3 ? bd[5 + i] : bd[0];
			off += sc_len[i];
		}
		POST(&e[k], fi_tsendv(e[k].ep, iv2, ds, 4, srv, SC_TAG, iv2));
		for (int j = 0; j < 3; j++)
			if (next(&e[k], &c, &src, 0) || !(c.flags & FI_SEND))
				DIE("lists %d: send %d failed", k, j);
	}
	/* Limits: tx iovs as fi_info says, one remote range, four receive
	 * buffers. */
	{
		struct iovec iv[5] = {{bp[0], 1}, {bp[1], 1}, {bp[2], 1}, {bp[3], 1}, {bp[4], 1}};
		ssize_t r = fi_writev(e[0].ep, iv, bd, 5, srv, raddr, key, NULL);
		if (r != -FI_EINVAL)
			DIE("fi_writev of 5 iovs: %zd", r);
		struct fi_rma_iov ri[2] = {{raddr, 1, key}, {raddr + 8, 1, key}};
		struct fi_msg_rma mr2 = {.msg_iov = iv, .desc = bd, .iov_count = 2, .addr = srv, .rma_iov = ri,
					 .rma_iov_count = 2};
		if ((r = fi_readmsg(e[0].ep, &mr2, 0)) != -FI_EINVAL)
			DIE("fi_readmsg of 2 remote ranges: %zd", r);
		if ((r = fi_recvv(e[0].ep, iv, bd, 5, srv, NULL)) != -FI_EINVAL)
			DIE("fi_recvv of 5 iovs: %zd", r);
	}
	char go[MAXEP][3];
	for (int k = 0; k < n; k++) {
		POST(&e[k], fi_trecv(e[k].ep, go[k], sizeof go[k], NULL, srv, 3, 0, NULL));
		if (next(&e[k], &c, &src, 0) || strcmp(go[k], "go"))
			DIE("go %d", k);
	}
	unsigned char *buf = malloc(CHUNK), *rd = malloc(CHUNK);
	struct fid_mr *mr;
	/* The read lands in registered memory (desc given: no bounce). */
	MUST(fi_mr_reg(dom, rd, CHUNK, FI_READ, 0, 0, 0, &mr, NULL));
	for (int k = 0; k < n; k++) {
		for (size_t i = 0; i < CHUNK; i++)
			buf[i] = pat(k, i);
		POST(&e[k], fi_write(e[k].ep, buf, CHUNK, NULL, srv, raddr + (uint64_t)k * CHUNK, key, NULL));
		unsigned char small[64];
		for (size_t i = 0; i < sizeof small; i++)
			small[i] = (unsigned char)(k + i);
		POST(&e[k], fi_inject_write(e[k].ep, small, sizeof small, srv, raddr + REGION / 4 + (uint64_t)k * 64, key));
		/* fi_writev of four registered iovs, in place (a list of four),
		 * and fi_writemsg of three whose middle one is not registered
		 * (through a slot), both before the writedata, which the server
		 * checks them at. */
		struct iovec wv[4];
		size_t off = 0;
		for (int i = 0; i < 4; i++) {
			unsigned char *b = bp[4 + i];
			for (size_t j = 0; j < wv_len[i]; j++)
				b[j] = pat(80 + k, off + j);
			wv[i] = (struct iovec){b, wv_len[i]};
			off += wv_len[i];
		}
		/* In place, not bounced: BURST of them posted at once all go,
		 * where bounced ones would run out of the endpoint's 16 transmit
		 * slots and answer -FI_EAGAIN (the same bytes to the same place:
		 * what the server checks is the same). */
		for (int i = 0; i < BURST; i++) {
			ssize_t r = fi_writev(e[k].ep, wv, &bd[4], 4, srv, raddr + WV + (uint64_t)k * 2048, key, NULL);
			if (r != 0)
				DIE("fi_writev %d of a burst of %d: %zd (%s): not in place?", i, BURST, r, fi_strerror((int)-r));
		}
		for (int i = 0; i < BURST; i++)
			if (next(&e[k], &c, &src, 0))
				DIE("fi_writev burst: %d failed", i);
		POST(&e[k], fi_writev(e[k].ep, wv, &bd[4], 4, srv, raddr + WV + (uint64_t)k * 2048, key, wv));
		struct iovec wm[3] = {{bp[0], wm_len[0]}, {plain[0], wm_len[1]}, {bp[1], wm_len[2]}};
		void *wmd[3] = {bd[0], NULL, bd[1]};
		off = 0;
		for (int i = 0; i < 3; i++) {
			for (size_t j = 0; j < wm_len[i]; j++)
				((unsigned char *)wm[i].iov_base)[j] = pat(90 + k, off + j);
			off += wm_len[i];
		}
		struct fi_rma_iov wr = {raddr + WV + (uint64_t)k * 2048 + 1024, sum(wm_len, 3), key};
		struct fi_msg_rma wmsg = {.msg_iov = wm, .desc = wmd, .iov_count = 3, .addr = srv, .rma_iov = &wr,
					  .rma_iov_count = 1, .context = wm};
		POST(&e[k], fi_writemsg(e[k].ep, &wmsg, FI_COMPLETION));
		memset(small, ~k, 16);
		POST(&e[k], fi_writedata(e[k].ep, small, 16, NULL, 0x2000u + (unsigned)k, srv,
					 raddr + REGION / 4 + 4096 + (uint64_t)k * 16, key, NULL));
		memset(rd, 0, CHUNK);
		POST(&e[k], fi_read(e[k].ep, rd, CHUNK, fi_mr_desc(mr), srv, raddr + REGION / 2 + (uint64_t)k * CHUNK, key,
				    rd));
		/* fi_readv into three registered iovs (a list), fi_readmsg into
		 * two unregistered ones (through a slot), of the server's
		 * pattern. */
		memset(bp[2], 0, PAGE);
		memset(bp[3], 0, PAGE);
		memset(plain, 0, sizeof plain);
		struct iovec rv[3] = {{bp[2], 1000}, {bp[3], 2000}, {bp[2] + 1000, 1096}};
		void *rvd[3] = {bd[2], bd[3], bd[2]};
		uint64_t rsrc = raddr + REGION / 2 + (uint64_t)k * CHUNK;
		POST(&e[k], fi_readv(e[k].ep, rv, rvd, 3, srv, rsrc, key, rv));
		struct iovec rm[2] = {{plain[0], 50}, {plain[1], 70}};
		struct fi_rma_iov rr = {rsrc + 100, 120, key};
		struct fi_msg_rma rmsg = {.msg_iov = rm, .iov_count = 2, .addr = srv, .rma_iov = &rr, .rma_iov_count = 1,
					  .context = rm};
		POST(&e[k], fi_readmsg(e[k].ep, &rmsg, 0));
		/* completions: write, writedata, read, writev, writemsg, readv,
		 * readmsg */
		for (int j = 0; j < 7; j++)
			if (next(&e[k], &c, &src, 0))
				DIE("endpoint %d: operation %d failed", k, j);
		for (size_t i = 0; i < CHUNK; i++)
			if (rd[i] != pat(99, REGION / 2 + (size_t)k * CHUNK + i))
				DIE("fi_read %d: byte %zu is %u", k, i, rd[i]);
		for (size_t i = 0, at = 0; i < 3; at += rv[i].iov_len, i++)
			for (size_t j = 0; j < rv[i].iov_len; j++)
				if (((unsigned char *)rv[i].iov_base)[j] != pat(99, REGION / 2 + (size_t)k * CHUNK + at + j))
					DIE("fi_readv %d: iov %zu byte %zu", k, i, j);
		for (size_t i = 0, at = 100; i < 2; at += rm[i].iov_len, i++)
			for (size_t j = 0; j < rm[i].iov_len; j++)
				if (((unsigned char *)rm[i].iov_base)[j] != pat(99, REGION / 2 + (size_t)k * CHUNK + at + j))
					DIE("fi_readmsg %d: iov %zu byte %zu", k, i, j);
		/* Done, then a key nobody registered (last: a peer may end the
		 * connection of a request it refused), then the server's bye,
		 * which comes on the server's own connection. */
		POST(&e[k], fi_tsend(e[k].ep, &ks[k], sizeof ks[k], NULL, srv, 8, NULL));
		if (next(&e[k], &c, &src, 0))
			DIE("done %d", k);
		POST(&e[k], fi_write(e[k].ep, buf, 8, NULL, srv, raddr, key ^ 0x5a5a5a5a, buf));
		int err = next(&e[k], &c, &src, 0);
		if (err != FI_EACCES || c.op_context != buf)
			DIE("bad key: %d (%s)", err, fi_strerror(err));
	}
	char bye[MAXEP][4];
	for (int k = 0; k < n; k++) {
		POST(&e[k], fi_trecv(e[k].ep, bye[k], sizeof bye[k], NULL, srv, 9, 0, NULL));
		if (next(&e[k], &c, &src, 0) || strcmp(bye[k], "bye") || src != srv)
			DIE("bye %d: %.4s from %" PRIu64, k, bye[k], src);
	}
	MUST(fi_close(&mr->fid));
	for (int i = 0; i < NB; i++) {
		MUST(fi_close(&bm[i]->fid));
		free(bp[i]);
	}
	free(buf);
	free(rd);
	close_all(e, n);
	printf("PASS client, %d endpoints\n", n);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 5)
		DIE("usage: fitest server SOCK PROVDIR N | fitest client SOCK PROVDIR N NAME ADDR KEY");
	setenv("METAROCE_SOCKET", argv[2], 1);
	int n = atoi(argv[4]);
	if (n < 1 || n > MAXEP)
		DIE("N %d", n);
	open_fabric(argv[3]);
	int r;
	if (!strcmp(argv[1], "server"))
		r = server(n);
	else if (argc == 8)
		r = client(n, argv[5], strtoull(argv[6], NULL, 10), strtoull(argv[7], NULL, 10));
	else
		DIE("usage");
	MUST(fi_close(&dom->fid));
	MUST(fi_close(&fab->fid));
	fi_freeinfo(info);
	return r;
}
