package bench

import (
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

func TestTCPPair(t *testing.T) {
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{})
	res, err := TCP(testCtx(t), p.A, p.B, TCPOptions{Duration: time.Second, Streams: 2})
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Gbps <= 0 || res.Received == 0 || res.Streams != 2 {
		t.Fatalf("nothing measured: %+v", res)
	}
	if res.Offloads != "tso:on gso:on gro:off" {
		t.Errorf("offloads %q on a default pair, want a new veth's tso:on gso:on gro:off", res.Offloads)
	}
}

// TestTCPLossThroughSwitch runs TCP through a star's switch without loss,
// then with 1% random drop, in the same topology: the lossy run must carry
// less. docs/platform.md records 13.1 against 5.4 Gb/s with iperf3 (offloads
// on), a margin no run-to-run noise closes.
func TestTCPLossThroughSwitch(t *testing.T) {
	needRoot(t)
	s := testnet.NewStar(t, 2, testnet.Config{})
	a, b := s.Hosts[0], s.Hosts[1]
	clean, err := TCP(testCtx(t), a, b, TCPOptions{Duration: time.Second})
	logResult(t, clean)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Switch.SetLoss(0.01); err != nil {
		t.Fatal(err)
	}
	lossy, err := TCP(testCtx(t), a, b, TCPOptions{Duration: time.Second})
	logResult(t, lossy)
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := s.Switch.Dropped()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("switch dropped %d packets; %.2f Gb/s clean, %.2f Gb/s at 1%% loss (%d retransmissions)",
		dropped, clean.Gbps, lossy.Gbps, lossy.Retransmits)
	if dropped == 0 {
		t.Fatal("the switch dropped nothing")
	}
	if !(lossy.Gbps < clean.Gbps) {
		t.Fatalf("1%% loss gave %.2f Gb/s, no less than %.2f without", lossy.Gbps, clean.Gbps)
	}
	if lossy.Retransmits == 0 {
		t.Error("no retransmissions through a lossy switch")
	}
}

func TestTCPNoOffloads(t *testing.T) {
	needRoot(t)
	s := testnet.NewStar(t, 2, testnet.Config{})
	res, err := TCP(testCtx(t), s.Hosts[0], s.Hosts[1], TCPOptions{Duration: time.Second, NoOffloads: true, IPv6: true})
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Offloads != "off" {
		t.Fatalf("offloads %q after NoOffloads, want off (notes %v)", res.Offloads, res.Notes)
	}
	if res.Gbps <= 0 {
		t.Fatalf("nothing measured: %+v", res)
	}
}

// TestTCPPingPong: every round trip is echoed intact (the check inside
// compares each echo's sequence byte) and the figures are ordered.
func TestTCPPingPong(t *testing.T) {
	needRoot(t)
	s := testnet.NewStar(t, 2, testnet.Config{})
	res, err := TCPPingPong(testCtx(t), s.Hosts[0], s.Hosts[1], TCPPingOptions{Count: 300})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", res)
	if res.RoundTrips != 300 || res.RTTMinUs <= 0 || res.RTTP50us < res.RTTMinUs || res.RTTP99us < res.RTTP50us {
		t.Fatalf("figures out of order: %+v", res)
	}
}
