package transport

// ringU32 is a fixed-capacity FIFO of uint32, allocated once. The transport
// uses it for retransmission and segmentation queues, whose sizes are
// bounded by the windows, so push never needs to grow.
type ringU32 struct {
	buf        []uint32
	head, tail uint32 // tail-head is the length; both wrap
	mask       uint32
}

func newRingU32(capPow2 int) ringU32 {
	return ringU32{buf: make([]uint32, capPow2), mask: uint32(capPow2 - 1)}
}

func (r *ringU32) len() int    { return int(r.tail - r.head) }
func (r *ringU32) empty() bool { return r.tail == r.head }
func (r *ringU32) full() bool  { return int(r.tail-r.head) == len(r.buf) }

func (r *ringU32) push(v uint32) bool {
	if r.full() {
		return false
	}
	r.buf[r.tail&r.mask] = v
	r.tail++
	return true
}

func (r *ringU32) peek() uint32 { return r.buf[r.head&r.mask] }

func (r *ringU32) pop() uint32 {
	v := r.buf[r.head&r.mask]
	r.head++
	return v
}

func nextPow2(v int) int {
	n := 1
	for n < v {
		n <<= 1
	}
	return n
}
