package perf

import "testing"

// TestCheckMessage: a landed message passes only with its own stamp and
// the writer's bytes; a stale slot (an earlier message), one flipped bit
// or nothing placed (zeros) fail, at every size including those shorter
// than the stamp.
func TestCheckMessage(t *testing.T) {
	p := newPatterns(7, 1, 4, 4096)
	for _, size := range []int{1, 5, 8, 9, 100, 4096} {
		want := p.slot(0, 3)
		msg := make([]byte, size)
		copy(msg, want)
		stamp(msg, 11)
		if !checkMessage(msg, want, 11) {
			t.Fatalf("size %d: the right message refused", size)
		}
		if checkMessage(msg, want, 7) {
			t.Errorf("size %d: the stamp of another message accepted", size)
		}
		bad := append([]byte(nil), msg...)
		bad[size-1] ^= 0x10
		if checkMessage(bad, want, 11) {
			t.Errorf("size %d: a flipped bit accepted", size)
		}
		if checkMessage(make([]byte, size), want, 11) {
			t.Errorf("size %d: an empty slot accepted", size)
		}
	}
}

// TestGeometry: the writer's window never exceeds its slots less one
// (so a slot is reused only after its message completed), and the
// defaults give every message of the demo's run its own remote slot.
func TestGeometry(t *testing.T) {
	g := newGeometry(perfOpts{test: "write-bw", size: 65536, iters: 4096, qps: 1, depth: 128})
	if g.remote != 4096 || g.depth != 128 || g.local != 129 {
		t.Fatalf("%+v", g)
	}
	g = newGeometry(perfOpts{test: "write-bw", all: true, iters: 1000, qps: 4, depth: 128})
	if g.depth >= g.local || g.local*g.stride*4 > slotBudget || g.remote*g.stride*4 > slotBudget {
		t.Fatalf("%+v over budget or window", g)
	}
}

// TestReadLanded: a READ's local slot passes only with the remote slot's
// bytes; nothing placed (the zeroed slot) or another slot's bytes fail,
// whatever the seeds (the old check passed when both sides used the
// same seed, whatever arrived).
func TestReadLanded(t *testing.T) {
	p := newPatterns(1, 1, 2, 4096)
	for _, size := range []int{1, 64, 4096} {
		got := make([]byte, size)
		if readLanded(got, p.slot(0, 0)) {
			t.Errorf("size %d: nothing placed, accepted", size)
		}
		copy(got, p.slot(0, 1))
		if readLanded(got, p.slot(0, 0)) && size > 1 {
			t.Errorf("size %d: the wrong slot accepted", size)
		}
		copy(got, p.slot(0, 0))
		if !readLanded(got, p.slot(0, 0)) {
			t.Errorf("size %d: the right bytes refused", size)
		}
	}
}

// TestWindowStats: windows with nothing completed are counted as
// stalled, the partial last window is left out, and the median is a
// window's, not the average's.
func TestWindowStats(t *testing.T) {
	var r Row
	r.windowStats([]int64{125000, 0, 125000, 125000, 0, 999}) // 1 Gb/s windows, two empty, a partial one
	if r.Windows != 5 || r.StalledWindows != 2 || r.WindowP50Gbps != 1 || r.WindowP10Gbps != 0 || r.BWPeakGbps != 1 {
		t.Fatalf("%+v", r)
	}
}
