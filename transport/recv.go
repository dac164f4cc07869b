package transport

import "github.com/metaroce/metaroce/wire"

// recvMsg tracks a message being received, indexed by MsgID & msgMask.
type recvMsg struct {
	inUse    bool
	complete bool
	// delivered marks a failed message that has taken effect but keeps
	// its slot as a tombstone, so its late packets get its own failure
	// reason; the slot is reused by the next message that maps to it.
	delivered bool
	op        wire.Opcode
	status    Status
	stream    uint16
	id        uint32
	streamSeq uint32
	msgLen    uint32
	got       uint32
	imm       uint32
	recvSeq   uint32
	dst       []byte // placement target: region range or receive buffer
	raddr     uint64
	rkey      uint32
	// low is the message's first PSN, as its first packet to arrive
	// implies (its PSN less its packet index). A sender gives a stream's
	// messages PSNs in posting order, so once every PSN before a later
	// message's low has arrived, an earlier position of its stream that
	// is still missing never will (deadPositions).
	low wire.PSN
}

type recvBuf struct {
	posted bool
	// claimed: a SEND (message id owner) has been given the buffer and
	// places into it. A buffer has one claimer at a time, so it completes
	// once and nothing writes into it after it is back with the
	// application (§9.4).
	claimed bool
	owner   uint32
	seq     uint32
	wrid    uint64
	buf     []byte
}

type recvStream struct {
	next    uint32 // stream sequence of the next message to take effect
	pending int    // complete messages waiting for an earlier one
	stalled bool   // a READ waits for a free response job
	// near is deadScan's scratch: 1 + the slot of the nearest complete
	// message ahead of next; 0 outside a scan.
	near int32
}

type nackRec struct {
	psn    wire.PSN
	path   uint16
	reason wire.NackReason
	seq    uint32
	ts     uint64
	info   uint32
}

type receiver struct {
	cum    wire.PSN // all PSNs before cum have arrived
	bits   []uint64 // arrival bitmap: PSN p is bit p & mask
	mask   uint32
	window int

	msgs    []recvMsg
	msgMask uint32
	streams []recvStream
	stalled int

	recvs    []recvBuf
	recvMask uint32
	// What msgs, recvs and paths may grow to (grow.go): the message
	// window, the receive queue and MaxPathID.
	msgCap, recvCap, pathCap int
	recvPosted               uint32 // RecvSeq the next posted buffer gets

	paths    []*rcvPath
	ackQ     []uint16 // paths owing an ack, FIFO
	ackHead  int
	ackTimer Time

	nacks     []nackRec
	nackHead  int
	nackCount int

	// what buildControl chose for the packet it just wrote
	lastEntropy uint16
	lastPlane   uint8

	// hint is this connection's share of the downlink, bits/s, as of
	// its latest accepted packet (0: none computed yet).
	hint uint64

	// deadAt: when cum reaches it, some message waiting for an earlier
	// position of its stream may be waiting for one that can no longer
	// come (deadPositions); valid while deadSet.
	deadAt  wire.PSN
	deadSet bool

	// go-back-N (rocev2 mode): a SEQUENCE NACK was sent for this cum.
	seqNakSent bool
	seqNakCum  wire.PSN
}

func (r *receiver) init(cfg *Config, st recvStore) {
	r.window = cfg.RecvWindow
	r.bits = reuse(st.bits, cfg.RecvWindow/64+1)
	r.mask = uint32(cfg.RecvWindow - 1)
	// The message, receive buffer and path tables start small and grow
	// (grow.go).
	r.msgCap = cfg.MsgWindow
	nm := startLen(initMsgs, cfg.MsgWindow, cap(st.msgs))
	r.msgs = reuse(st.msgs, nm)
	r.msgMask = uint32(nm - 1)
	r.streams = reuse(st.streams, cfg.MaxStreams)
	r.recvCap = cfg.RecvQueue
	nr := startLen(initRecvs, cfg.RecvQueue, cap(st.recvs))
	r.recvs = reuse(st.recvs, nr)
	r.recvMask = uint32(nr - 1)
	r.pathCap = cfg.MaxPathID
	if np := min(cap(st.paths), cfg.MaxPathID); np >= initPaths {
		// Keep the records a released connection allocated, reset.
		r.paths = st.paths[:np]
		for i, p := range r.paths {
			if p != nil {
				*p = rcvPath{id: uint16(i)}
			}
		}
	} else {
		r.paths = make([]*rcvPath, min(initPaths, cfg.MaxPathID))
	}
	r.ackQ = st.ackQ[:0]
	if cap(r.ackQ) < cfg.MaxPathID {
		r.ackQ = make([]uint16, 0, cfg.MaxPathID)
	}
	r.nacks = reuse(st.nacks, 64)
}

