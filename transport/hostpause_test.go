package transport

import (
	"bytes"
	"testing"
	"time"
)

// TestHeldAcksKeepAPauseFromSweeping: a receiver whose acks have shown it
// holding packets (their AckDelay, measured from the arrival its link
// stamped) pauses for four RTOs. The timers allow for the hold (§8.4, the
// host allowance), so the pause is proven before a second expiry could
// sweep what is in flight: a handful of resends, not the whole flight.
// With the same pause and nothing seen before, the second expiry sweeps
// (TestLongPauseProvenAfterASweep). On the star demo, a peer that had held
// acks for 0.9 ms paused 2.5 ms against an RTO of 0.55 ms, and the sweep
// resent 447 packets, every one a duplicate.
func TestHeldAcksKeepAPauseFromSweeping(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	n.stamped = true
	rto := Time(c.snd.rto)
	// A pause shorter than the RTO: no expiry, but the acks after it
	// report the packets' wait.
	n.pause(rto * 4 / 5)
	if h := c.snd.hold.get(n.now); h < Duration(rto/2) {
		t.Fatalf("hold %v after the receiver held packets for %v", h, time.Duration(rto*4/5))
	}
	before := *n.eps[0].Stats()
	st := n.pause(4 * rto)
	t.Logf("a pause of %v: %d timeouts, %d lost, %d tail probes, %d path timeouts, %d spurious; RTO %v", time.Duration(4*rto), st.Timeouts-before.Timeouts, st.LostDetected-before.LostDetected, st.TailProbes-before.TailProbes, st.PathTimeouts-before.PathTimeouts, st.SpuriousRetx-before.SpuriousRetx, c.snd.rto)
	if st.Timeouts-before.Timeouts > 1 {
		t.Fatalf("%d expiries in one pause: the second sweeps", st.Timeouts-before.Timeouts)
	}
	if lost := st.LostDetected - before.LostDetected; lost > 2 {
		t.Fatalf("%d transmissions declared lost in a pause; want at most the probe's and the expiry's", lost)
	}
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatal("the WRITE did not complete intact")
	}
}

// TestHeldAcksWidenTheProbeTimeout: a receiver pause longer than the tail
// probe timeout but shorter than the RTO fires a probe; the acks after it
// report how long the receiver held each packet (its link stamped their
// arrival), and from then on the probe timeout of a flight allows for that
// hold (§8.4), so the next pause of the same length fires no probe.
func TestHeldAcksWidenTheProbeTimeout(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	n.stamped = true
	pause := Time(c.snd.rto) * 3 / 4
	if p := Time(c.pto(n.now)); p >= pause {
		t.Fatalf("probe timeout %v not under the pause %v: the test tests nothing", time.Duration(p), time.Duration(pause))
	}
	st := n.pause(pause)
	if st.TailProbes != 1 || st.Timeouts != 0 {
		t.Fatalf("the first pause: %d tail probes, %d timeouts; want 1 and 0", st.TailProbes, st.Timeouts)
	}
	if h := c.snd.hold.get(n.now); h < Duration(pause)/2 {
		t.Fatalf("hold %v after a %v pause", h, time.Duration(pause))
	}
	before := *st
	st = n.pause(pause)
	t.Logf("the second pause: %d tail probes, %d timeouts, %d path timeouts, %d lost", st.TailProbes-before.TailProbes, st.Timeouts-before.Timeouts, st.PathTimeouts-before.PathTimeouts, st.LostDetected-before.LostDetected)
	if st.TailProbes != 1 || st.Timeouts != 0 || st.LostDetected != before.LostDetected {
		t.Fatalf("the second pause: %d tail probes, %d timeouts in all, %d more lost; want 1, 0 and none", st.TailProbes, st.Timeouts, st.LostDetected-before.LostDetected)
	}
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatal("the WRITE did not complete intact")
	}
}

// TestLonePacketProbedWithoutTheHold: the peer's hold widens the probe
// timeout of a flight, not of a lone packet, whose loss is the tail latency
// the probe exists for (§8.4).
func TestLonePacketProbedWithoutTheHold(t *testing.T) {
	n, c, _ := twoPlanesMidWrite(t)
	s := &c.snd
	now := n.now
	hold := Duration(3 * time.Millisecond)
	s.hold.raise(now, hold)
	s.rto = c.rtoNow(now)
	if s.rto < hold {
		t.Fatalf("RTO %v with the peer holding acks %v", s.rto, hold)
	}
	srtt := max(s.rtt.srtt, c.ep.dataRTT.srtt)
	saved := s.inflight
	defer func() { s.inflight = saved }()
	s.inflight = 1
	if got, want := c.pto(now), max(2*srtt+c.ep.cfg.AckDelay, c.ep.cfg.MinPathTimeout); got != want {
		t.Fatalf("one packet in flight: probe timeout %v, want %v (two RTTs and AckDelay)", got, want)
	}
	s.inflight = 2
	if got, want := c.pto(now), min(2*srtt+hold, s.rto); got != want {
		t.Fatalf("two packets in flight: probe timeout %v, want %v (two RTTs and the hold)", got, want)
	}
}
