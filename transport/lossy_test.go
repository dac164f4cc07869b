package transport_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// retransmitBound is the documented bound (docs/spec.md §8.6) on
// retransmissions per first transmission under independent random loss p
// of data packets: selective repeat resends each lost packet, and each
// resend is lost with p again, so the expectation is p/(1-p); we allow 30%
// over it for ack loss and timeouts, plus a constant for small runs.
// Go-back-N would resend the whole window behind each loss, tens of times
// more.
func retransmitBound(p float64) float64 { return 1.3*p/(1-p) + 0.005 }

// TestLossyExactlyOnce is the acceptance scenario of §8: across ops, seeds
// and loss up to 10% with reordering, duplication and corruption on, every
// message completes exactly once, byte-exact, and retransmissions stay
// within the selective-repeat bound.
func TestLossyExactlyOnce(t *testing.T) {
	losses := []float64{0, 0.01, 0.05, 0.10}
	for _, op := range []string{"write", "read", "send"} {
		for _, loss := range losses {
			for seed := uint64(1); seed <= 3; seed++ {
				name := fmt.Sprintf("%s/loss=%v/seed=%d", op, loss, seed)
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					link := sim.DefaultLink
					link.Loss, link.Reorder, link.Dup, link.Corrupt = loss, 0.1, 0.01, 0.01
					res, err := sim.RunLossy(sim.LossyConfig{Op: op, Messages: 150, Size: 65536,
						Outstanding: 16, Streams: 4, Seed: seed, Link: link, Limit: 10 * time.Second})
					if err != nil {
						t.Fatal(err)
					}
					checkExactlyOnce(t, res)
					p := 1 - (1-loss)*(1-link.Corrupt)
					if b := retransmitBound(p); res.RetransmitRatio > b {
						t.Errorf("retransmit ratio %.4f above the selective-repeat bound %.4f (p=%.3f)", res.RetransmitRatio, b, p)
					}
				})
			}
		}
	}
}

func checkExactlyOnce(t *testing.T, res *sim.Result) {
	t.Helper()
	if res.Error != "" {
		t.Fatalf("run failed: %s", res.Error)
	}
	if res.MessagesCompleted != res.Messages || res.MessagesLost != 0 || res.MessagesFailed != 0 {
		t.Errorf("completed %d of %d, lost %d, failed %d", res.MessagesCompleted, res.Messages, res.MessagesLost, res.MessagesFailed)
	}
	if res.DuplicatesDelivered != 0 || res.CorruptDelivered != 0 {
		t.Errorf("duplicates delivered %d, corrupt delivered %d", res.DuplicatesDelivered, res.CorruptDelivered)
	}
	if want := int64(res.Messages) * int64(res.Size); res.BytesVerified != want {
		t.Errorf("bytes verified %d, want %d", res.BytesVerified, want)
	}
}

// TestJumboMTU runs the lossy scenario at MTU 9000 and 1500: both complete
// and the jumbo run needs about six times fewer packets.
func TestJumboMTU(t *testing.T) {
	var sent [2]uint64
	for i, mtu := range []int{1500, 9000} {
		link := sim.DefaultLink
		link.Loss, link.Reorder, link.Corrupt = 0.02, 0.05, 0.005
		res, err := sim.RunLossy(sim.LossyConfig{Op: "write", Messages: 100, Size: 1 << 20,
			Outstanding: 4, Streams: 2, Seed: 5, Link: link, Transport: transport.Config{MTU: mtu}})
		if err != nil {
			t.Fatal(err)
		}
		checkExactlyOnce(t, res)
		sent[i] = res.PacketsSent - res.PacketsRetransmit
	}
	ratio := float64(sent[0]) / float64(sent[1])
	want := float64(9000-116) / float64(1500-116)
	if math.Abs(ratio-want) > 0.2 {
		t.Errorf("first transmissions 1500/9000 = %.2f, want about %.2f", ratio, want)
	}
}

// TestGoodputCleanLink: on a clean link one connection fills it, up to
// the header overhead (payload / wire bytes per packet).
func TestGoodputCleanLink(t *testing.T) {
	res, err := sim.RunLossy(sim.LossyConfig{Op: "write", Messages: 400, Size: 65536,
		Outstanding: 16, Streams: 4, Seed: 1, Link: sim.DefaultLink})
	if err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, res)
	mp := float64(transport.Defaults.MTU - 116)
	ceiling := 100 * mp / (mp + 64 + 4 + sim.WireOverhead)
	if res.GoodputGbps < 0.9*ceiling {
		t.Errorf("goodput %.1f Gb/s, want at least 90%% of the %.1f Gb/s ceiling", res.GoodputGbps, ceiling)
	}
	if res.PacketsRetransmit != 0 || res.Timeouts != 0 {
		t.Errorf("clean link: %d retransmissions, %d timeouts", res.PacketsRetransmit, res.Timeouts)
	}
	// Ack coalescing: one ack per AckEvery data packets per path, plus
	// one per message for the ack-request on its last packet.
	perMsg := float64(res.Messages) / float64(res.PacketsSent)
	if got, max := float64(res.AcksSent)/float64(res.PacketsSent), 1/float64(transport.Defaults.AckEvery)+perMsg+0.02; got > max {
		t.Errorf("acks per data packet %.3f, want at most %.3f", got, max)
	}
}

// TestLossyWithEachController: with every congestion controller wired in,
// the lossy scenario still completes exactly once and byte-exact (the
// controllers change timing, never correctness).
func TestLossyWithEachController(t *testing.T) {
	for _, cc := range []string{"none", "metaroce", "receiver-hint", "dcqcn"} {
		t.Run(cc, func(t *testing.T) {
			link := sim.DefaultLink
			link.Loss, link.Reorder, link.Corrupt = 0.02, 0.05, 0.005
			res, err := sim.RunLossy(sim.LossyConfig{Op: "write", Messages: 200, Size: 65536, Outstanding: 16,
				Streams: 4, Seed: 3, Link: link, Transport: transport.Config{Congestion: cc}, Limit: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			checkExactlyOnce(t, res)
			t.Logf("%s: %.1f Gb/s, retransmit ratio %.4f, timeouts %d", cc, res.GoodputGbps, res.RetransmitRatio, res.Timeouts)
		})
	}
}