func (r *receiver) bit(p wire.PSN) bool {
	i := uint32(p) & r.mask
	return r.bits[i/64]&(1<<(i%64)) != 0
}

func (r *receiver) setBit(p wire.PSN) {
	i := uint32(p) & r.mask
	r.bits[i/64] |= 1 << (i % 64)
}

func (r *receiver) clearBit(p wire.PSN) {
	i := uint32(p) & r.mask
	r.bits[i/64] &^= 1 << (i % 64)
}

// advance moves cum past every PSN that has arrived, clearing their bits
// so the slots are clean when the window wraps onto them.
func (r *receiver) advance() {
	for r.bit(r.cum) {
		r.clearBit(r.cum)
		r.cum++
	}
}

func (r *receiver) postRecv(wrid uint64, buf []byte) error {
	b := &r.recvs[r.recvPosted&r.recvMask]
	for b.posted && (b.seq^r.recvPosted)&uint32(r.recvCap-1) != 0 && len(r.recvs) < r.recvCap {
		r.growRecvs() // grow.go
		b = &r.recvs[r.recvPosted&r.recvMask]
	}
	if b.posted {
		return ErrRecvQueueFull
	}
	*b = recvBuf{posted: true, seq: r.recvPosted, wrid: wrid, buf: buf}
	r.recvPosted++
	return nil
}

// Outcome of accepting a data packet.
const (
	accOK      = iota // placed (or nothing to place): mark arrived
	accRefused        // refused (NACK sent): not marked, nothing placed
)

// onData handles a validated data packet (§8.2). A packet that is refused
// is not recorded anywhere, neither in the PSN window nor in its path's
// SACK state: only a NACK speaks of it, and if the NACK is lost the sender
// resends and hears it again. So no ack can ever make a refused packet
// look delivered.
func (c *Conn) onData(now Time, d wire.Data, srcPort uint16, ce bool) {
	r := &c.rcv
	e := c.ep
	e.stats.DataReceived++
	c.stats.DataReceived++
	pid := int(d.PathID())
	if pid >= len(r.paths) {
		if r.paths == nil || pid >= r.pathCap {
			// Beyond MaxPathID, or a released connection's (no tables).
			e.stats.RxBadPath++
			return
		}
		r.growPaths(pid) // grow.go
	}
	if d.Opcode() == wire.OpProbe {
		// A probe asks only "does this path work": ack it at once.
		e.stats.ProbesReceived++
		p := r.path(pid)
		p.record(c.ep.arrival(now), d.PathSeq(), 0, d.Timestamp(), false)
		p.entropy = srcPort
		r.queueAck(p)
		return
	}
	psn := d.PSN()
	dist := r.cum.Distance(psn)
	if dist < 0 || (int(dist) < r.window && r.bit(psn)) {
		e.stats.Duplicates++
		c.stats.Duplicates++
		p := r.path(pid)
		p.record(c.ep.arrival(now), d.PathSeq(), psn, d.Timestamp(), ce)
		p.entropy = srcPort
		r.queueAck(p) // the sender resends because it lacks our acks: tell it now
		return
	}
	if int(dist) >= r.window {
		e.stats.OutOfWindow++
		c.queueNack(d, wire.NackOutOfWindow, uint32(r.window))
		return
	}
	if dist > 0 && e.cfg.Mode == ModeRoCEv2 {
		// The go-back-N baseline takes packets in order only, and says
		// once per gap where to resume (§8.8).
		e.stats.OutOfOrderDropped++
		if !r.seqNakSent || r.seqNakCum != r.cum {
			r.seqNakSent, r.seqNakCum = true, r.cum
			e.stats.SequenceNacks++
			c.queueNack(d, wire.NackSequence, 0)
		}
		return
	}
	res, reason := accOK, wire.NackReason(0)
	switch {
	case d.Flags()&wire.FlagVoid != 0:
		// The sender abandons this PSN after our NACK (§6.3): consume it.
		e.stats.VoidReceived++
	case d.Opcode() == wire.OpReadResp:
		if !c.onReadResp(now, d) {
			// No such read outstanding (flushed, or a confused peer).
			res, reason = accRefused, wire.NackInvalidRequest
		}
	default:
		res, reason = c.acceptMsgPacket(d)
	}
	if res == accRefused {
		info := uint32(0)
		if reason == wire.NackRNR {
			info = uint32(e.cfg.RNRDelay / 1000)
		}
		c.queueNack(d, reason, info)
		return
	}
	r.setBit(psn)
	r.advance()
	if r.deadSet && !r.cum.Before(r.deadAt) {
		c.deadPositions()
	}
	if e.fair != nil {
		r.hint = e.fair.Observe(int64(now), uint64(c.localID), d.PayloadLen())
	}
	p := r.path(pid)
	p.record(c.ep.arrival(now), d.PathSeq(), psn, d.Timestamp(), ce)
	p.entropy = srcPort
	p.pending++
	if p.pending == 1 {
		p.firstPending = now
	}
	if d.Flags()&wire.FlagAckReq != 0 || p.pending >= e.cfg.AckEvery {
		r.queueAck(p)
	} else if r.ackTimer == 0 {
		r.ackTimer = now + Time(e.cfg.AckDelay)
	}
}

