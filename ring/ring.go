package ring

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring is one single-producer single-consumer ring in shared memory: the
// memfd that holds it and this process's mapping of it. A process uses the
// ring through one of its views, Producer or Consumer (a test may use both,
// from two goroutines).
//
// A Ring's methods other than its views' are for set-up and tear-down; Close
// must not run while a view is in use, since it unmaps the memory the view
// reads.
type Ring struct {
	mem    []byte // the whole mapping (or, in tests, heap memory)
	mapped bool   // mem came from mmap and goes back with munmap
	fd     int    // the memfd, -1 for heap-backed test rings
	geom   geometry

	prodWord *uint32 // producer index, written only by the producer
	consWord *uint32 // consumer index, written only by the consumer
	flagWord *uint32 // need-wakeup flag: consumer sets, either clears
	slots    []byte  // slots*slotSize bytes from offset headerSize

	prod *Producer // made on first use by Producer
	cons *Consumer // made on first use by Consumer
}

// Create makes a ring of slots slots (a power of two) of slotSize bytes (a
// multiple of 8) in a new memfd, sealed against shrinking, growing and
// further sealing, and maps it. Hand FD to the peer (SCM_RIGHTS, or
// exec.Cmd.ExtraFiles), which maps the same ring with Attach.
func Create(slots, slotSize int) (*Ring, error) {
	if slots < 0 || slotSize < 0 {
		return nil, fmt.Errorf("create ring: negative geometry %d x %d", slots, slotSize)
	}
	g, err := checkGeometry(uint64(slots), uint64(slotSize))
	if err != nil {
		return nil, fmt.Errorf("create ring: %w", err)
	}
	fd, err := unix.MemfdCreate("metaroce-ring", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("create ring: memfd_create: %w", err)
	}
	r, err := createOn(fd, g)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("create ring: %w", err)
	}
	return r, nil
}

func createOn(fd int, g geometry) (*Ring, error) {
	size := g.bytes()
	if err := unix.Ftruncate(fd, size); err != nil {
		return nil, fmt.Errorf("ftruncate %d: %w", size, err)
	}
	// Sealed, the file keeps its size for its life: no peer, whatever it
	// does, can make an access inside our mapping raise SIGBUS.
	seals := unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_SEAL
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return nil, fmt.Errorf("seal memfd: %w", err)
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap %d bytes: %w", size, err)
	}
	putHeader(mem, g)
	r := newRing(mem, g)
	r.mapped, r.fd = true, fd
	return r, nil
}

// Attach maps the ring in memfd fd, made by Create in this or another
// process. It trusts nothing in the file: the mapping size comes from fstat;
// the file must be a memfd sealed against shrinking (else the peer could
// truncate it under us and fault us); the header must carry our magic and
// version and a geometry inside the limits that fits the file. A header the
// peer rewrites later is never read again.
//
// On success the Ring owns fd and Close closes it; on error the caller still
// owns it. Every error about the file's contents wraps ErrBadHeader.
func Attach(fd int) (*Ring, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("attach ring: fstat: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("attach ring: %w: fd %d is not a memfd (mode %#o)", ErrBadHeader, fd, st.Mode)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("attach ring: %w: fd %d is not a sealable memfd: %v", ErrBadHeader, fd, err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("attach ring: %w: memfd is not sealed against shrinking", ErrBadHeader)
	}
	if st.Size < headerSize || st.Size > headerSize+MaxRingBytes {
		return nil, fmt.Errorf("attach ring: %w: file size %d outside [%d, %d]",
			ErrBadHeader, st.Size, headerSize, headerSize+MaxRingBytes)
	}
	mem, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("attach ring: mmap %d bytes: %w", st.Size, err)
	}
	g, err := parseHeader(readHeader(mem), st.Size)
	if err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("attach ring: %w", err)
	}
	r := newRing(mem, g)
	r.mapped, r.fd = true, fd
	return r, nil
}

// newRing points a Ring at mem, whose header already says g.
func newRing(mem []byte, g geometry) *Ring {
	return &Ring{
		mem:      mem,
		fd:       -1,
		geom:     g,
		prodWord: (*uint32)(unsafe.Pointer(&mem[offProducer])),
		consWord: (*uint32)(unsafe.Pointer(&mem[offConsumer])),
		flagWord: (*uint32)(unsafe.Pointer(&mem[offFlags])),
		slots:    mem[headerSize:g.bytes():g.bytes()],
	}
}

// FD is the memfd holding the ring, to pass to the peer. The Ring keeps
// owning it.
func (r *Ring) FD() int { return r.fd }

// CloseFD closes the memfd and keeps the mapping, which holds the file's
// pages for as long as it lasts: once the peer has its own descriptor (or
// mapping) this process needs neither, and a descriptor per ring is what
// runs a process with thousands of queue pairs out of RLIMIT_NOFILE.
// Close still unmaps. FD is -1 afterwards.
func (r *Ring) CloseFD() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	if err != nil {
		return fmt.Errorf("close ring memfd: %w", err)
	}
	return nil
}

// Bytes is the size of the ring's mapping: its header and slots.
func (r *Ring) Bytes() int64 { return r.geom.bytes() }

// Size is the mapping a ring of slots slots of slotSize bytes needs, for
// a budget to charge before Create.
func Size(slots, slotSize int) int64 { return headerSize + int64(slots)*int64(slotSize) }

// Slots is the number of slots, a power of two.
func (r *Ring) Slots() int { return int(r.geom.slots) }

// SlotSize is the size of one slot in bytes.
func (r *Ring) SlotSize() int { return int(r.geom.slotSize) }

// Producer is this process's producer view of the ring, made on the first
// call (which reads the shared indices) and the same view afterwards. Only
// one goroutine may use it.
func (r *Ring) Producer() *Producer {
	if r.prod == nil {
		r.prod = newProducer(r)
	}
	return r.prod
}

// Consumer is this process's consumer view of the ring, made on the first
// call and the same view afterwards. Only one goroutine may use it.
func (r *Ring) Consumer() *Consumer {
	if r.cons == nil {
		r.cons = newConsumer(r)
	}
	return r.cons
}

// Close unmaps the ring and closes its memfd. The peer's mapping is not
// affected. No view may be used during or after Close.
func (r *Ring) Close() error {
	var err error
	if r.mapped && r.mem != nil {
		err = unix.Munmap(r.mem)
	}
	r.mem, r.slots, r.mapped = nil, nil, false
	r.prodWord, r.consWord, r.flagWord = nil, nil, nil
	if r.fd >= 0 {
		if cerr := unix.Close(r.fd); err == nil {
			err = cerr
		}
		r.fd = -1
	}
	if err != nil {
		return fmt.Errorf("close ring: %w", err)
	}
	return nil
}
