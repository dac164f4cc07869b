package transport

import (
	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/wire"
	"time"
)

// onAck processes an acknowledgement (§5, §8.3).
func (c *Conn) onAck(now Time, a wire.Ack) {
	s := &c.snd
	c.ep.stats.AcksReceived++
	cum := a.CumPSN()
	if cum.After(s.nextPSN) {
		c.ep.stats.RxBogusAck++
		return
	}
	pid := int(a.PathID())
	if pid >= len(s.paths) {
		c.ep.stats.RxBogusAck++
		return
	}
	p := &s.paths[pid]
	h := a.PathAckSeq()
	if int32(h-p.nextSeq) >= 0 {
		c.ep.stats.RxBogusAck++ // acknowledges a sequence never sent
		return
	}
	if c := a.Credit(); c > 0 {
		s.credit = int(min(c, uint32(wire.MaxRecvWindow)))
	}
	s.hold.raise(now, Duration(a.AckDelay()))
	s.lastAckAt = now
	c.proveHole(now, cum, a.EchoTimestamp(), false) // holes.go
	if ts := Time(a.EchoTimestamp()); s.frtoAt != 0 && ts != 0 && ts < s.frtoAt {
		// The ack answers a transmission sent before the expiry: the
		// peer got it, and its ack was held (frtoDecide).
		c.frtoPause()
	}
	if ts := Time(a.EchoTimestamp()); s.silenceAt != 0 && ts != 0 && ts < s.silenceAt {
		// The silence was a pause, even if a second expiry swept it:
		// an RTO as long as the time since its timer started would not
		// have fired, and the RTO adds that much from now on,
		// fading (the pause allowance, rtoNow).
		s.pause.raise(now, Duration(now-s.silenceFrom))
		s.silenceAt = 0
		s.rto = max(s.rto, c.rtoNow(now))
	}
	var rtt, fabric Duration
	if ts := a.EchoTimestamp(); ts != 0 && Time(ts) <= now && s.echoCurrent(p, h, Time(ts)) {
		rtt = c.recoverySample(now, ts, a.AckDelay()) // fabric.go
		fabric = c.fabricSample(now, ts, a.AckDelay())
		if t := c.snd.tx(p, h); t.hs && t.live && pid == 0 {
			// The handshake probe's answer: an RTO's worth of RTT,
			// not a data packet's (no minimum, no controller sample).
			s.rtt.sampleHandshake(rtt)
			c.ep.sampleHandshakeRTT(now, rtt)
			rtt, fabric = 0, 0
		} else {
			s.rtt.sample(rtt)
			c.ep.dataRTT.sample(rtt)
			s.sampleFabric(rtt, fabric)
		}
		if rtt > 0 {
			c.ep.stats.RTT.Observe(rtt)
		}
	}
	progress := false
	for s.una.Before(cum) {
		if c.ackPSN(s.una) {
			progress = true
		}
		c.advanceUna()
	}
	if !p.haveAcked || int32(h-p.largestAcked) > 0 {
		p.largestAcked, p.haveAcked = h, true
	}
	if c.scanPath(now, pid, a, rtt) {
		progress = true
	}
	c.advanceUna()
	c.noteUna(now)
	c.askHole(now) // holes.go
	if s.cc != nil && (s.ackedBytes > 0 || rtt > 0) {
		marked := int(a.CECount()) * c.maxPayload
		s.cc.OnAck(int64(now), congestion.AckSample{Bytes: s.ackedBytes, RTT: fabric, MinRTT: s.fabric.min,
			Marked: min(marked, max(s.ackedBytes, marked)), Path: pid, RateHint: uint64(a.RateHint()) * 1e6,
			InFlight: s.inflightBytes})
		s.ackedBytes = 0
	}
	if s.silenceAt != 0 && !s.una.Before(s.silenceEnd) {
		s.silenceAt = 0
	}
	if progress {
		c.frtoDecide(now)
		s.timeouts = 0
		s.rto = c.rtoNow(now)
		s.rtoDeadline, s.tlpDeadline, s.tlpFired, s.tlpNew = 0, 0, false, false
		if s.inflight > 0 {
			s.rtoDeadline = now + Time(s.rto)
			s.tlpDeadline = now + Time(c.pto())
		} else if s.readsWaiting > 0 {
			s.rtoDeadline = now + Time(s.rto) // the response wait (§8.4)
		}
	}
}

