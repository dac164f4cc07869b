package transport

import (
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Hole repair (docs/spec.md §8.10).
//
// A forged ack whose CumPSN or SACK covers PSNs the receiver never got (or
// a forged data packet that took a genuine transmission's PathID and
// PathSeq, so the receiver's SACK vouches for a transmission it refused or
// never saw) makes the sender take those PSNs as delivered and forget
// them. The receiver's CumPSN then stops at the first of them for good:
// the stream whose messages had them stops taking effect, and once the
// sender is a receive window past the hole everything draws OUT_OF_WINDOW.
//
// The sender proves such a hole from its own clock. An honest receiver's
// CumPSN never moves back, and it covers a PSN only after the PSN
// arrived. When the sender's una reached U at time t, every PSN before U
// had been reported arrived by acks the sender had received by t, so the
// receiver had them all before t. An ack that echoes a Timestamp te > t
// answers a transmission sent after t, so it was generated after t, and an
// honest one then carries CumPSN >= U. An ack (or NACK, which carries
// CumPSN and the refused transmission's Timestamp too) with te > t and
// CumPSN c < U therefore shows that the receiver lacks a PSN of [c, U)
// that the sender holds delivered: c itself, if the ack is honest. If the
// ack is itself forged, what it "proves" costs the honest receiver only
// duplicates (below).
//
// The sender keeps, for the proof, a ring of unaMarks marks (una, time)
// taken as una advances, at most one new mark per markSpacing (a quarter
// of the smoothed RTT): the newest mark is updated in place within its
// spacing, so the ring always holds the current una and reaches back about
// two round trips under steady progress, and for good once progress stops
// (which a hole soon causes). An ack's proof looks up the newest mark
// older than its echo: no allocation, no lock, at most unaMarks steps, and
// none at all for the usual ack, whose CumPSN is not before una.
//
// The repair abandons [c, U) as §6.3 step 6 abandons a refused PSN: one
// void packet per PSN (VOID|RETX|ACK_REQ, no payload), bounded by the send
// window, in front of every other data packet. The sender no longer has
// those PSNs' records (their slots may hold newer PSNs), so a repair void
// is a WRITE whose message fields are all zero; the receiver consumes a
// void without looking at them (§8.2 step 3) and, for a PSN it already
// has, takes it for a duplicate. Once the hole is consumed, CumPSN moves
// on and the lost-position rule (§9.1) fails the stream positions whose
// packets the hole swallowed, so the stream goes on.
//
// A repair void is a transmission on its path (it takes a path sequence)
// but its slot is resolved at once: it acknowledges nothing when its ack
// comes, gives no RTT sample, is never in flight, never lost, never timed
// and never counted for or against the path. If it is lost, the next
// proving ack repairs again. Repairs are rate-limited: within an RTO of
// a repair only PSNs past its end are voided, so neither the acks of the
// repair's own voids, which keep proving the rest of the hole until the
// last void lands, nor a stream of forged acks draws more than a send
// window of voids per RTO (plus what was sent meanwhile). The exception is NACK SEQUENCE (§8.8): a go-back-N
// receiver drops every void behind a lost one, sends its SEQUENCE NACK
// once per CumPSN and nothing more, so only its NACK can ask again.

// unaMarks is the size of the ring of una marks: with markSpacing a
// quarter of the smoothed RTT it reaches back two round trips, and an
// ack's echo is one round trip old.
const unaMarks = 8

// unaMark records that una reached una at time at.
type unaMark struct {
	una wire.PSN
	at  Time
}

// markSpacing is the least time between two marks of the ring.
func (c *Conn) markSpacing() Time {
	rtt := c.snd.rtt.srtt
	if rtt == 0 {
		rtt = c.ep.cfg.InitialRTO
	}
	return Time(max(rtt/4, Duration(time.Microsecond)))
}

// noteUna records una after it may have advanced (onAck, onNack).
func (c *Conn) noteUna(now Time) {
	s := &c.snd
	if s.markN > 0 {
		m := &s.marks[s.markHead]
		if m.una == s.una {
			return
		}
		if now-s.markOpen < c.markSpacing() {
			// Within the spacing: the newest mark moves. An echo
			// between its old time and now then finds the mark before,
			// with a smaller una: less of the hole proven, never more.
			m.una, m.at = s.una, now
			return
		}
	}
	s.markHead = (s.markHead + 1) % unaMarks
	s.marks[s.markHead] = unaMark{una: s.una, at: now}
	s.markOpen = now
	s.markN = min(s.markN+1, unaMarks)
}

// unaBefore returns where una stood at the newest mark taken before te.
func (s *sender) unaBefore(te Time) (wire.PSN, bool) {
	for i := range s.markN {
		m := &s.marks[(s.markHead-i+unaMarks)%unaMarks]
		if m.at < te {
			return m.una, true
		}
	}
	return 0, false
}

// proveHole checks an ack's or NACK's CumPSN cum and echoed Timestamp
// echo against the una marks, and queues the repair of a hole it proves.
// force (a NACK SEQUENCE) lifts the rate limit.
func (c *Conn) proveHole(now Time, cum wire.PSN, echo uint64, force bool) {
	s := &c.snd
	te := Time(echo)
	if !cum.Before(s.una) {
		s.holeAsk = false // the usual ack: the receiver has all before una
		return
	}
	if te == 0 || te > now {
		return
	}
	u, ok := s.unaBefore(te)
	if !ok || !cum.Before(u) {
		// A late ack, generated before una passed cum, or a hole that
		// needs a fresher echo to be proven (askHole).
		s.holeAsk = true
		return
	}
	// The receiver takes PSNs up to its window from its CumPSN; the rest
	// of a wider hole is proven again once these are consumed.
	end := u
	if int(cum.Distance(u)) > s.window {
		end = cum + wire.PSN(s.window)
	}
	if !force && s.repairAt != 0 && now-s.repairAt < Time(s.rto) {
		// Repaired within an RTO: the voids may still be on their way,
		// and their own acks prove the hole until the last one lands.
		// Only PSNs past that repair are news. Those still queued stay,
		// but none before cum, which the receiver says it has: so the
		// queue never spans more than a window, whatever CumPSNs (a
		// mutated one far behind, then an honest one) come in between.
		if !s.repairEnd.Before(end) {
			return
		}
		if s.repairNext.Before(cum) {
			s.repairNext = cum
		}
		s.repairEnd = end
	} else {
		s.repairAt = now
		s.repairNext, s.repairEnd = cum, end
	}
	c.ep.stats.HolesRepaired++
	c.ep.markReady(c)
}

// askHole sends a PROBE when an ack behind una could not be judged and
// nothing is in flight (§8.10 "Asking"): no later ack would come to judge
// it, and the probe's ack echoes a transmission newer than every mark.
// At most one per RTO; a lost probe leaves the question to the
// keepalive.
func (c *Conn) askHole(now Time) {
	s := &c.snd
	if !s.holeAsk || s.inflight > 0 || s.repairing() {
		return
	}
	if s.holeAskAt != 0 && now-s.holeAskAt < Time(s.rto) {
		return
	}
	s.holeAsk, s.holeAskAt = false, now
	s.keepalive = true // buildKeepalive writes the PROBE
	c.ep.markReady(c)
}

// repairing reports whether repair voids wait to be sent.
func (s *sender) repairing() bool { return s.repairNext != s.repairEnd }

// buildRepair writes the next repair void into buf and returns its length
// and path; 0 when no path has room.
func (c *Conn) buildRepair(now Time, buf []byte) (int, int) {
	s := &c.snd
	pi := s.pickPath(-1)
	if pi < 0 {
		s.armRingTimer(now)
		return 0, 0
	}
	psn := s.repairNext
	s.repairNext++
	p := &s.paths[pi]
	seq, t := s.claim(p)
	// Resolved at once: nothing waits for it (see the package comment
	// above), so it holds no slot of the ring and no timer.
	*t = txRec{sent: now, psn: psn}
	c.advanceOldest(p)
	h := wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagVoid | wire.FlagRetx | wire.FlagAckReq,
		DstConn: c.peerID, PSN: psn, PathID: uint16(pi), PathSeq: seq, Timestamp: uint64(now)}
	h.Put(buf)
	n := wire.DataLen + wire.TrailerLen
	wire.Seal(buf[:n])
	if s.cc != nil {
		// Paced like data, so a window of voids does not leave as one
		// burst; not in flight, so the controller's window is not told.
		s.pace(now, n)
	}
	c.ep.stats.RepairVoidsSent++
	return n, pi
}
