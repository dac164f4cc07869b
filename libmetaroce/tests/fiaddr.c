/* fiaddr: addresses and connection set-up of the provider, as libfabric
 * applications written elsewhere use them (fabtests, MPI), run by
 * fiaddr_test.go:
 *
 *   fiaddr local SOCK PROVDIR               the address vector and fi_getinfo's addressing, one process
 *   fiaddr server SOCK PROVDIR PORT         in-band address exchange, the listening side
 *   fiaddr client SOCK PROVDIR IP PORT      the side that knows only IP and PORT
 *   fiaddr both SOCK PROVDIR PORT PEERIP PEERPORT DIR
 *                                           simultaneous first sends: two of these, one per host
 *
 * local: fi_av_insert of NULL is -FI_EINVAL and of a garbage name inserts
 * nothing (FI_SYNC_ERR says why for each); insertsvc, insertsym, lookup,
 * straddr; fi_av_remove, after which a send to the entry is -FI_EINVAL and
 * a lookup -FI_ENOENT, and its index is never given out again;
 * fi_getinfo(node, service) gives dest_addr, with FI_SOURCE src_addr, a
 * service that is no number or a domain capability the provider lacks
 * (FI_SHARED_AV) matches nothing.
 *
 * server/client: the fabtests way without -E. The server's info comes
 * from fi_getinfo(NULL, PORT, FI_SOURCE), so its endpoint listens at PORT;
 * the client's from fi_getinfo(IP, PORT, 0), whose dest_addr it inserts,
 * then sends its own name; the server inserts that and answers, and
 * messages of 1 B to 64 KiB go both ways, each byte checked.
 *
 * both: two endpoints that know each other's IP and port only (fi_av_
 * insertsvc) and, once both are up (a file each in DIR), send to each
 * other first at the same moment: every message must arrive, none be
 * refused. Exit 0 and "PASS" is a pass. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "check.h"

#define NAMELEN 64 /* sizeof the provider's name */
#define NMSG 64    /* messages each way in "both" */
#define MAXLEN (64 << 10)

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
static struct fid_ep *ep;
static struct fid_cq *cq;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static struct fi_info *hints_new(void)
{
	struct fi_info *h = fi_allocinfo();
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_TAGGED | FI_MSG;
	h->fabric_attr->prov_name = strdup("metaroce");
	return h;
}

static void open_all(const char *node, const char *service, uint64_t flags)
{
	struct fi_info *h = hints_new();
	MUST(fi_getinfo(FI_VERSION(1, 17), node, service, flags, h, &info));
	fi_freeinfo(h);
	MUST(fi_fabric(info->fabric_attr, &fab, NULL));
	MUST(fi_domain(fab, info, &dom, NULL));
	MUST(fi_av_open(dom, &(struct fi_av_attr){.type = FI_AV_TABLE}, &av, NULL));
	MUST(fi_cq_open(dom, &(struct fi_cq_attr){.format = FI_CQ_FORMAT_TAGGED, .size = 1024}, &cq, NULL));
	MUST(fi_endpoint(dom, info, &ep, NULL));
	MUST(fi_ep_bind(ep, &av->fid, 0));
	MUST(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV));
	MUST(fi_enable(ep));
}

static void close_all(void)
{
	MUST(fi_close(&ep->fid));
	MUST(fi_close(&av->fid));
	MUST(fi_close(&cq->fid));
	MUST(fi_close(&dom->fid));
	MUST(fi_close(&fab->fid));
	fi_freeinfo(info);
}

/* wait_comp takes completions until want of them came, failing on an
 * error entry or 30 s without progress. */
