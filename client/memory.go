package client

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/resident"
)

// Memory is shared memory the application allocates for registration: a
// memfd, sealed so it can never shrink (the daemon maps it too and must
// not fault), mapped into this process.
type Memory struct {
	f   *os.File
	buf []byte
}

// Alloc makes size bytes of shareable memory.
func Alloc(size int) (*Memory, error) {
	if size <= 0 {
		return nil, fmt.Errorf("metaroce: alloc %d bytes", size)
	}
	fd, err := unix.MemfdCreate("metaroce-mr", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("metaroce: memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "metaroce-mr")
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, fmt.Errorf("metaroce: ftruncate: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		f.Close()
		return nil, fmt.Errorf("metaroce: seal: %w", err)
	}
	b, err := unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("metaroce: mmap: %w", err)
	}
	// Memory for I/O is made resident here, once, so filling and checking
	// buffers costs no page fault per page later (package resident).
	if err := resident.Make(b); err != nil {
		unix.Munmap(b)
		f.Close()
		return nil, fmt.Errorf("metaroce: alloc %d bytes: making them resident: %w", size, err)
	}
	return &Memory{f: f, buf: b}, nil
}

// Bytes is the memory.
func (m *Memory) Bytes() []byte { return m.buf }

// Close unmaps the memory in this process. Regions registered on it stay
// valid in the daemon until deregistered or the session ends; do not
// Close while requests on it are outstanding.
func (m *Memory) Close() error {
	err := unix.Munmap(m.buf)
	m.buf = nil
	if cerr := m.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Access is what a region allows.
type Access uint8

const (
	// LocalWrite lets the daemon write into the region on this side: the
	// destination of a READ, a receive buffer.
	LocalWrite Access = proto.AccessLocalWrite
	// RemoteRead lets peers READ from it.
	RemoteRead Access = proto.AccessRemoteRead
	// RemoteWrite lets peers WRITE into it.
	RemoteWrite Access = proto.AccessRemoteWrite
)

// MR is a registered memory region: bytes [Off, Off+Len) of a Memory,
// addressed by Addr (this process's virtual address of the first byte;
// peers use the same addresses with Key as rkey).
type MR struct {
	c    *Client
	m    *Memory
	Off  int
	Len  int
	Addr uint64
	Key  uint32
}

// RegisterMemory registers [off, off+n) of m with the daemon.
func (c *Client) RegisterMemory(m *Memory, off, n int, access Access) (*MR, error) {
	if off < 0 || n <= 0 || off > len(m.buf) || n > len(m.buf)-off {
		return nil, fmt.Errorf("%w: [%d, %d) of %d bytes", ErrOutOfRange, off, off+n, len(m.buf))
	}
	addr := uint64(uintptr(unsafe.Pointer(&m.buf[off])))
	var r proto.Response
	_, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpRegister}, Offset: uint64(off), Length: uint64(n),
		Addr: addr, Access: uint8(access)}, &r, int(m.f.Fd()))
	if err != nil {
		return nil, err
	}
	return &MR{c: c, m: m, Off: off, Len: n, Addr: addr, Key: r.Key}, nil
}

// Bytes is the region's memory.
func (r *MR) Bytes() []byte { return r.m.buf[r.Off : r.Off+r.Len] }

// Deregister revokes the region's key: from now on no peer reaches it and
// no new request may name it.
func (r *MR) Deregister() error {
	var resp proto.Response
	_, err := r.c.do(proto.Request{Header: proto.Header{Op: proto.OpDeregMR}, Key: r.Key}, &resp)
	return err
}

// addr is the address of byte off of the region, checking [off, off+n).
func (r *MR) addr(off, n int) (uint64, error) {
	if off < 0 || n < 0 || off > r.Len || n > r.Len-off {
		return 0, fmt.Errorf("%w: [%d, %d) of a %d-byte region", ErrOutOfRange, off, off+n, r.Len)
	}
	return r.Addr + uint64(off), nil
}
