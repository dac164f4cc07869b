// Package resident readies shared memory for the data path before the
// data path touches it, as RDMA memory registration (ibv_reg_mr's
// pinning) readies memory for a NIC.
//
// Why: a page fault, or the first write through a mapping even after its
// page is mapped, is expensive on the virtual machines this project runs
// on (docs/platform.md, "Page faults"): copying into 256 MiB of fresh
// memfd took 958 ms, a fault per 4 KiB page; after MADV_POPULATE_WRITE
// alone 383 ms, since the first write to each page still cost about 5 us;
// after the populate and one write per page, 9 ms. An engine placing a
// bandwidth test's data into fresh memory spent 72% of its time there.
// The work belongs where registration happens (the daemon's control
// goroutine, the application's Alloc), not in the engine's copies.
package resident

import (
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Make allocates and maps every page of the shared, writable mapping m
// (MADV_POPULATE_WRITE) and then writes each page once through m with an
// atomic add of zero: no byte changes, and a concurrent write by another
// process sharing the memory is never lost. Kernels before 5.14 lack the
// populate (EINVAL); the writes alone then fault the pages in. Any other
// error (ENOMEM: no memory for the pages) is returned and m is left as
// it was.
func Make(m []byte) error {
	if len(m) == 0 {
		return nil
	}
	if err := unix.Madvise(m, unix.MADV_POPULATE_WRITE); err != nil && err != unix.EINVAL {
		return err
	}
	page := os.Getpagesize()
	base := uintptr(unsafe.Pointer(&m[0]))
	// From the first 4-byte-aligned word, then one word per page.
	first := int((4 - base%4) % 4)
	for off := first; off+4 <= len(m); off += page {
		atomic.AddUint32((*uint32)(unsafe.Pointer(&m[off])), 0)
	}
	return nil
}

// Present counts the pages of m mapped in this process's page tables
// (bit 63 of each /proc/self/pagemap entry), which is what Make is for:
// a page can sit in the page cache (mincore) and still fault on access.
func Present(m []byte) (int, error) {
	if len(m) == 0 {
		return 0, nil
	}
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	page := uintptr(os.Getpagesize())
	first := uintptr(unsafe.Pointer(&m[0])) / page
	last := (uintptr(unsafe.Pointer(&m[0])) + uintptr(len(m)) - 1) / page
	buf := make([]byte, 8*(last-first+1))
	if _, err := f.ReadAt(buf, int64(first*8)); err != nil {
		return 0, err
	}
	n := 0
	for i := 0; i < len(buf); i += 8 {
		if buf[i+7]&0x80 != 0 {
			n++
		}
	}
	return n, nil
}