static void wait_comp(int want)
{
	double t0 = now_s();
	for (int got = 0; got < want;) {
		struct fi_cq_tagged_entry c;
		ssize_t n = fi_cq_read(cq, &c, 1);
		if (n == 1) {
			got++;
			t0 = now_s();
			continue;
		}
		if (n == -FI_EAVAIL) {
			struct fi_cq_err_entry err = {0};
			fi_cq_readerr(cq, &err, 0);
			DIE("error completion: %s (flags %#" PRIx64 ")", fi_strerror(err.err), err.flags);
		}
		if (n != -FI_EAGAIN)
			DIE("cq read: %zd", n);
		if (now_s() > t0 + 30)
			DIE("%d of %d completions in 30 s", got, want);
	}
}

/* post retries while the provider answers -FI_EAGAIN (connecting, or no
 * room), progressing it; any other error is fatal: a refusal is one. */
#define POST(call)                                                                                             \
	do {                                                                                                   \
		ssize_t r_;                                                                                    \
		double t0_ = now_s();                                                                          \
		while ((r_ = (call)) == -FI_EAGAIN) {                                                          \
			struct fi_cq_tagged_entry x_;                                                          \
			ssize_t n_ = fi_cq_read(cq, &x_, 0);                                                   \
			if (n_ == -FI_EAVAIL) {                                                                \
				struct fi_cq_err_entry e_ = {0};                                               \
				fi_cq_readerr(cq, &e_, 0);                                                     \
				DIE("%s: error completion while retrying: %s (prov %d, flags %#" PRIx64 ")",  \
				    #call, fi_strerror(e_.err), e_.prov_errno, e_.flags);                      \
			}                                                                                      \
			if (now_s() > t0_ + 40)                                                                \
				DIE("%s: still -FI_EAGAIN after 40 s", #call);                                 \
		}                                                                                              \
		if (r_)                                                                                        \
			DIE("%s: %zd (%s)", #call, r_, fi_strerror((int)-r_));                                 \
	} while (0)

static unsigned char pat(int k, size_t i) { return (unsigned char)(k * 31 + i * 7 + 3); }

/* ---- local: the address vector and getinfo ---- */

static int local(void)
{
	open_all(NULL, NULL, 0);
	/* NULL addresses: today's crash in fabtests' in-band exchange (an
	 * info without dest_addr, inserted as it was). */
	fi_addr_t fa = 7;
	CHECK(fi_av_insert(av, NULL, 1, &fa, 0, NULL) == -FI_EINVAL, "insert NULL");
	CHECK(fi_av_insert(av, NULL, 0, &fa, 0, NULL) == 0, "insert none");
	/* garbage: no IP in the name, a zero service, a service past 24 bits */
	unsigned char junk[3][NAMELEN];
	memset(junk[0], 0xff, NAMELEN);
	memset(junk[1], 0, NAMELEN);
	strcpy((char *)junk[1], "10.0.0.1");
	memset(junk[2], 0, NAMELEN);
	strcpy((char *)junk[2], "10.0.0.1");
	uint32_t big = 1u << 24;
	memcpy(junk[2] + 48, &big, 4);
	fi_addr_t fas[3] = {1, 2, 3};
	int errs[3] = {0};
	CHECK(fi_av_insert(av, junk, 3, fas, FI_SYNC_ERR, errs) == 0, "junk inserted");
	for (int i = 0; i < 3; i++)
		CHECK(fas[i] == FI_ADDR_NOTAVAIL && errs[i] == FI_EINVAL, "junk %d: %" PRIu64 " err %d", i, fas[i], errs[i]);
	CHECK(fi_av_insert(av, junk, 1, fas, FI_PEEK, NULL) == -FI_EBADFLAGS, "bad flags");

	/* insertsvc, insertsym, lookup, straddr */
	fi_addr_t a0 = FI_ADDR_NOTAVAIL, sym[6];
	CHECK(fi_av_insertsvc(av, "10.1.2.3", "9228", &a0, 0, NULL) == 1 && a0 == 0, "insertsvc: %" PRIu64, a0);
	CHECK(fi_av_insertsvc(av, "10.1.2.3", "nine", &fa, 0, NULL) == 0 && fa == FI_ADDR_NOTAVAIL, "insertsvc bad service");
	CHECK(fi_av_insertsvc(av, "10.1.2.3", "0", &fa, 0, NULL) == 0, "insertsvc service 0");
	CHECK(fi_av_insertsym(av, "10.1.2.254", 3, "100", 2, sym, 0, NULL) == 6, "insertsym");
	char nm[NAMELEN], buf[96];
	size_t len = sizeof nm;
	CHECK(fi_av_lookup(av, sym[5], nm, &len) == 0 && len == NAMELEN, "lookup");
	len = sizeof buf;
	fi_av_straddr(av, nm, buf, &len);
	CHECK(strcmp(buf, "metaroce://10.1.3.0/101") == 0, "insertsym's last: %s", buf);
	len = sizeof nm;
	CHECK(fi_av_lookup(av, 999, nm, &len) == -FI_ENOENT, "lookup past the end");

	/* remove: the entry is gone for good, and sends to it refused */
	CHECK(fi_av_remove(av, &a0, 1, 0) == 0, "remove");
	len = sizeof nm;
	CHECK(fi_av_lookup(av, a0, nm, &len) == -FI_ENOENT, "lookup removed");
	CHECK(fi_av_remove(av, &a0, 1, 0) == -FI_EINVAL, "remove twice");
	char one = 1;
	CHECK(fi_tsend(ep, &one, 1, NULL, a0, 1, NULL) == -FI_EINVAL, "send to removed");
	CHECK(fi_av_insertsvc(av, "10.1.2.3", "9228", &fa, 0, NULL) == 1 && fa != a0, "index reused: %" PRIu64, fa);

	/* getinfo's addressing */
	struct fi_info *h = hints_new(), *i2 = NULL;
	CHECK(fi_getinfo(FI_VERSION(1, 17), "10.9.8.7", "4242", 0, h, &i2) == 0 && i2 && i2->dest_addr &&
		      i2->dest_addrlen == NAMELEN && i2->src_addr && i2->src_addrlen == NAMELEN,
	      "getinfo node, service: dest_addr (and a source, as every info has)");
	if (i2 && i2->dest_addr) {
		len = sizeof buf;
		fi_av_straddr(av, i2->dest_addr, buf, &len);
		CHECK(strcmp(buf, "metaroce://10.9.8.7/4242") == 0, "dest_addr %s", buf);
	}
	fi_freeinfo(i2);
	i2 = NULL;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, "4242", FI_SOURCE, h, &i2) == 0 && i2 && i2->src_addr &&
		      i2->src_addrlen == NAMELEN && !i2->dest_addr,
	      "getinfo FI_SOURCE: src_addr");
	fi_freeinfo(i2);
	i2 = NULL;
	CHECK(fi_getinfo(FI_VERSION(1, 17), "10.9.8.7", "port", 0, h, &i2) == -FI_ENODATA, "getinfo bad service");
	h->domain_attr->caps = FI_SHARED_AV;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i2) == -FI_ENODATA, "getinfo FI_SHARED_AV");
	h->domain_attr->caps = FI_LOCAL_COMM;
	CHECK(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i2) == 0 && i2 &&
		      (i2->domain_attr->caps & FI_LOCAL_COMM),
	      "getinfo FI_LOCAL_COMM");
	fi_freeinfo(i2);
	i2 = NULL;

	/* sockaddrs, when asked for: an endpoint then listens publicly at a
	 * port of its own pick, and its name is a struct sockaddr_in */
	h->domain_attr->caps = 0;
	h->addr_format = FI_SOCKADDR_IN;
	MUST(fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, h, &i2));
	CHECK(i2->addr_format == FI_SOCKADDR_IN && i2->src_addrlen == sizeof(struct sockaddr_in), "sockaddr info");
	struct fid_domain *d2;
	struct fid_av *av2;
	struct fid_cq *cq2;
	struct fid_ep *ep2;
	MUST(fi_domain(fab, i2, &d2, NULL));
	MUST(fi_av_open(d2, &(struct fi_av_attr){.type = FI_AV_TABLE}, &av2, NULL));
	MUST(fi_cq_open(d2, &(struct fi_cq_attr){.format = FI_CQ_FORMAT_TAGGED}, &cq2, NULL));
	MUST(fi_endpoint(d2, i2, &ep2, NULL));
	MUST(fi_ep_bind(ep2, &av2->fid, 0));
	MUST(fi_ep_bind(ep2, &cq2->fid, FI_TRANSMIT | FI_RECV));
	MUST(fi_enable(ep2));
	struct sockaddr_in sin[2];
	len = sizeof sin[0];
	MUST(fi_getname(&ep2->fid, &sin[0], &len));
	CHECK(len == sizeof sin[0] && sin[0].sin_family == AF_INET && ntohs(sin[0].sin_port) >= 49152,
	      "sockaddr name: len %zu family %d port %u", len, sin[0].sin_family, ntohs(sin[0].sin_port));
	sin[1] = sin[0];
	sin[1].sin_family = AF_INET6; /* not an IPv4 sockaddr: refused */
	fi_addr_t sa[2];
	CHECK(fi_av_insert(av2, sin, 2, sa, 0, NULL) == 1 && sa[0] == 0 && sa[1] == FI_ADDR_NOTAVAIL, "sockaddr insert");
	len = sizeof buf;
	fi_av_straddr(av2, &sin[0], buf, &len);
	CHECK(strncmp(buf, "fi_sockaddr_in://", 17) == 0, "sockaddr straddr %s", buf);
	MUST(fi_close(&ep2->fid));
	MUST(fi_close(&av2->fid));
	MUST(fi_close(&cq2->fid));
	MUST(fi_close(&d2->fid));
	fi_freeinfo(i2);
	fi_freeinfo(h);
	close_all();
	if (fails)
		return 1;
	printf("PASS local, %d checks\n", checks);
	return 0;
}

