package dataplane_test

import (
	"context"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/gentest"
	"github.com/metaroce/metaroce/transport"
)

// TestEnginesOverMemLink runs two engines against each other over the
// in-memory twin with 1% loss: every message is verified at the target.
func TestEnginesOverMemLink(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, lb := dataplane.NewMemPair(a, b, 9000, 0.01, 1)
	// The send window alone: the in-memory link stamps no arrivals, so
	// real time on shared cores would be in every fabric sample a
	// controller took (docs/spec.md §8.9.4); this test is about the engines.
	cfg := transport.Config{Congestion: transport.CongestionNone}
	epA, err := transport.NewEndpoint(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	epB, _ := transport.NewEndpoint(cfg, b)
	gc := gentest.Config{Size: 65536, Slots: 8, Seed: 3, Peer: b, Messages: 400, Streams: 2}
	w, err := gentest.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	tgt := gentest.NewTarget(gc, epB)
	var verified atomic.Int64
	tgt.Report = func(s gentest.TargetStats) { verified.Store(int64(s.Verified)) }
	ea := dataplane.NewEngine(dataplane.EngineConfig{}, la, epA, w)
	eb := dataplane.NewEngine(dataplane.EngineConfig{}, lb, epB, tgt)
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
	st := tgt.Stats()
	if st.Verified != gc.Messages || st.Corrupt != 0 || st.Duplicates != 0 {
		t.Fatalf("target: %+v", st)
	}
	if epA.Stats().DataRetransmitted == 0 {
		t.Error("1% loss but no retransmissions")
	}
}

// TestIdleEngineSleeps: an engine with nothing to do polls, yielding the
// CPU, for YieldTime after its last work (here its start), and from then
// on blocks in Poll instead of spinning (counted, not timed: 2 ms of
// yielding against 200 ms of run).
func TestIdleEngineSleeps(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, _ := dataplane.NewMemPair(a, b, 2048, 0, 1)
	ep, _ := transport.NewEndpoint(transport.Config{}, a)
	e := dataplane.NewEngine(dataplane.EngineConfig{SpinIterations: 10, MaxSleep: 20 * time.Millisecond,
		YieldTime: 2 * time.Millisecond}, la, ep, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	time.Sleep(100 * time.Millisecond)
	midYields := e.Stats.Yields.Load()
	<-done
	it, sl, y := e.Stats.Iterations.Load(), e.Stats.Sleeps.Load(), e.Stats.Yields.Load()
	if sl == 0 {
		t.Fatal("idle engine never slept")
	}
	if y == 0 {
		t.Error("the engine never yielded: it slept straight after its hot spin")
	}
	if y != midYields {
		t.Errorf("%d yields by half time, %d at the end: the idle engine kept polling", midYields, y)
	}
	// 10 spins per sleep, and each sleep lasts until MaxSleep: a few
	// hundred iterations at most, where a spinning loop would do millions.
	if it-y > 11*sl+20 {
		t.Errorf("%d iterations (%d of them yields) for %d sleeps: the engine spins while idle", it, y, sl)
	}
}

// TestNoYield: a negative YieldTime sleeps straight after the hot spin.
func TestNoYield(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, _ := dataplane.NewMemPair(a, b, 2048, 0, 1)
	ep, _ := transport.NewEndpoint(transport.Config{}, a)
	e := dataplane.NewEngine(dataplane.EngineConfig{SpinIterations: 10, MaxSleep: 5 * time.Millisecond, YieldTime: -1}, la, ep, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	e.Run(ctx)
	if y, sl := e.Stats.Yields.Load(), e.Stats.Sleeps.Load(); y != 0 || sl == 0 {
		t.Fatalf("%d yields, %d sleeps; want none and some", y, sl)
	}
}

// TestYieldStallSleeps: when a thread that never yields shares the
// engine's CPU, a yield loses the CPU for that thread's whole time slice;
// the engine notices, counts it, and sleeps for the rest of the gap (where
// the scheduler wakes it ahead of the hog) though its YieldTime is an hour.
// (ring.YieldGate's test covers the waits after.)
func TestYieldStallSleeps(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, _ := dataplane.NewMemPair(a, b, 2048, 0, 1)
	ep, _ := transport.NewEndpoint(transport.Config{}, a)
	e := dataplane.NewEngine(dataplane.EngineConfig{CPU: 0, PinSet: true, YieldTime: time.Hour}, la, ep, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	hogReady := make(chan struct{})
	go func() { // a thread on CPU 0 that never yields
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			t.Error(err)
		}
		close(hogReady)
		for ctx.Err() == nil {
		}
	}()
	<-hogReady
	e.Run(ctx)
	y, st, sl := e.Stats.Yields.Load(), e.Stats.YieldStalls.Load(), e.Stats.Sleeps.Load()
	t.Logf("%d yields, %d stalls, %d sleeps", y, st, sl)
	if st == 0 {
		t.Fatal("no yield stalled with a hog on the engine's CPU")
	}
	if sl == 0 {
		t.Fatal("the engine never slept though its yields stalled (YieldTime is an hour)")
	}
}
