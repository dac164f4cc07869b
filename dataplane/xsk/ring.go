package xsk

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Desc is one RX or TX descriptor, laid out as the kernel's struct xdp_desc.
type Desc struct {
	// Addr is the UMEM offset of the packet's first byte. On RX it is the
	// frame's start plus the headroom; on TX any offset whose bytes
	// [Addr, Addr+Len) lie inside one frame.
	Addr uint64
	// Len is the number of bytes at Addr.
	Len uint32
	// Options holds PktContd on every buffer of a multi-buffer packet but
	// the last.
	Options uint32
}

// PktContd (XDP_PKT_CONTD) in Desc.Options says the packet continues in the
// next descriptor. Only sockets opened with Config.SG see or may send it.
const PktContd = unix.XDP_PKT_CONTD

// More reports whether the packet continues in the next descriptor.
func (d Desc) More() bool { return d.Options&PktContd != 0 }

const descSize = uint64(unsafe.Sizeof(Desc{}))

var _ [16 - descSize]struct{} // struct xdp_desc is 16 bytes
var _ [descSize - 16]struct{}

// ring is the part shared with the kernel: pointers into the mmap'd ring.
// Each ring has one producer and one consumer; we are one of them and the
// kernel the other.
type ring struct {
	producer *uint32
	consumer *uint32
	flags    *uint32
	size     uint32 // power of two
	mask     uint32 // size - 1
}

// newRing points a ring at mem laid out by off, with desc the start of the
// descriptor array.
func newRing(mem []byte, off unix.XDPRingOffset, size uint32) (ring, unsafe.Pointer) {
	return ring{
		producer: (*uint32)(unsafe.Pointer(&mem[off.Producer])),
		consumer: (*uint32)(unsafe.Pointer(&mem[off.Consumer])),
		flags:    (*uint32)(unsafe.Pointer(&mem[off.Flags])),
		size:     size,
		mask:     size - 1,
	}, unsafe.Pointer(&mem[off.Desc])
}

// needWakeup reads the ring's need_wakeup flag. It follows a seq-cst store of
// our index (see the package doc), so it cannot be reordered before it.
func (r *ring) needWakeup() bool {
	return atomic.LoadUint32(r.flags)&unix.XDP_RING_NEED_WAKEUP != 0
}

// prodRing is a ring we produce into (fill, TX). Slots in [prod, reserved)
// are reserved but not yet published; [prod, cachedCons) is known free.
type prodRing struct {
	ring
	reserved   uint32 // next slot Reserve hands out
	prod       uint32 // last value stored to *producer
	cachedCons uint32 // *consumer + size as last loaded
}

func (r *prodRing) init() {
	r.prod = atomic.LoadUint32(r.producer)
	r.reserved = r.prod
	r.cachedCons = atomic.LoadUint32(r.consumer) + r.size
}

// free returns how many slots can be reserved, loading the consumer index
// (one atomic) only when the cached view has fewer than n.
func (r *prodRing) free(n uint32) uint32 {
	f := r.cachedCons - r.reserved
	if f >= n {
		return f
	}
	r.cachedCons = atomic.LoadUint32(r.consumer) + r.size
	return r.cachedCons - r.reserved
}

// Reserve claims up to n slots and returns the index of the first and how
// many it got (0 when the ring is full). Write them, then Submit.
func (r *prodRing) Reserve(n uint32) (idx, got uint32) {
	got = min(n, r.free(n))
	idx = r.reserved
	r.reserved += got
	return idx, got
}

// Cancel gives back the last n reserved, unsubmitted slots.
func (r *prodRing) Cancel(n uint32) {
	r.reserved -= min(n, r.reserved-r.prod)
}

// Submit publishes every reserved slot to the kernel with one store-release
// of the producer index. It is a no-op when nothing is reserved.
func (r *prodRing) Submit() {
	if r.reserved == r.prod {
		return
	}
	r.prod = r.reserved
	atomic.StoreUint32(r.producer, r.prod)
}

// Pending returns how many published slots the kernel has not consumed yet
// (one atomic load).
func (r *prodRing) Pending() uint32 {
	return r.prod - atomic.LoadUint32(r.consumer)
}

// NeedWakeup reports whether the kernel asked for a syscall to process this
// ring (XDP_RING_NEED_WAKEUP).
func (r *prodRing) NeedWakeup() bool { return r.needWakeup() }

// Size is the number of slots.
func (r *prodRing) Size() uint32 { return r.size }

// consRing is a ring we consume from (RX, completion). Slots in
// [cons, peeked) are handed to the caller but not yet released;
// [peeked, cachedProd) are known filled.
type consRing struct {
	ring
	peeked     uint32 // next slot Peek hands out
	cons       uint32 // last value stored to *consumer
	cachedProd uint32 // *producer as last loaded
}

func (r *consRing) init() {
	r.cons = atomic.LoadUint32(r.consumer)
	r.peeked = r.cons
	r.cachedProd = atomic.LoadUint32(r.producer)
}

// avail returns how many filled slots can be peeked, loading the producer
// index (one atomic load-acquire) only when the cached view has fewer than n.
func (r *consRing) avail(n uint32) uint32 {
	a := r.cachedProd - r.peeked
	if a >= n {
		return a
	}
	r.cachedProd = atomic.LoadUint32(r.producer)
	return r.cachedProd - r.peeked
}

