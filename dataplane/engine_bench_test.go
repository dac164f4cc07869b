package dataplane

import (
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
)

// fakeLink is a zero-allocation, lock-free in-memory link for measuring
// the engine loop alone: two of them share frame pools and hand frames to
// each other through plain slices, driven by one goroutine.
type fakeLink struct {
	local netip.Addr
	peer  *fakeLink
	inbox []int // frame indices waiting to be received
	free  []int
	bufs  [][]byte
	lens  []int
	taken []int
}

func newFakePair(a, b netip.Addr, frames, size int) (*fakeLink, *fakeLink) {
	mk := func(addr netip.Addr) *fakeLink {
		l := &fakeLink{local: addr, inbox: make([]int, 0, frames), free: make([]int, 0, frames),
			bufs: make([][]byte, frames), lens: make([]int, frames), taken: make([]int, 0, frames)}
		for i := range l.bufs {
			l.bufs[i] = make([]byte, size)
			l.free = append(l.free, i)
		}
		return l
	}
	x, y := mk(a), mk(b)
	x.peer, y.peer = y, x
	return x, y
}

func (l *fakeLink) Receive(batch []RxPacket) int {
	n := min(len(batch), len(l.inbox))
	for i := 0; i < n; i++ {
		f := l.inbox[i]
		batch[i] = RxPacket{Payload: l.peer.bufs[f][:l.peer.lens[f]], From: l.peer.local, Handle: uint64(f)}
	}
	l.inbox = append(l.inbox[:0], l.inbox[n:]...)
	return n
}

func (l *fakeLink) Release(batch []RxPacket) {
	for i := range batch {
		l.peer.free = append(l.peer.free, int(batch[i].Handle))
	}
}

func (l *fakeLink) ReserveTx(batch []TxPacket) int {
	n := min(len(batch), len(l.free))
	for i := 0; i < n; i++ {
		f := l.free[len(l.free)-1-i]
		batch[i] = TxPacket{Buf: l.bufs[f], Handle: uint64(f)}
	}
	l.free = l.free[:len(l.free)-n]
	return n
}

func (l *fakeLink) SubmitTx(batch []TxPacket) error {
	for i := range batch {
		f := int(batch[i].Handle)
		if batch[i].Len == 0 {
			l.free = append(l.free, f)
			continue
		}
		l.lens[f] = batch[i].Len
		l.peer.inbox = append(l.peer.inbox, f)
	}
	return nil
}

func (l *fakeLink) Poll(time.Duration) error { return nil }
func (l *fakeLink) Info() LinkInfo           { return LinkInfo{Backend: "fake"} }
func (l *fakeLink) Close() error             { return nil }

// BenchmarkEngineLoop runs two engines (writer and target) over the fake
// link on one goroutine and reports the cost of the whole loop, both ends,
// per data packet delivered: RX batch, transport, placement, completions,
// TX batch, generator. ns/op is per data packet; allocs should be 0.
func BenchmarkEngineLoop(b *testing.B) {
	a, bb := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, lb := newFakePair(a, bb, 4096, 9000)
	epA, _ := transport.NewEndpoint(transport.Config{Seed: 1}, a)
	epB, _ := transport.NewEndpoint(transport.Config{Seed: 2}, bb)
	gc := GenConfig{Size: 65536, Slots: 16, Seed: 1, Peer: bb, Messages: b.N/40 + 20000, Streams: 4}
	w, _ := NewWriter(gc)
	tgt := NewTarget(gc, epB)
	ea := NewEngine(EngineConfig{}, la, epA, w)
	eb := NewEngine(EngineConfig{}, lb, epB, tgt)
	now := transport.Time(0)
	step := func() {
		now += 2000
		ea.iterate(now)
		eb.iterate(now)
	}
	for i := 0; i < 2000; i++ { // connect and reach steady state
		step()
	}
	start := epB.Stats().DataReceived
	b.ReportAllocs()
	b.ResetTimer()
	for epB.Stats().DataReceived-start < uint64(b.N) {
		step()
		if w.finished {
			b.Fatal("the writer ran out of messages")
		}
	}
	b.StopTimer()
	if tgt.Stats().Corrupt != 0 {
		b.Fatal("corrupt messages")
	}
}