// claimRecv reports whether the SEND packet d may have receive buffer b.
// An unclaimed buffer it may. One already claimed by another message is
// contested, which an honest sender never causes (it numbers its SENDs'
// RecvSeq one by one) and a forged SEND does: of the two, the one
// earlier in the same stream is the one that can take effect first, so
// it gets the buffer and the later claimer fails (its packets are
// refused from then on, and it takes effect with no effect when its turn
// comes), so a forgery cannot hold up the stream it pretends to be part
// of. Otherwise d waits, as for a buffer not yet posted.
func (c *Conn) claimRecv(b *recvBuf, d wire.Data) bool {
	r := &c.rcv
	if !b.claimed {
		return true
	}
	x := &r.msgs[b.owner&r.msgMask]
	if !x.inUse || x.id != b.owner || !x.op.IsSend() || x.recvSeq != b.seq || x.delivered {
		return true // a stale claim: its message has gone
	}
	if x.stream != d.Stream() || int32(x.streamSeq-d.StreamSeq()) <= 0 {
		return false
	}
	x.dst = nil
	if x.status == StatusOK {
		x.status = StatusRemoteInvalid
	}
	x.recvSeq = ^b.seq // no longer names b: its take-effect completes no buffer
	if !x.complete {
		x.complete = true
		c.recvMsgComplete(x)
	}
	b.claimed = false
	return true
}

// failReason is the NACK reason a failed message's packets get.
func failReason(st Status) wire.NackReason {
	if st == StatusRemoteAccess {
		return wire.NackRemoteAccess
	}
	return wire.NackInvalidRequest
}

// rmaTarget checks an RMA packet's key, right and the whole message range
// (§10.3) and returns the bytes it may touch.
func (c *Conn) rmaTarget(d wire.Data) ([]byte, bool) {
	want := AccessRemoteWrite
	if d.Opcode() == wire.OpReadReq {
		want = AccessRemoteRead
	}
	reg, ok := c.mem.Lookup(d.RKey())
	if !ok {
		return nil, false
	}
	return reg.slice(d.RemoteAddr(), d.MsgLen(), want)
}

