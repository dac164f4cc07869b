package resident

import (
	"bytes"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestMake: after Make every page of a fresh memfd mapping is resident
// (mincore), and bytes written before it are unchanged, at every page's
// first word (the ones Make writes) and elsewhere.
func TestMake(t *testing.T) {
	page := os.Getpagesize()
	size := 64*page + 123
	fd, err := unix.MemfdCreate("resident-test", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		t.Fatal(err)
	}
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	// Half the pages written before, half left as holes.
	want := make([]byte, size)
	for p := 0; p < size; p += 2 * page {
		for i := p; i < min(p+page, size); i++ {
			want[i] = byte(i*7 + 1)
		}
		copy(m[p:min(p+page, size)], want[p:min(p+page, size)])
	}
	pages := (size + page - 1) / page
	before, err := Present(m)
	if err != nil {
		t.Fatal(err)
	}
	if before == pages {
		t.Fatal("every page mapped before Make: the test shows nothing")
	}
	if err := Make(m); err != nil {
		t.Fatal(err)
	}
	if after, err := Present(m); err != nil || after != pages {
		t.Errorf("%d of %d pages mapped after Make (%d before): %v", after, pages, before, err)
	}
	if !bytes.Equal(m, want) {
		t.Error("Make changed the memory's contents")
	}
	// An unaligned slice of it: still no change.
	if err := Make(m[3 : size-5]); err != nil || !bytes.Equal(m, want) {
		t.Errorf("unaligned: %v, contents changed %v", err, !bytes.Equal(m, want))
	}
}
