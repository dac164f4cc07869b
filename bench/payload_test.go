package bench

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/wire/frame"
)

func testEndpoints(v6 bool) frame.Endpoints {
	ep := frame.Endpoints{
		SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}, DstMAC: [6]byte{2, 0, 0, 0, 0, 2},
		Src: netip.MustParseAddr("10.99.0.1"), Dst: netip.MustParseAddr("10.99.1.2"),
		SrcPort: 49152, DstPort: 4792,
	}
	if v6 {
		ep.Src, ep.Dst = netip.MustParseAddr("fd00:99::1"), netip.MustParseAddr("fd00:99:0:1::2")
	}
	return ep
}

// TestStampKeepsChecksum: a frame built once and then stamped with any
// sequence number still parses with every checksum verified, and reads
// back the number. That is what lets the blaster write 16 bytes a packet.
func TestStampKeepsChecksum(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, size := range []int{frame.HeaderLen(v6) + payloadLen, 64 + 18, 1514} {
			tm, err := newTemplate(testEndpoints(v6), size, 0xbeef)
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, 2048)
			if _, err := tm.build(buf, kindBlast, 0); err != nil {
				t.Fatal(err)
			}
			f := buf[:size]
			seqs := []uint64{0, 1, 0xffff, 0x10000, 1<<63 - 1, ^uint64(0)}
			for range 200 {
				seqs = append(seqs, rand.Uint64())
			}
			for _, seq := range seqs {
				stamp(f[tm.hdrLen:], seq)
				var p frame.Frame
				if err := frame.Parse(f, &p); err != nil {
					t.Fatalf("v6 %v size %d seq %#x: %v", v6, size, seq, err)
				}
				if p.Endpoints != tm.ep || len(p.Payload) != size-tm.hdrLen {
					t.Fatalf("parsed %+v, %d-byte payload", p.Endpoints, len(p.Payload))
				}
				got, ok := tm.check(f, kindBlast, size)
				if !ok || got != seq {
					t.Fatalf("check: %#x %v, want %#x", got, ok, seq)
				}
			}
		}
	}
}