// acceptMsgPacket validates and places a packet of a WRITE, SEND or READ
// request (§9). The key is checked on every packet against the message's
// whole range, so every packet of a message is judged alike. A message
// that fails completes (as failed) at its first refused packet, so its
// stream moves on; its later packets are refused too.
func (c *Conn) acceptMsgPacket(d wire.Data) (int, wire.NackReason) {
	r := &c.rcv
	id := d.MsgID()
	m := r.msgSlot(id) // grow.go
	if m.inUse && m.id != id && !m.delivered && int(m.stream) < len(r.streams) &&
		int32(m.streamSeq-r.streams[m.stream].next) < 0 {
		// Its stream has passed its position (a forged message, whose
		// position the genuine one took): it can never take effect, and
		// keeping it would refuse every message of this slot for good.
		m.inUse = false
	}
	if m.inUse && m.id != id {
		if !m.delivered {
			// The slot still holds an older message (a stalled READ):
			// the sender is ahead of us. Refuse for now.
			return accRefused, wire.NackOutOfWindow
		}
		m.inUse = false // a failed message's tombstone: reuse it
	}
	if !m.inUse {
		if int(d.Stream()) >= len(r.streams) {
			return accRefused, wire.NackInvalidRequest
		}
		if int32(d.StreamSeq()-r.streams[d.Stream()].next) < 0 {
			// A message that already took effect (a failed one, whose
			// remaining packets still come): refuse.
			return accRefused, wire.NackInvalidRequest
		}
		*m = recvMsg{inUse: true, op: d.Opcode(), stream: d.Stream(), id: id,
			streamSeq: d.StreamSeq(), msgLen: d.MsgLen(), imm: d.Imm(),
			low: d.PSN() - wire.PSN(d.Offset()/uint32(max(1, c.maxPayload)))}
		switch op := d.Opcode(); {
		case op.IsWrite() || op == wire.OpReadReq:
			m.raddr, m.rkey = d.RemoteAddr(), d.RKey()
			if dst, ok := c.rmaTarget(d); ok {
				m.dst = dst
			} else {
				m.status = StatusRemoteAccess
			}
		case op.IsSend():
			rs := d.RecvSeq()
			b := &r.recvs[rs&r.recvMask]
			if int32(rs-r.recvPosted) >= 0 || !b.posted || b.seq != rs || !c.claimRecv(b, d) {
				m.inUse = false
				return accRefused, wire.NackRNR
			}
			b.claimed, b.owner = true, id
			m.recvSeq = rs
			if uint64(d.MsgLen()) > uint64(len(b.buf)) {
				m.status = StatusLocalLength
			} else {
				m.dst = b.buf[:d.MsgLen()]
			}
		}
		if m.status != StatusOK {
			m.complete = true
			c.recvMsgComplete(m)
			return accRefused, failReason(m.status)
		}
	} else {
		if m.op != d.Opcode() || m.stream != d.Stream() || m.msgLen != d.MsgLen() ||
			m.streamSeq != d.StreamSeq() {
			// The message fails here (§9.1), as the sender's does on this
			// NACK: it then takes effect, with no effect, so its stream
			// goes on, and its remaining packets draw INVALID_REQUEST.
			if !m.complete {
				m.status = StatusRemoteInvalid
				m.complete = true
				c.recvMsgComplete(m)
			}
			return accRefused, wire.NackInvalidRequest
		}
		if m.complete {
			return accRefused, failReason(m.status)
		}
		if m.op.IsWrite() || m.op == wire.OpReadReq {
			if _, ok := c.rmaTarget(d); !ok || m.raddr != d.RemoteAddr() || m.rkey != d.RKey() {
				// Deregistered mid-message, or a packet that disagrees
				// with the first: the message fails from here on.
				m.status = StatusRemoteAccess
				m.complete = true
				c.recvMsgComplete(m)
				return accRefused, wire.NackRemoteAccess
			}
		}
	}
	n := uint32(d.PayloadLen())
	if n > 0 {
		copy(m.dst[d.Offset():], d.Payload())
		c.ep.stats.BytesPlaced += uint64(n)
		c.stats.BytesPlaced += uint64(n)
	}
	m.got += n
	if m.got >= m.msgLen || m.op == wire.OpReadReq {
		m.complete = true
		c.recvMsgComplete(m)
	}
	return accOK, 0
}

func (c *Conn) recvMsgComplete(m *recvMsg) {
	r := &c.rcv
	st := &r.streams[m.stream]
	if m.streamSeq != st.next {
		st.pending++
		if !r.deadSet || m.low.Before(r.deadAt) {
			r.deadAt, r.deadSet = m.low, true
		}
		return
	}
	c.deliverRecvStream(m.stream, m)
}

