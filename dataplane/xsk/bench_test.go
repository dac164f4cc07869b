package xsk

import (
	"sync/atomic"
	"testing"
)

// memSocket is a Socket whose four rings live in plain memory, with no fd:
// the engine-side batch operations run against it with the test playing the
// kernel. need_wakeup is off, so nothing makes a syscall except a TX kick,
// which these tests avoid.
type memSocket struct {
	*Socket
	fill, comp, rx, tx *memRing
	size               uint32
}

func newMemSocket(frames, size uint32) *memSocket {
	m := &memSocket{
		fill: newMemRing(size, 8, 0), comp: newMemRing(size, 8, 0),
		rx: newMemRing(size, descSize, 0), tx: newMemRing(size, descSize, 0),
		size: size,
	}
	s := &Socket{fd: -1, pool: NewFramePool(frames, 2048), headOff: kernelHeadroom}
	s.Fill = newFillRing(m.fill.mem, m.fill.off, size)
	s.Completion = newCompletionRing(m.comp.mem, m.comp.off, size)
	s.RX = newRxRing(m.rx.mem, m.rx.off, size)
	s.TX = newTxRing(m.tx.mem, m.tx.off, size)
	m.Socket = s
	return m
}

// kernelRX plays the kernel's receive path: take n frames from the fill ring
// and hand them back as RX descriptors of length l.
func (m *memSocket) kernelRX(n int, l uint32) int {
	var scratch [256]uint64
	addrs := scratch[:m.fill.kernelConsumeInto(m.size, scratch[:min(n, len(scratch))])]
	p := atomic.LoadUint32(m.rx.prod())
	d := m.rx.descs(m.size)
	for _, a := range addrs {
		d[p&(m.size-1)] = Desc{Addr: a + kernelHeadroom, Len: l}
		p++
	}
	atomic.StoreUint32(m.rx.prod(), p)
	return len(addrs)
}

// kernelTX plays the kernel's send path: consume the TX ring and complete
// every descriptor.
func (m *memSocket) kernelTX() int {
	p := atomic.LoadUint32(m.tx.prod())
	c := atomic.LoadUint32(m.tx.cons())
	d := m.tx.descs(m.size)
	cp := atomic.LoadUint32(m.comp.prod())
	a := m.comp.addrs(m.size)
	n := 0
	for ; c != p; c++ {
		a[cp&(m.size-1)] = d[c&(m.size-1)].Addr
		cp++
		n++
	}
	atomic.StoreUint32(m.tx.cons(), c)
	atomic.StoreUint32(m.comp.prod(), cp)
	return n
}

// TestEngineLoopAccounting drives Refill, Receive, Transmit (as an echo:
// every received frame is sent back) and Complete against the plain-memory
// kernel, checking that every frame is always accounted for.
func TestEngineLoopAccounting(t *testing.T) {
	const frames, size = 256, 64
	m := newMemSocket(frames, size)
	m.info.NeedWakeup = true // flags stay clear: no syscalls
	rxb := make([]Desc, 32)
	check := func(held int) {
		t.Helper()
		rx, tx := m.InFlight()
		if sum := m.pool.Free() + int(rx) + int(tx) + held; sum != frames {
			t.Fatalf("free %d + rx %d + tx %d + held %d = %d, want %d", m.pool.Free(), rx, tx, held, sum, frames)
		}
	}
	for round := 0; round < 500; round++ {
		if _, err := m.Refill(size); err != nil {
			t.Fatal(err)
		}
		check(0)
		m.kernelRX(1+round%40, 60)
		n := m.Receive(rxb)
		check(n)
		for i := range rxb[:n] {
			rxb[i].Addr = m.pool.FrameStart(rxb[i].Addr) // echo from the frame start
		}
		q, err := m.Transmit(rxb[:n])
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range rxb[q:n] {
			m.pool.Put(d.Addr) // did not fit: drop
		}
		check(0)
		if round%3 == 0 {
			m.kernelTX()
		}
		m.Complete()
		check(0)
	}
	m.kernelTX()
	m.Complete()
	if rx, tx := m.InFlight(); tx != 0 || m.pool.Free()+int(rx) != frames {
		t.Fatalf("end: free %d rx %d tx %d", m.pool.Free(), rx, tx)
	}
}

