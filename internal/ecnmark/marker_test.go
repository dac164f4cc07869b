package ecnmark

import (
	"encoding/binary"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// tc actions (linux/pkt_cls.h).
const (
	actOK   = 0
	actShot = 2
)

// ECN codepoints (RFC 3168).
const (
	notECT = 0
	ect1   = 1
	ect0   = 2
	ce     = 3
)

// load loads a configured program, closed when the test ends. It skips
// without root or when the kernel refuses BPF, and fails on anything else
// (a verifier rejection is a bug).
func load(t *testing.T, cfg Config) *Program {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("loading tc programs needs root (CAP_BPF, CAP_NET_ADMIN)")
	}
	p, err := Load(cfg)
	if errors.Is(err, unix.EPERM) || errors.Is(err, ebpf.ErrNotSupported) {
		t.Skipf("kernel refuses to load BPF: %v", err)
	}
	if err != nil {
		t.Fatalf("Load(%+v): %+v", cfg, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return p
}

// frame4 is an Ethernet + IPv4 + UDP frame of n bytes (n >= 42) whose IP
// header's ECN field is ecn, with a valid header checksum.
func frame4(n int, ecn byte) []byte {
	f := make([]byte, n)
	binary.BigEndian.PutUint16(f[12:], 0x0800)
	ip := f[14:]
	ip[0] = 0x45
	ip[1] = 0x28<<2 | ecn // DSCP 10 (AF11) kept through the mark
	binary.BigEndian.PutUint16(ip[2:], uint16(n-14))
	ip[8], ip[9] = 64, unix.IPPROTO_UDP
	copy(ip[12:16], []byte{10, 99, 0, 1})
	copy(ip[16:20], []byte{10, 99, 1, 2})
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip[:20]))
	binary.BigEndian.PutUint16(ip[20:], 4791)
	binary.BigEndian.PutUint16(ip[22:], 4792)
	binary.BigEndian.PutUint16(ip[24:], uint16(n-34))
	return f
}

// frame6 is an Ethernet + IPv6 + UDP frame of n bytes with traffic class
// ECN field ecn.
func frame6(n int, ecn byte) []byte {
	f := make([]byte, n)
	binary.BigEndian.PutUint16(f[12:], 0x86dd)
	ip := f[14:]
	binary.BigEndian.PutUint32(ip[0:], 6<<28|uint32(ecn)<<20)
	binary.BigEndian.PutUint16(ip[4:], uint16(n-54))
	ip[6], ip[7] = unix.IPPROTO_UDP, 64
	ip[8], ip[23] = 0xfd, 1  // fd00::1
	ip[24], ip[39] = 0xfd, 2 // fd00::2
	return f
}

func ipChecksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s > 0xffff {
		s = s>>16 + s&0xffff
	}
	return ^uint16(s)
}

// ecnOf returns the ECN field of a frame the program returned.
func ecnOf(f []byte) byte {
	if binary.BigEndian.Uint16(f[12:]) == 0x86dd {
		return byte(binary.BigEndian.Uint32(f[14:])>>20) & 3
	}
	return f[15] & 3
}

// run sends frame through the program once and returns the action and the
// frame as it leaves.
func run(t *testing.T, p *Program, frame []byte) (uint32, []byte) {
	t.Helper()
	out := make([]byte, len(frame)+256)
	opts := &ebpf.RunOptions{Data: frame, DataOut: out}
	act, err := p.objs.EcnMark.Run(opts)
	if err != nil {
		t.Fatalf("test run: %v", err)
	}
	return act, opts.DataOut
}