/* ---- server/client: in-band address exchange ---- */

static unsigned char *rbuf, *sbuf;

static void pingpong(fi_addr_t peer, int first)
{
	for (size_t n = 1, k = 0; n <= MAXLEN; n *= 4, k++) {
		if (first) {
			for (size_t i = 0; i < n; i++)
				sbuf[i] = pat((int)k, i);
			POST(fi_tsend(ep, sbuf, n, NULL, peer, k, NULL));
			wait_comp(1);
		}
		memset(rbuf, 0, n);
		POST(fi_trecv(ep, rbuf, n, NULL, peer, k, 0, NULL));
		wait_comp(1);
		for (size_t i = 0; i < n; i++)
			if (rbuf[i] != pat((int)k, i))
				DIE("message %zu: byte %zu is %u, want %u", k, i, rbuf[i], pat((int)k, i));
		if (!first) {
			memcpy(sbuf, rbuf, n);
			POST(fi_tsend(ep, sbuf, n, NULL, peer, k, NULL));
			wait_comp(1);
		}
	}
}

static int server(const char *port)
{
	open_all(NULL, port, FI_SOURCE);
	char name[NAMELEN];
	size_t len = sizeof name;
	MUST(fi_getname(&ep->fid, name, &len));
	printf("READY\n");
	fflush(stdout);
	/* The client's name comes first, in band. */
	char peer[NAMELEN];
	POST(fi_recv(ep, peer, sizeof peer, NULL, FI_ADDR_UNSPEC, NULL));
	wait_comp(1);
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	if (fi_av_insert(av, peer, 1, &a, 0, NULL) != 1)
		DIE("insert the client's name");
	char ack = 'A';
	POST(fi_send(ep, &ack, 1, NULL, a, NULL));
	wait_comp(1);
	pingpong(a, 0);
	printf("PASS server\n");
	close_all();
	return 0;
}

