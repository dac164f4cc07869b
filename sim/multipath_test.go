package sim

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/transport"
)

func failover(mode transport.Mode, seed uint64) MultipathConfig {
	return MultipathConfig{Scenario: "failover", Paths: 8, Fail: 2, FailPlane: -1, FailAt: 2 * time.Millisecond,
		Conns: 4, Messages: 3000, Size: 65536, Seed: seed, Transport: transport.Config{Mode: mode}}
}

func mustRun(t *testing.T, c MultipathConfig) *MultipathResult {
	t.Helper()
	r, err := RunMultipath(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFailoverRecovers (issue 3 acceptance): 2 of 8 paths blackholed
// mid-transfer. Nothing is lost, duplicated or corrupted; goodput after
// recovery is at least 70% of before; goodput is back within 200 us (we
// measure 80 us at a ~10 us loaded RTT: the path timeout is 3 RTTs of
// other paths' acks, then the lost packets are resent elsewhere); no
// connection stalls for more than 150 us.
func TestFailoverRecovers(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		r := mustRun(t, failover(transport.ModeMetaRoCE, seed))
		if r.Error != "" || r.MessagesLost != 0 || r.MessagesFailed != 0 {
			t.Fatalf("seed %d: %s, lost %d failed %d", seed, r.Error, r.MessagesLost, r.MessagesFailed)
		}
		if r.GoodputAfterGbps < 0.7*r.GoodputBeforeGbps {
			t.Errorf("seed %d: goodput after %.1f < 70%% of before %.1f", seed, r.GoodputAfterGbps, r.GoodputBeforeGbps)
		}
		if !r.Recovered || r.RecoveryUs > 200 {
			t.Errorf("seed %d: recovered %v in %.0f us, want within 200 us", seed, r.Recovered, r.RecoveryUs)
		}
		if r.ConnStallUs < 0 || r.ConnStallUs > 150 {
			t.Errorf("seed %d: a connection stalled %.0f us", seed, r.ConnStallUs)
		}
		if r.PathsRetired == 0 || r.PathTimeouts == 0 {
			t.Errorf("seed %d: dead paths were never noticed (retired %d, path timeouts %d)", seed, r.PathsRetired, r.PathTimeouts)
		}
		for _, p := range r.PerPath {
			if p.Failed && p.PacketsAfter > r.PerPath[2].PacketsAfter/10 {
				t.Errorf("seed %d: dead path %d still took %d packets after the fault", seed, p.Path, p.PacketsAfter)
			}
		}
	}
}

// TestRoCEv2BaselineStalls: the same fault under the rocev2 baseline (one
// hashed path per connection, no repathing): a connection hashed onto a
// dead path never completes anything again and fails after its
// retransmission timeouts, where metaroce's every connection is back
// within 150 us. The margin asserted: metaroce's longest stall is at
// least 100 times shorter than the baseline's (here: never vs 55 us).
func TestRoCEv2BaselineStalls(t *testing.T) {
	m := mustRun(t, failover(transport.ModeMetaRoCE, 1))
	b := mustRun(t, failover(transport.ModeRoCEv2, 1))
	if b.ConnStallUs >= 0 && b.ConnStallUs < 100*m.ConnStallUs {
		t.Fatalf("rocev2 stalled %.0f us, metaroce %.0f us: expected the baseline to stall far longer", b.ConnStallUs, m.ConnStallUs)
	}
	if b.MessagesFailed == 0 {
		t.Error("rocev2: no connection failed on the dead path")
	}
	if b.PathsRetired != 0 || b.ProbesSent != 0 {
		t.Error("rocev2 repathed")
	}
}

// TestDegradedPathCarriesLess: a path slowed to a quarter of its rate
// with four times its delay carries, from the fault on, less than half
// the mean of the healthy paths.
func TestDegradedPathCarriesLess(t *testing.T) {
	c := failover(transport.ModeMetaRoCE, 1)
	c.Scenario, c.SlowFactor = "degraded", 4
	r := mustRun(t, c)
	if r.Error != "" || r.MessagesLost != 0 {
		t.Fatal(r.Error)
	}
	var healthy float64
	for _, p := range r.PerPath[1:] {
		healthy += float64(p.PacketsAfter)
	}
	healthy /= float64(len(r.PerPath) - 1)
	if got := float64(r.PerPath[0].PacketsAfter); got > 0.5*healthy {
		t.Errorf("degraded path carried %.0f packets after the fault, healthy mean %.0f", got, healthy)
	}
	// A lossy path (5% each way) is avoided too, less strongly: the loss
	// term of the cost (32 x loss rate) makes it 2.6 times as dear, but
	// power-of-two choices still picks it whenever the other candidate
	// has much more in flight. Measured: 0.81 of the healthy mean.
	c.SlowFactor, c.PathLoss = 1, 0.05
	r = mustRun(t, c)
	healthy = 0
	for _, p := range r.PerPath[1:] {
		healthy += float64(p.PacketsAfter)
	}
	healthy /= float64(len(r.PerPath) - 1)
	if got := float64(r.PerPath[0].PacketsAfter); got > 0.9*healthy || r.MessagesLost != 0 {
		t.Errorf("lossy path carried %.0f packets after the fault, healthy mean %.0f (lost %d)", got, healthy, r.MessagesLost)
	}
}

// TestSprayEvenness: with nothing wrong, the scheduler spreads packets
// over a connection's logical paths with a coefficient of variation
// under 0.15 (power of two choices on in-flight x RTT).
func TestSprayEvenness(t *testing.T) {
	c := failover(transport.ModeMetaRoCE, 2)
	c.Fail, c.FailAt = 0, time.Hour
	r := mustRun(t, c)
	if r.Error != "" {
		t.Fatal(r.Error)
	}
	if r.LogicalCV > 0.15 {
		t.Errorf("logical-path CV %.3f, want <= 0.15", r.LogicalCV)
	}
}

// TestPlaneDown: with two planes, losing every path of plane 1 moves all
// traffic to plane 0 with nothing lost.
func TestPlaneDown(t *testing.T) {
	c := failover(transport.ModeMetaRoCE, 3)
	c.Planes, c.FailPlane = 2, 1
	r := mustRun(t, c)
	if r.Error != "" || r.MessagesLost != 0 || r.MessagesFailed != 0 || r.PathsFailed != 4 {
		t.Fatalf("%s lost %d failed %d paths failed %d", r.Error, r.MessagesLost, r.MessagesFailed, r.PathsFailed)
	}
	if r.GoodputAfterGbps < 0.7*r.GoodputBeforeGbps {
		t.Errorf("after %.1f before %.1f", r.GoodputAfterGbps, r.GoodputBeforeGbps)
	}
	for _, p := range r.PerPath {
		if p.Failed && p.PacketsAfter > 1000 {
			t.Errorf("dead plane's path %d carried %d packets after the fault", p.Path, p.PacketsAfter)
		}
	}
}

// TestGoBackNBaseline: under random loss the rocev2 baseline resends far
// more than selective repeat, as go-back-N does, and still delivers.
func TestGoBackNBaseline(t *testing.T) {
	link := DefaultLink
	link.Loss = 0.01
	run := func(m transport.Mode) *Result {
		r, err := RunLossy(LossyConfig{Op: "write", Messages: 300, Size: 65536, Outstanding: 8, Streams: 2,
			Seed: 4, Link: link, Transport: transport.Config{Mode: m}})
		if err != nil {
			t.Fatal(err)
		}
		if r.Error != "" || r.MessagesCompleted != 300 || r.CorruptDelivered != 0 {
			t.Fatalf("%s: %+v", m, r)
		}
		return r
	}
	sel, gbn := run(transport.ModeMetaRoCE), run(transport.ModeRoCEv2)
	if gbn.RetransmitRatio < 5*sel.RetransmitRatio {
		t.Errorf("go-back-N retransmit ratio %.4f, selective %.4f: want at least 5x", gbn.RetransmitRatio, sel.RetransmitRatio)
	}
}
