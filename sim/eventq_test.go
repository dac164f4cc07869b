package sim

import (
	"math/rand/v2"
	"testing"
)

// TestEventQueueOrder checks the radix heap against the order it must
// reproduce: by time, then by push order, with pushes at the latest pop's
// time, near it, far ahead, and (as between two Run calls) before it.
func TestEventQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var q eventQueue
	type ref struct {
		at  Time
		seq int32
	}
	var pending []ref
	var now Time
	seq := int32(0)
	push := func(at Time) {
		q.push(event{at: at, buf: seq})
		pending = append(pending, ref{at, seq})
		seq++
	}
	for step := 0; step < 200_000; step++ {
		switch r := rng.IntN(10); {
		case r < 5 || len(pending) == 0:
			var at Time
			switch rng.IntN(4) {
			case 0:
				at = now // same time as the latest pop
			case 1:
				at = now + Time(rng.IntN(4)) // a few distinct near times
			case 2:
				at = now + Time(rng.IntN(1<<20))
			default:
				if now > 0 && rng.IntN(50) == 0 {
					at = now - Time(rng.IntN(int(min(now, 1000)))) // before the latest pop
				} else {
					at = now + Time(rng.IntN(64))
				}
			}
			push(at)
		default:
			best := 0
			for i, p := range pending {
				if p.at < pending[best].at || p.at == pending[best].at && p.seq < pending[best].seq {
					best = i
				}
			}
			want := pending[best]
			pending = append(pending[:best], pending[best+1:]...)
			got := q.pop()
			if got.at != want.at || got.buf != want.seq {
				t.Fatalf("step %d: popped (%d, #%d), want (%d, #%d)", step, got.at, got.buf, want.at, want.seq)
			}
			if rng.IntN(20) == 0 && q.len() > 0 {
				// Run stopping at its end: the event goes back in front.
				q.unpop()
				pending = append(pending, want)
				for i := len(pending) - 1; i > 0 && pending[i].seq < pending[i-1].seq; i-- {
					pending[i], pending[i-1] = pending[i-1], pending[i]
				}
				continue
			}
			now = got.at
		}
		if q.len() != len(pending) {
			t.Fatalf("step %d: len %d, want %d", step, q.len(), len(pending))
		}
	}
}
