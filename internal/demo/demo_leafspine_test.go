package demo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

// TestLeafSpineDemo runs a short leaf-spine demo (root: namespaces, XDP)
// and checks what the demo claims: metaroce's packets spread over all four
// spines, the cut spine carries nothing after the cut, nothing is lost,
// every byte is verified, and goodput comes back after the cut. It asserts
// no speeds: the machine is shared, and only "more than zero" is safe.
// It runs at MTU 1500 and at 9000, where the spines must have forwarded
// jumbo frames (their mean packet, acks included, above 1500 bytes).
func TestLeafSpineDemo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the leaf-spine demo needs root (network namespaces, XDP, AF_XDP)")
	}
	if underRace {
		// Measured on 6.18.44-fc (no arrival stamps: docs/platform.md):
		// under the detector no goodput after the cut and no recovery in
		// the test's 1.2 s, 3 runs of 3, while the plain pass passes; a
		// timing test, and the plain pass is the one that counts.
		t.Skip("under the race detector: the demo's figures are timings; the plain test pass runs it")
	}
	for _, c := range []struct {
		mtu, flows int
	}{{1500, 4}, {9000, 2}} {
		t.Run(fmt.Sprintf("mtu%d", c.mtu), func(t *testing.T) {
			testLeafSpineDemo(t, c.mtu, c.flows)
		})
	}
}

func testLeafSpineDemo(t *testing.T, mtu, flows int) {
	var out bytes.Buffer
	args := strings.Fields(fmt.Sprintf("-topology leafspine -json -before 800ms -after 1200ms -tcp-flows %d -mtu %d", flows, mtu))
	if err := Run(args, &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var r LeafSpineResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	t.Logf("goodput before %.3f during %.3f after %.3f Gb/s, recovery %.0f ms, spines %+v",
		r.GoodputBefore, r.GoodputDuring, r.GoodputAfter, r.RecoveryMs, r.SpinePackets)
	if r.MTU != mtu {
		t.Errorf("mtu %d in the JSON, want %d", r.MTU, mtu)
	}
	if want := payloadCeiling(float64(r.SpineRateBps)*float64(r.Spines), mtu, false); r.PayloadCeiling != want {
		t.Errorf("payload ceiling %v, want %v at MTU %d", r.PayloadCeiling, want, mtu)
	}
	if !r.DataVerified || r.MessagesLost != 0 || r.Messages == 0 {
		t.Errorf("verified %v, %d of %d messages lost", r.DataVerified, r.MessagesLost, r.Messages)
	}
	if len(r.SpinePackets) != 4 {
		t.Fatalf("%d spines counted, want 4", len(r.SpinePackets))
	}
	for _, s := range r.SpinePackets {
		// 64 paths over 4 spines: 16 +- 3.5 entropy values on each (one
		// standard deviation of the binomial); 8% and 45% are 5 and 29
		// values, more than 3 deviations out. Traffic per path is not
		// equal either (paths are retired and redrawn), hence the margin.
		if s.Share < 0.08 || s.Share > 0.45 {
			t.Errorf("spine %d carried %.0f%% of the packets before the cut, want 8%% to 45%%", s.Spine, 100*s.Share)
		}
	}
	if r.CutSpineAfter != 0 {
		t.Errorf("the cut spine forwarded %d packets after the cut", r.CutSpineAfter)
	}
	if r.GoodputBefore <= 0 || r.GoodputAfter <= 0 {
		t.Errorf("goodput before %v after %v, want both measured", r.GoodputBefore, r.GoodputAfter)
	}
	// No more payload than the spines carry (2% for the sampling's edges).
	after := r.PayloadCeiling * float64(r.Spines-1) / float64(r.Spines)
	if r.GoodputBefore > 1.02*r.PayloadCeiling || r.GoodputAfter > 1.02*after {
		t.Errorf("goodput before %v after %v, above the spines' payload ceiling %v and %v", r.GoodputBefore, r.GoodputAfter, r.PayloadCeiling, after)
	}
	if !r.Recovered || r.RecoveryMs <= 0 {
		t.Errorf("no recovery measured: recovered %v, recovery_ms %v", r.Recovered, r.RecoveryMs)
	}
	if mtu > 1500 {
		var pk, by uint64
		for _, s := range r.SpinePackets {
			pk, by = pk+s.Before, by+s.BytesBefore
		}
		if pk == 0 || by/pk <= 1500 {
			t.Errorf("MTU %d: the spines forwarded %d bytes in %d packets before the cut, want a mean above 1500", mtu, by, pk)
		}
	}
	if r.TCP == nil || r.TCP.GoodputBefore <= 0 || len(r.TCP.PerFlow) != flows {
		t.Errorf("TCP comparison missing or empty: %+v (errors %v)", r.TCP, r.Errors)
	}
	// Blackholed TCP flows stall and the others do not: exactly the flows
	// the leaves' route lookup puts on the cut spine.
	if r.TCP != nil && r.TCP.Stalled != r.TCP.OnCutSpine {
		t.Errorf("TCP: %d flows stalled, %d hashed onto the cut spine: %+v", r.TCP.Stalled, r.TCP.OnCutSpine, r.TCP.PerFlow)
	}
	if len(r.Errors) > 0 {
		t.Errorf("errors: %v", r.Errors)
	}
}

// TestPayloadCeiling: a full 1500-byte packet over IPv4 is a 1494-byte
// frame (1384 bytes of payload, 64 of header, 4 of CRC, UDP, IPv4 and
// Ethernet) and over IPv6 a 1514-byte one; at MTU 9000 the payload is
// 8884 bytes, in an 8994- or 9014-byte frame.
func TestPayloadCeiling(t *testing.T) {
	for _, c := range []struct {
		mtu  int
		ipv6 bool
		want float64
	}{
		{1500, false, 1384.0 / 1494}, {1500, true, 1384.0 / 1514},
		{9000, false, 8884.0 / 8994}, {9000, true, 8884.0 / 9014},
	} {
		if got := payloadCeiling(1e9, c.mtu, c.ipv6); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("MTU %d, IPv6 %v: %v Gb/s of payload per Gb/s, want %v", c.mtu, c.ipv6, got, c.want)
		}
	}
}
