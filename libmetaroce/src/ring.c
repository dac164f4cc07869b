/* ring.c: ring/'s shared-memory rings from C (ring/layout.go, ring/spsc.go).
 *
 * The daemon creates each ring; we attach. The header is checked once
 * (magic, version, geometry within ring/'s limits, the file large enough,
 * sealed against shrinking so it can never fault under us) and only our
 * copy of the geometry is read after. Every index the daemon writes is
 * checked against the one window a correct peer can be in before use;
 * outside it the ring fails with MR_ERR_CORRUPT for good. Slot offsets are
 * masked with our own count. Index words are read and written with
 * sequentially consistent atomics, as Go's sync/atomic does, which is what
 * the need-wakeup protocol needs (ring/doorbell.go). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

/* ring/layout.go. */
enum {
	offMagic = 0,
	offVersion = 4,
	offSlotSize = 8,
	offSlots = 12,
	cacheLine = 64,
	offProducer = 1 * cacheLine,
	offConsumer = 2 * cacheLine,
	offFlags = 3 * cacheLine,
	headerSize = 4 * cacheLine,
	ringMagic = 0x4752524d, /* "MRRG" little-endian */
	ringVersion = 1,
	minSlotSize = 8,
	maxSlotSize = 1 << 16,
	slotAlign = 8,
	maxSlots = 1 << 24,
};
#define maxRingBytes ((int64_t)1 << 30)

int mr_ring_attach(int fd, uint32_t min_slot, struct mr_ring *r, char *why, size_t why_len)
{
	struct stat st;
	memset(r, 0, sizeof *r);
	if (fstat(fd, &st) < 0) {
		snprintf(why, why_len, "fstat: %s", strerror(errno));
		return MR_ERR_PROTOCOL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_len, "descriptor is not a memfd (mode %#o)", (unsigned)st.st_mode);
		return MR_ERR_PROTOCOL;
	}
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(why, why_len, "ring memfd is not sealed against shrinking");
		return MR_ERR_PROTOCOL;
	}
	if (st.st_size < headerSize || st.st_size > headerSize + maxRingBytes) {
		snprintf(why, why_len, "ring file of %lld bytes", (long long)st.st_size);
		return MR_ERR_PROTOCOL;
	}
	void *mem = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mem == MAP_FAILED) {
		snprintf(why, why_len, "mmap ring: %s", strerror(errno));
		return MR_ERR_SYS;
	}
	uint32_t h[4];
	for (int i = 0; i < 4; i++)
		h[i] = atomic_load((_Atomic uint32_t *)((uint8_t *)mem + 4 * i));
	uint32_t slot_size = h[offSlotSize / 4], slots = h[offSlots / 4];
	const char *bad = NULL;
	if (h[offMagic / 4] != ringMagic)
		bad = "bad magic";
	else if (h[offVersion / 4] != ringVersion)
		bad = "unknown version";
	else if (slots == 0 || slots > maxSlots || (slots & (slots - 1)) != 0)
		bad = "slot count not a power of two in range";
	else if (slot_size < minSlotSize || slot_size > maxSlotSize || slot_size % slotAlign != 0)
		bad = "slot size out of range";
	else if ((int64_t)slots * slot_size > maxRingBytes)
		bad = "ring too large";
	else if (headerSize + (int64_t)slots * slot_size > st.st_size)
		bad = "slots beyond the end of the file";
	else if (slot_size < min_slot)
		bad = "slots too small for the records";
	if (bad) {
		snprintf(why, why_len, "ring header: %s (slots %u of %u bytes, file %lld bytes)", bad, slots,
			 slot_size, (long long)st.st_size);
		munmap(mem, (size_t)st.st_size);
		return MR_ERR_CORRUPT;
	}
	r->mem = mem;
	r->map_len = (size_t)st.st_size;
	r->slots = slots;
	r->slot_size = slot_size;
	r->mask = slots - 1;
	r->prod_word = (_Atomic uint32_t *)(r->mem + offProducer);
	r->cons_word = (_Atomic uint32_t *)(r->mem + offConsumer);
	r->flag_word = (_Atomic uint32_t *)(r->mem + offFlags);
	r->slot0 = r->mem + headerSize;
	return MR_OK;
}

