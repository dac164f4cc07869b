package transport

import "github.com/metaroce/metaroce/wire"

// recvMsg tracks a message being received, indexed by MsgID & msgMask.
type recvMsg struct {
	inUse     bool
	complete  bool
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
}

type recvBuf struct {
	posted bool
	seq    uint32
	wrid   uint64
	buf    []byte
}

type recvStream struct {
	next    uint32 // stream sequence of the next message to take effect
	pending int    // complete messages waiting for an earlier one
	stalled bool   // a READ waits for a free response job
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

	recvs      []recvBuf
	recvMask   uint32
	recvPosted uint32 // RecvSeq the next posted buffer gets

	paths    []*rcvPath
	ackQ     []uint16 // paths owing an ack, FIFO
	ackHead  int
	ackTimer Time

	nacks     []nackRec
	nackHead  int
	nackCount int
}

func (r *receiver) init(cfg *Config) {
	r.window = cfg.RecvWindow
	r.bits = make([]uint64, cfg.RecvWindow/64+1)
	r.mask = uint32(cfg.RecvWindow - 1)
	r.msgs = make([]recvMsg, cfg.MsgWindow)
	r.msgMask = uint32(cfg.MsgWindow - 1)
	r.streams = make([]recvStream, cfg.MaxStreams)
	r.recvs = make([]recvBuf, cfg.RecvQueue)
	r.recvMask = uint32(cfg.RecvQueue - 1)
	r.paths = make([]*rcvPath, cfg.MaxPathID)
	r.ackQ = make([]uint16, 0, cfg.MaxPathID)
	r.nacks = make([]nackRec, 64)
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
	if b.posted {
		return ErrRecvQueueFull
	}
	*b = recvBuf{posted: true, seq: r.recvPosted, wrid: wrid, buf: buf}
	r.recvPosted++
	return nil
}

// Outcome of accepting a data packet.
const (
	accOK       = iota // placed (or nothing to place): mark arrived
	accConsumed        // refused for good (NACK sent): mark arrived, place nothing
	accRefused         // refused for now (NACK sent): do not mark arrived
)