// echoCurrent reports whether an ack of path sequence h that echoes ts
// may give an RTT sample (§5.7 step 2): h's transmission must still be
// unresolved (in flight, or declared lost and not yet proven late) and ts
// must not be older than its send time. An ack that fails this was
// delayed or duplicated on its way, or replays an old one: its echo is
// the age of a packet resolved long ago, not a round trip, and one such
// sample of seconds would hold the smoothed RTT, and with it the loss
// delay, the RTO and the pacing rate, seconds wide for as many acks as it
// takes to decay.
func (s *sender) echoCurrent(p *sendPath, h uint32, ts Time) bool {
	t := s.tx(p, h)
	return (t.live || t.lost) && ts >= t.sent
}

// scanPath resolves the transmissions of path pid that ack a covers:
// acknowledged ones are delivered, holes overtaken by ReorderPackets later
// arrivals or older than the loss delay are lost (§8.3.2). It reports
// whether any PSN was newly acknowledged.
func (c *Conn) scanPath(now Time, pid int, a wire.Ack, rtt Duration) bool {
	s := &c.snd
	p := &s.paths[pid]
	h := a.PathAckSeq()
	delay := c.pathLossDelay(p, rtt)
	if p.lostMarks > 0 {
		c.checkSpurious(p, a)
	}
	thresh := uint32(c.ep.cfg.ReorderPackets)
	progress := false
	acked := 0
	hs := false // the ack resolved the handshake probe
	c.ep.stats.CEEchoed += uint64(a.CECount())
	defer func() {
		if hs && acked == 0 {
			return // it timed the control route, not this path
		}
		p.sample(rtt, acked, int(a.CECount()))
	}()
	for seq := p.oldest; int32(seq-h) <= 0; seq++ {
		t := c.snd.tx(p, seq)
		if !t.live {
			continue
		}
		back := h - seq
		if back < wire.SackBits && a.Received(back) {
			t.live = false
			p.inflight--
			if t.hs {
				hs = true
				continue
			}
			acked++
			if t.sent > s.newestAckedSent {
				s.newestAckedSent = t.sent
			}
			if pl := int(p.plane); pl < MaxPlanes && t.sent > s.planeAckedSent[pl] {
				s.planeAckedSent[pl], s.planeAckedRTT[pl] = t.sent, Duration(now-t.sent)
			}
			c.pathAcked(p, now, t.probe)
			if !t.probe && c.ackTransmission(t.psn, uint16(pid), seq) {
				progress = true
			}
			continue
		}
		if back >= thresh || back >= wire.SackBits || now-t.sent >= delay {
			c.loseTransmission(now, pid, seq)
			continue
		}
		// A hole not yet old enough: look again when it will be.
		if d := t.sent + delay; s.lossDeadline == 0 || d < s.lossDeadline {
			s.lossDeadline = d
		}
	}
	c.advanceOldest(p)
	return progress
}

// checkSpurious looks for transmissions of p declared lost that a now
// SACKs: they were late, not lost. Each widens the reorder window (RACK's
// reo_wnd adaptation, RFC 8985 §6.2, with SACK in place of DSACK).
func (c *Conn) checkSpurious(p *sendPath, a wire.Ack) {
	s := &c.snd
	h := a.PathAckSeq()
	lo := p.nextSeq - (p.mask + 1) // entries older than this are overwritten
	if int32(h-wire.SackBits+1-lo) > 0 {
		lo = h - wire.SackBits + 1
	}
	for seq := lo; int32(seq-p.oldest) < 0 && int32(seq-h) <= 0; seq++ {
		t := c.snd.tx(p, seq)
		if !t.lost {
			continue
		}
		if a.Received(h - seq) {
			t.lost = false
			p.lostMarks--
			c.ep.stats.SpuriousRetx++
			s.spurious++
			s.reoMult = min(s.reoMult+1, maxReoMult)
			s.reoQuiet = 0
		}
	}
}

// pathLossDelay is how old a hole on p must be to count as lost: the
// path's own RTT (the larger of its smoothed RTT and the sample rtt, when
// given) plus the reorder fraction of it; the connection's loss delay
// while the path has no RTT of its own. Paths differ, and a slow path's
// packets are not late by the fast paths' measure.
func (c *Conn) pathLossDelay(p *sendPath, rtt Duration) Time {
	s := &c.snd
	frac := s.reorderFrac(c.ep.cfg.ReorderFraction)
	if p.srtt == 0 {
		// Without any sample, the acceptor's handshake bound (§8.4).
		initial := c.ep.cfg.InitialRTO
		if s.rtt.bound > 0 {
			initial = s.rtt.bound
		}
		return Time(s.rtt.lossDelay(frac, initial))
	}
	return Time(float64(max(p.srtt, rtt)) * (1 + frac))
}

