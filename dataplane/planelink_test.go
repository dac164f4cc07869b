package dataplane_test

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/gentest"
	"github.com/metaroce/metaroce/transport"
)

// countLink counts the packets a plane's link sends.
type countLink struct {
	dataplane.Link
	sent atomic.Uint64
}

func (c *countLink) SubmitTx(batch []dataplane.TxPacket) error {
	for i := range batch {
		if batch[i].Len > 0 {
			c.sent.Add(1)
		}
	}
	return c.Link.SubmitTx(batch)
}

// TestEnginesOverPlanes: two hosts of two planes each, one in-memory link
// per plane (1% loss on plane 1), one engine and endpoint per host over a
// PlaneLink: every message is verified at the target, and both planes
// carry about half of the packets.
func TestEnginesOverPlanes(t *testing.T) {
	addr := netip.MustParseAddr
	a := []netip.Addr{addr("10.0.0.1"), addr("10.1.0.1")}
	b := []netip.Addr{addr("10.0.0.2"), addr("10.1.0.2")}
	var la, lb [2]*countLink
	for p, loss := range []float64{0, 0.01} {
		x, y := dataplane.NewMemPair(a[p], b[p], 9000, loss, uint64(p+1))
		la[p], lb[p] = &countLink{Link: x}, &countLink{Link: y}
	}
	cfg := transport.Config{Congestion: transport.CongestionNone, Planes: 2}
	ep := func(addrs []netip.Addr) *transport.Endpoint {
		e, err := transport.NewEndpoint(cfg, addrs[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := e.SetPlaneAddrs(addrs); err != nil {
			t.Fatal(err)
		}
		return e
	}
	epA, epB := ep(a), ep(b)
	pla, err := dataplane.NewPlaneLink([]dataplane.Link{la[0], la[1]}, 64)
	if err != nil {
		t.Fatal(err)
	}
	plb, _ := dataplane.NewPlaneLink([]dataplane.Link{lb[0], lb[1]}, 64)
	gc := gentest.Config{Size: 65536, Slots: 8, Seed: 3, Peer: b[0], Messages: 400, Streams: 2}
	w, err := gentest.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	tgt := gentest.NewTarget(gc, epB)
	var verified atomic.Int64
	tgt.Report = func(s gentest.TargetStats) { verified.Store(int64(s.Verified)) }
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, pla, epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, plb, epB, tgt)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	go func() { errs <- ea.Run(ctx) }()
	go func() { errs <- eb.Run(ctx) }()
	var res gentest.Result
	select {
	case res = <-w.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("writer did not finish in 60s")
	}
	deadline := time.Now().Add(5 * time.Second)
	for verified.Load() < int64(gc.Messages) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-errs
	<-errs
	if res.Err != "" || res.Completed != gc.Messages || res.Failed != 0 {
		t.Fatalf("writer: %+v", res)
	}
	if st := tgt.Stats(); st.Verified != gc.Messages || st.Corrupt != 0 || st.Duplicates != 0 {
		t.Fatalf("target: %+v", st)
	}
	s0, s1 := la[0].sent.Load(), la[1].sent.Load()
	t.Logf("sender's packets per plane: %d %d; copied %d, copy drops %d", s0, s1, pla.Copied, pla.CopyDrops)
	if share := float64(s0) / float64(s0+s1); share < 0.35 || share > 0.65 {
		t.Errorf("plane 0 carried %d of %d packets", s0, s0+s1)
	}
	if epA.Stats().DataRetransmitted == 0 {
		t.Error("1% loss on plane 1 but no retransmissions")
	}
}

// staticLink is a link that allocates nothing: a fixed set of frames it
// hands out for transmit and returns for receive.
type staticLink struct {
	frames [][]byte
	rx     int // packets Receive returns each call
	from   netip.Addr
}

func (s *staticLink) Receive(batch []dataplane.RxPacket) int {
	n := min(s.rx, len(batch))
	for i := range n {
		batch[i] = dataplane.RxPacket{Payload: s.frames[i][:64], From: s.from}
	}
	return n
}
func (s *staticLink) Release([]dataplane.RxPacket) {}
func (s *staticLink) ReserveTx(batch []dataplane.TxPacket) int {
	n := min(len(batch), len(s.frames))
	for i := range n {
		batch[i] = dataplane.TxPacket{Buf: s.frames[i]}
	}
	return n
}
func (s *staticLink) SubmitTx([]dataplane.TxPacket) error { return nil }
func (s *staticLink) Poll(time.Duration) error            { return nil }
func (s *staticLink) Info() dataplane.LinkInfo            { return dataplane.LinkInfo{Backend: "static"} }
func (s *staticLink) Close() error                        { return nil }

// TestPlaneLinkNoAllocs: receiving from every plane, releasing, and
// sending a batch whose packets go to both planes (half of them copied)
// allocate nothing.
func TestPlaneLinkNoAllocs(t *testing.T) {
	mk := func(a string) *staticLink {
		s := &staticLink{rx: 8, from: netip.MustParseAddr(a)}
		for range 16 {
			s.frames = append(s.frames, make([]byte, 2048))
		}
		return s
	}
	pl, err := dataplane.NewPlaneLink([]dataplane.Link{mk("10.0.0.1"), mk("10.1.0.1")}, 16)
	if err != nil {
		t.Fatal(err)
	}
	rx := make([]dataplane.RxPacket, 16)
	tx := make([]dataplane.TxPacket, 16)
	allocs := testing.AllocsPerRun(100, func() {
		n := pl.Receive(rx)
		pl.Release(rx[:n])
		k := pl.ReserveTx(tx)
		for i := range tx[:k] {
			tx[i].Len, tx[i].Plane = 100, uint8(i%2)
		}
		pl.SubmitTx(tx[:k])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per receive and send", allocs)
	}
	if pl.Copied == 0 {
		t.Fatal("no packet was copied to the other plane")
	}
}
