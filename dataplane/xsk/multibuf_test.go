package xsk

import (
	"bytes"
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// newSpanSocket is a memSocket of 4096-byte frames with a UMEM in the Go
// heap and TX spans of spanFrames frames after the pool's frames.
func newSpanSocket(frames, ringSize, nspans, spanFrames uint32) *memSocket {
	const fs = 4096
	m := newMemSocket(frames, ringSize)
	m.pool = NewFramePool(frames, fs)
	m.umem = make([]byte, (frames+nspans*spanFrames)*fs)
	m.spans.init(uint64(frames)*fs, nspans, spanFrames, fs)
	m.info.Config.SG = true
	m.info.NeedWakeup = true // flags stay clear: no syscalls
	return m
}

// kernelComplete plays the kernel completing the first n TX descriptors it
// has not consumed yet.
func (m *memSocket) kernelComplete(n int) int {
	p := atomic.LoadUint32(m.tx.prod())
	c := atomic.LoadUint32(m.tx.cons())
	d := m.tx.descs(m.size)
	cp := atomic.LoadUint32(m.comp.prod())
	a := m.comp.addrs(m.size)
	k := 0
	for ; c != p && k < n; c++ {
		a[cp&(m.size-1)] = d[c&(m.size-1)].Addr
		cp++
		k++
	}
	atomic.StoreUint32(m.tx.cons(), c)
	atomic.StoreUint32(m.comp.prod(), cp)
	return k
}

// kernelRXChain plays the kernel receiving pkt: it takes frames from the
// fill ring, copies at most per bytes into each after the headroom, and
// publishes the chain on the RX ring. It returns false if the fill ring ran
// short.
func (m *memSocket) kernelRXChain(pkt []byte, per int) bool {
	p := atomic.LoadUint32(m.rx.prod())
	d := m.rx.descs(m.size)
	for off := 0; off < len(pkt); off += per {
		var a [1]uint64
		if m.fill.kernelConsumeInto(m.size, a[:]) == 0 {
			return false
		}
		c := copy(m.umem[a[0]+kernelHeadroom:], pkt[off:min(off+per, len(pkt))])
		opt := uint32(0)
		if off+per < len(pkt) {
			opt = PktContd
		}
		d[p&(m.size-1)] = Desc{Addr: a[0] + kernelHeadroom, Len: uint32(c), Options: opt}
		p++
	}
	atomic.StoreUint32(m.rx.prod(), p)
	return true
}

func TestSplit(t *testing.T) {
	p := NewFramePool(8, 4096)
	var d [4]Desc
	for _, tc := range []struct {
		addr uint64
		n    uint32
		want []Desc
	}{
		{20, 100, []Desc{{20, 100, 0}}},
		{20, 4076, []Desc{{20, 4076, 0}}},
		{20, 4077, []Desc{{20, 4076, PktContd}, {4096, 1, 0}}},
		// MTU 9000 over IPv4: a 8994-byte frame 20 bytes into a span.
		{20, 8994, []Desc{{20, 4076, PktContd}, {4096, 4096, PktContd}, {8192, 822, 0}}},
		{8192, 4096 * 4, []Desc{{8192, 4096, PktContd}, {12288, 4096, PktContd}, {16384, 4096, PktContd}, {20480, 4096, 0}}},
	} {
		n := p.Split(tc.addr, tc.n, d[:])
		if n != len(tc.want) || !equalDescs(d[:n], tc.want) {
			t.Errorf("Split(%d, %d) = %v, want %v", tc.addr, tc.n, d[:n], tc.want)
		}
	}
	if n := p.Split(0, 4096*4+1, d[:]); n != 0 {
		t.Errorf("five descriptors into four: %d", n)
	}
	if n := p.Split(0, 0, d[:]); n != 0 {
		t.Errorf("empty packet: %d", n)
	}
}

func equalDescs(a, b []Desc) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestTransmitWholeChains: a TX ring with room for part of a batch of
// three-descriptor packets queues only whole packets; a span comes back
// only when the last of its descriptors has completed.
func TestTransmitWholeChains(t *testing.T) {
	m := newSpanSocket(16, 8, 4, 3)
	var descs [9]Desc
	var starts [3]uint64
	k := 0
	for i := range starts {
		a, ok := m.GetSpan()
		if !ok {
			t.Fatal("no span")
		}
		starts[i] = a
		if !m.IsSpan(a) || len(m.SpanBuf(a+20)) != 3*4096-20 {
			t.Fatalf("span %#x: IsSpan %v, buf %d", a, m.IsSpan(a), len(m.SpanBuf(a+20)))
		}
		k += m.pool.Split(a+20, 8994, descs[k:])
	}
	q, err := m.Transmit(descs[:k])
	if err != nil {
		t.Fatal(err)
	}
	if q != 6 {
		t.Fatalf("queued %d descriptors of 9 into a ring of 8: want 6 (two whole packets)", q)
	}
	m.PutSpan(starts[2]) // not queued: the caller's to put back
	if m.SpansFree() != 2 {
		t.Fatalf("%d spans free, want 2", m.SpansFree())
	}
	m.kernelComplete(2) // the first packet's first two descriptors
	m.Complete()
	if m.SpansFree() != 2 {
		t.Fatalf("span freed before its last descriptor completed: %d free", m.SpansFree())
	}
	m.kernelComplete(1)
	m.Complete()
	if m.SpansFree() != 3 {
		t.Fatalf("span not freed by its last completion: %d free", m.SpansFree())
	}
	m.kernelComplete(3)
	m.Complete()
	if m.SpansFree() != 4 || m.pool.Free() != 16 {
		t.Fatalf("end: %d spans free, %d frames", m.SpansFree(), m.pool.Free())
	}
}

// TestAssembleChains: the kernel delivers jumbo packets as chains of
// 3840-byte buffers; Receive in small batches (so chains straddle them)
// and the Assembler rebuild every packet byte for byte, and drop the one
// too long for the buffer.
func TestAssembleChains(t *testing.T) {
	m := newSpanSocket(64, 64, 0, 0)
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 0, 9018)
	var asm Assembler
	var sent [][]byte
	for _, n := range []int{60, 3840, 3841, 9014, 9018, 9019, 7000, 1} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(rng.Uint32())
		}
		sent = append(sent, p)
	}
	var got [][]byte
	dropped := 0
	var rx [2]Desc
	for _, p := range sent {
		if _, err := m.Refill(64); err != nil {
			t.Fatal(err)
		}
		if !m.kernelRXChain(p, 3840) {
			t.Fatal("fill ring short")
		}
		for {
			n := m.Receive(rx[:])
			if n == 0 {
				break
			}
			for _, d := range rx[:n] {
				if asm.Idle() {
					asm.Start(buf)
				}
				pkt, st := asm.Add(m.Frame(d.Addr, d.Len), d.More())
				m.pool.Put(d.Addr)
				switch st {
				case AsmDone:
					got = append(got, bytes.Clone(pkt))
				case AsmDropped:
					dropped++
				}
			}
		}
	}
	if dropped != 1 || len(got) != len(sent)-1 {
		t.Fatalf("got %d packets, dropped %d", len(got), dropped)
	}
	j := 0
	for _, p := range sent {
		if len(p) > cap(buf) {
			continue
		}
		if !bytes.Equal(got[j], p) {
			t.Fatalf("packet of %d bytes reassembled as %d bytes, or differently", len(p), len(got[j]))
		}
		j++
	}
	if rx, _ := m.InFlight(); m.pool.Free()+int(rx) != 64 {
		t.Fatalf("frames leaked: free %d, in flight %d", m.pool.Free(), rx)
	}
}