// maxReoMult caps the reorder window at 4 times its base (with the 1/4
// default, one RTT, RACK's own cap).
const maxReoMult = 4

// reorderFrac is the reorder allowance as a fraction of the RTT.
func (s *sender) reorderFrac(base float64) float64 {
	return base * float64(max(1, s.reoMult))
}

func (c *Conn) advanceOldest(p *sendPath) {
	for p.oldest != p.nextSeq && !c.snd.tx(p, p.oldest).live {
		p.oldest++
	}

}

// ackTransmission records that a transmission of psn arrived.
func (c *Conn) ackTransmission(psn wire.PSN, path uint16, seq uint32) bool {
	s := &c.snd
	if psn.Before(s.una) || !psn.Before(s.nextPSN) {
		return false
	}
	r := &s.pkts[uint32(psn)&s.pktMask]
	if r.state == psAcked || r.state == psFree {
		if r.tx > 1 {
			c.ep.stats.SpuriousRetx++
		}
		return false
	}
	return c.ackPSN(psn)
}

// ackPSN marks psn delivered; it reports whether that is news.
func (c *Conn) ackPSN(psn wire.PSN) bool {
	s := &c.snd
	r := &s.pkts[uint32(psn)&s.pktMask]
	held := false
	switch r.state {
	case psAcked, psFree:
		return false
	case psInflight:
		s.inflight--
		s.inflightBytes -= int(r.n)
	case psRNR:
		s.rnrWaiting--
		held = r.rnrAt == rnrHeld
	}
	r.state = psAcked
	s.ackedBytes += int(r.n)
	c.stats.Acked++
	if r.msg&readJobBit != 0 {
		c.jobAcked(r.msg &^ readJobBit)
	} else {
		m := &s.msgs[r.msg]
		m.acked++
		if held {
			m.rnrHeld-- // acked from an earlier transmission: never resent
		}
		if m.rnrRounds != 0 {
			c.rnrProgress(r.msg, m)
		}
		if m.op == wire.OpReadReq && !m.reqAcked {
			m.reqAcked = true
			if !m.respDone && m.status == StatusOK {
				// Nothing of ours is in flight for it any more: the
				// response wait runs the retransmission timer (§8.4).
				m.awaitResp = true
				s.readsWaiting++
			}
		}
		c.msgProgress(m)
	}
	return true
}

// ackThrough acknowledges every PSN before cum, the ReceivedPSN of the
// peer's DISCONNECT (§7.7): the peer had them all when it closed, so the
// messages they complete are delivered, whatever became of their acks. A
// cum outside [una, nextPSN] names nothing sent and not yet acknowledged
// and is ignored.
func (s *sender) ackThrough(c *Conn, cum wire.PSN) {
	if !s.una.Before(cum) || cum.After(s.nextPSN) {
		return
	}
	for s.una.Before(cum) {
		c.ackPSN(s.una)
		c.advanceUna()
	}
}

func (c *Conn) advanceUna() {
	s := &c.snd
	for s.una != s.nextPSN {
		r := &s.pkts[uint32(s.una)&s.pktMask]
		if r.state != psAcked {
			break
		}
		r.state = psFree
		s.una++
	}
	for s.msgUna != s.nextMsgID {
		m := &s.msgs[s.msgUna&s.msgMask]
		if m.inUse && m.id == s.msgUna && !m.fullyAcked() {
			break
		}
		s.msgUna++
	}
}

func (m *sendMsg) fullyAcked() bool {
	return m.segPkts == m.npkts && m.acked == m.npkts
}

