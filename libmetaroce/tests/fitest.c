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
 * checked; a bad key fails with FI_EACCES. The server's CQ has a wait
 * object: fi_cq_sread, and FI_GETWAIT + fi_trywait + poll. A send to
 * itself. Exit 0 and "PASS" is a pass. */
#define _GNU_SOURCE
#include <inttypes.h>
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
#define REGION (64 << 10)
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
	/* RMA writes with data: each client's fi_writedata completes here
	 * after its fi_write and fi_inject_write landed. */
	for (int k = 0; k < n; k++) {
		if (next(&s, &c, &src, 1))
			DIE("writedata: error");
		if (!(c.flags & FI_REMOTE_CQ_DATA) || !(c.flags & FI_RMA) || c.data < 0x2000 || c.data >= 0x2000u + (unsigned)n)
			DIE("writedata: flags %#" PRIx64 " data %#" PRIx64, c.flags, c.data);
		int j = (int)(c.data - 0x2000);
		int from = -1;
		for (int i = 0; i < n; i++)
			if (fa[i] == src)
				from = who[i];
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
		memset(small, ~k, 16);
		POST(&e[k], fi_writedata(e[k].ep, small, 16, NULL, 0x2000u + (unsigned)k, srv,
					 raddr + REGION / 4 + 4096 + (uint64_t)k * 16, key, NULL));
		memset(rd, 0, CHUNK);
		POST(&e[k], fi_read(e[k].ep, rd, CHUNK, fi_mr_desc(mr), srv, raddr + REGION / 2 + (uint64_t)k * CHUNK, key,
				    rd));
		/* completions: write, writedata, read */
		for (int j = 0; j < 3; j++)
			if (next(&e[k], &c, &src, 0))
				DIE("endpoint %d: operation %d failed", k, j);
		for (size_t i = 0; i < CHUNK; i++)
			if (rd[i] != pat(99, REGION / 2 + (size_t)k * CHUNK + i))
				DIE("fi_read %d: byte %zu is %u", k, i, rd[i]);
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
