package control

import (
	"fmt"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/resident"
	"github.com/metaroce/metaroce/transport"
)

// region is one registered range. The control goroutine makes it; engines
// see it only through the *transport.Region in their tables; the mapping
// is unmapped once no engine can reach it (session reclaim, dereg).
type region struct {
	key     uint32
	length  uint64
	mapping []byte // the whole mmap, page-aligned
	tr      transport.Region
	// refs counts the engines that must let go of it before it is
	// unmapped (each engine's reaper drops one).
	refs atomic.Int32
	// use is the session's share of the budget that the mapping was
	// charged to (nil: the daemon's own), and cost what it took; the
	// reaper gives it back, maybe after the session has gone.
	use  *usage
	cost usage
}

// mapRegion maps [off, off+length) of the memfd f, after checking that f
// is a memfd sealed against shrinking and long enough. f stays the
// caller's; the mapping outlives it. The mapping is charged to use (a
// session's share of the daemon's budget; nil: the daemon's alone).
func mapRegion(f *os.File, off, length uint64, access uint8, use *usage) (*region, error) {
	if length == 0 || access&^(proto.AccessLocalWrite|proto.AccessRemoteRead|proto.AccessRemoteWrite) != 0 {
		return nil, proto.Errorf(proto.CodeBadRequest, "length %d, access %#x", length, access)
	}
	fd := int(f.Fd())
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, proto.Errorf(proto.CodeBadRegion, "not a memfd (F_GET_SEALS: %v)", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		// Unsealed, the client could truncate the file and every access
		// of the daemon to the lost pages would be a SIGBUS.
		return nil, proto.Errorf(proto.CodeBadRegion, "memfd not sealed with F_SEAL_SHRINK")
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, proto.Errorf(proto.CodeBadRegion, "fstat: %v", err)
	}
	if off > uint64(st.Size) || length > uint64(st.Size)-off {
		return nil, proto.Errorf(proto.CodeBadRegion, "range [%d, %d) beyond the memfd's %d bytes", off, off+length, st.Size)
	}
	page := uint64(os.Getpagesize())
	base := off &^ (page - 1)
	n := off + length - base
	if n > 1<<40 {
		return nil, proto.Errorf(proto.CodeBadRequest, "region of %d bytes", length)
	}
	cost := usage{maps: 1, regd: int64(n)}
	if err := resources.take(use, cost); err != nil {
		return nil, err
	}
	m, err := unix.Mmap(fd, int64(base), int(n), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		resources.give(use, cost)
		return nil, proto.Errorf(proto.CodeBadRegion, "mmap: %v", err)
	}
	// Registration makes the region resident (package resident says why:
	// left to the engine's first copies, a 512 MiB perf run's receiving
	// engine spent 72% of its time in page faults), but only where the
	// memfd already holds as many allocated bytes as the range spans
	// (client.Alloc makes all of it resident): the daemon maps pages the
	// application paid for and never allocates a sparse memfd's holes for
	// it, so a session cannot make the daemon allocate more than it did.
	// Otherwise the pages fault in as data lands, as before.
	if uint64(st.Blocks)*512 >= n {
		if err := resident.Make(m); err != nil {
			unix.Munmap(m)
			resources.give(use, cost)
			return nil, proto.Errorf(proto.CodeLimit, "memory: making %d bytes resident: %v", n, err)
		}
	}
	var acc transport.Access
	if access&proto.AccessLocalWrite != 0 {
		acc |= transport.AccessLocalWrite
	}
	if access&proto.AccessRemoteRead != 0 {
		acc |= transport.AccessRemoteRead
	}
	if access&proto.AccessRemoteWrite != 0 {
		acc |= transport.AccessRemoteWrite
	}
	r := &region{length: length, mapping: m, use: use, cost: cost}
	r.tr = transport.Region{Buf: m[off-base : off-base+length], Access: acc}
	return r, nil
}

func (r *region) unmap() {
	if r.mapping != nil {
		if err := unix.Munmap(r.mapping); err != nil {
			panic(fmt.Sprintf("control: munmap region %#x: %v", r.key, err)) // our own mapping: cannot fail
		}
		r.mapping = nil
		resources.give(r.use, r.cost)
	}
}

// localSlice resolves a work request's local range in r: the bytes
// [laddr, laddr+n), if they lie inside r and r grants want.
func localSlice(r *transport.Region, laddr uint64, n uint32, want transport.Access) ([]byte, bool) {
	if r.Access&want != want || laddr < r.Addr {
		return nil, false
	}
	off := laddr - r.Addr
	if off > uint64(len(r.Buf)) || uint64(n) > uint64(len(r.Buf))-off {
		return nil, false
	}
	return r.Buf[off : off+uint64(n)], true
}
