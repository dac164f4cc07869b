//go:build linux

package crc32c

import (
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopyAfterReadsOnlyItsBytes: the masked load that joins the header to
// the payload addresses bytes before the payload without reading them. A
// payload that starts a page after an inaccessible one must not fault.
func TestCopyAfterReadsOnlyItsBytes(t *testing.T) {
	page := unix.Getpagesize()
	mem, err := unix.Mmap(-1, 0, 2*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	if err := unix.Mprotect(mem[:page], unix.PROT_NONE); err != nil {
		t.Fatal(err)
	}
	src := mem[page:]
	for i := range src {
		src[i] = byte(i * 7)
	}
	for _, hdr := range []int{1, 17, 60, 64} {
		for _, n := range []int{200, 1400, page} {
			pkt := make([]byte, hdr+n)
			want := reference(0, append(make([]byte, hdr), src[:n]...))
			if got := CopyAfter(pkt, hdr, src[:n]); got != want {
				t.Fatalf("%d-byte header, %d bytes: %#x, want %#x", hdr, n, got, want)
			}
		}
	}
}
