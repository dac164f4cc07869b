package dataplane_test

import (
	"context"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/gentest"
	"github.com/metaroce/metaroce/transport"
)

// rssHost is a host with several receive queues; rssLink is one queue's
// Link. A packet goes to the peer host's queue picked by hashing its UDP
// source port, as RSS does, so one connection's packets arrive on every
// queue. (A test twin: it locks, as the kernel would.)
type rssHost struct {
	addr   netip.Addr
	peer   *rssHost
	queues []*rssLink
}

type rssLink struct {
	host *rssHost
	mu   sync.Mutex
	q    [][]byte
	from []uint16
}

func newRSSPair(a, b netip.Addr, n int) (*rssHost, *rssHost) {
	mk := func(addr netip.Addr) *rssHost {
		h := &rssHost{addr: addr}
		for i := 0; i < n; i++ {
			h.queues = append(h.queues, &rssLink{host: h})
		}
		return h
	}
	x, y := mk(a), mk(b)
	x.peer, y.peer = y, x
	return x, y
}

func (l *rssLink) Receive(batch []dataplane.RxPacket) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := min(len(batch), len(l.q))
	for i := 0; i < n; i++ {
		batch[i] = dataplane.RxPacket{Payload: l.q[i], From: l.host.peer.addr, SrcPort: l.from[i]}
	}
	l.q, l.from = l.q[n:], l.from[n:]
	return n
}
func (l *rssLink) Release([]dataplane.RxPacket) {}
func (l *rssLink) ReserveTx(batch []dataplane.TxPacket) int {
	for i := range batch {
		batch[i] = dataplane.TxPacket{Buf: make([]byte, 2048)}
	}
	return len(batch)
}
func (l *rssLink) SubmitTx(batch []dataplane.TxPacket) error {
	for _, p := range batch {
		if p.Len == 0 {
			continue
		}
		h := uint32(p.SrcPort) * 2654435761
		dst := l.host.peer.queues[int(h>>16)%len(l.host.peer.queues)]
		dst.mu.Lock()
		dst.q = append(dst.q, p.Buf[:p.Len])
		dst.from = append(dst.from, p.SrcPort)
		dst.mu.Unlock()
	}
	return nil
}
func (l *rssLink) Poll(d time.Duration) error { time.Sleep(min(d, 20*time.Microsecond)); return nil }
func (l *rssLink) Info() dataplane.LinkInfo   { return dataplane.LinkInfo{Backend: "rss-twin"} }
func (l *rssLink) Close() error               { return nil }

// TestMultiQueueHandOff: two hosts with two queues each, RSS spreading
// every connection over both; engines hand each other what they do not
// own, and a WRITE run completes byte-exact.
func TestMultiQueueHandOff(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	ha, hb := newRSSPair(a, b, 2)
	gc := gentest.Config{Size: 32768, Slots: 8, Seed: 7, Peer: b, Messages: 300, Streams: 2}
	w, err := gentest.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	var verified atomic.Int64
	build := func(h *rssHost, addr netip.Addr, writerOn int) []*dataplane.Engine {
		var es []*dataplane.Engine
		for i, l := range h.queues {
			// No congestion control: the in-memory queues carry no
			// arrival stamps, so four engines' scheduling on a shared
			// machine would be in every RTT sample the controller took
			// (docs/spec.md §8.9.4), and this test is about the hand-off.
			ep, err := transport.NewEndpoint(transport.Config{IDMask: 1, IDTag: uint32(i), Congestion: transport.CongestionNone}, addr)
			if err != nil {
				t.Fatal(err)
			}
			var d dataplane.Driver
			if i == writerOn {
				d = w
			} else if writerOn < 0 {
				tgt := gentest.NewTarget(gc, ep)
				tgt.Report = func(s gentest.TargetStats) { verified.Add(1) }
				d = tgt
			}
			es = append(es, dataplane.NewEngine(dataplane.EngineConfig{}, l, ep, d))
		}
		dataplane.ConnectEngines(es, 256)
		return es
	}
	ea, eb := build(ha, a, 1), build(hb, b, -1)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, e := range append(ea, eb...) {
		wg.Add(1)
		go func() { defer wg.Done(); e.Run(ctx) }()
	}
	var res gentest.Result
	select {
	case res = <-w.Done():
	case <-time.After(60 * time.Second):
		t.Error("writer did not finish")
	}
	for i := 0; i < 500 && verified.Load() < int64(gc.Messages); i++ {
		time.Sleep(2 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if res.Err != "" || res.Completed != gc.Messages || verified.Load() != int64(gc.Messages) {
		t.Fatalf("writer %+v, target verified %d", res, verified.Load())
	}
	var fwd uint64
	for _, e := range append(ea, eb...) {
		fwd += e.Stats.Forwarded.Load()
	}
	if fwd == 0 {
		t.Fatal("no packet was handed between engines: RSS did not spread the connection")
	}
	t.Logf("forwarded %d packets between engines", fwd)
}
