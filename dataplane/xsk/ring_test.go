package xsk

import (
	"runtime"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// memRing is ring memory in the Go heap laid out as the kernel lays out an
// mmap'd ring: producer, consumer and flags on separate cache lines, then
// the descriptors. The test plays the kernel on the other side.
type memRing struct {
	mem []byte
	off unix.XDPRingOffset
}

func newMemRing(size uint32, elem uint64, start uint32) *memRing {
	off := unix.XDPRingOffset{Producer: 0, Consumer: 64, Flags: 128, Desc: 192}
	words := (off.Desc + uint64(size)*elem + 7) / 8
	backing := make([]uint64, words) // 8-byte aligned
	m := &memRing{mem: unsafe.Slice((*byte)(unsafe.Pointer(&backing[0])), words*8), off: off}
	*m.prod() = start
	*m.cons() = start
	return m
}

func (m *memRing) prod() *uint32  { return (*uint32)(unsafe.Pointer(&m.mem[m.off.Producer])) }
func (m *memRing) cons() *uint32  { return (*uint32)(unsafe.Pointer(&m.mem[m.off.Consumer])) }
func (m *memRing) flags() *uint32 { return (*uint32)(unsafe.Pointer(&m.mem[m.off.Flags])) }

func (m *memRing) addrs(size uint32) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(&m.mem[m.off.Desc])), size)
}

func (m *memRing) descs(size uint32) []Desc {
	return unsafe.Slice((*Desc)(unsafe.Pointer(&m.mem[m.off.Desc])), size)
}

// kernelConsume plays the kernel consuming up to n entries of a ring we
// produce into, returning the addresses it read.
func (m *memRing) kernelConsume(size uint32, n int) []uint64 {
	p := atomic.LoadUint32(m.prod())
	c := atomic.LoadUint32(m.cons())
	a := m.addrs(size)
	var out []uint64
	for ; c != p && len(out) < n; c++ {
		out = append(out, a[c&(size-1)])
	}
	atomic.StoreUint32(m.cons(), c)
	return out
}

// kernelProduce plays the kernel producing addresses into a ring we consume
// from; it returns how many fitted.
func (m *memRing) kernelProduce(size uint32, vals []uint64) int {
	p := atomic.LoadUint32(m.prod())
	c := atomic.LoadUint32(m.cons())
	a := m.addrs(size)
	n := 0
	for ; n < len(vals) && p-c < size; n++ {
		a[p&(size-1)] = vals[n]
		p++
	}
	atomic.StoreUint32(m.prod(), p)
	return n
}

func TestProdRingReserveSubmitCancel(t *testing.T) {
	const size = 8
	m := newMemRing(size, 8, 0)
	f := newFillRing(m.mem, m.off, size)

	idx, got := f.Reserve(5)
	if idx != 0 || got != 5 {
		t.Fatalf("Reserve(5) = %d, %d", idx, got)
	}
	for i := uint32(0); i < got; i++ {
		f.Set(idx+i, uint64(100+i))
	}
	if *m.prod() != 0 {
		t.Fatal("Reserve published")
	}
	idx, got = f.Reserve(5)
	if idx != 5 || got != 3 {
		t.Fatalf("second Reserve(5) = %d, %d; want 5, 3", idx, got)
	}
	f.Cancel(2)
	f.Set(5, 105)
	f.Submit()
	if p := *m.prod(); p != 6 {
		t.Fatalf("producer %d after submitting 6", p)
	}
	if got := m.kernelConsume(size, 4); len(got) != 4 || got[0] != 100 || got[3] != 103 {
		t.Fatalf("kernel read %v", got)
	}
	// 2 unconsumed of 8: 6 free. The cached consumer is stale (it saw 0),
	// so asking for 6 must reload it.
	if _, got := f.Reserve(6); got != 6 {
		t.Fatalf("Reserve after consume got %d, want 6", got)
	}
	if _, got := f.Reserve(1); got != 0 {
		t.Fatalf("Reserve on a full ring got %d", got)
	}
	f.Cancel(100) // more than reserved: cancels only the reserved ones
	if f.reserved != f.prod {
		t.Fatalf("Cancel left reserved %d, prod %d", f.reserved, f.prod)
	}
	f.Submit() // nothing reserved: no store
	if p := *m.prod(); p != 6 {
		t.Fatalf("empty Submit moved producer to %d", p)
	}
	if n := f.Pending(); n != 2 {
		t.Fatalf("Pending = %d, want 2", n)
	}
}