// loseTransmission declares transmission seq of path pid lost and queues
// its PSN for retransmission if that transmission is the PSN's latest.
func (c *Conn) loseTransmission(now Time, pid int, seq uint32) {
	s := &c.snd
	p := &s.paths[pid]
	t := c.snd.tx(p, seq)
	if !t.live {
		return
	}
	t.live = false
	p.inflight--
	if seq == p.oldest {
		// Free the slot now: the tail probe and the timeout resend the
		// oldest PSN without a path scan after, and a ring whose head
		// stays put once nothing is live fills and takes nothing more,
		// with no timer left to notice (nothing is in flight).
		c.advanceOldest(p)
	}
	if t.hs {
		return
	}
	c.pathLost(p, now, t.probe)
	if t.probe {
		return
	}
	t.lost = true
	p.lostMarks++
	psn := t.psn
	if psn.Before(s.una) || !psn.Before(s.nextPSN) {
		return
	}
	r := &s.pkts[uint32(psn)&s.pktMask]
	if r.state != psInflight || int(r.path) != pid || r.pseq != seq {
		return
	}
	r.state = psLost
	s.inflight--
	s.inflightBytes -= int(r.n)
	if s.cc != nil && !s.unjudged {
		s.cc.OnLoss(int64(now), int(r.n))
	}
	s.retxQ.push(uint32(psn))
	if s.reoMult > 1 {
		// RFC 8985 §7.2 decays its multiplier after 16 recoveries
		// without a spurious one; we count losses.
		if s.reoQuiet++; s.reoQuiet >= 16 {
			s.reoMult--
			s.reoQuiet = 0
		}
	}
	c.stats.Lost++
	c.ep.stats.LostDetected++
}

// onNack processes a negative acknowledgement (§6.3).
func (c *Conn) onNack(now Time, n wire.Nack) {
	s := &c.snd
	reason := n.Reason()
	c.ep.stats.NacksReceived[reason]++
	c.stats.NacksReceived++
	if reason == wire.NackUnsupportedVersion {
		c.fail(StatusRemoteInvalid, errVersion)
		return
	}
	if reason == wire.NackSequence {
		// Go back to where the receiver stands, resending everything
		// outstanding from there in PSN order (§8.8).
		cum := n.CumPSN()
		if cum.After(s.nextPSN) {
			return
		}
		// A go-back-N receiver says where it stands once per CumPSN,
		// and drops every void behind a lost one: this NACK is the only
		// request a lost repair void gets, so it is not rate-limited.
		c.proveHole(now, cum, n.EchoTimestamp(), true)
		for s.una.Before(cum) {
			c.ackPSN(s.una)
			c.advanceUna()
		}
		c.noteUna(now)
		for psn := s.una; psn != s.nextPSN; psn++ {
			if r := &s.pkts[uint32(psn)&s.pktMask]; r.state == psInflight {
				c.loseTransmission(now, int(r.path), r.pseq)
			}
		}
		// The ring slots of what was just declared lost are free: unless
		// the oldest moves past them the ring stays full, no path has
		// room and the resends never leave.
		for pi := range s.paths {
			c.advanceOldest(&s.paths[pi])
		}
		return
	}
	// A NACK carries the receiver's CumPSN and the refused transmission's
	// Timestamp, so it proves a hole as an ack does (holes.go).
	if !n.CumPSN().After(s.nextPSN) {
		c.proveHole(now, n.CumPSN(), n.EchoTimestamp(), false)
	}
	psn := n.PSN()
	if psn.Before(s.una) || !psn.Before(s.nextPSN) {
		return
	}
	// The transmission arrived: resolve it on its path without loss.
	if pid := int(n.PathID()); pid < len(s.paths) {
		p := &s.paths[pid]
		seq := n.PathSeq()
		if int32(seq-p.oldest) >= 0 && int32(seq-p.nextSeq) < 0 {
			if t := c.snd.tx(p, seq); t.live && t.psn == psn {
				t.live = false
				p.inflight--
				c.advanceOldest(p)
			}
		}
	}
	r := &s.pkts[uint32(psn)&s.pktMask]
	if r.state != psInflight && r.state != psLost {
		return
	}
	if r.state == psInflight && (int(n.PathID()) != int(r.path) || n.PathSeq() != r.pseq) &&
		(reason == wire.NackRNR || reason == wire.NackOutOfWindow) {
		// The NACK refused an earlier transmission (late, or a
		// duplicate) while a newer one is out: that one draws its own
		// answer. Holding the PSN now would leave the newer one live in
		// its path's ring with nothing in flight to time it, so if it
		// were lost its slot would never be freed (§6.3 step 4).
		return
	}
	switch reason {
	case wire.NackRNR, wire.NackOutOfWindow:
		// RNRRetryForever: an RNR NACK of a message never fails it, and
		// its waits back off instead (rnr.go).
		forever := reason == wire.NackRNR && c.rnrForever && r.msg&readJobBit == 0
		if r.msg&readJobBit == 0 && !forever {
			// Both wait for the receiver; both are bounded, so a
			// receiver that never makes room cannot hold us forever.
			m := &s.msgs[r.msg]
			m.rnrTries++
			if m.rnrTries > c.ep.cfg.RNRRetries {
				if reason == wire.NackRNR {
					c.fail(StatusRNRRetryExceeded, errRNR)
				} else {
					c.fail(StatusRetryExceeded, errWindow)
				}
				return
			}
		}
		if r.state == psInflight {
			s.inflight--
			s.inflightBytes -= int(r.n)
		}
		// The peer answers: whatever else is in flight, the silence the
		// retransmission timer measures has not begun (§8.4).
		s.peerAnswered = true
		// A lost-queued record is skipped by buildData once not psLost.
		r.state = psRNR
		s.rnrWaiting++
		delay := c.ep.cfg.RNRDelay
		if reason == wire.NackRNR {
			if hint := Duration(n.Info()) * 1000; hint > 0 {
				// Info can name 71 minutes; one NACK must not park a
				// PSN that long (§6.3 step 5).
				delay = min(hint, c.ep.cfg.maxRNRWait())
			}
			c.ep.stats.RNRWaits++
		} else {
			delay = max(delay, s.rtt.srtt)
		}
		r.rnrAt = now + Time(delay)
		if forever {
			r.rnrAt = c.rnrForeverWait(now, &s.msgs[r.msg], psn, r, delay)
		}
		if r.rnrAt != rnrHeld && (s.rnrDeadline == 0 || r.rnrAt < s.rnrDeadline) {
			s.rnrDeadline = r.rnrAt
		}
	case wire.NackRemoteAccess, wire.NackInvalidRequest:
		if r.msg&readJobBit == 0 {
			m := &s.msgs[r.msg]
			if m.status == StatusOK {
				m.status = StatusRemoteAccess
				if reason == wire.NackInvalidRequest {
					m.status = StatusRemoteInvalid
				}
			}
		}
		// The receiver did not consume the PSN (a NACK never does):
		// abandon it with a void packet, acked like any other (§6.3).
		r.void = true
		if r.state == psInflight {
			s.inflight--
			s.inflightBytes -= int(r.n)
			r.state = psLost
			s.retxQ.push(uint32(psn))
		}
	}
}

