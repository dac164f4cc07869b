package dataplane_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/gentest"
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

func (l *fakeLink) Receive(batch []dataplane.RxPacket) int {
	n := min(len(batch), len(l.inbox))
	for i := 0; i < n; i++ {
		f := l.inbox[i]
		batch[i] = dataplane.RxPacket{Payload: l.peer.bufs[f][:l.peer.lens[f]], From: l.peer.local, Handle: uint64(f)}
	}
	l.inbox = append(l.inbox[:0], l.inbox[n:]...)
	return n
}

func (l *fakeLink) Release(batch []dataplane.RxPacket) {
	for i := range batch {
		l.peer.free = append(l.peer.free, int(batch[i].Handle))
	}
}

func (l *fakeLink) ReserveTx(batch []dataplane.TxPacket) int {
	n := min(len(batch), len(l.free))
	for i := 0; i < n; i++ {
		f := l.free[len(l.free)-1-i]
		batch[i] = dataplane.TxPacket{Buf: l.bufs[f], Handle: uint64(f)}
	}
	l.free = l.free[:len(l.free)-n]
	return n
}

func (l *fakeLink) SubmitTx(batch []dataplane.TxPacket) error {
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
func (l *fakeLink) Info() dataplane.LinkInfo { return dataplane.LinkInfo{Backend: "fake"} }
func (l *fakeLink) Close() error             { return nil }

// BenchmarkEngineLoop runs two engines (writer and target) over the fake
// link on one goroutine and reports the cost of the whole loop, both ends,
// per data packet delivered: RX batch, transport, placement, completions,
// TX batch, and the writer and target (internal/gentest). ns/op is per
// data packet; allocs should be 0.
func BenchmarkEngineLoop(b *testing.B) {
	a, bb := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, lb := newFakePair(a, bb, 4096, 9000)
	epA, _ := transport.NewEndpoint(transport.Config{Seed: 1}, a)
	epB, _ := transport.NewEndpoint(transport.Config{Seed: 2}, bb)
	gc := gentest.Config{Size: 65536, Slots: 16, Seed: 1, Peer: bb, Messages: b.N/40 + 20000, Streams: 4}
	w, _ := gentest.NewWriter(gc)
	tgt := gentest.NewTarget(gc, epB)
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, la, epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, lb, epB, tgt)
	now := transport.Time(0)
	step := func() {
		now += 2000
		ea.Iterate(now)
		eb.Iterate(now)
	}
	for i := 0; i < 2000; i++ { // connect and reach steady state
		step()
	}
	start := epB.Stats().DataReceived
	b.ReportAllocs()
	b.ResetTimer()
	for epB.Stats().DataReceived-start < uint64(b.N) {
		step()
		select {
		case <-w.Done():
			b.Fatal("the writer ran out of messages")
		default:
		}
	}
	b.StopTimer()
	if tgt.Stats().Corrupt != 0 {
		b.Fatal("corrupt messages")
	}
}

// TestEngineLoopAllocs: the engine loop, both ends of a WRITE stream
// (receive batches, transport, placement, acks, completions, transmit
// batches, the writer and the target), allocates nothing per iteration
// once connected.
func TestEngineLoopAllocs(t *testing.T) {
	a, bb := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, lb := newFakePair(a, bb, 4096, 9000)
	epA, _ := transport.NewEndpoint(transport.Config{Seed: 1}, a)
	epB, _ := transport.NewEndpoint(transport.Config{Seed: 2}, bb)
	gc := gentest.Config{Size: 65536, Slots: 16, Seed: 1, Peer: bb, Messages: 1 << 20, Streams: 4}
	w, _ := gentest.NewWriter(gc)
	tgt := gentest.NewTarget(gc, epB)
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, la, epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, lb, epB, tgt)
	now := transport.Time(0)
	step := func() {
		now += 2000
		ea.Iterate(now)
		eb.Iterate(now)
	}
	for range 5000 { // connect and reach steady state
		step()
	}
	before := epB.Stats().DataReceived
	if allocs := testing.AllocsPerRun(2000, step); allocs != 0 {
		t.Errorf("%v allocations per loop iteration, want 0", allocs)
	}
	if got := epB.Stats().DataReceived - before; got < 1000 {
		t.Fatalf("only %d data packets in 2000 iterations: the stream was not flowing", got)
	}
	if tgt.Stats().Corrupt != 0 {
		t.Fatal("corrupt messages")
	}
}