func TestAssemblerDrops(t *testing.T) {
	var a Assembler
	a.Start(nil) // no buffer
	a.Add([]byte{1}, true)
	if _, st := a.Add([]byte{2}, false); st != AsmDropped || !a.Idle() {
		t.Fatalf("no buffer: %v", st)
	}
	buf := make([]byte, 0, 100)
	a.Start(buf)
	for i := 0; i < maxChain; i++ {
		a.Add([]byte{1}, true)
	}
	if _, st := a.Add([]byte{2}, false); st != AsmDropped {
		t.Fatalf("%d descriptors: %v", maxChain+1, st)
	}
	// An Add with no Start (a continuation whose head was lost) is dropped
	// with its packet.
	if _, st := a.Add([]byte{2}, false); st != AsmDropped {
		t.Fatalf("headless: %v", st)
	}
	a.Start(buf)
	if pkt, st := a.Add([]byte{7, 8}, false); st != AsmDone || !bytes.Equal(pkt, []byte{7, 8}) {
		t.Fatalf("single: %v %v", pkt, st)
	}
}

// TestMultiBufferNoAllocs holds the hot-path claim for spans, Split,
// chained Transmit, Complete and the Assembler.
func TestMultiBufferNoAllocs(t *testing.T) {
	m := newSpanSocket(256, 256, 32, 3)
	var descs [3 * 16]Desc
	var rx [16]Desc
	buf := make([]byte, 0, 9018)
	pkt := make([]byte, 9014)
	var asm Assembler
	allocs := testing.AllocsPerRun(500, func() {
		k := 0
		for i := 0; i < 16; i++ {
			a, ok := m.GetSpan()
			if !ok {
				panic("no span")
			}
			k += m.pool.Split(a+20, 8994, descs[k:])
		}
		if q, _ := m.Transmit(descs[:k]); q != k {
			panic("short")
		}
		m.kernelComplete(k)
		m.Complete()

		_, _ = m.Refill(64)
		m.kernelRXChain(pkt, 3840)
		n := m.Receive(rx[:])
		for _, d := range rx[:n] {
			if asm.Idle() {
				asm.Start(buf)
			}
			asm.Add(m.Frame(d.Addr, d.Len), d.More())
			m.pool.Put(d.Addr)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per loop", allocs)
	}
}

// FuzzSplit: whatever the address and length, Split's descriptors cover
// the packet contiguously, each inside one frame, chained correctly.
func FuzzSplit(f *testing.F) {
	f.Add(uint64(20), uint32(8994), false)
	f.Add(uint64(0), uint32(1), true)
	f.Add(uint64(4095), uint32(2), false)
	f.Fuzz(func(t *testing.T, addr uint64, n uint32, small bool) {
		fs := uint32(4096)
		if small {
			fs = 2048
		}
		addr %= 1 << 30
		n %= 1 << 16
		p := NewFramePool(1, fs)
		var d [maxChain]Desc
		k := p.Split(addr, n, d[:])
		if n == 0 {
			if k != 0 {
				t.Fatalf("empty packet gave %d descriptors", k)
			}
			return
		}
		need := int((addr%uint64(fs) + uint64(n) + uint64(fs) - 1) / uint64(fs))
		if need > maxChain {
			if k != 0 {
				t.Fatalf("%d descriptors needed, %d given room, got %d", need, maxChain, k)
			}
			return
		}
		if k != need {
			t.Fatalf("Split(%d, %d) over %d-byte frames: %d descriptors, want %d", addr, n, fs, k, need)
		}
		at, total := addr, uint32(0)
		for i, x := range d[:k] {
			if x.Addr != at || x.Len == 0 || p.FrameStart(x.Addr) != p.FrameStart(x.Addr+uint64(x.Len)-1) {
				t.Fatalf("descriptor %d %+v (expected at %d)", i, x, at)
			}
			if x.More() != (i < k-1) {
				t.Fatalf("descriptor %d of %d: More %v", i, k, x.More())
			}
			at += uint64(x.Len)
			total += x.Len
		}
		if total != n {
			t.Fatalf("covered %d of %d bytes", total, n)
		}
	})
}

// FuzzAssembler drives the Assembler with arbitrary chains (lengths and
// PktContd flags from the input, with and without a buffer) and checks it
// against a model: a packet that fits the buffer in at most 18 descriptors
// comes out as the concatenation of its pieces, any other is dropped.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte{0x80 | 10, 20, 0x80 | 100, 0x80 | 100, 5}, uint16(300))
	f.Add([]byte{0x7f, 0x7f, 0x7f}, uint16(0))
	f.Add(bytes.Repeat([]byte{0x81}, 20), uint16(1000))
	f.Fuzz(func(t *testing.T, chain []byte, limit uint16) {
		var a Assembler
		buf := make([]byte, 0, int(limit)%2000)
		var model []byte
		descs := 0
		seq := byte(0)
		for i, c := range chain {
			more := c&0x80 != 0
			piece := make([]byte, int(c&0x7f))
			for j := range piece {
				piece[j] = seq
				seq++
			}
			if a.Idle() {
				if i%7 == 6 {
					a.Start(nil)
					model = nil
					descs = -1 << 20 // no buffer: always dropped
				} else {
					a.Start(buf)
					model, descs = model[:0], 0
				}
			}
			descs++
			model = append(model, piece...)
			pkt, st := a.Add(piece, more)
			switch {
			case more:
				if st != AsmMore {
					t.Fatalf("descriptor %d with PktContd: %v", i, st)
				}
			case descs > 0 && descs <= maxChain && len(model) <= cap(buf):
				if st != AsmDone || !bytes.Equal(pkt, model) {
					t.Fatalf("descriptor %d ends a %d-byte packet: %v, %d bytes", i, len(model), st, len(pkt))
				}
			default:
				if st != AsmDropped {
					t.Fatalf("descriptor %d ends a packet of %d bytes in %d descriptors (limit %d): %v", i, len(model), descs, cap(buf), st)
				}
			}
			if a.Idle() == more {
				t.Fatalf("descriptor %d: Idle %v after more=%v", i, a.Idle(), more)
			}
		}
	})
}