func TestCheckRejects(t *testing.T) {
	tm, err := newTemplate(testEndpoints(false), 100, 7)
	if err != nil {
		t.Fatal(err)
	}
	good := make([]byte, 100)
	if _, err := tm.build(good, kindBlast, 42); err != nil {
		t.Fatal(err)
	}
	if seq, ok := tm.check(good, kindBlast, 100); !ok || seq != 42 {
		t.Fatalf("good frame: %d %v", seq, ok)
	}
	for name, mod := range map[string]func(f []byte) []byte{
		"other run":   func(f []byte) []byte { f[tm.hdrLen+offTag]++; return f },
		"other kind":  func(f []byte) []byte { f[tm.hdrLen+offKind] = kindProbe; return f },
		"torn seq":    func(f []byte) []byte { f[tm.hdrLen+offSeq+7] ^= 1; return f },
		"torn inv":    func(f []byte) []byte { f[tm.hdrLen+offInv] ^= 0x80; return f },
		"short":       func(f []byte) []byte { return f[:99] },
		"zero frame":  func(f []byte) []byte { clear(f); return f },
		"stale probe": func(f []byte) []byte { f[tm.hdrLen+offKind] = 0; return f },
	} {
		f := mod(append([]byte(nil), good...))
		if _, ok := tm.check(f, kindBlast, 100); ok {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestTurnAround: the reflected probe has swapped addresses, ports kept,
// checksums still valid, and still verifies as the same probe.
func TestTurnAround(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		tm, err := newTemplate(testEndpoints(v6), frame.HeaderLen(v6)+payloadLen+2, 1)
		if err != nil {
			t.Fatal(err)
		}
		f := make([]byte, tm.frameLen)
		if _, err := tm.build(f, kindProbe, 9); err != nil {
			t.Fatal(err)
		}
		turnAround(f, v6)
		var p frame.Frame
		if err := frame.Parse(f, &p); err != nil {
			t.Fatalf("v6 %v: reflected frame: %v", v6, err)
		}
		ep := tm.ep
		want := frame.Endpoints{SrcMAC: ep.DstMAC, DstMAC: ep.SrcMAC, Src: ep.Dst, Dst: ep.Src, SrcPort: ep.SrcPort, DstPort: ep.DstPort}
		if p.Endpoints != want {
			t.Fatalf("v6 %v: reflected %+v, want %+v", v6, p.Endpoints, want)
		}
		if seq, ok := tm.check(f, kindProbe, tm.frameLen); !ok || seq != 9 {
			t.Fatalf("v6 %v: reflected probe reads %d %v", v6, seq, ok)
		}
	}
}

func TestSeqChecker(t *testing.T) {
	var c seqChecker
	for _, s := range []struct {
		seq uint64
		ok  bool
	}{{0, true}, {1, true}, {5, true}, {3, true}, {5, true}, {6, false}, {9, true}} {
		c.observe(s.seq, s.ok)
	}
	if c.received != 4 || c.reorder != 2 || c.bad != 1 || c.next != 10 {
		t.Fatalf("%+v: want 4 received (0 1 5 9), 2 reordered (3, 5 again), 1 bad", c)
	}
}

// TestHotPathNoAllocs: what runs per packet allocates nothing.
func TestHotPathNoAllocs(t *testing.T) {
	tm, err := newTemplate(testEndpoints(false), 1514, 3)
	if err != nil {
		t.Fatal(err)
	}
	f := make([]byte, 2048)
	if _, err := tm.build(f, kindBlast, 0); err != nil {
		t.Fatal(err)
	}
	f = f[:1514]
	var c seqChecker
	seq := uint64(0)
	if a := testing.AllocsPerRun(1000, func() {
		stamp(f[tm.hdrLen:], seq)
		c.observe(tm.check(f, kindBlast, 1514))
		turnAround(f, false)
		seq++
	}); a != 0 {
		t.Fatalf("%v allocations per packet", a)
	}
}

func TestPercentile(t *testing.T) {
	s := make([]time.Duration, 100)
	for i := range s {
		s[i] = time.Duration(i+1) * time.Microsecond
	}
	if p := percentile(s, 0.5); p != 50*time.Microsecond {
		t.Errorf("p50 %v", p)
	}
	if p := percentile(s, 0.99); p != 99*time.Microsecond {
		t.Errorf("p99 %v", p)
	}
	if p := percentile(s[:1], 0.99); p != time.Microsecond {
		t.Errorf("p99 of one %v", p)
	}
}

func TestNewSockDrops(t *testing.T) {
	// The kernel counts an empty-fill-ring drop in rx_dropped too.
	if d := newSockDrops(10, 2, 10, 0); d != (sockDrops{fillEmpty: 10, rxFull: 2}) || d.total() != 12 {
		t.Errorf("%+v", d)
	}
	if d := newSockDrops(10, 0, 13, 1); d.other != 4 || d.total() != 14 {
		t.Errorf("%+v", d)
	}
}

// TestPathEndpoints: a pair's path is its two ends; a star's adds the two
// switch ports between them.
func TestPathEndpoints(t *testing.T) {
	link := func(a, b string) (*testnet.Endpoint, *testnet.Endpoint) {
		x, y := &testnet.Endpoint{Name: a}, &testnet.Endpoint{Name: b}
		x.Peer, y.Peer = y, x
		return x, y
	}
	pa, pb := link("a", "b")
	if got := pathEndpoints(&testnet.Host{Port: pa}, &testnet.Host{Port: pb}); len(got) != 2 || got[0] != pa || got[1] != pb {
		t.Errorf("pair: %v", got)
	}
	h0, s0 := link("h0", "s0")
	h1, s1 := link("h1", "s1")
	got := pathEndpoints(&testnet.Host{Port: h0}, &testnet.Host{Port: h1})
	if len(got) != 4 || got[0] != h0 || got[1] != s0 || got[2] != s1 || got[3] != h1 {
		t.Errorf("star: %v", got)
	}
}

func TestOptionsDefaults(t *testing.T) {
	o, err := RawOptions{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.FrameSize != 1514 || o.Duration != 2*time.Second || o.RoundTrips != DefaultRoundTrips ||
		o.ProbeSize != 64 || o.Port != 4792 || o.TxSkbBudget != 256 {
		t.Errorf("raw defaults %+v", o)
	}
	if o, _ := (RawOptions{IPv6: true}).withDefaults(); o.ProbeSize != 82 {
		t.Errorf("IPv6 probe %d, want 82", o.ProbeSize)
	}
	to, err := TCPOptions{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if to.Duration != 2*time.Second || to.Streams != 1 || to.Port != 5201 || to.WriteSize != 128<<10 {
		t.Errorf("tcp defaults %+v", to)
	}
	if _, err := (TCPOptions{Streams: 65}).withDefaults(); err == nil {
		t.Error("65 streams accepted")
	}
}