// senderTimer runs the sender's timers that are due.
func (c *Conn) senderTimer(now Time) {
	s := &c.snd
	cfg := &c.ep.cfg
	if s.rnrDeadline != 0 && now >= s.rnrDeadline {
		s.rnrDeadline = 0
		for psn := s.una; psn != s.nextPSN && s.rnrWaiting > 0; psn++ {
			r := &s.pkts[uint32(psn)&s.pktMask]
			if r.state != psRNR || r.rnrAt == rnrHeld {
				continue // held: its message's progress sends it (rnr.go)
			}
			if now >= r.rnrAt {
				r.state = psLost
				s.rnrWaiting--
				s.retxQ.push(uint32(psn))
			} else if s.rnrDeadline == 0 || r.rnrAt < s.rnrDeadline {
				s.rnrDeadline = r.rnrAt
			}
		}
	}
	if s.frtoDeadline != 0 && now >= s.frtoDeadline {
		// No ack echoed a transmission older than the expiry: loss,
		// and the controller now hears of the timeout it was spared.
		s.frtoAt, s.frtoDeadline = 0, 0
		if s.cc != nil {
			s.cc.OnTimeout(int64(now))
		}
		c.timeoutSweep(now)
	}
	if s.lossDeadline != 0 && now >= s.lossDeadline {
		s.lossDeadline = 0
		for pi := range s.paths {
			p := &s.paths[pi]
			if !p.haveAcked {
				continue
			}
			// The same threshold the per-path scan uses (§8.3.2).
			delay := c.pathLossDelay(p, 0)
			for seq := p.oldest; int32(seq-p.largestAcked) < 0; seq++ {
				t := c.snd.tx(p, seq)
				if !t.live {
					continue
				}
				if now-t.sent >= delay {
					c.loseTransmission(now, pi, seq)
				} else if d := t.sent + delay; s.lossDeadline == 0 || d < s.lossDeadline {
					s.lossDeadline = d
				}
			}
			c.advanceOldest(p)
		}
	}
	if s.tlpDeadline != 0 && now >= s.tlpDeadline {
		s.tlpDeadline = 0
		if !s.tlpFired && s.inflight > 0 && s.retxQ.empty() {
			s.tlpFired = true
			if c.holding(now) && !s.segQ.empty() && int(s.una.Distance(s.nextPSN)) < min(s.window, s.credit) {
				// The peer's acks have shown its host holding them (an
				// engine descheduled on a shared core), so a silence is
				// more likely a pause than a lost tail, and new data
				// waits behind the controller's window: send one packet
				// of it past the window (RFC 8985 §7.3). Its ack shows
				// the peer alive, and what it leaves unacked behind it is
				// overdue in its turn (§8.7.4); a paused peer answers it
				// with the rest, and nothing was sent twice. Without such
				// holds (a NIC's acks, the simulator) the oldest is
				// resent: behind a dead spine that finds the tail a
				// round trip sooner.
				c.ep.stats.TailProbes++
				s.tlpNew = true
			} else if r := &s.pkts[uint32(s.una)&s.pktMask]; s.una != s.nextPSN && r.state == psInflight {
				// Resend the oldest outstanding packet, on another path;
				// its ack (or its loss) tells us about the tail.
				c.ep.stats.TailProbes++
				c.loseTransmission(now, int(r.path), r.pseq)
			}
		}
	}
	if s.rtoDeadline != 0 && now >= s.rtoDeadline {
		started := s.rtoDeadline - Time(s.rto)
		s.rtoDeadline = 0
		if s.inflight == 0 && !s.ringWait {
			c.responseTimeout(now)
			return
		}
		// An RNR or OUT_OF_WINDOW NACK since the timer started means the
		// peer is there and refusing for now, which RNRRetries bounds: the
		// expiry resends what is old, as always, but is no silence, so it
		// neither counts against MaxRetries nor backs off nor tells the
		// controller to collapse its rate. (Counted, a receiver slow to
		// post buffers made a sender cut its rate on every expiry until
		// its packets were a hundred milliseconds apart.)
		answered := s.peerAnswered
		s.peerAnswered = false
		if !answered {
			s.timeouts++
			c.stats.Timeouts++
			c.ep.stats.Timeouts++
			if s.timeouts > cfg.MaxRetries {
				c.fail(StatusRetryExceeded, errRetries)
				return
			}
		}
		if !answered && cfg.Mode != ModeRoCEv2 && (s.timeouts == 1 || s.frtoAt != 0 && s.pause.get(now) > 0) {
			// The first expiry of a silence resends the oldest PSN
			// alone and lets the next ack say whether the silence was
			// loss (onAck, frtoDecide); so does every later expiry
			// while no ack has answered, once this connection's hosts
			// have been seen to pause (§8.4). The controller hears
			// of neither the timeout nor that PSN's loss until the
			// acks say loss (senderTimer): told at once, it collapsed
			// its window to one packet at every pause of a host's
			// engine, and the pause, proven by the next ack, left it
			// there (Eifel's response, RFC 4015, undoes that; not
			// doing it needs no undo). A second expiry that swept
			// resent everything in flight whenever an engine was
			// descheduled for over three RTOs: 400 to 900 duplicates at
			// a time in the star demo. Without pauses seen, it sweeps:
			// the first expiry's resend may have taken a dead path
			// again, and a spine failure's all-to-all took three times
			// as long waiting on the acks' verdict.
			if s.timeouts == 1 {
				s.frtoAt, s.frtoDeadline = now, 0
				s.silenceAt, s.silenceFrom, s.silenceEnd = now, started, s.nextPSN
			}
			if r := &s.pkts[uint32(s.una)&s.pktMask]; s.una != s.nextPSN && r.state == psInflight {
				s.paths[r.path].sweeps++ // rank
				s.sweeping, s.unjudged = true, true
				c.loseTransmission(now, int(r.path), r.pseq)
				s.sweeping, s.unjudged = false, false
			}
		} else {
			if !answered && s.cc != nil {
				s.cc.OnTimeout(int64(now))
			}
			s.frtoAt, s.frtoDeadline = 0, 0
			c.timeoutSweep(now)
		}
		if !answered {
			s.rto = min(2*s.rto, cfg.MaxRTO)
		}
		if s.inflight > 0 || !s.retxQ.empty() || s.readsWaiting > 0 {
			s.rtoDeadline = now + Time(s.rto)
		}
	}
}

