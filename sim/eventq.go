package sim

import "math/bits"

// eventQueue orders the pending events by time, FIFO among equal times.
//
// It is a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, 1990), which
// works because simulated time never runs backwards: every event pushed is
// at or after last, the time of the latest pop. Bucket i holds the events
// whose time first differs from last at bit i-1 (bucket 0: equal to
// last), so a push is one append; a pop takes bucket 0 in order, and when
// that is empty, finds the earliest time in the lowest non-empty bucket,
// makes it last and spreads that bucket over the buckets below. An event
// moves down at most once per bit of the time span it waits across (about
// 20 bits for the microseconds to milliseconds of a fabric), so a pop
// costs a few appends instead of the 2 log2 n comparisons and swaps of
// 48-byte events a binary heap pays with a million events pending (its
// sift was a sixth of the 1024-host simulation).
//
// Equal times keep their push order: all events of one time are always in
// the same bucket (the bucket depends only on the time and last), each
// bucket is appended in push order, and spreading a bucket walks it in
// order. That is what a binary heap keyed by (time, push sequence) gives,
// so simulations are the same event for event.
type eventQueue struct {
	last    Time
	head    int    // next event of buckets[0] to pop
	nonzero uint64 // bit i: buckets[i] is not empty (i >= 1)
	n       int    // events queued
	buckets [65][]event
}

func (q *eventQueue) len() int { return q.n }

func (q *eventQueue) push(ev event) {
	if ev.at < q.last {
		q.rebase(ev.at)
	}
	i := bits.Len64(uint64(ev.at ^ q.last))
	q.buckets[i] = append(q.buckets[i], ev)
	q.nonzero |= 1 << i
	q.n++
}

// pop removes and returns the earliest event; the queue must not be
// empty.
func (q *eventQueue) pop() event {
	if q.head == len(q.buckets[0]) {
		q.buckets[0], q.head = q.buckets[0][:0], 0
		q.nonzero &^= 1
		i := bits.TrailingZeros64(q.nonzero)
		b := q.buckets[i]
		m := b[0].at
		for k := 1; k < len(b); k++ {
			m = min(m, b[k].at)
		}
		q.last = m
		for k := range b {
			j := bits.Len64(uint64(b[k].at ^ m))
			q.buckets[j] = append(q.buckets[j], b[k])
			q.nonzero |= 1 << j
		}
		q.buckets[i] = b[:0]
		q.nonzero &^= 1 << i
	}
	ev := q.buckets[0][q.head]
	q.head++
	q.n--
	return ev
}

// unpop puts back the event pop just returned, at the front (Run stops
// before an event past its end).
func (q *eventQueue) unpop() {
	q.head--
	q.n++
}

// rebase lowers last to t (an event is pushed before the latest pop, as
// a scenario may do between two Run calls) by spreading every queued
// event again relative to t. Walking the buckets from 0 up keeps push
// order among equal times, since those share a bucket. Rare: never
// inside one Run.
func (q *eventQueue) rebase(t Time) {
	var all []event
	all = append(all, q.buckets[0][q.head:]...)
	q.buckets[0], q.head = q.buckets[0][:0], 0
	for i := 1; i < len(q.buckets); i++ {
		all = append(all, q.buckets[i]...)
		q.buckets[i] = q.buckets[i][:0]
	}
	q.nonzero = 0
	q.last = t
	for _, ev := range all {
		j := bits.Len64(uint64(ev.at ^ t))
		q.buckets[j] = append(q.buckets[j], ev)
		q.nonzero |= 1 << j
	}
}
