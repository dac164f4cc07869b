/* memory.c: shareable memory and its registration (docs/api.md, Memory).
 * Memory is a memfd sealed against shrinking and growing, so that the
 * daemon, which maps it too, can never fault on a truncated page. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"

/* sized_memfd makes a sealable memfd of size bytes; -1 with errno set on
 * failure (the descriptor closed). */
static int sized_memfd(const char *name, size_t size)
{
	int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)size) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

/* seal fixes a memfd's size for good, so a mapping of it never faults on
 * a truncated page. */
static int seal(int fd) { return fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL); }

int mr_mem_alloc(size_t size, struct mr_mem **out)
{
	*out = NULL;
	if (size == 0 || size > ((size_t)1 << 40))
		return MR_ERR_INVAL;
	struct mr_mem *m = calloc(1, sizeof *m);
	if (!m)
		return MR_ERR_SYS;
	m->fd = sized_memfd("metaroce-mr", size);
	if (m->fd < 0 || seal(m->fd) < 0)
		goto fail;
	m->ptr = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
	if (m->ptr == MAP_FAILED)
		goto fail;
	/* Memory for I/O is made resident now, as the Go client's Alloc does
	 * (internal/resident): every page allocated and mapped, then written
	 * once (it is all zero and nobody else has it yet), so filling and
	 * checking buffers takes no fault per page later, and the daemon,
	 * seeing the memfd's pages allocated, maps them all at registration
	 * instead of faulting as data lands (docs/platform.md, Page faults).
	 * Kernels before 5.14 lack MADV_POPULATE_WRITE: the writes alone
	 * fault the pages in. */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
	if (madvise(m->ptr, size, MADV_POPULATE_WRITE) < 0 && errno != EINVAL) {
		int e = errno;
		munmap(m->ptr, size);
		errno = e;
		goto fail;
	}
	long page = sysconf(_SC_PAGESIZE);
	for (size_t off = 0; off < size; off += (size_t)page)
		((volatile char *)m->ptr)[off] = 0;
	m->size = size;
	*out = m;
	return MR_OK;
fail:;
	int e = errno;
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	errno = e;
	return MR_ERR_SYS;
}

/* mr_mem_adopt turns memory the application already has into shareable
 * memory, in place: the daemon moves bytes only between memfds, and an
 * application's buffer (malloc, a stack array, a static) is anonymous
 * memory no other process can map. The pages covering [addr, addr+len)
 * get a memfd of their own, filled with their current bytes, which is
 * then mapped over them (MAP_FIXED, MAP_SHARED): the same virtual
 * addresses, the same contents, now memory the daemon can map too, so
 * WRITEs and READs reach the application's own buffer with no copy.
 * Whole pages are taken, so their neighbours of the buffer become shared
 * too (harmless: still this process's memory, at the same addresses).
 * What the caller must know: a write to those pages by another thread
 * between the copy and the remap is lost; the pages are MAP_SHARED from
 * then on (a fork shares them with the child instead of copying, as with
 * verbs' registered memory); and mr_mem_free leaves them mapped (they are
 * the application's memory), closing only the memfd. */
int mr_mem_adopt(void *addr, size_t len, struct mr_mem **out)
{
	*out = NULL;
	long page = sysconf(_SC_PAGESIZE);
	if (!addr || len == 0 || len > ((size_t)1 << 40) || page <= 0)
		return MR_ERR_INVAL;
	uintptr_t lo = (uintptr_t)addr & ~((uintptr_t)page - 1);
	uintptr_t hi = ((uintptr_t)addr + len + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
	size_t size = hi - lo;
	struct mr_mem *m = calloc(1, sizeof *m);
	if (!m)
		return MR_ERR_SYS;
	m->fd = sized_memfd("metaroce-adopt", size);
	if (m->fd < 0)
		goto fail;
	/* pwrite reads the pages through the kernel: an address that is not
	 * mapped readable fails with EFAULT instead of crashing us. It is the
	 * raw system call because the whole pages are read, the buffer's
	 * neighbours too, which AddressSanitizer's pwrite would take for an
	 * overflow of the buffer. */
	for (size_t done = 0; done < size;) {
		ssize_t n = syscall(SYS_pwrite64, m->fd, (const char *)lo + done, size - done, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0 || errno == EFAULT) {
				close(m->fd);
				free(m);
				return MR_ERR_INVAL;
			}
			goto fail;
		}
		done += (size_t)n;
	}
	if (seal(m->fd) < 0)
		goto fail;
	void *p = mmap((void *)lo, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, m->fd, 0);
	if (p == MAP_FAILED)
		goto fail;
	m->ptr = p;
	m->size = size;
	m->adopted = 1;
	*out = m;
	return MR_OK;
fail:;
	int e = errno;
	if (m->fd >= 0)
		close(m->fd);
	free(m);
	errno = e;
	return MR_ERR_SYS;
}

void *mr_mem_ptr(const struct mr_mem *m) { return m->ptr; }
size_t mr_mem_size(const struct mr_mem *m) { return m->size; }

void mr_mem_free(struct mr_mem *m)
{
	if (!m)
		return;
	if (!m->adopted)
		munmap(m->ptr, m->size);
	close(m->fd);
	free(m);
}

int mr_reg(struct mr_ctx *ctx, struct mr_mem *m, size_t off, size_t len, int access, struct mr_mr **out)
{
	*out = NULL;
	if (len == 0 || off > m->size || len > m->size - off || (access & ~7))
		return MR_ERR_INVAL;
	struct mr_mr *mr = calloc(1, sizeof *mr);
	if (!mr)
		return MR_ERR_SYS;
	mr->ctx = ctx;
	mr->buf = (uint8_t *)m->ptr + off;
	mr->addr = (uint64_t)(uintptr_t)mr->buf;
	mr->len = len;
	char body[256];
	snprintf(body, sizeof body, "\"op\":\"reg_mr\",\"offset\":%zu,\"length\":%zu,\"addr\":%llu,\"access\":%d}", off,
		 len, (unsigned long long)mr->addr, access);
	struct mr_reply r;
	int err = mr_request(ctx, body, &m->fd, 1, &r, NULL, 0, NULL);
	if (err) {
		free(mr);
		return err;
	}
	if (r.key == 0 || r.key > UINT32_MAX) {
		mr_seterr(ctx, "reg_mr: key %llu", (unsigned long long)r.key);
		free(mr);
		return MR_ERR_PROTOCOL;
	}
	mr->key = (uint32_t)r.key;
	*out = mr;
	return MR_OK;
}

int mr_dereg(struct mr_mr *mr)
{
	if (!mr)
		return MR_OK;
	char body[64];
	snprintf(body, sizeof body, "\"op\":\"dereg_mr\",\"key\":%u}", mr->key);
	struct mr_reply r;
	int err = mr_request(mr->ctx, body, NULL, 0, &r, NULL, 0, NULL);
	free(mr);
	return err;
}