// timeoutSweep declares lost, at an expiry of the retransmission timer,
// everything unresolved that has had its round trip (§8.4).
func (c *Conn) timeoutSweep(now Time) {
	s := &c.snd
	// Everything unresolved that has had a round trip and the
	// reorder allowance to be acked is lost (RACK's rule at an RTO,
	// RFC 8985 §6.3: whatever was sent before the silence began is
	// as lost as the packet the timer ran for); the oldest
	// outstanding PSN always is, so a timeout always resends
	// something. Each path by its own round trip, as the per-path
	// scan judges it.
	//
	// These losses say nothing about any one path: the timer ran
	// because no path was acked, the host's own pause or the peer's
	// as likely as the fabric. So they do not count towards a
	// path's suspicion (§8.7.4); counted, one pause of the receiver
	// marked three or more packets lost on every path, suspected
	// them all, and took every plane down at once (demo -topology
	// planes: a dozen planes down in runs without a cut).
	if r := &s.pkts[uint32(s.una)&s.pktMask]; s.una != s.nextPSN && r.state == psInflight {
		s.paths[r.path].sweeps++ // rank
	}
	s.sweeping = true
	for pi := range s.paths {
		p := &s.paths[pi]
		horizon := now - c.pathLossDelay(p, 0)
		for seq := p.oldest; seq != p.nextSeq; seq++ {
			if t := c.snd.tx(p, seq); t.live && t.sent <= horizon {
				c.loseTransmission(now, pi, seq)
			}
		}
		c.advanceOldest(p)
	}
	if r := &s.pkts[uint32(s.una)&s.pktMask]; s.una != s.nextPSN && r.state == psInflight {
		c.loseTransmission(now, int(r.path), r.pseq)
	}
	s.sweeping = false
}

