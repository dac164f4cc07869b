package sim

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestQueueBucketsAreContiguous(t *testing.T) {
	// Every value lands in a bucket whose range holds it, and buckets
	// tile the numbers without gaps: bucketLow(b+1) is one past b's top.
	for v := 0; v < 1<<20; v += 1 + v/97 {
		b := queueBucket(v)
		if lo, hi := bucketLow(b), bucketLow(b+1); v < lo || v >= hi {
			t.Fatalf("v=%d in bucket %d = [%d,%d)", v, b, lo, hi)
		}
	}
	for b := 0; b < 200; b++ {
		if queueBucket(bucketLow(b)) != b {
			t.Fatalf("bucketLow(%d)=%d maps to bucket %d", b, bucketLow(b), queueBucket(bucketLow(b)))
		}
	}
}

func TestQueueHistQuantileWithinResolution(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var h QueueHist
	var vals []int
	for range 100000 {
		v := int(rng.ExpFloat64() * 40000)
		vals = append(vals, v)
		h.Add(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999} {
		want := vals[int(q*float64(len(vals)))]
		got := h.Quantile(q)
		if got < want || float64(got) > float64(want)*1.125+8 {
			t.Errorf("q%.3f: got %d, true %d", q, got, want)
		}
	}
	var empty QueueHist
	if empty.Quantile(0.99) != 0 {
		t.Error("empty histogram has a nonzero quantile")
	}
	var m QueueHist
	m.Merge(&h)
	if m.Count() != h.Count() || m.Quantile(0.99) != h.Quantile(0.99) {
		t.Error("merge lost counts")
	}
}