static int client(const char *ip, const char *port)
{
	open_all(ip, port, 0);
	if (!info->dest_addr || info->dest_addrlen != NAMELEN)
		DIE("no dest_addr from fi_getinfo(%s, %s)", ip, port);
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	if (fi_av_insert(av, info->dest_addr, 1, &a, 0, NULL) != 1)
		DIE("insert dest_addr");
	char name[NAMELEN], ack = 0;
	size_t len = sizeof name;
	MUST(fi_getname(&ep->fid, name, &len));
	POST(fi_recv(ep, &ack, 1, NULL, FI_ADDR_UNSPEC, NULL));
	POST(fi_send(ep, name, len, NULL, a, NULL));
	wait_comp(2);
	CHECK(ack == 'A', "ack %d", ack);
	pingpong(a, 1);
	close_all();
	if (fails)
		return 1;
	printf("PASS client\n");
	return 0;
}

/* ---- both: simultaneous first sends ---- */

static int both(const char *port, const char *peer_ip, const char *peer_port, const char *dir)
{
	open_all(NULL, port, FI_SOURCE);
	fi_addr_t a = FI_ADDR_NOTAVAIL;
	if (fi_av_insertsvc(av, peer_ip, peer_port, &a, 0, NULL) != 1)
		DIE("insertsvc %s %s", peer_ip, peer_port);
	/* Up: say so, and wait until the peer is (its file). */
	char mine[512], theirs[512];
	snprintf(mine, sizeof mine, "%s/up.%s", dir, port);
	snprintf(theirs, sizeof theirs, "%s/up.%s", dir, peer_port);
	FILE *f = fopen(mine, "w");
	if (!f)
		DIE("create %s", mine);
	fclose(f);
	for (double t0 = now_s(); access(theirs, F_OK) != 0;) {
		if (now_s() > t0 + 30)
			DIE("peer never came up");
		usleep(1000);
	}
	unsigned char *rbuf = calloc(NMSG, 4096), *sbuf = calloc(NMSG, 4096);
	if (!rbuf || !sbuf)
		DIE("calloc");
	/* Our sends first, with nothing received yet: the peer does the same
	 * at this moment. */
	for (int k = 0; k < NMSG; k++) {
		size_t n = (size_t)(k % 8 + 1) * 512;
		for (size_t i = 0; i < n; i++)
			sbuf[(size_t)k * 4096 + i] = pat(k, i);
		POST(fi_tsend(ep, sbuf + (size_t)k * 4096, n, NULL, a, (uint64_t)k, NULL));
	}
	for (int k = 0; k < NMSG; k++)
		POST(fi_trecv(ep, rbuf + (size_t)k * 4096, 4096, NULL, a, (uint64_t)k, 0, NULL));
	wait_comp(2 * NMSG);
	for (int k = 0; k < NMSG; k++) {
		size_t n = (size_t)(k % 8 + 1) * 512;
		for (size_t i = 0; i < n; i++)
			if (rbuf[(size_t)k * 4096 + i] != pat(k, i))
				DIE("message %d: byte %zu", k, i);
	}
	close_all();
	free(rbuf);
	free(sbuf);
	printf("PASS both %s\n", port);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		DIE("usage: fiaddr local|server|client|both SOCK PROVDIR ...");
	setenv("METAROCE_SOCKET", argv[2], 1);
	setenv("FI_PROVIDER_PATH", argv[3], 1);
	if (!strcmp(argv[1], "local"))
		return local();
	rbuf = calloc(1, MAXLEN);
	sbuf = calloc(1, MAXLEN);
	int r = 1;
	if (!strcmp(argv[1], "server") && argc == 5)
		r = server(argv[4]);
	else if (!strcmp(argv[1], "client") && argc == 6)
		r = client(argv[4], argv[5]);
	else if (!strcmp(argv[1], "both") && argc == 8)
		r = both(argv[4], argv[5], argv[6], argv[7]);
	else
		DIE("bad arguments");
	free(rbuf);
	free(sbuf);
	return r;
}
