package transport_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// TestRecycledWindows: connections that close or fail with their windows
// full (packets in flight, lost, out of order; messages half placed)
// hand those windows to the next connections, which must find them as
// clean as new ones: every later transfer, over the same lossy link, is
// exact. A released connection has no paths but keeps its counters.
func TestRecycledWindows(t *testing.T) {
	link := sim.DefaultLink
	link.Loss, link.Reorder = 0.05, 0.2
	const size = 256 << 10
	p := newPair(t, transport.Config{}, link, 2*size)
	for round := range 12 {
		p.ca, p.cb = nil, nil
		p.connect()
		if round > 0 {
			if s, r := transport.Spares(p.a.EP); s != 0 || r != 0 {
				// The initiator's one released connection went to this one.
				t.Fatalf("round %d: A keeps %d/%d spares after connecting", round, s, r)
			}
		}
		src := pattern(size, byte(round))
		back := make([]byte, size)
		p.ca.PostWrite(&transport.WorkRequest{WRID: 1, Local: src, RemoteAddr: regionAddr, RKey: p.key})
		p.ca.PostRead(&transport.WorkRequest{WRID: 2, Local: back, RemoteAddr: regionAddr, RKey: p.key})
		// Something in flight when the connection ends, to dirty the
		// windows: a write to the second half, cut short.
		p.ca.PostWrite(&transport.WorkRequest{WRID: 3, Local: src, RemoteAddr: regionAddr + size, RKey: p.key})
		p.kick()
		p.runUntil(time.Second, func() bool { return count(p.cqA, transport.OpRead, transport.StatusOK) == round+1 })
		if !bytes.Equal(p.region[:size], src) || !bytes.Equal(back, src) {
			t.Fatalf("round %d: data differs on a connection with recycled windows", round)
		}
		ca := p.ca
		switch round % 3 {
		case 0, 1:
			ca.Close(p.net.Now())
			p.kick()
		case 2:
			// The peer closes it.
			p.cb.Close(p.net.Now())
			p.kick()
		}
		p.runUntil(time.Second, func() bool {
			return ca.State() == transport.StateClosed || ca.State() == transport.StateFailed
		})
		p.idle(10 * time.Millisecond)
		if s, r := transport.Spares(p.a.EP); s != 1 || r != 1 {
			t.Fatalf("round %d: A keeps %d sender and %d receiver windows, want the closed connection's", round, s, r)
		}
		if paths := ca.Paths(nil); len(paths) != 0 {
			t.Fatalf("round %d: a released connection reports %d paths", round, len(paths))
		}
		if a, n := ca.PathCounts(); a != 0 || n != 0 {
			t.Fatalf("round %d: a released connection counts %d of %d paths", round, a, n)
		}
		if st := ca.Stats(); st.BytesSent < size {
			t.Fatalf("round %d: a released connection's counters are gone: %+v", round, st)
		}
	}
}
