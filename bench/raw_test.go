package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

func logResult(t *testing.T, r any) {
	t.Helper()
	b, _ := json.Marshal(r)
	t.Logf("%s", b)
}

// checkRaw asserts what a raw run must show, whatever the machine's speed:
// verified frames at B, a clean sequence check, answered probes.
func checkRaw(t *testing.T, res RawResult, err error, backend string) {
	t.Helper()
	logResult(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if res.Backend != backend {
		t.Errorf("backend %q, want %q", res.Backend, backend)
	}
	if !res.SeqOK || res.BadFrames != 0 || res.Reordered != 0 {
		t.Errorf("sequence check failed: %d bad, %d reordered", res.BadFrames, res.Reordered)
	}
	if res.PPS <= 0 || res.Gbps <= 0 || res.Received == 0 || res.Received > res.Sent {
		t.Errorf("rate: %.0f pps, %.3f Gb/s, %d of %d received", res.PPS, res.Gbps, res.Received, res.Sent)
	}
	// The blaster's thread spins in its transmit calls the whole window:
	// it has CPU per frame, and on copy-mode veth most of it in the kernel
	// (the receiving side's path runs inside the call). 0.3 leaves room
	// for a window of few clock ticks.
	if res.SenderCPUNsPerFrame <= 0 || res.SenderKernelShare < 0.3 || res.SenderKernelShare > 1 {
		t.Errorf("sender CPU %.0f ns a frame, kernel share %.2f", res.SenderCPUNsPerFrame, res.SenderKernelShare)
	}
	if res.Lost != res.Sent-res.Received {
		t.Errorf("lost %d != sent %d - received %d", res.Lost, res.Sent, res.Received)
	}
	if res.RoundTrips == 0 || res.LatP50 <= 0 || res.LatP99 < res.LatP50 || res.LatMin > res.LatP50 {
		t.Errorf("latency: %d round trips, p50 %.1f us, p99 %.1f us, min %.1f us",
			res.RoundTrips, res.LatP50, res.LatP99, res.LatMin)
	}
	if res.Bind != "copy" {
		t.Errorf("bind %q on veth, want copy", res.Bind)
	}
	if runtime.NumCPU() >= 2 && !res.Pinned {
		t.Errorf("%d CPUs but the threads were not pinned", runtime.NumCPU())
	}
}

// noXDPLeft fails if a program is still attached to a host's port.
func noXDPLeft(t *testing.T, hosts ...*testnet.Host) {
	t.Helper()
	for _, h := range hosts {
		out, err := h.Run("ip", "-d", "link", "show", "dev", h.Port.Name)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, "prog/xdp") || strings.Contains(out, "xdp ") {
			t.Errorf("an XDP program is still attached to %s:\n%s", h.Port, out)
		}
	}
}

// goroutinesSettle waits for the goroutine count to come back to n (the
// namespace helpers' goroutines end just after their results are in).
func goroutinesSettle(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > n {
		buf := make([]byte, 1<<16)
		t.Errorf("%d goroutines left running (had %d):\n%s", g, n, buf[:runtime.Stack(buf, true)])
	}
}

func TestRawAFXDPPair(t *testing.T) {
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{})
	g := runtime.NumGoroutine()
	res, err := RawAFXDP(testCtx(t), p.A, p.B, RawOptions{Duration: time.Second})
	checkRaw(t, res, err, "xsk")
	if res.FrameSize != DefaultFrameSize || res.XDPMode != "native" {
		t.Errorf("frame size %d, xdp mode %q: want %d, native", res.FrameSize, res.XDPMode, DefaultFrameSize)
	}
	noXDPLeft(t, p.A, p.B)
	goroutinesSettle(t, g)
}

// TestRawAFXDPStarIPv6 runs through a star's switch, which routes the
// frames (A addresses its next hop), over IPv6: the reflector's swap must
// hold for both, and the switch must not reorder.
func TestRawAFXDPStarIPv6(t *testing.T) {
	needRoot(t)
	s := testnet.NewStar(t, 2, testnet.Config{})
	res, err := RawAFXDP(testCtx(t), s.Hosts[0], s.Hosts[1], RawOptions{Duration: time.Second, IPv6: true, RoundTrips: 2000})
	checkRaw(t, res, err, "xsk")
	if !res.IPv6 || res.ProbeSize != 82 {
		t.Errorf("ipv6 %v, probe size %d: want true, 82", res.IPv6, res.ProbeSize)
	}
}

