package ring

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func dup(t testing.TB, fd int) int {
	t.Helper()
	d, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func attach(t *testing.T, fd int) *Ring {
	t.Helper()
	r, err := Attach(dup(t, fd))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// TestAttachSharesTheRing writes through one mapping and reads through an
// Attach of the same memfd.
func TestAttachSharesTheRing(t *testing.T) {
	a := newMemfdRing(t, 256, 48)
	b := attach(t, a.FD())
	if b.Slots() != 256 || b.SlotSize() != 48 {
		t.Fatalf("attached geometry %dx%d", b.Slots(), b.SlotSize())
	}
	p, c := a.Producer(), b.Consumer()
	for seq := uint64(0); seq < 10000; {
		first, got, err := p.Reserve(100)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			putRecord(p.Slot(first+i), seq+uint64(i))
		}
		p.Commit(got)
		cf, cgot, err := c.Peek(1000)
		if err != nil || cgot != got || cf != first {
			t.Fatalf("Peek = %d, %d, %v; want %d, %d", cf, cgot, err, first, got)
		}
		for i := range cgot {
			if err := checkRecord(c.Slot(cf+i), seq+uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Release(cgot)
		seq += uint64(got)
	}
}

func TestCreateRefusesBadGeometry(t *testing.T) {
	for _, g := range [][2]int{{0, 8}, {3, 8}, {-1, 8}, {8, 0}, {8, 12}, {8, -8}, {MaxSlots * 2, 8}, {8, MaxSlotSize + 8}, {MaxSlots, MaxSlotSize}} {
		if r, err := Create(g[0], g[1]); err == nil {
			r.Close()
			t.Errorf("Create(%d, %d) succeeded", g[0], g[1])
		}
	}
}

// TestAttachRefusesBadHeaders rewrites the header of a good ring as a hostile
// creator could and checks Attach refuses it with ErrBadHeader, and does not
// fault, for each.
func TestAttachRefusesBadHeaders(t *testing.T) {
	set := func(off int, v uint32) func([]byte) {
		return func(m []byte) { atomic.StoreUint32((*uint32)(unsafe.Pointer(&m[off])), v) }
	}
	cases := []struct {
		name   string
		mutate func([]byte)
		want   string
	}{
		{"magic", set(offMagic, 0x12345678), "magic"},
		{"version", set(offVersion, 2), "version"},
		{"slot count not a power of two", set(offSlots, 96), "power of two"},
		{"slot count zero", set(offSlots, 0), "power of two"},
		{"slot count huge", set(offSlots, 1<<31), "power of two"},
		{"slot size zero", set(offSlotSize, 0), "slot size"},
		{"slot size unaligned", set(offSlotSize, 60), "slot size"},
		{"slot size huge", set(offSlotSize, 1<<31), "slot size"},
		{"slots past the file", set(offSlots, 128), "need"},
		{"slot size past the file", set(offSlotSize, 128), "need"},
		{"product overflows", func(m []byte) { set(offSlots, MaxSlots)(m); set(offSlotSize, MaxSlotSize)(m) }, "exceed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newMemfdRing(t, 64, 64)
			tc.mutate(r.mem)
			fd := dup(t, r.FD())
			defer unix.Close(fd)
			if a, err := Attach(fd); err == nil {
				a.Close()
				t.Fatal("Attach accepted the header")
			} else if !errors.Is(err, ErrBadHeader) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Attach: %v; want ErrBadHeader about %q", err, tc.want)
			}
		})
	}
}

// TestAttachRefusesBadFiles: a file that is not a sealed memfd, or is too
// small to hold a header, is refused before anything is mapped or read.
func TestAttachRefusesBadFiles(t *testing.T) {
	refuse := func(name string, fd int) {
		t.Helper()
		defer unix.Close(fd)
		if r, err := Attach(fd); err == nil {
			r.Close()
			t.Errorf("%s: Attach succeeded", name)
		} else if !errors.Is(err, ErrBadHeader) {
			t.Errorf("%s: %v; want ErrBadHeader", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}

	// An unsealed memfd with a perfect header: it could be truncated
	// under us, so it is refused.
	fd, err := unix.MemfdCreate("unsealed", unix.MFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	g, _ := checkGeometry(8, 8)
	unix.Ftruncate(fd, g.bytes())
	var hdr [16]byte
	putHeader(hdr[:], g)
	unix.Pwrite(fd, hdr[:], 0)
	refuse("unsealed memfd", fd)

	// A sealed memfd smaller than a header.
	fd, _ = unix.MemfdCreate("tiny", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	unix.Ftruncate(fd, headerSize-1)
	unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK)
	refuse("short memfd", fd)

	// A regular file.
	f, err := os.Create(filepath.Join(t.TempDir(), "ring"))
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(4096)
	refuse("regular file", dup(t, int(f.Fd())))
	f.Close()

	// A pipe.
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	unix.Close(p[1])
	refuse("pipe", p[0])
}

// TestRewrittenHeaderIsNotReread: the geometry is copied at Attach; a peer
// rewriting the header afterwards changes nothing.
func TestRewrittenHeaderIsNotReread(t *testing.T) {
	a := newMemfdRing(t, 8, 16)
	b := attach(t, a.FD())
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&a.mem[offSlots])), 1<<20)
	atomic.StoreUint32((*uint32)(unsafe.Pointer(&a.mem[offSlotSize])), 1<<16)
	c := b.Consumer()
	atomic.StoreUint32(a.prodWord, 8)
	first, got, err := c.Peek(100)
	if err != nil || got != 8 {
		t.Fatalf("Peek = %d, %v", got, err)
	}
	for i := range got {
		if len(c.Slot(first+i)) != 16 {
			t.Fatal("slot size changed under us")
		}
	}
}

// FuzzParseHeader: whatever the 16 header bytes and file size, parseHeader
// either refuses or returns a geometry inside the limits that fits the file;
// and a header it accepts re-encodes to itself.
func FuzzParseHeader(f *testing.F) {
	for _, g := range [][2]uint64{{1, 8}, {1024, 64}, {MaxSlots, 64}, {4, MaxSlotSize}} {
		geo, err := checkGeometry(g[0], g[1])
		if err != nil {
			f.Fatal(err)
		}
		var h [16]byte
		putHeader(h[:], geo)
		f.Add(h[:], geo.bytes())
		f.Add(h[:], geo.bytes()-1)
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		var h [16]byte
		copy(h[:], b)
		g, err := parseHeader(h, size)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v does not wrap ErrBadHeader", err)
			}
			return
		}
		if g.slots == 0 || g.slots&(g.slots-1) != 0 || g.slots > MaxSlots ||
			g.slotSize < MinSlotSize || g.slotSize > MaxSlotSize || g.slotSize%SlotAlign != 0 ||
			g.bytes() > size || g.bytes() > headerSize+MaxRingBytes {
			t.Fatalf("accepted %+v for a %d-byte file", g, size)
		}
		var again [16]byte
		putHeader(again[:], g)
		if again != h {
			t.Fatalf("header %x re-encodes as %x", h, again)
		}
	})
}