// deliverRecvStream makes messages of a stream take effect in order,
// starting with m (whose turn it is).
func (c *Conn) deliverRecvStream(stream uint16, m *recvMsg) {
	r := &c.rcv
	st := &r.streams[stream]
	for m != nil {
		if !c.takeEffect(m) {
			if !st.stalled {
				st.stalled = true
				r.stalled++
			}
			return
		}
		if st.stalled {
			st.stalled = false
			r.stalled--
		}
		m.dst = nil
		if m.status == StatusOK {
			m.inUse = false
		} else {
			m.delivered = true
		}
		st.next++
		m = nil
		if st.pending > 0 {
			for i := range r.msgs {
				x := &r.msgs[i]
				if x.inUse && x.complete && !x.delivered && x.stream == stream && x.streamSeq == st.next {
					st.pending--
					m = x
					break
				}
			}
		}
	}
}

// takeEffect performs a complete message's effect at its turn in the
// stream; false means it must wait (no READ response job free).
func (c *Conn) takeEffect(m *recvMsg) bool {
	r := &c.rcv
	switch {
	case m.op == wire.OpReadReq:
		if m.status == StatusOK && !c.addReadJob(m.id, m.stream, m.streamSeq, m.dst) {
			return false
		}
		if m.status == StatusOK {
			c.ep.markReady(c)
		}
	case m.op == wire.OpWriteImm:
		if m.status == StatusOK {
			c.ep.stats.RecvCompleted++
			c.ep.complete(Completion{Conn: c, Op: OpRecvWriteImm, Stream: m.stream,
				Bytes: int(m.msgLen), Imm: m.imm, HasImm: true})
		}
	case m.op.IsSend():
		b := &r.recvs[m.recvSeq&r.recvMask]
		if !b.posted || !b.claimed || b.owner != m.id || b.seq != m.recvSeq {
			break // it lost its buffer to an earlier SEND (claimRecv)
		}
		cq := Completion{Conn: c, Op: OpRecv, WRID: b.wrid, Stream: m.stream,
			Bytes: int(m.msgLen), Status: m.status}
		if m.op == wire.OpSendImm {
			cq.Imm, cq.HasImm = m.imm, true
		}
		b.posted, b.claimed = false, false
		b.buf = nil
		c.ep.stats.RecvCompleted++
		c.ep.complete(cq)
	}
	return true
}

// deadPositions runs when cum has passed the first PSN of a message that
// waits for an earlier position of its stream. A sender gives a stream's
// positions their PSNs in posting order, so once cum has passed the first
// PSN of a complete message x, every PSN of every position between the
// stream's next and x has arrived: a position there still missing, or
// whose message is still incomplete, lost its packets to packets that
// took their PSNs first (forged ones, §13: the genuine ones were taken
// for duplicates). Waiting would stall the stream for good; those
// positions fail instead (remote invalid request, no effect), and the
// stream goes on. The evidence is the nearest complete message ahead of
// next, so a complete message further ahead (possibly forged too) never
// fails one that is complete and merely waits. An honest peer never
// causes this: its earlier positions are complete by the time cum passes
// a later one's PSNs, and the scan finds nothing. It is a scan of the
// message window, run only when cum passes the earliest such PSN, and
// again while it fails positions (what then took effect may leave the
// stream waiting before the next gap, whose evidence has arrived too).
func (c *Conn) deadPositions() {
	for c.deadScan() {
	}
}