func TestEngineLoopNoAllocs(t *testing.T) {
	m := newMemSocket(1024, 256)
	m.info.NeedWakeup = true
	rxb := make([]Desc, 64)
	allocs := testing.AllocsPerRun(1000, func() {
		_, _ = m.Refill(64)
		m.kernelRX(64, 60)
		n := m.Receive(rxb)
		for i := range rxb[:n] {
			rxb[i].Addr = m.pool.FrameStart(rxb[i].Addr)
		}
		_, _ = m.Transmit(rxb[:n])
		m.kernelTX()
		m.Complete()
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per loop", allocs)
	}
}

const benchBatch = 64

func perDesc(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchBatch, "ns/desc")
}

// BenchmarkTxEnqueue: reserve, write and submit a batch of 64 descriptors;
// the "kernel" consumes by moving the consumer index (no descriptor reads).
func BenchmarkTxEnqueue(b *testing.B) {
	const size = 2048
	m := newMemRing(size, descSize, 0)
	tx := newTxRing(m.mem, m.off, size)
	batch := make([]Desc, benchBatch)
	for i := range batch {
		batch[i] = Desc{Addr: uint64(i) * 2048, Len: 64}
	}
	b.ReportAllocs()
	for b.Loop() {
		if tx.Enqueue(batch) != benchBatch {
			b.Fatal("ring full")
		}
		atomic.StoreUint32(m.cons(), atomic.LoadUint32(m.prod()))
	}
	perDesc(b)
}

// BenchmarkTxReserveInPlace: the same through Reserve/Desc/Submit, writing
// descriptors in place.
func BenchmarkTxReserveInPlace(b *testing.B) {
	const size = 2048
	m := newMemRing(size, descSize, 0)
	tx := newTxRing(m.mem, m.off, size)
	b.ReportAllocs()
	for b.Loop() {
		idx, got := tx.Reserve(benchBatch)
		for i := uint32(0); i < got; i++ {
			d := tx.Desc(idx + i)
			d.Addr = uint64(i) * 2048
			d.Len = 64
			d.Options = 0
		}
		tx.Submit()
		atomic.StoreUint32(m.cons(), atomic.LoadUint32(m.prod()))
	}
	perDesc(b)
}

// BenchmarkRxDequeue: peek, copy out and release 64 descriptors the
// "kernel" made available by moving the producer index.
func BenchmarkRxDequeue(b *testing.B) {
	const size = 2048
	m := newMemRing(size, descSize, 0)
	rx := newRxRing(m.mem, m.off, size)
	out := make([]Desc, benchBatch)
	b.ReportAllocs()
	for b.Loop() {
		atomic.StoreUint32(m.prod(), atomic.LoadUint32(m.cons())+benchBatch)
		if rx.Dequeue(out) != benchBatch {
			b.Fatal("short")
		}
	}
	perDesc(b)
}

// BenchmarkFillRefill: move 64 frames from the pool to the fill ring, the
// "kernel" consumes them and they return to the pool (Refill + PutN).
func BenchmarkFillRefill(b *testing.B) {
	m := newMemSocket(4096, 2048)
	back := make([]uint64, benchBatch)
	b.ReportAllocs()
	for b.Loop() {
		if n, _ := m.Refill(benchBatch); n != benchBatch {
			b.Fatal("short refill")
		}
		m.fill.kernelConsumeInto(m.size, back)
		m.pool.PutN(back)
	}
	perDesc(b)
}

// BenchmarkCompletionReap: Complete 64 completions into the pool.
func BenchmarkCompletionReap(b *testing.B) {
	m := newMemSocket(4096, 2048)
	tmp := make([]uint64, benchBatch)
	a := m.comp.addrs(m.size)
	b.ReportAllocs()
	for b.Loop() {
		m.pool.GetN(tmp)
		p := atomic.LoadUint32(m.comp.prod())
		for _, v := range tmp {
			a[p&(m.size-1)] = v
			p++
		}
		atomic.StoreUint32(m.comp.prod(), p)
		if m.Complete() != benchBatch {
			b.Fatal("short")
		}
	}
	perDesc(b)
}

// kernelConsumeInto is kernelConsume without allocation, for benchmarks.
func (m *memRing) kernelConsumeInto(size uint32, dst []uint64) int {
	p := atomic.LoadUint32(m.prod())
	c := atomic.LoadUint32(m.cons())
	a := m.addrs(size)
	n := 0
	for ; c != p && n < len(dst); c++ {
		dst[n] = a[c&(size-1)]
		n++
	}
	atomic.StoreUint32(m.cons(), c)
	return n
}
