package transport

import (
	"math/rand/v2"
	"testing"
)

// TestConnHeap drives the timer heap with random inserts, moves (earlier,
// later, unchanged) and removals, and checks after each that every entry
// is no earlier than its parent, carries its connection's deadline, and
// is where its connection thinks it is.
func TestConnHeap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	conns := make([]*Conn, 64)
	for i := range conns {
		conns[i] = &Conn{heapIdx: -1, deadline: Never}
	}
	var h connHeap
	for step := range 20_000 {
		c := conns[rng.IntN(len(conns))]
		switch r := rng.IntN(10); {
		case r == 0:
			h.remove(c)
			c.deadline = Never
		case r == 1:
			h.fix(c) // unchanged
		default:
			c.deadline = Time(rng.IntN(1000))
			if rng.IntN(20) == 0 {
				c.deadline = Never
			}
			h.fix(c)
		}
		in := 0
		for _, c := range conns {
			if c.heapIdx >= 0 {
				in++
				if h[c.heapIdx].c != c || h[c.heapIdx].at != c.deadline {
					t.Fatalf("step %d: entry %d is not its connection's", step, c.heapIdx)
				}
			} else if c.deadline != Never {
				t.Fatalf("step %d: a connection with a deadline is not in the heap", step)
			}
		}
		if in != len(h) {
			t.Fatalf("step %d: %d connections in a heap of %d", step, in, len(h))
		}
		for i := 1; i < len(h); i++ {
			if h[i].at < h[(i-1)/2].at {
				t.Fatalf("step %d: entry %d earlier than its parent", step, i)
			}
		}
	}
}
