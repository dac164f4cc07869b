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
	// The tail probe does not wait for the hold: it recovers lost tails
	// (§8.4).
	if srtt := max(c.snd.rtt.srtt, c.ep.dataRTT.srtt); c.pto() > max(2*srtt+c.ep.cfg.AckDelay, c.ep.cfg.MinPathTimeout) {
		t.Fatalf("probe timeout %v with SRTT %v: it waits for the hold", c.pto(), srtt)
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
