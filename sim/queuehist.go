package sim

import "math/bits"

// QueueHist is a log-linear histogram of the backlog, in bytes, that
// packets find when they arrive at a rate-limited link: the queue as the
// traffic experiences it, which is what delay and marking depend on
// (sampling on a clock would weigh idle time instead). Each power of two
// is split into 8 buckets, so a quantile is exact to within 12.5%, and
// the histogram is a fixed array: recording allocates nothing.
type QueueHist struct {
	counts [queueHistBuckets]uint64
	n      uint64
}

const (
	queueHistSub     = 3         // log2 of the buckets per power of two
	queueHistMax     = 1<<32 - 1 // larger backlogs count as this
	queueHistBuckets = (32 - queueHistSub + 1) << queueHistSub
)

// bucket maps v >= 0 to its bucket: values below 8 have one bucket each;
// above, the bucket is the power of two and the next 3 bits.
func queueBucket(v int) int {
	u := uint64(v)
	if u < 1<<queueHistSub {
		return int(u)
	}
	e := bits.Len64(u) - 1 - queueHistSub
	return (e+1)<<queueHistSub | int(u>>e)&(1<<queueHistSub-1)
}

// bucketLow is the smallest value in bucket b.
func bucketLow(b int) int {
	if b < 1<<queueHistSub {
		return b
	}
	e := b>>queueHistSub - 1
	m := b&(1<<queueHistSub-1) | 1<<queueHistSub
	return m << e
}

// Add records one arrival that found v bytes queued.
func (h *QueueHist) Add(v int) {
	h.counts[queueBucket(min(max(v, 0), queueHistMax))]++
	h.n++
}

// Count is the number of arrivals recorded.
func (h *QueueHist) Count() uint64 { return h.n }

// Quantile returns the upper edge of the bucket holding quantile q
// (0..1) of the recorded backlogs: no more than 12.5% above the true
// value. It returns 0 when nothing was recorded.
func (h *QueueHist) Quantile(q float64) int {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if rank >= h.n {
		rank = h.n - 1
	}
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen > rank {
			return bucketLow(b+1) - 1
		}
	}
	return queueHistMax
}

// Merge adds o's counts to h.
func (h *QueueHist) Merge(o *QueueHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}