// TestRawAsavie runs the asavie comparison, then our own layer on the same
// hosts: the second run can bind the queue only if the first released its
// socket (see closeAsavie).
func TestRawAsavie(t *testing.T) {
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{})
	g := runtime.NumGoroutine()
	res, err := RawAsavie(testCtx(t), p.A, p.B, RawOptions{Duration: time.Second})
	checkRaw(t, res, err, "asavie")
	noXDPLeft(t, p.A, p.B)
	ours, err := RawAFXDP(testCtx(t), p.A, p.B, RawOptions{Duration: time.Second, RoundTrips: 1000})
	checkRaw(t, ours, err, "xsk")
	t.Logf("receive rate xsk/asavie: %.2f", ours.PPS/res.PPS)
	goroutinesSettle(t, g)
	ms, err := socketMappings()
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 0 {
		t.Errorf("socket mappings left: %v", ms)
	}
}

// TestRawCancel: a cancelled context ends a long run promptly, with every
// resource released (the next run on the same hosts binds and attaches).
func TestRawCancel(t *testing.T) {
	needRoot(t)
	p := testnet.NewPair(t, testnet.Config{})
	for _, f := range []func(context.Context, *testnet.Host, *testnet.Host, RawOptions) (RawResult, error){RawAFXDP, RawAsavie} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		res, err := f(ctx, p.A, p.B, RawOptions{Duration: time.Minute})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %v, want the context's", res.Backend, err)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("%s: took %v to give up", res.Backend, el)
		}
		noXDPLeft(t, p.A, p.B)
	}
	res, err := RawAFXDP(testCtx(t), p.A, p.B, RawOptions{Duration: 200 * time.Millisecond, RoundTrips: 100})
	checkRaw(t, res, err, "xsk")
}

func TestRawOptionsRefused(t *testing.T) {
	for _, o := range []RawOptions{
		{FrameSize: 1515},            // beyond MTU 1500 and the Ethernet header
		{MTU: 4000, FrameSize: 4015}, // beyond MTU 4000 likewise
		{MTU: 9217},                  // beyond the largest MTU
		{FrameSize: 40},              // shorter than the headers
		{Duration: -time.Second},     // negative
		{ProbeSize: 70, IPv6: true},  // under 62+20
	} {
		// The options are checked before the hosts, so empty hosts do.
		res, err := RawAFXDP(context.Background(), &testnet.Host{}, &testnet.Host{}, o)
		if err == nil || strings.Contains(err.Error(), "two hosts") {
			t.Errorf("%+v: error %v, result %+v", o, err, res)
		}
	}
}

// TestRawAFXDPJumbo runs the raw baseline with multi-buffer frames, at
// MTU 9000 (three-descriptor chains) and 4200 (two), as the demo does
// when MetaRoCE runs at that MTU: every frame verified at the sink.
func TestRawAFXDPJumbo(t *testing.T) {
	needRoot(t)
	for _, mtu := range []int{9000, 4200} {
		t.Run(fmt.Sprint(mtu), func(t *testing.T) {
			p := testnet.NewPair(t, testnet.Config{Link: testnet.LinkConfig{MTU: mtu}})
			res, err := RawAFXDP(testCtx(t), p.A, p.B, RawOptions{Duration: time.Second, MTU: mtu, RoundTrips: 1000})
			checkRaw(t, res, err, "xsk")
			want := map[int]int{9000: 3, 4200: 2}[mtu]
			if res.FrameSize != mtu+14 || res.MTU != mtu || !res.MultiBuffer || res.Chain != want || res.XDPMode != "native" {
				t.Errorf("frame %d, mtu %d, multi-buffer %v, chain %d, xdp %q: want %d, %d, true, %d, native",
					res.FrameSize, res.MTU, res.MultiBuffer, res.Chain, res.XDPMode, mtu+14, mtu, want)
			}
			noXDPLeft(t, p.A, p.B)
			if _, err := RawAsavie(testCtx(t), p.A, p.B, RawOptions{Duration: time.Second, MTU: mtu}); err == nil ||
				!strings.Contains(err.Error(), "single-buffer") {
				t.Errorf("asavie at mtu %d: %v, want a refusal", mtu, err)
			}
		})
	}
}
