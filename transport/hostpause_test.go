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

// TestTailProbeSendsNewData: once the peer's acks have shown it holding
// packets, a pause longer than the tail probe's timeout and shorter than
// the RTO sets off a probe that is the next new packet, sent past the
// controller's window (RFC 8985 §7.3), not a resend of the oldest: the
// pause costs no duplicate. (A resent oldest was most of the duplicates
// a lossless 4 GiB write-bw on the star demo sent: 25-33 tail probes a
// run, one per pause of the receiving engine.) The WRITE then completes
// intact.
func TestTailProbeSendsNewData(t *testing.T) {
	n, c, src := twoPlanesMidWrite(t)
	n.stamped = true
	rto := Time(c.snd.rto)
	n.pause(rto * 4 / 5) // the acks after it show the hold
	if !c.holding(n.now) {
		t.Fatalf("not holding after the receiver held packets for %v (hold %v)", time.Duration(rto*4/5), c.snd.hold.get(n.now))
	}
	pto, rtoNow := Time(c.pto()), Time(c.rtoNow(n.now))
	if 2*pto >= rtoNow {
		t.Fatalf("probe timeout %v, RTO %v: no pause fits between", time.Duration(pto), time.Duration(rtoNow))
	}
	before, dupBefore := *n.eps[0].Stats(), n.eps[1].Stats().Duplicates
	next := c.snd.nextPSN
	st := n.pause((pto + rtoNow) / 2)
	probes, lost, timeouts := st.TailProbes-before.TailProbes, st.LostDetected-before.LostDetected, st.Timeouts-before.Timeouts
	t.Logf("a pause of %v (probe timeout %v, RTO %v): %d tail probes, %d lost, %d timeouts, %d new PSNs",
		time.Duration((pto+rtoNow)/2), time.Duration(pto), time.Duration(rtoNow), probes, lost, timeouts, c.snd.nextPSN-next)
	if probes == 0 || timeouts != 0 {
		t.Fatalf("%d tail probes, %d timeouts: the pause did not test the probe alone", probes, timeouts)
	}
	if lost != 0 {
		t.Fatalf("%d transmissions declared lost in a pause shorter than the RTO: the probe resent", lost)
	}
	if d := n.eps[1].Stats().Duplicates - dupBefore; d != 0 {
		t.Fatalf("the receiver got %d duplicates from a pause", d)
	}
	if c.snd.nextPSN == next {
		t.Fatal("no new PSN went out: the probe sent nothing")
	}
	n.run(Time(10*time.Second), func() bool { return n.doneWrites() == 2 })
	if n.doneWrites() != 2 || !bytes.Equal(n.regions[1][1<<20:9<<20], src) {
		t.Fatal("the WRITE did not complete intact")
	}
}
