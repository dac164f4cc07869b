package control

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/resident"
)

// TestRegionResident: registering memory the application allocated and
// made resident (as client.Alloc does) maps every page in the daemon too,
// so the engine's copies take no fault; registering a sparse memfd (its
// pages never allocated) allocates none of them for it, so a session
// cannot make the daemon allocate what it did not.
func TestRegionResident(t *testing.T) {
	page := os.Getpagesize()
	size := 256 * page
	memfd := func(fill bool) *os.File {
		fd, err := unix.MemfdCreate("region-test", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
		if err != nil {
			t.Fatal(err)
		}
		f := os.NewFile(uintptr(fd), "region-test")
		t.Cleanup(func() { f.Close() })
		if err := unix.Ftruncate(fd, int64(size)); err != nil {
			t.Fatal(err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW); err != nil {
			t.Fatal(err)
		}
		if fill {
			if _, err := f.WriteAt(make([]byte, size), 0); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	blocks := func(f *os.File) int64 {
		var st unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &st); err != nil {
			t.Fatal(err)
		}
		return st.Blocks * 512
	}
	present := func(m []byte) int {
		n, err := resident.Present(m)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	f := memfd(true)
	r, err := mapRegion(f, 0, uint64(size), proto.AccessRemoteWrite, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := present(r.mapping); got != size/page {
		t.Errorf("allocated memfd: %d of %d pages resident in the daemon's mapping", got, size/page)
	}
	r.unmap()

	f = memfd(false)
	r, err = mapRegion(f, 0, uint64(size), proto.AccessRemoteWrite, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.unmap()
	if n := present(r.mapping); n != 0 {
		t.Errorf("sparse memfd: %d pages mapped at registration", n)
	}
	if b := blocks(f); b != 0 {
		t.Errorf("sparse memfd: registration allocated %d bytes of it", b)
	}
}