func TestConsRingPeekRelease(t *testing.T) {
	const size = 8
	m := newMemRing(size, 8, 0)
	c := newCompletionRing(m.mem, m.off, size)

	if _, got := c.Peek(4); got != 0 {
		t.Fatalf("Peek on empty ring got %d", got)
	}
	if n := m.kernelProduce(size, []uint64{1, 2, 3, 4, 5}); n != 5 {
		t.Fatal(n)
	}
	idx, got := c.Peek(3)
	if got != 3 || c.Addr(idx) != 1 || c.Addr(idx+2) != 3 {
		t.Fatalf("Peek(3) = %d, %d", idx, got)
	}
	if *m.cons() != 0 {
		t.Fatal("Peek released")
	}
	idx, got = c.Peek(8)
	if got != 2 || c.Addr(idx) != 4 {
		t.Fatalf("Peek(8) = %d, %d", idx, got)
	}
	c.Release()
	if *m.cons() != 5 {
		t.Fatalf("consumer %d after release of 5", *m.cons())
	}
	// The kernel may now fill all 8 slots.
	if n := m.kernelProduce(size, []uint64{6, 7, 8, 9, 10, 11, 12, 13, 14}); n != 8 {
		t.Fatalf("kernel fitted %d, want 8", n)
	}
	dst := make([]uint64, 16)
	if n := c.Dequeue(dst); n != 8 || dst[0] != 6 || dst[7] != 13 {
		t.Fatalf("Dequeue = %d %v", n, dst[:n])
	}
}

// TestRingIndexWraparound runs each ring type through the point where the
// free-running uint32 indices wrap from 2^32-1 to 0.
func TestRingIndexWraparound(t *testing.T) {
	const size = 16
	for _, start := range []uint32{0, 1<<31 - 5, 1<<32 - 7, 1<<32 - 1} {
		// Producer side: fill ring.
		m := newMemRing(size, 8, start)
		f := newFillRing(m.mem, m.off, size)
		next, want := uint64(0), uint64(0)
		for round := 0; round < 50; round++ {
			idx, got := f.Reserve(uint32(3 + round%size))
			for i := uint32(0); i < got; i++ {
				f.Set(idx+i, next)
				next++
			}
			f.Submit()
			for _, v := range m.kernelConsume(size, 1+round%7) {
				if v != want {
					t.Fatalf("start %#x: kernel read %d, want %d", start, v, want)
				}
				want++
			}
		}
		if end := *m.prod(); end-start != uint32(next) {
			t.Fatalf("start %#x: producer moved %d for %d entries", start, end-start, next)
		}
		if next < 3*size {
			t.Fatalf("only %d entries went through", next)
		}

		// Consumer side: completion ring.
		m = newMemRing(size, 8, start)
		c := newCompletionRing(m.mem, m.off, size)
		next, want = 0, 0
		dst := make([]uint64, size)
		for round := 0; round < 50; round++ {
			vals := make([]uint64, 1+round%11)
			for i := range vals {
				vals[i] = next + uint64(i)
			}
			next += uint64(m.kernelProduce(size, vals))
			n := c.Dequeue(dst[:1+round%5])
			for _, v := range dst[:n] {
				if v != want {
					t.Fatalf("start %#x: got %d, want %d", start, v, want)
				}
				want++
			}
		}
		if *m.cons()-start != uint32(want) {
			t.Fatalf("start %#x: consumer moved %d for %d entries", start, *m.cons()-start, want)
		}
	}
}

