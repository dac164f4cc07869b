package transport

import (
	"github.com/metaroce/metaroce/wire"
)

// rcvPath is the receiver's record of one path of the peer (§5.2): the
// highest per-path sequence seen and a 256-bit trailing bitmap, bit i for
// highest-i. Holes never pin it: it slides with the highest sequence, as
// path sequence numbers are never retransmitted.
type rcvPath struct {
	id           uint16
	have         bool
	queued       bool // in ackQ
	highest      uint32
	bits         [4]uint64
	pending      int    // packets since the last ack for this path
	firstPending Time   // arrival of the oldest of them
	ce           uint16 // CE marks since the last ack
	entropy      uint16 // UDP source port of the latest data on this path (0: unknown)
	echoTS       uint64
	echoPSN      wire.PSN
	arrived      Time
}

func (r *receiver) path(pid int) *rcvPath {
	p := r.paths[pid]
	if p == nil {
		// Once per path of a connection: a cold allocation.
		p = &rcvPath{id: uint16(pid)}
		r.paths[pid] = p
	}
	return p
}

func (p *rcvPath) record(now Time, seq uint32, psn wire.PSN, ts uint64, ce bool) {
	if ce && p.ce < 0xffff {
		p.ce++
	}
	if !p.have {
		p.have, p.highest = true, seq
		p.bits = [4]uint64{1}
	} else if d := int32(seq - p.highest); d > 0 {
		p.shift(uint32(d))
		p.bits[0] |= 1
		p.highest = seq
	} else if back := uint32(-d); back < wire.SackBits {
		p.bits[back/64] |= 1 << (back % 64)
	} else {
		return // older than the bitmap reaches: nothing to report
	}
	if int32(seq-p.highest) == 0 {
		p.echoTS, p.echoPSN, p.arrived = ts, psn, now
	}
}

// shift moves every bit up by d (bit i becomes bit i+d).
func (p *rcvPath) shift(d uint32) {
	if d >= wire.SackBits {
		p.bits = [4]uint64{}
		return
	}
	w, b := int(d/64), d%64
	for i := 3; i >= 0; i-- {
		var v uint64
		if j := i - w; j >= 0 {
			v = p.bits[j] << b
			if b != 0 && j > 0 {
				v |= p.bits[j-1] >> (64 - b)
			}
		}
		p.bits[i] = v
	}
}

func (r *receiver) queueAck(p *rcvPath) {
	if p.queued {
		return
	}
	p.queued = true
	r.ackQ = append(r.ackQ, p.id) // capacity MaxPathID: never grows
}

// ackTimerFired queues an ack for every path whose oldest unacknowledged
// packet has waited AckDelay, and re-arms for the others. Timing each path
// from its own first pending packet keeps one busy path from dragging
// every idle path into an ack each AckDelay.
func (r *receiver) ackTimerFired(now Time, delay Duration) {
	r.ackTimer = 0
	for _, p := range r.paths {
		if p == nil || p.pending == 0 || p.queued {
			continue
		}
		if due := p.firstPending + Time(delay); due <= now {
			r.queueAck(p)
		} else if r.ackTimer == 0 || due < r.ackTimer {
			r.ackTimer = due
		}
	}
}

func (r *receiver) hasControl() bool {
	return r.nackCount > 0 || r.ackHead < len(r.ackQ)
}

// buildControl writes a pending NACK or ack into buf; 0 if none. It
// sets c.rcv.lastEntropy to the entropy the packet should carry (0: the
// caller picks).
func (c *Conn) buildControl(now Time, buf []byte) int {
	c.rcv.lastEntropy, c.rcv.lastPlane = 0, 0
	r := &c.rcv
	if r.nackCount > 0 {
		n := r.nacks[r.nackHead]
		r.nackHead = (r.nackHead + 1) % len(r.nacks)
		r.nackCount--
		if int(n.path) < len(r.paths) && r.paths[n.path] != nil {
			r.lastEntropy, r.lastPlane = r.paths[n.path].entropy, c.pathPlane(int(n.path))
		}
		h := wire.NackHeader{DstConn: c.peerID, PSN: n.psn, PathID: n.path, Reason: n.reason,
			PathSeq: n.seq, CumPSN: r.cum, EchoTimestamp: n.ts, Info: n.info}
		h.Put(buf)
		return wire.NackLen + wire.TrailerLen
	}
	if r.ackHead < len(r.ackQ) {
		p := r.paths[r.ackQ[r.ackHead]]
		r.ackHead++
		if r.ackHead == len(r.ackQ) {
			r.ackQ, r.ackHead = r.ackQ[:0], 0
		}
		p.queued = false
		r.lastEntropy, r.lastPlane = p.entropy, c.pathPlane(int(p.id))
		h := wire.AckHeader{DstConn: c.peerID, CumPSN: r.cum, PathID: p.id, CECount: p.ce,
			PathAckSeq: p.highest, EchoPSN: p.echoPSN, EchoTimestamp: p.echoTS,
			RateHint: c.rateHint(), Credit: uint32(r.window), AckDelay: uint32(max(0, now-p.arrived))}
		for i := 0; i < wire.SackBytes; i++ {
			h.Sack[i] = byte(p.bits[i/8] >> (8 * (i % 8)))
		}
		h.Put(buf)
		p.pending, p.ce = 0, 0
		c.ep.stats.AcksSent++
		return wire.AckLen + wire.TrailerLen
	}
	return 0
}

// rateHint is the RateHint for c's next ack in Mb/s (§8.9): its fair
// share of the downlink while at least two connections send to this
// endpoint, else 0. A lone sender's own controller already finds the
// downlink's rate, and a hint of 95% of the line rate would only cap it.
func (c *Conn) rateHint() uint32 {
	f := c.ep.fair
	if f == nil || f.Active() < 2 || c.rcv.hint == 0 {
		return 0
	}
	return uint32(max(c.rcv.hint/1e6, 1))
}