// Peek hands out up to n filled slots: the index of the first and how many
// (0 when empty). Read them, then Release.
func (r *consRing) Peek(n uint32) (idx, got uint32) {
	got = min(n, r.avail(n))
	idx = r.peeked
	r.peeked += got
	return idx, got
}

// Release returns every peeked slot to the kernel with one store-release of
// the consumer index. Read the slots before: the kernel may overwrite them at
// once. It is a no-op when nothing is peeked.
func (r *consRing) Release() {
	if r.peeked == r.cons {
		return
	}
	r.cons = r.peeked
	atomic.StoreUint32(r.consumer, r.cons)
}

// Size is the number of slots.
func (r *consRing) Size() uint32 { return r.size }

// FillRing hands empty frames to the kernel for RX. We produce, the kernel
// consumes.
type FillRing struct {
	prodRing
	addrs []uint64 // size entries, in the mmap'd ring
}

func newFillRing(mem []byte, off unix.XDPRingOffset, size uint32) FillRing {
	r, d := newRing(mem, off, size)
	f := FillRing{prodRing: prodRing{ring: r}, addrs: unsafe.Slice((*uint64)(d), size)}
	f.init()
	return f
}

// Set writes the frame address of reserved slot idx.
func (r *FillRing) Set(idx uint32, addr uint64) { r.addrs[idx&r.mask] = addr }

// Enqueue reserves, writes and submits as many of addrs as fit and returns
// how many.
func (r *FillRing) Enqueue(addrs []uint64) int {
	idx, got := r.Reserve(uint32(len(addrs)))
	for i := uint32(0); i < got; i++ {
		r.addrs[(idx+i)&r.mask] = addrs[i]
	}
	r.Submit()
	return int(got)
}

// CompletionRing returns the frames of sent TX descriptors. The kernel
// produces, we consume.
type CompletionRing struct {
	consRing
	addrs []uint64
}

func newCompletionRing(mem []byte, off unix.XDPRingOffset, size uint32) CompletionRing {
	r, d := newRing(mem, off, size)
	c := CompletionRing{consRing: consRing{ring: r}, addrs: unsafe.Slice((*uint64)(d), size)}
	c.init()
	return c
}

// Addr reads the frame address in peeked slot idx.
func (r *CompletionRing) Addr(idx uint32) uint64 { return r.addrs[idx&r.mask] }

// Dequeue peeks up to len(dst) addresses, copies them into dst, releases
// them and returns how many.
func (r *CompletionRing) Dequeue(dst []uint64) int {
	idx, got := r.Peek(uint32(len(dst)))
	for i := uint32(0); i < got; i++ {
		dst[i] = r.addrs[(idx+i)&r.mask]
	}
	r.Release()
	return int(got)
}

// TxRing carries descriptors of frames to send. We produce, the kernel
// consumes.
type TxRing struct {
	prodRing
	descs []Desc
}

func newTxRing(mem []byte, off unix.XDPRingOffset, size uint32) TxRing {
	r, d := newRing(mem, off, size)
	t := TxRing{prodRing: prodRing{ring: r}, descs: unsafe.Slice((*Desc)(d), size)}
	t.init()
	return t
}

// Desc returns reserved slot idx for writing.
func (r *TxRing) Desc(idx uint32) *Desc { return &r.descs[idx&r.mask] }

// Enqueue reserves, writes and submits as many of descs as fit and returns
// how many. It does not kick the kernel (see Socket.Transmit).
func (r *TxRing) Enqueue(descs []Desc) int {
	idx, got := r.Reserve(uint32(len(descs)))
	for i := uint32(0); i < got; i++ {
		r.descs[(idx+i)&r.mask] = descs[i]
	}
	r.Submit()
	return int(got)
}

// enqueueWhole is Enqueue that never leaves a multi-buffer packet half
// queued: when the ring has room for only part of descs, the reservation
// ends after the last descriptor without PktContd that fits.
func (r *TxRing) enqueueWhole(descs []Desc) int {
	idx, got := r.Reserve(uint32(len(descs)))
	if int(got) < len(descs) {
		k := got
		for k > 0 && descs[k-1].More() {
			k--
		}
		r.Cancel(got - k)
		got = k
	}
	for i := uint32(0); i < got; i++ {
		r.descs[(idx+i)&r.mask] = descs[i]
	}
	r.Submit()
	return int(got)
}

// RxRing carries descriptors of received frames. The kernel produces, we
// consume.
type RxRing struct {
	consRing
	descs []Desc
}

func newRxRing(mem []byte, off unix.XDPRingOffset, size uint32) RxRing {
	r, d := newRing(mem, off, size)
	x := RxRing{consRing: consRing{ring: r}, descs: unsafe.Slice((*Desc)(d), size)}
	x.init()
	return x
}

// Desc reads peeked slot idx.
func (r *RxRing) Desc(idx uint32) Desc { return r.descs[idx&r.mask] }

// Dequeue peeks up to len(dst) descriptors, copies them into dst, releases
// the slots and returns how many. The frames stay the caller's until they
// go back to the fill ring or the pool.
func (r *RxRing) Dequeue(dst []Desc) int {
	idx, got := r.Peek(uint32(len(dst)))
	for i := uint32(0); i < got; i++ {
		dst[i] = r.descs[(idx+i)&r.mask]
	}
	r.Release()
	return int(got)
}
