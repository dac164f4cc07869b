package transport

import (
	"testing"
	"time"
)

// TestHistogramBuckets: a sample lands in the first bucket whose bound is
// at least the sample, and what exceeds every bound in the overflow.
func TestHistogramBuckets(t *testing.T) {
	cases := []struct {
		d    Duration
		want int
	}{
		{-5, 0}, {0, 0}, {1, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {2049, 2},
		{10 * time.Microsecond, 4}, // bounds 8.192 us, 16.384 us
		{BucketBound(HistogramBuckets - 1), HistogramBuckets - 1},
		{BucketBound(HistogramBuckets-1) + 1, HistogramBuckets},
		{time.Hour, HistogramBuckets},
	}
	for _, c := range cases {
		var h Histogram
		h.Observe(c.d)
		if h.Counts[c.want] != 1 || h.Count() != 1 {
			t.Errorf("Observe(%v): counts %v, want bucket %d", c.d, h.Counts, c.want)
		}
		if c.d > 0 && c.want > 0 && c.want < HistogramBuckets && (c.d <= BucketBound(c.want-1) || c.d > BucketBound(c.want)) {
			t.Errorf("%v outside bucket %d's range", c.d, c.want)
		}
	}
	var h Histogram
	h.Observe(3)
	h.Observe(4)
	if h.Sum != 7 {
		t.Errorf("sum %d, want 7", h.Sum)
	}
}

func BenchmarkHistogramObserve(b *testing.B) {
	b.ReportAllocs()
	var h Histogram
	for i := range b.N {
		h.Observe(Duration(i & 0xfffff))
	}
}