func counters(t *testing.T, p *Program) Counters {
	t.Helper()
	c, err := p.Counters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// slow is a port so slow (1 kb/s, 125 B/s) that it drains next to nothing
// while a test runs: every frame's effect on the queue is its length, less
// a byte per 8 ms (drift below, a bound for a slow machine). 1000-byte
// frames: the 4th finds 3000 bytes (not above the threshold), the 5th
// finds 4000 (above), the 7th would take the queue to 7000 (above the
// limit).
var slow = Config{RateBps: 1000, ECNBytes: 3000, LimitBytes: 6500}

// drift bounds what slow drains in a test: 100 bytes is 800 ms.
const drift = 100

func TestBelowThresholdNotMarked(t *testing.T) {
	p := load(t, slow)
	for i := range 4 {
		act, out := run(t, p, frame4(1000, ect0))
		if act != actOK || ecnOf(out) != ect0 {
			t.Fatalf("frame %d (queue %d B before it): action %d, ECN %d; want OK and ECT(0) unchanged", i, i*1000, act, ecnOf(out))
		}
	}
	c := counters(t, p)
	if c.Marked != 0 || c.Dropped != 0 || c.Packets != 4 || c.Bytes != 4000 || c.PeakBytes > 4000 || c.PeakBytes < 4000-drift {
		t.Fatalf("counters %+v: want 4 packets, 4000 bytes, peak 4000 (less drift), nothing marked or dropped", c)
	}
}

func TestAboveThresholdMarksECT(t *testing.T) {
	for _, tc := range []struct {
		name  string
		frame func(int, byte) []byte
		ecn   byte
	}{{"ipv4-ect0", frame4, ect0}, {"ipv4-ect1", frame4, ect1}, {"ipv4-ce", frame4, ce}, {"ipv6-ect0", frame6, ect0}} {
		t.Run(tc.name, func(t *testing.T) {
			p := load(t, slow)
			for range 4 {
				run(t, p, tc.frame(1000, notECT))
			}
			act, out := run(t, p, tc.frame(1000, tc.ecn))
			if act != actOK || ecnOf(out) != ce {
				t.Fatalf("5th frame (4000 B queued, threshold 3000): action %d, ECN %d; want OK and CE", act, ecnOf(out))
			}
			if binary.BigEndian.Uint16(out[12:]) == 0x0800 {
				if ipChecksum(out[14:34]) != 0 {
					t.Errorf("IPv4 header checksum wrong after marking: % x", out[14:34])
				}
				if out[15]>>2 != 0x28 {
					t.Errorf("DSCP changed: %#x", out[15]>>2)
				}
			}
			if c := counters(t, p); c.Marked != 1 || c.NotECT != 0 {
				t.Fatalf("counters %+v: want 1 marked, none unmarkable", c)
			}
		})
	}
}

func TestAboveThresholdNotECTUnmarked(t *testing.T) {
	p := load(t, slow)
	for range 4 {
		run(t, p, frame4(1000, notECT))
	}
	act, out := run(t, p, frame4(1000, notECT))
	if act != actOK || ecnOf(out) != notECT {
		t.Fatalf("non-ECT frame above the threshold: action %d, ECN %d; want OK, left not-ECT", act, ecnOf(out))
	}
	if c := counters(t, p); c.Marked != 0 || c.NotECT != 1 {
		t.Fatalf("counters %+v: want none marked, 1 unmarkable", c)
	}
}

func TestDropsAboveBuffer(t *testing.T) {
	p := load(t, slow)
	for i := range 6 {
		if act, _ := run(t, p, frame4(1000, ect0)); act != actOK {
			t.Fatalf("frame %d (queue %d B): action %d, want OK", i, i*1000, act)
		}
	}
	// 6000 queued: 1000 more would exceed 6500, 500 fits.
	if act, _ := run(t, p, frame4(1000, ect0)); act != actShot {
		t.Fatalf("frame over the limit: action %d, want SHOT (%d)", act, actShot)
	}
	if act, _ := run(t, p, frame4(500, ect0)); act != actOK {
		t.Fatalf("frame that fits after a drop: action %d, want OK", act)
	}
	c := counters(t, p)
	if c.Dropped != 1 || c.PeakBytes > 6500 || c.PeakBytes < 6500-drift || c.Packets != 8 || c.Marked != 3 {
		t.Fatalf("counters %+v: want 1 dropped, peak 6500 (less drift), 8 packets, 3 marked (frames 5, 6 and the 500-byte one)", c)
	}
	h, err := p.Histogram()
	if err != nil {
		t.Fatal(err)
	}
	if h.Total() != 8 {
		t.Fatalf("histogram holds %d packets, want 8", h.Total())
	}
	// The backlogs found: 0, 1000, ..., 5000, 6000, 6000. The median
	// (4th of 8) found 3000; the top found 6000; each read as the upper
	// edge of its bucket (width 6500/256).
	if q := h.Quantile(0.5); q < 3000-drift || q > 3000+h.Width {
		t.Errorf("median backlog %.0f, want 3000 to %.0f", q, 3000+h.Width)
	}
	if q := h.Quantile(1); q < 6000-drift || q > 6000+h.Width {
		t.Errorf("top backlog %.0f, want 6000 to %.0f", q, 6000+h.Width)
	}
}

// TestDrains checks the queue drains at the rate: at 8 Mb/s (1 byte per
// microsecond) a 6000-byte queue is gone after 20 ms.
func TestDrains(t *testing.T) {
	p := load(t, Config{RateBps: 8e6, ECNBytes: 3000, LimitBytes: 1 << 20})
	for range 6 {
		run(t, p, frame4(1000, ect0))
	}
	if c := counters(t, p); c.QueueBytes < 5000 {
		t.Fatalf("queue %d B after 6000 B back to back, want at least 5000 (the runs take well under 1 ms)", c.QueueBytes)
	}
	sleepMs(20)
	act, out := run(t, p, frame4(1000, ect0))
	if act != actOK || ecnOf(out) != ect0 {
		t.Fatalf("after 20 ms idle: action %d, ECN %d; want OK, unmarked", act, ecnOf(out))
	}
	if c := counters(t, p); c.QueueBytes != 1000 {
		t.Fatalf("queue %d B after draining and one frame, want 1000", c.QueueBytes)
	}
	if err := p.Reset(); err != nil {
		t.Fatal(err)
	}
	if c := counters(t, p); c != (Counters{}) {
		t.Fatalf("counters after Reset: %+v", c)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {RateBps: 1e6, ECNBytes: 100, LimitBytes: 100}, {RateBps: 200e9, LimitBytes: 1}, {RateBps: 1e6, ECNBytes: -1, LimitBytes: 10}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
	if err := (Config{RateBps: 1e9, ECNBytes: 30000, LimitBytes: 300000}).Validate(); err != nil {
		t.Error(err)
	}
}

func sleepMs(n int) { time.Sleep(time.Duration(n) * time.Millisecond) }

// TestHistBucketsMatchesC keeps HistBuckets and the C program's
// HIST_BUCKETS (the map's size) the same number.
func TestHistBucketsMatchesC(t *testing.T) {
	spec, err := loadMarker()
	if err != nil {
		t.Fatal(err)
	}
	if n := spec.Maps[markerMapBacklogHist].MaxEntries; n != HistBuckets {
		t.Fatalf("backlog_hist has %d entries, HistBuckets is %d", n, HistBuckets)
	}
}