// onData handles a validated data packet (§8.2).
func (c *Conn) onData(now Time, d wire.Data, ce bool) {
	r := &c.rcv
	e := c.ep
	e.stats.DataReceived++
	c.stats.DataReceived++
	pid := int(d.PathID())
	if pid >= len(r.paths) {
		e.stats.RxBadPath++
		return
	}
	p := r.path(pid)
	p.record(now, d.PathSeq(), d.PSN(), d.Timestamp(), ce)
	psn := d.PSN()
	dist := r.cum.Distance(psn)
	if dist < 0 || (int(dist) < r.window && r.bit(psn)) {
		e.stats.Duplicates++
		c.stats.Duplicates++
		r.queueAck(p) // the sender resends because it lacks our acks: tell it now
		return
	}
	if int(dist) >= r.window {
		e.stats.OutOfWindow++
		c.queueNack(d, wire.NackOutOfWindow, uint32(r.window))
		return
	}
	reason := wire.NackReason(0)
	res := accOK
	if d.Opcode() == wire.OpReadResp {
		if !c.onReadResp(d) {
			// No such read outstanding (flushed, or a confused peer):
			// consume it so the responder stops resending.
			res, reason = accConsumed, wire.NackInvalidRequest
		}
	} else {
		res, reason = c.acceptMsgPacket(d)
	}
	switch res {
	case accOK, accConsumed:
		r.setBit(psn)
		r.advance()
		if res == accConsumed {
			c.queueNack(d, reason, 0)
		}
	case accRefused:
		info := uint32(0)
		if reason == wire.NackRNR {
			info = uint32(e.cfg.RNRDelay / 1000)
		}
		c.queueNack(d, reason, info)
		return
	}
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

// acceptMsgPacket validates and places a packet of a WRITE, SEND or READ
// request (§9). Every packet of a message is judged on the message's whole
// range, so a message is placed entirely or not at all.
func (c *Conn) acceptMsgPacket(d wire.Data) (int, wire.NackReason) {
	r := &c.rcv
	id := d.MsgID()
	m := &r.msgs[id&r.msgMask]
	if m.inUse && m.id != id {
		// The slot still holds an older message (a stalled READ): the
		// sender is ahead of us. Refuse for now.
		return accRefused, wire.NackOutOfWindow
	}
	if !m.inUse {
		if int(d.Stream()) >= len(r.streams) {
			return accConsumed, wire.NackInvalidRequest
		}
		if int32(d.StreamSeq()-r.streams[d.Stream()].next) < 0 {
			// A new PSN for a message that already took effect: the
			// peer is confused; consume it so it stops resending.
			return accConsumed, wire.NackInvalidRequest
		}
		*m = recvMsg{inUse: true, op: d.Opcode(), stream: d.Stream(), id: id,
			streamSeq: d.StreamSeq(), msgLen: d.MsgLen(), imm: d.Imm()}
		switch op := d.Opcode(); {
		case op.IsWrite() || op == wire.OpReadReq:
			want := AccessRemoteWrite
			if op == wire.OpReadReq {
				want = AccessRemoteRead
			}
			m.raddr, m.rkey = d.RemoteAddr(), d.RKey()
			if reg, ok := c.mem.Lookup(d.RKey()); !ok {
				m.status = StatusRemoteAccess
			} else if dst, ok := reg.slice(d.RemoteAddr(), d.MsgLen(), want); !ok {
				m.status = StatusRemoteAccess
			} else {
				m.dst = dst
			}
		case op.IsSend():
			rs := d.RecvSeq()
			b := &r.recvs[rs&r.recvMask]
			if int32(rs-r.recvPosted) >= 0 || !b.posted || b.seq != rs {
				m.inUse = false
				return accRefused, wire.NackRNR
			}
			m.recvSeq = rs
			if uint64(d.MsgLen()) > uint64(len(b.buf)) {
				m.status = StatusLocalLength
			} else {
				m.dst = b.buf[:d.MsgLen()]
			}
		}
	} else if m.op != d.Opcode() || m.stream != d.Stream() || m.msgLen != d.MsgLen() ||
		m.streamSeq != d.StreamSeq() {
		return accConsumed, wire.NackInvalidRequest
	}
	if m.complete {
		return accConsumed, wire.NackInvalidRequest
	}
	n := uint32(d.PayloadLen())
	m.got += n
	res, reason := accOK, wire.NackReason(0)
	switch m.status {
	case StatusOK:
		if n > 0 {
			copy(m.dst[d.Offset():], d.Payload())
			c.ep.stats.BytesPlaced += uint64(n)
			c.stats.BytesPlaced += uint64(n)
		}
	case StatusRemoteAccess:
		res, reason = accConsumed, wire.NackRemoteAccess
	default:
		res, reason = accConsumed, wire.NackInvalidRequest
	}
	if m.got >= m.msgLen || m.op == wire.OpReadReq {
		m.complete = true
		c.recvMsgComplete(m)
	}
	return res, reason
}

func (c *Conn) recvMsgComplete(m *recvMsg) {
	st := &c.rcv.streams[m.stream]
	if m.streamSeq != st.next {
		st.pending++
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
		m.inUse = false
		m.dst = nil
		st.next++
		m = nil
		if st.pending > 0 {
			for i := range r.msgs {
				x := &r.msgs[i]
				if x.inUse && x.complete && x.stream == stream && x.streamSeq == st.next {
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
		cq := Completion{Conn: c, Op: OpRecv, WRID: b.wrid, Stream: m.stream,
			Bytes: int(m.msgLen), Status: m.status}
		if m.op == wire.OpSendImm {
			cq.Imm, cq.HasImm = m.imm, true
		}
		b.posted = false
		b.buf = nil
		c.ep.stats.RecvCompleted++
		c.ep.complete(cq)
	}
	return true
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
			if x.inUse && x.complete && x.stream == uint16(si) && x.streamSeq == st.next {
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
			b.posted = false
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
