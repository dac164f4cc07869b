package dataplane_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/gentest"
	"github.com/metaroce/metaroce/transport"
)

// burstLink counts the packets an engine hands to the link between two
// of its receives. It is called on the engine goroutine only.
type burstLink struct {
	dataplane.Link
	since, most, total int
}

func (l *burstLink) Receive(batch []dataplane.RxPacket) int {
	l.since = 0
	return l.Link.Receive(batch)
}

func (l *burstLink) SubmitTx(batch []dataplane.TxPacket) error {
	for _, p := range batch {
		if p.Len > 0 {
			l.since++
			l.total++
		}
	}
	l.most = max(l.most, l.since)
	return l.Link.SubmitTx(batch)
}

// writeOver runs internal/gentest's writer on an engine over la (address
// a) against its target on an engine over lb (address gc.Peer), both
// endpoints with cfg, until the writer is done, and fails t unless every
// message completed. started, if set, sees the engines before they run.
func writeOver(t *testing.T, a netip.Addr, la, lb dataplane.Link, cfg transport.Config, gc gentest.Config, started func(ea, eb *dataplane.Engine)) {
	t.Helper()
	epA, err := transport.NewEndpoint(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	epB, err := transport.NewEndpoint(cfg, gc.Peer)
	if err != nil {
		t.Fatal(err)
	}
	w, err := gentest.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, la, epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, lb, epB, gentest.NewTarget(gc, epB))
	if started != nil {
		started(ea, eb)
	}
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
	cancel()
	<-errs
	<-errs
	if res.Err != "" || res.Completed != gc.Messages {
		t.Fatalf("writer: %+v", res)
	}
}

// TestFlushLeavesRoomToReceive: an engine owing hundreds of packets (a
// window's worth of a bulk WRITE, or thousands of connections' timeouts
// at once) hands at most MaxFlush of them to the link before it reads its
// RX ring again. Writing them all first held the ring unread for
// milliseconds, and the acks that arrived meanwhile overflowed it.
func TestFlushLeavesRoomToReceive(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	ma, mb := dataplane.NewMemPair(a, b, 2048, 0, 1)
	la := &burstLink{Link: ma}
	cfg := transport.Config{Congestion: transport.CongestionNone, SendWindow: 512}
	gc := gentest.Config{Size: 65536, Slots: 16, Seed: 5, Peer: b, Messages: 100, Streams: 2}
	writeOver(t, a, la, mb, cfg, gc, nil)
	t.Logf("%d packets sent, at most %d between two receives", la.total, la.most)
	if la.total < 1000 {
		t.Fatalf("only %d packets sent", la.total)
	}
	if la.most > dataplane.MaxFlush {
		t.Fatalf("%d packets handed to the link between two receives, want at most %d", la.most, dataplane.MaxFlush)
	}
}