// deadScan is one pass of deadPositions: it finds each stream's nearest
// complete message ahead of its next (in recvStream.near, cleared again
// before it returns), fails the positions before it whose PSNs have all
// arrived, and reports whether it failed any.
func (c *Conn) deadScan() bool {
	r := &c.rcv
	r.deadSet = false
	for i := range r.msgs {
		x := &r.msgs[i]
		if !x.inUse || !x.complete || x.delivered || int(x.stream) >= len(r.streams) {
			continue
		}
		st := &r.streams[x.stream]
		if d := int32(x.streamSeq - st.next); st.stalled || d <= 0 || d > int32(r.msgCap) {
			// A stalled stream waits for a READ job, not for a
			// position. Evidence more than a message window ahead is
			// not taken: a forged complete message far ahead would
			// otherwise move the stream past every genuine position up
			// to its own, and each of those would then fail when it
			// came; this way one forged message fails at most
			// MsgWindow positions.
			continue
		}
		if st.near == 0 || int32(x.streamSeq-r.msgs[st.near-1].streamSeq) < 0 {
			st.near = int32(i + 1)
		}
	}
	failed := false
	for i := range r.msgs {
		x := &r.msgs[i]
		if !x.inUse || int(x.stream) >= len(r.streams) || r.streams[x.stream].near != int32(i+1) {
			continue
		}
		r.streams[x.stream].near = 0
		if r.cum.Before(x.low) {
			if !r.deadSet || x.low.Before(r.deadAt) {
				r.deadAt, r.deadSet = x.low, true
			}
			continue
		}
		c.skipDead(x.stream, x.streamSeq)
		failed = true
	}
	return failed
}

// skipDead fails the positions of stream before upto that have not taken
// effect, and delivers what then may.
func (c *Conn) skipDead(stream uint16, upto uint32) {
	r := &c.rcv
	st := &r.streams[stream]
	for int32(st.next-upto) < 0 && !st.stalled {
		// Positions with no message pass in one step: one scan a
		// message, however far ahead upto is.
		m := r.firstAhead(stream, st.next, upto)
		if m == nil {
			c.ep.stats.StreamPositionsLost += uint64(upto - st.next)
			st.next = upto
			break
		}
		c.ep.stats.StreamPositionsLost += uint64(m.streamSeq - st.next)
		st.next = m.streamSeq
		if !m.complete {
			c.ep.stats.StreamPositionsLost++
			m.status, m.dst, m.complete = StatusRemoteInvalid, nil, true
		} else {
			st.pending--
		}
		c.deliverRecvStream(stream, m)
	}
	if st.stalled {
		return
	}
	if m := r.firstAhead(stream, st.next, st.next+1); m != nil && m.complete {
		st.pending--
		c.deliverRecvStream(stream, m)
	}
}

// firstAhead is the message of stream not yet taken effect with the
// earliest position in [from, upto), or nil.
func (r *receiver) firstAhead(stream uint16, from, upto uint32) *recvMsg {
	var best *recvMsg
	for i := range r.msgs {
		x := &r.msgs[i]
		if !x.inUse || x.delivered || x.stream != stream {
			continue
		}
		if d := x.streamSeq - from; d < upto-from && (best == nil || d < best.streamSeq-from) {
			best = x
		}
	}
	return best
}

// retryStalled resumes streams whose READ waited for a response job.
func (r *receiver) retryStalled(c *Conn) {
	if r.stalled == 0 {
		return
	}
	for si := range r.streams {
		st := &r.streams[si]
		if !st.stalled {
			continue
		}
		for i := range r.msgs {
			x := &r.msgs[i]
			if x.inUse && x.complete && !x.delivered && x.stream == uint16(si) && x.streamSeq == st.next {
				c.deliverRecvStream(uint16(si), x)
				break
			}
		}
	}
}

// flush completes posted receive buffers with st.
func (r *receiver) flush(c *Conn, st Status) {
	for i := range r.recvs {
		b := &r.recvs[i]
		if b.posted {
			b.posted, b.claimed = false, false
			c.ep.complete(Completion{Conn: c, Op: OpRecv, WRID: b.wrid, Status: st})
		}
	}
}

func (c *Conn) queueNack(d wire.Data, reason wire.NackReason, info uint32) {
	c.owe(nackRec{psn: d.PSN(), path: d.PathID(), reason: reason, seq: d.PathSeq(),
		ts: d.Timestamp(), info: info})
}

// owe queues a NACK; a full queue drops it, since the sender resends and
// hears again.
func (c *Conn) owe(n nackRec) {
	r := &c.rcv
	c.ep.stats.NacksSent[n.reason]++
	c.stats.NacksSent++
	if r.nackCount == len(r.nacks) {
		return
	}
	r.nacks[(r.nackHead+r.nackCount)%len(r.nacks)] = n
	r.nackCount++
}
