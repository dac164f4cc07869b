package transport

import (
	"testing"
	"time"
)

// TestPlaneUnprovenNeverAnswers (§7.9): the listener announces a plane-1
// address at which nothing answers (a port out of order, or an address
// that is not its own). The connection never puts data there: a WRITE
// completes on plane 0 alone without a retransmission, plane 1 stays
// down and unproven at both ends, and what it does cost is probes backed
// off to one per path per MaxProbeInterval.
func TestPlaneUnprovenNeverAnswers(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 8<<20)
	n.dead[1] = true
	n.connect()
	n.write(pattern(4<<20, 1), 0)
	c := n.conns[0]
	if n.sent[0][1] != 0 || n.sent[1][1] != 0 {
		t.Fatalf("%d and %d data packets went to the plane that never answered", n.sent[0][1], n.sent[1][1])
	}
	if st := c.Stats(); st.Retransmitted != 0 || st.Timeouts != 0 {
		t.Fatalf("the WRITE on plane 0 took %d retransmissions and %d timeouts; want none", st.Retransmitted, st.Timeouts)
	}
	probes := n.probe[0][1]
	const idle = time.Second
	n.run(Time(idle), nil)
	for i := range n.conns {
		pl := planeInfo(n.conns[i])
		if len(pl) != 2 || !pl[1].Down || !pl[1].Unproven || pl[1].ActivePaths != 0 || pl[0].Down {
			t.Fatalf("endpoint %d planes %+v; want plane 1 down and unproven, plane 0 up", i, pl)
		}
		st := n.eps[i].Stats()
		if st.PlanesUnproven != 1 || st.PlanesProven != 0 || st.PlanesDown != 0 {
			t.Fatalf("endpoint %d: %d planes unproven, %d proven, %d down; want 1, 0, 0", i, st.PlanesUnproven, st.PlanesProven, st.PlanesDown)
		}
	}
	if c.State() != StateEstablished {
		t.Fatalf("connection %v", c.State())
	}
	// Backed off: each of plane 1's paths probes at most once per
	// MaxProbeInterval, and ProbeCount times per entropy value.
	cfg := n.eps[0].Config()
	paths := planeInfo(c)[1].Paths
	bound := paths * (int(idle/cfg.MaxProbeInterval) + cfg.ProbeCount)
	got := n.probe[0][1] - probes
	t.Logf("plane 1 unanswered for %v: %d probes from %d paths (bound %d)", idle, got, paths, bound)
	if got == 0 || got > bound {
		t.Fatalf("%d probes on the unanswered plane in %v; want some, at most %d", got, idle, bound)
	}
}

// TestPlaneProvenThenUsed (§7.9): both ends' planes answer. Right after
// the handshake plane 1 is unproven and carries nothing but probes; the
// probes' answers from the peer's plane-1 address prove it within a few
// round trips, at both ends, and a WRITE then goes half on each plane.
func TestPlaneProvenThenUsed(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 8<<20)
	n.connect()
	if pl := planeInfo(n.conns[0]); !pl[1].Unproven || !pl[1].Down {
		t.Fatalf("planes %+v at the handshake; want plane 1 unproven", pl)
	}
	start := n.now
	n.run(Time(time.Second), func() bool {
		return !planeInfo(n.conns[0])[1].Unproven && !planeInfo(n.conns[1])[1].Unproven
	})
	t.Logf("plane 1 proven at both ends %v after the initiator's handshake", time.Duration(n.now-start))
	for i := range n.conns {
		if pl := planeInfo(n.conns[i]); pl[1].Unproven || pl[1].Down {
			t.Fatalf("endpoint %d planes %+v; want plane 1 proven and up", i, pl)
		}
		if st := n.eps[i].Stats(); st.PlanesUnproven != 1 || st.PlanesProven != 1 || st.PlanesUp != 0 {
			t.Fatalf("endpoint %d: %d unproven, %d proven, %d up; want 1, 1, 0", i, st.PlanesUnproven, st.PlanesProven, st.PlanesUp)
		}
	}
	if n.sent[0][1] != 0 {
		t.Fatalf("%d data packets on plane 1 before it was proven", n.sent[0][1])
	}
	n.run(Time(time.Millisecond), nil) // every path of plane 1 restored
	n.write(pattern(4<<20, 2), 0)
	a, b := n.sent[0][0], n.sent[0][1]
	if share := float64(b) / float64(a+b); share < 0.4 || share > 0.6 {
		t.Fatalf("plane 1 carried %d of %d data packets; want about half", b, a+b)
	}
}

// TestPlaneProofNeedsItsAddress (§7.9): an answer to a plane-1 probe that
// comes from the peer's plane-0 address proves nothing about its plane-1
// address. Endpoint 1's host routes what its plane-1 port would send out
// of plane 0, from its plane-0 address: endpoint 0's plane-1 probes reach
// it, and their acks come back, but from the wrong address; endpoint 0
// must not take plane 1 into use (its data there would leave by a port
// that cannot answer).
func TestPlaneProofNeedsItsAddress(t *testing.T) {
	n := newPlaneNet(t, [2][]string{{"10.0.0.1", "10.1.0.1"}, {"10.0.0.2", "10.1.0.2"}}, 8<<20)
	n.reroute[1][1] = true
	n.connect()
	n.run(Time(100*time.Millisecond), nil)
	if pl := planeInfo(n.conns[0]); !pl[1].Unproven {
		t.Fatalf("endpoint 0 planes %+v: plane 1 proven without an answer from the peer's address there", pl)
	}
	if n.probe[0][1] == 0 || n.conns[0].snd.paths[1].acked == 0 {
		t.Fatalf("no probes on plane 1, or none of them answered: the test tests nothing")
	}
	n.write(pattern(1<<20, 3), 0)
	if n.sent[0][1] != 0 || n.conns[0].Stats().Retransmitted != 0 {
		t.Fatalf("%d data packets on endpoint 0's unproven plane, %d retransmitted", n.sent[0][1], n.conns[0].Stats().Retransmitted)
	}
}