func TestTxRxRingDescs(t *testing.T) {
	const size = 4
	m := newMemRing(size, descSize, 1<<32-2)
	tx := newTxRing(m.mem, m.off, size)
	in := []Desc{{Addr: 1, Len: 10}, {Addr: 2, Len: 20, Options: PktContd}, {Addr: 3, Len: 30}, {Addr: 4}, {Addr: 5}}
	if n := tx.Enqueue(in); n != 4 {
		t.Fatalf("Enqueue fitted %d of 5 in a 4-ring", n)
	}
	d := m.descs(size)
	for i := uint32(0); i < 4; i++ {
		if got := d[(1<<32-2+i)&(size-1)]; got != in[i] {
			t.Errorf("slot %d = %+v, want %+v", i, got, in[i])
		}
	}
	if !in[1].More() || in[0].More() {
		t.Error("More() wrong")
	}

	// The same memory read back as an RX ring the kernel filled.
	m2 := newMemRing(size, descSize, 1<<32-1)
	rx := newRxRing(m2.mem, m2.off, size)
	d2 := m2.descs(size)
	for i := uint32(0); i < 3; i++ {
		d2[(1<<32-1+i)&(size-1)] = in[i]
	}
	atomic.StoreUint32(m2.prod(), 2) // 2^32-1 + 3, wrapped
	out := make([]Desc, 8)
	if n := rx.Dequeue(out); n != 3 || out[0] != in[0] || out[2] != in[2] {
		t.Fatalf("Dequeue = %d %+v", n, out[:n])
	}
	if *m2.cons() != 2 {
		t.Fatalf("consumer %d, want 2 (wrapped)", *m2.cons())
	}
}

func TestNeedWakeupFlag(t *testing.T) {
	m := newMemRing(8, 8, 0)
	f := newFillRing(m.mem, m.off, 8)
	if f.NeedWakeup() {
		t.Fatal("flag set on fresh ring")
	}
	atomic.StoreUint32(m.flags(), unix.XDP_RING_NEED_WAKEUP)
	if !f.NeedWakeup() {
		t.Fatal("flag not seen")
	}
}

// TestRingConcurrentSPSC runs a producer and a "kernel" consumer on two
// goroutines through two rings (TX out, completion back) across the uint32
// wrap. Under -race it checks that the atomics order descriptor accesses.
func TestRingConcurrentSPSC(t *testing.T) {
	const size = 64
	const total = 200_000
	start := uint32(1<<32 - 1000)
	txm := newMemRing(size, descSize, start)
	cqm := newMemRing(size, 8, start)
	tx := newTxRing(txm.mem, txm.off, size)
	cq := newCompletionRing(cqm.mem, cqm.off, size)

	done := make(chan error, 1)
	go func() { // the kernel: TX ring -> completion ring
		txd := txm.descs(size)
		cqa := cqm.addrs(size)
		moved := 0
		for moved < total {
			p := atomic.LoadUint32(txm.prod())
			c := atomic.LoadUint32(txm.cons())
			cp := atomic.LoadUint32(cqm.prod())
			cc := atomic.LoadUint32(cqm.cons())
			n := 0
			for c != p && cp-cc < size {
				d := txd[c&(size-1)]
				if d.Len != uint32(d.Addr)*3 {
					done <- errBadDesc
					return
				}
				cqa[cp&(size-1)] = d.Addr
				c++
				cp++
				n++
			}
			atomic.StoreUint32(txm.cons(), c)
			atomic.StoreUint32(cqm.prod(), cp)
			moved += n
			if n == 0 {
				runtime.Gosched()
			}
		}
		done <- nil
	}()

	var sent, reaped uint64
	batch := make([]Desc, 32)
	back := make([]uint64, 32)
	for reaped < total {
		k := 0
		for ; k < len(batch) && sent+uint64(k) < total; k++ {
			a := sent + uint64(k)
			batch[k] = Desc{Addr: a, Len: uint32(a) * 3}
		}
		sent += uint64(tx.Enqueue(batch[:k]))
		n := cq.Dequeue(back)
		for _, a := range back[:n] {
			if a != reaped {
				t.Fatalf("completion %d, want %d", a, reaped)
			}
			reaped++
		}
		if n == 0 {
			runtime.Gosched()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

type testErr string

func (e testErr) Error() string { return string(e) }

const errBadDesc = testErr("kernel side read a torn descriptor")
