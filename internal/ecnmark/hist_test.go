package ecnmark

import "testing"

// TestHistogramQuantile: a quantile is the upper edge of the bucket that
// holds it, at most one bucket width above the backlog; Sub takes an
// earlier reading away.
func TestHistogramQuantile(t *testing.T) {
	h := Histogram{Width: 1000, Counts: make([]uint64, 10)}
	if q := h.Quantile(0.5); q != 0 {
		t.Fatalf("empty histogram: quantile %v, want 0", q)
	}
	h.Counts[0], h.Counts[3], h.Counts[9] = 90, 9, 1 // 100 packets
	for _, tc := range []struct{ q, want float64 }{{0, 1000}, {0.5, 1000}, {0.9, 1000}, {0.91, 4000}, {0.99, 4000}, {1, 10000}} {
		if got := h.Quantile(tc.q); got != tc.want {
			t.Errorf("quantile %v = %v, want %v", tc.q, got, tc.want)
		}
	}
	d := h.Sub(Histogram{Width: 1000, Counts: []uint64{90}})
	if d.Total() != 10 || d.Quantile(0.5) != 4000 {
		t.Errorf("after Sub: %d packets, median %v; want 10 and 4000", d.Total(), d.Quantile(0.5))
	}
}