void mr_ring_detach(struct mr_ring *r)
{
	if (r->mem)
		munmap(r->mem, r->map_len);
	r->mem = NULL;
}

uint8_t *mr_ring_slot(const struct mr_ring *r, uint32_t i)
{
	return r->slot0 + (size_t)(i & r->mask) * r->slot_size;
}

/* Producer: next = reserved, mine = prod (published), cached = consumer. */
static int prod_load(struct mr_ring *r)
{
	uint32_t c = atomic_load(r->cons_word);
	if (r->mine - c > r->slots || r->next - c > r->slots) {
		r->err = MR_ERR_CORRUPT;
		return r->err;
	}
	r->cached = c;
	return (int)(c + r->slots - r->next);
}

void mr_ring_producer(struct mr_ring *r)
{
	r->mine = atomic_load(r->prod_word);
	r->next = r->mine;
	r->cached = r->mine - r->slots;
	prod_load(r);
}

int mr_ring_reserve(struct mr_ring *r, uint32_t n, uint32_t *first)
{
	*first = r->next;
	if (r->err)
		return r->err;
	uint32_t free = r->cached + r->slots - r->next;
	if (free < n) {
		int f = prod_load(r);
		if (f < 0)
			return f;
		free = (uint32_t)f;
	}
	uint32_t got = n < free ? n : free;
	r->next += got;
	return (int)got;
}

void mr_ring_commit(struct mr_ring *r, uint32_t n)
{
	r->next = r->mine + n;
	if (n == 0)
		return;
	r->mine = r->next;
	atomic_store(r->prod_word, r->mine);
}

/* Consumer: next = peeked, mine = cons (released), cached = producer. */
static int cons_load(struct mr_ring *r)
{
	uint32_t p = atomic_load(r->prod_word);
	uint32_t w = p - r->mine;
	if (w > r->slots || w < r->next - r->mine) {
		r->err = MR_ERR_CORRUPT;
		return r->err;
	}
	r->cached = p;
	return (int)(p - r->next);
}

void mr_ring_consumer(struct mr_ring *r)
{
	r->mine = atomic_load(r->cons_word);
	r->next = r->mine;
	r->cached = r->mine;
	cons_load(r);
}

int mr_ring_peek(struct mr_ring *r, uint32_t n, uint32_t *first)
{
	*first = r->next;
	if (r->err)
		return r->err;
	uint32_t avail = r->cached - r->next;
	if (avail < n) {
		int a = cons_load(r);
		if (a < 0)
			return a;
		avail = (uint32_t)a;
	}
	uint32_t got = n < avail ? n : avail;
	r->next += got;
	return (int)got;
}

void mr_ring_release(struct mr_ring *r, uint32_t n)
{
	r->next = r->mine + n;
	if (n == 0)
		return;
	r->mine = r->next;
	atomic_store(r->cons_word, r->mine);
}

int mr_ring_available(struct mr_ring *r)
{
	if (r->err)
		return r->err;
	if (r->cached - r->next > 0)
		return (int)(r->cached - r->next);
	return cons_load(r);
}

int mr_is_bell(int fd)
{
	int dom = 0, typ = 0;
	socklen_t l = sizeof dom;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l) < 0)
		return 0;
	l = sizeof typ;
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &typ, &l) < 0)
		return 0;
	return dom == AF_UNIX && typ == SOCK_DGRAM;
}

int mr_bell_ring(int fd)
{
	static const char b = 1;
	for (;;) {
		if (send(fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
			return MR_OK;
		switch (errno) {
		case EINTR:
			continue;
		case EAGAIN: case ENOBUFS: /* a ring is already waiting there */
			return MR_OK;
		case ECONNREFUSED: case EPIPE: case ENOTCONN: case ECONNRESET:
			return MR_ERR_DAEMON_GONE;
		}
		return MR_ERR_SYS;
	}
}

void mr_bell_clear(int fd)
{
	char buf[64];
	for (int i = 0; i < 64; i++) {
		if (recv(fd, buf, sizeof buf, MSG_DONTWAIT) < 0 && errno != EINTR)
			return;
	}
}