// frtoDecide runs on an ack that acknowledged a new PSN while the first
// expiry of a silence waits for its verdict (§8.4, after F-RTO, RFC 5682,
// judged by the echo as Eifel does, RFC 3522). An ack that echoes a
// transmission sent before the expiry shows the peer received it and its
// ack was held (the peer's host or ours paused): the transmissions still
// out are late, not lost, and nothing more is resent (frtoPause). This
// ack echoed only what was sent since; if no such older echo comes within
// the receiver's ack hold (the hold allowance: a paused receiver answers everything it held
// at once, and the retransmission, sent with ACK_REQ, may be answered
// first), the silence was loss, and the sweep the expiry held back runs
// then (senderTimer), a round trip after the expiry rather than a
// doubled RTO. Which PSNs or path sequences an ack covers cannot tell the
// two apart: after a loss the first ack also covers what arrived before
// the loss began, whose own acks were lost with the rest.
func (c *Conn) frtoDecide(now Time) {
	s := &c.snd
	if s.frtoAt != 0 && s.frtoDeadline == 0 {
		s.frtoDeadline = now + Time(max(c.holdAllowance(now), Duration(time.Microsecond)))
	}
}

// frtoPause settles the first expiry of a silence as a pause.
func (c *Conn) frtoPause() {
	s := &c.snd
	c.ep.stats.SpuriousTimeouts++
	s.frtoAt, s.frtoDeadline = 0, 0
}

// responseTimeout is the retransmission timer's expiry while nothing of
// ours is in flight but a READ whose request was acknowledged waits for
// its response (§8.4, §9.3). The response is the responder's to resend,
// and a responder that gave up (its retry limit) has forgotten the
// connection and says nothing, so without this the READ, and its stream
// behind it, would wait forever. Each expiry sends a keepalive PROBE,
// which a responder that forgot the connection answers with RESET, and
// counts as a timeout: MaxRetries of them without a response packet fail
// the connection, as unanswered data would.
func (c *Conn) responseTimeout(now Time) {
	s := &c.snd
	cfg := &c.ep.cfg
	if s.readsWaiting == 0 {
		return
	}
	s.timeouts++
	c.ep.stats.ResponseTimeouts++
	if s.timeouts > cfg.MaxRetries {
		c.fail(StatusRetryExceeded, errRetries)
		return
	}
	s.keepalive = true
	c.ep.markReady(c)
	s.rto = min(2*s.rto, cfg.MaxRTO)
	s.rtoDeadline = now + Time(s.rto)
}

// responseProgress restarts the response wait when a response packet is
// placed: the responder is alive and serving.
func (c *Conn) responseProgress(now Time) {
	s := &c.snd
	if s.inflight > 0 || s.readsWaiting == 0 {
		return // the timer runs for our own data, and its acks restart it
	}
	s.timeouts = 0
	s.rto = c.rtoNow(now)
	s.rtoDeadline = now + Time(s.rto)
}

// buildKeepalive writes the keepalive PROBE responseTimeout asked for, on
// an active path with room (any path with room when none is active).
func (c *Conn) buildKeepalive(now Time, buf []byte) (int, int) {
	s := &c.snd
	s.keepalive = false
	for _, k := range s.active {
		if s.room(&s.paths[k]) {
			return c.putProbe(now, buf, int(k), false), int(k)
		}
	}
	for i := range s.paths {
		if s.proven(s.paths[i].plane) && s.room(&s.paths[i]) {
			return c.putProbe(now, buf, i, false), i
		}
	}
	return 0, 0
}

// msgProgress completes m if it is done and reports completions that
// stream order allows.
func (c *Conn) msgProgress(m *sendMsg) {
	if m.done || !m.fullyAcked() {
		return
	}
	if m.op == wire.OpReadReq && m.status == StatusOK && !m.respDone {
		return
	}
	m.done = true
	c.deliverSendStream(m.stream)
}

func (c *Conn) deliverSendStream(stream uint16) {
	s := &c.snd
	st := &s.streams[stream]
	for st.head >= 0 {
		m := &s.msgs[st.head]
		if !m.done {
			return
		}
		st.head = m.next
		if st.head < 0 {
			st.tail = -1
		}
		cq := Completion{Conn: c, WRID: m.wrid, Status: m.status, Stream: m.stream, Bytes: int(m.size)}
		switch {
		case m.op.IsWrite():
			cq.Op = OpWrite
		case m.op.IsSend():
			cq.Op = OpSend
		default:
			cq.Op = OpRead
		}
		if m.status == StatusOK {
			c.ep.stats.MessagesCompleted++
		} else {
			c.ep.stats.MessagesFailed++
		}
		m.inUse = false
		m.local, m.sgl = nil, nil
		c.ep.complete(cq)
	}
}

// onReadResp places a READ response packet into the requester's buffer.
// It reports whether the packet was accepted.
func (c *Conn) onReadResp(now Time, d wire.Data) bool {
	s := &c.snd
	id := d.MsgID()
	m := &s.msgs[id&s.msgMask]
	if !m.inUse || m.id != id || m.op != wire.OpReadReq || d.MsgLen() != m.size {
		return false
	}
	off := d.Offset()
	if m.sgl != nil {
		scatterAt(m.sgl, off, d.Payload())
	} else {
		copy(m.local[off:], d.Payload())
	}
	m.readGot += uint32(d.PayloadLen())
	if m.readGot >= d.MsgLen() && !m.respDone {
		m.respDone = true
		if m.awaitResp {
			m.awaitResp = false
			s.readsWaiting--
		}
	}
	c.responseProgress(now)
	c.msgProgress(m)
	return true
}

// addReadJob queues a READ response; false if no job slot is free.
func (c *Conn) addReadJob(reqID uint32, stream uint16, streamSeq uint32, data []byte) bool {
	s := &c.snd
	if s.jobFree < 0 && !s.growJobs() {
		return false
	}
	ji := s.jobFree
	j := &s.jobs[ji]
	s.jobFree = j.nextFree
	*j = readJob{inUse: true, reqID: reqID, stream: stream, streamSeq: streamSeq, data: data,
		npkts: packetsFor(len(data), s.mp), nextFree: -1}
	s.jobCount++
	s.segQ.push(readJobBit | uint32(ji))
	return true
}

func (c *Conn) jobAcked(ji uint32) {
	s := &c.snd
	j := &s.jobs[ji]
	j.acked++
	if j.acked < j.npkts || j.segPkts < j.npkts {
		return
	}
	j.inUse = false
	j.data = nil
	j.nextFree = s.jobFree
	s.jobFree = int32(ji)
	s.jobCount--
	c.rcv.retryStalled(c)
}

// flush completes every outstanding message with st.
func (s *sender) flush(c *Conn, st Status) {
	for i := range s.msgs {
		if m := &s.msgs[i]; m.inUse && !m.done {
			m.done = true
			m.status = st
		}
	}
	for i := range s.streams {
		c.deliverSendStream(uint16(i))
	}
	s.inflight, s.rnrWaiting, s.inflightBytes, s.readsWaiting = 0, 0, 0, 0
	s.keepalive, s.peerAnswered = false, false
	s.rtoDeadline, s.lossDeadline, s.rnrDeadline, s.tlpDeadline = 0, 0, 0, 0
	s.frtoAt, s.frtoDeadline = 0, 0
	s.ringWait = false
	s.repairNext = s.repairEnd
	s.segQ = ringU32{buf: s.segQ.buf, mask: s.segQ.mask}
	s.retxQ = ringU32{buf: s.retxQ.buf, mask: s.retxQ.mask}
}
