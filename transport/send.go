package transport

import (
	"fmt"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/wire"
)

// Packet record states.
const (
	psFree     uint8 = iota
	psInflight       // transmitted, outcome unknown
	psLost           // declared lost, queued in retxQ
	psRNR            // refused with RNR, waiting for rnrAt
	psAcked          // delivered, or consumed by a VOID after a failing NACK
)

// readJobBit marks a packet record's msg index as a read-response job.
const readJobBit = 1 << 31

// pktRec is the sender's record of one PSN, indexed by PSN & pktMask.
type pktRec struct {
	msg   uint32 // message slot (or readJobBit|job slot)
	off   uint32
	n     uint32
	sent  Time // last transmission
	rnrAt Time
	pseq  uint32 // path sequence of the last transmission
	path  uint16
	state uint8
	tx    uint8 // transmissions so far
	void  bool  // resend without payload, abandoning the PSN (§6.3)
}

// sendMsg is an outstanding application message, indexed by MsgID & msgMask.
type sendMsg struct {
	inUse     bool
	done      bool // completion ready to report (in stream order)
	reqAcked  bool // READ: the request packet is acknowledged
	op        wire.Opcode
	status    Status
	stream    uint16
	id        uint32
	streamSeq uint32
	recvSeq   uint32
	wrid      uint64
	local     []byte
	sgl       [][]byte // the local buffer as a gather list, instead of local (WorkRequest.SGL)
	size      uint32   // the message's length: local's, or the sum of sgl's
	raddr     uint64
	rkey      uint32
	imm       uint32
	npkts     uint32 // packets the message is cut into (fewer if it failed early)
	segOff    uint32 // next offset to segment
	segPkts   uint32 // packets segmented so far
	acked     uint32 // packets acknowledged (or consumed)
	readGot   uint32 // READ: response bytes placed
	respDone  bool   // READ: every response byte placed (also for zero bytes)
	awaitResp bool   // READ: request acked, response not done: counted in readsWaiting
	rnrTries  int
	// With RNRRetryForever (rnr.go): the rounds of RNR refusal since the
	// message last made progress (0: none), the PSN whose refusals open
	// rounds (the probe) and when the current round opened, and how many
	// of its PSNs are held behind the probe.
	rnrRounds uint8
	rnrProbe  wire.PSN
	rnrRound  Time
	rnrHeld   uint32
	next      int32 // next message of the same stream, -1 at the end
}

// readJob is a READ response the responder owes, in its own PSN space.
type readJob struct {
	inUse     bool
	reqID     uint32
	stream    uint16
	streamSeq uint32
	data      []byte
	npkts     uint32
	segOff    uint32
	segPkts   uint32
	acked     uint32
	nextFree  int32
}

// streamQ lists a stream's outstanding messages in posting order.
type streamQ struct {
	head, tail int32
	nextSeq    uint32
}

type sender struct {
	// planeDown: the planes whose every path is suspect, and since when
	// (planeHealth, §8.7.4).
	planeDown   [MaxPlanes]bool
	planeDownAt [MaxPlanes]Time
	// planeUnproven: the planes (other than 0) the peer has not yet
	// answered on from its address there (§7.9, planes.go): down, and
	// never used for data, until it does.
	planeUnproven [MaxPlanes]bool

	nextPSN wire.PSN
	una     wire.PSN // oldest PSN not acked
	pkts    []pktRec
	pktMask uint32
	window  int
	credit  int // the peer's advertised credit

	msgs      []sendMsg
	msgMask   uint32
	nextMsgID uint32
	msgUna    uint32 // oldest message id not fully acked
	streams   []streamQ
	nextRecv  uint32 // RecvSeq of the next SEND

	jobs     []readJob
	jobFree  int32
	jobCount int
	// msgCap and jobCap are what msgs and jobs may grow to (grow.go).
	msgCap, jobCap int

	segQ  ringU32 // message slots (or readJobBit|job) with packets left to cut
	retxQ ringU32 // PSNs declared lost, to resend

	paths      []sendPath
	nextPath   int      // round-robin cursor for acks
	active     []uint16 // paths that carry data
	lastPath   int
	rng        uint64
	probesOwed []uint16
	// hsProbe: the acceptor owes the PROBE that follows its ACCEPT
	// (handshake.go).
	hsProbe bool
	// rings holds every path's transmissions, path i's at i*PathRing
	// (see tx).
	rings     []txRec
	pathTimer Time // next run of the path health loop
	// newestAckedSent is the send time of the newest transmission acked
	// on any path, planeAckedSent on any path of each plane, and
	// planeAckedRTT how long that one took, ack included: the
	// yardsticks for overdue paths (paths.go, overdue).
	newestAckedSent Time
	planeAckedSent  [MaxPlanes]Time
	planeAckedRTT   [MaxPlanes]Duration
	// sweeping: the retransmission timeout is declaring losses, which
	// are no evidence against a path (recovery.go, senderTimer).
	sweeping bool
	// unjudged: the loss being declared is the first expiry's resend of
	// the oldest PSN, which the controller hears of only if the acks
	// call the silence loss (§8.4, senderTimer).
	unjudged bool
	// frtoAt is when the first expiry of a silence resent the oldest PSN
	// alone (0: no verdict waits), and frtoDeadline when it is settled
	// as loss unless an ack echoes something older first (recovery.go,
	// frtoDecide).
	frtoAt, frtoDeadline Time
	// silenceAt is the first expiry of the latest silence (0: none, or
	// settled), silenceFrom when the timer that expired then was
	// started (the silence began no later), and silenceEnd the PSN sent
	// next then. An ack echoing a transmission sent before silenceAt
	// proves the silence a pause, whatever the expiries judged
	// meanwhile (§8.4); once una reaches silenceEnd no such ack is owed.
	silenceAt, silenceFrom Time
	silenceEnd             wire.PSN
	// pause is the pause allowance, added to the RTO (rtt.go, §8.4): the
	// longest silence the acks proved a pause. hold is the hold
	// allowance (§8.7.4): the longest AckDelay an ack reported, what
	// a path's ack may lag another's.
	pause, hold allowance
	// lastAckAt is when the latest valid ack arrived: once the peer has
	// been seen to pause, a path's transmission is overdue only if the
	// peer answered after its ack was due (overdue).
	lastAckAt Time

	rtt         rttEstimator
	fabric      fabricRTT // the congestion controller's samples (fabric.go)
	reoMult     int       // reorder window multiplier, raised by spurious losses
	reoQuiet    int       // losses since the last spurious one (decays reoMult)
	spurious    uint64
	rto         Duration
	rtoDeadline Time
	// Tail loss probe (RFC 8985 §7): with nothing after it to reveal a
	// gap, a lost last packet would wait for the RTO (at least MinRTO);
	// after a probe timeout of about two RTTs without an ack, the oldest
	// outstanding packet is resent once instead, or, when the peer is
	// seen holding its acks and new data waits, the next new packet goes
	// (tlpNew; spec §8.4).
	tlpDeadline Time
	tlpFired    bool
	// tlpNew: the tail probe is a new packet, which may go past the
	// controller's window and the pacer (RFC 8985 §7.3): set when the
	// probe fires with new data to send, cleared when it is sent or an
	// ack makes progress.
	tlpNew       bool
	timeouts     int
	lossDeadline Time
	rnrWaiting   int
	rnrDeadline  Time
	// readsWaiting counts READs whose request is acknowledged and whose
	// response is not all placed: while there are any, the
	// retransmission timer runs even with nothing in flight, and a
	// keepalive PROBE is owed at each expiry (recovery.go responseTimeout).
	readsWaiting int
	keepalive    bool
	// peerAnswered: an RNR or OUT_OF_WINDOW NACK held a PSN since the
	// retransmission timer last expired (recovery.go senderTimer).
	peerAnswered bool
	// ringWait: a packet found no path with room in its ring since the
	// last one was sent (armRingTimer).
	ringWait bool
	inflight int // PSNs in psInflight
	// Hole repair (holes.go): marks of where una stood when (a ring,
	// newest at markHead; markOpen is when that slot was opened), and
	// the PSNs [repairNext, repairEnd) still to void, of a repair made
	// at repairAt.
	marks                 [unaMarks]unaMark
	markHead, markN       int
	markOpen              Time
	repairNext, repairEnd wire.PSN
	repairAt              Time
	// holeAsk: an ack behind una could not be judged since the last
	// probe askHole sent (at holeAskAt).
	holeAsk   bool
	holeAskAt Time
	// Congestion control (congestion/): nil for "none". The window bounds
	// payload bytes in flight; the pacer spaces packets at its rate.
	cc            congestion.Controller
	inflightBytes int
	ackedBytes    int  // newly acked since the last OnAck
	nextTx        Time // the pacer's next release
	paceTimer     Time
	// paceHold: once the pacer has held the connection back, nothing
	// leaves before this time, when a whole burst is due (pace).
	paceHold Time
	// paceCredit: how far nextTx may lag now (PacingBurst less a
	// packet's interval at the pacer's last rate).
	paceCredit Time
	burst      Time // Config.PacingBurst
	mp         int  // negotiated payload bytes per packet
}

func (s *sender) init(cfg *Config, window, msgWindow int, entropy func() uint16, seed uint64, st sendStore) {
	n := nextPow2(window)
	s.window = window
	s.credit = window
	s.burst = Time(cfg.PacingBurst)
	// The packet, message and job tables start small and grow (grow.go).
	np := startLen(initPkts, n, cap(st.pkts))
	s.pkts = reuse(st.pkts, np)
	s.pktMask = uint32(np - 1)
	s.msgCap = msgWindow
	nm := startLen(initMsgs, msgWindow, cap(st.msgs))
	s.msgs = reuse(st.msgs, nm)
	s.msgMask = uint32(nm - 1)
	s.streams = reuse(st.streams, cfg.MaxStreams)
	for i := range s.streams {
		s.streams[i] = streamQ{head: -1, tail: -1}
	}
	// Read jobs: the requester holds at most msgWindow reads, and a job
	// outlives its read by at most an ack's round trip; twice covers it,
	// and delivery stalls (never fails) if even that runs out.
	s.jobCap = 2 * msgWindow
	s.jobs = reuse(st.jobs, min(s.jobCap, max(initJobs, cap(st.jobs))))
	for i := range s.jobs {
		s.jobs[i].nextFree = int32(i + 1)
	}
	s.jobs[len(s.jobs)-1].nextFree = -1
	s.jobFree = 0
	s.segQ = ringU32{buf: reuse(st.segQ, nextPow2(msgWindow+s.jobCap))}
	s.segQ.mask = uint32(len(s.segQ.buf) - 1)
	s.retxQ = ringU32{buf: reuse(st.retxQ, n), mask: uint32(n - 1)}
	s.paths = reuse(st.paths, cfg.Paths)
	// One allocation for every path's ring: connections come and go by
	// the thousand in a collective's set-up.
	s.rings = reuse(st.rings, cfg.Paths*cfg.PathRing)
	for i := range s.paths {
		p := &s.paths[i]
		p.entropy = entropy()
		p.plane = uint8(i % cfg.Planes)
		p.base = uint32(i * cfg.PathRing)
		p.mask = uint32(cfg.PathRing - 1)
	}
	s.active = reuse(st.active, cfg.Paths)[:0]
	s.probesOwed = reuse(st.owed, cfg.Paths)[:0]
	s.rebuildActive()
	s.rng = seed | 1
	s.lastPath = -1
	s.rtt.init(cfg)
	// The handshake may have measured the round trip already (§8.4).
	s.rto = s.rtt.rto(cfg.InitialRTO)
	s.reoMult = 1
}

func (s *sender) post(op wire.Opcode, wr *WorkRequest) error {
	id := s.nextMsgID
	if int(id-s.msgUna) >= s.msgCap {
		return ErrQueueFull
	}
	m := s.msgSlot(id)
	idx := id & s.msgMask
	if m.inUse {
		return ErrQueueFull // its completion still waits on an earlier message of its stream
	}
	st := &s.streams[wr.Stream]
	*m = sendMsg{
		inUse: true, op: op, stream: wr.Stream, id: id, streamSeq: st.nextSeq,
		wrid: wr.WRID, local: wr.Local, sgl: wr.SGL, size: uint32(wr.size()), raddr: wr.RemoteAddr, rkey: wr.RKey, next: -1,
	}
	if op.HasImm() {
		m.imm = wr.Imm
	}
	if op.IsSend() {
		m.recvSeq = s.nextRecv
		s.nextRecv++
	}
	m.npkts = 1
	if op != wire.OpReadReq {
		m.npkts = packetsFor(int(m.size), s.maxPayload())
	}
	st.nextSeq++
	if st.tail < 0 {
		st.head = int32(idx)
	} else {
		s.msgs[st.tail].next = int32(idx)
	}
	st.tail = int32(idx)
	s.nextMsgID++
	s.segQ.push(idx)
	return nil
}

// armRingTimer runs the retransmission timer when a packet waits for room
// in a path's ring. Rings drain as acks resolve their transmissions; a
// ring can instead stay full of transmissions no ack will ever resolve
// (superseded by retransmissions, or made unackable when a duplicate or
// forged packet moved the receiver's path sequence past them, §13) with
// nothing in flight, and then no other timer runs. The expiry resolves
// the transmissions older than its horizon (senderTimer), which frees
// the ring.
func (s *sender) armRingTimer(now Time) {
	s.ringWait = true
	if s.rtoDeadline == 0 {
		s.rtoDeadline = now + Time(s.rto)
	}
}

func packetsFor(n, mp int) uint32 {
	if n == 0 {
		return 1
	}
	return uint32((n + mp - 1) / mp)
}

func (s *sender) maxPayload() int { return s.mp }

// windowOpen reports whether a new PSN may be sent.
func (s *sender) windowOpen() bool {
	w := s.window
	if s.credit < w {
		w = s.credit
	}
	if s.cc != nil && s.inflightBytes >= s.ccWindow() && !s.tlpNew {
		return false
	}
	return int(s.una.Distance(s.nextPSN)) < w
}

// pace charges the pacer for a packet of n bytes sent at now. The pacer
// is a token bucket PacingBurst deep (in time at the controller's rate):
// nextTx is when the next packet's token is due, and the credit a
// connection saved while it had nothing to send (or its engine came
// late) may be spent at once, up to PacingBurst's worth. Once the pacer
// has held the connection back it lets nothing go until a whole burst is
// due (paceHold), so a flow paced below the link leaves in bursts of
// PacingBurst at its rate, not a packet per engine iteration: a software
// link hands packets to the kernel a batch per system call, and paced a
// packet at a time it cost a call per packet (docs/spec.md §8.9.4). A
// burst's bytes reach a bottleneck that drains at least at the rate in
// PacingBurst, so it adds at most that much queueing delay. With
// PacingBurst 0 every packet waits for its own interval.
func (s *sender) pace(now Time, n int) {
	rate := s.cc.PacingRate()
	if rate == 0 {
		return
	}
	gap := Time(float64(n*8) * 1e9 / float64(rate))
	s.paceCredit = max(s.burst-gap, 0)
	s.nextTx = max(s.nextTx, now-s.paceCredit) + gap
}

// ccWindow is how many bytes the controller lets be in flight: its
// window, which is what the fabric holds (the controller sizes it on
// fabric samples, §8.9.4), plus what its rate puts into the hosts' share
// of the round trip, the smoothed host delay (fabric.go): bytes that have
// arrived and wait for the receiver's engine or for the sender's to read
// their ack are in flight to the transport but hold no queue in the
// fabric. Without them a window sized for a 20 us fabric round trip
// limits a flow whose round trip is 300 us with its hosts' waits to
// window/300 us (docs/spec.md §8.9.4). Where the link stamps no arrival
// (the simulator) the host delay is 0 and this is the window.
func (s *sender) ccWindow() int {
	w := s.cc.Window()
	if h := s.fabric.host; h > 0 {
		if rate := s.cc.PacingRate(); rate > 0 {
			w += int(float64(rate) / 8 * h.Seconds())
		}
	}
	return w
}

func (s *sender) hasData() bool {
	if !s.retxQ.empty() || s.repairing() {
		return true
	}
	return !s.segQ.empty() && s.windowOpen()
}

// buildData writes the next data packet into buf and returns its length and
// path, or 0 when nothing can be sent now.
func (c *Conn) buildData(now Time, buf []byte) (int, int) {
	s := &c.snd
	if (s.nextTx > now || s.paceHold > now) && !s.tlpNew {
		// Paced: nothing leaves before the pacer's release time, and
		// once held, not before a whole burst is due.
		if s.paceHold <= now {
			s.paceHold = s.nextTx + s.paceCredit
		}
		s.paceTimer = s.paceHold
		return 0, 0
	}
	if s.repairing() {
		// A proven hole stalls the receiver's CumPSN, and with it every
		// stream behind it: its voids go first (holes.go).
		return c.buildRepair(now, buf)
	}
	for !s.retxQ.empty() {
		psn := wire.PSN(s.retxQ.peek())
		r := &s.pkts[uint32(psn)&s.pktMask]
		if r.state != psLost {
			s.retxQ.pop() // acked meanwhile
			continue
		}
		pi := s.pickPath(int(r.path))
		if pi < 0 {
			s.armRingTimer(now)
			return 0, 0
		}
		s.retxQ.pop()
		c.stats.Retransmitted++
		c.ep.stats.DataRetransmitted++
		return c.emit(now, buf, psn, r, pi, wire.FlagRetx|wire.FlagAckReq), pi
	}
	for !s.segQ.empty() && s.windowOpen() {
		slot := s.segQ.peek()
		var off, n, total uint32
		var last bool
		if slot&readJobBit != 0 {
			j := &s.jobs[slot&^readJobBit]
			total = uint32(len(j.data))
			off = j.segOff
			n = min(total-off, uint32(s.mp))
			j.segOff += n
			j.segPkts++
			last = j.segPkts == j.npkts
		} else {
			m := &s.msgs[slot]
			if m.status != StatusOK { // failed early: cut no more
				m.npkts = m.segPkts
				s.segQ.pop()
				c.msgProgress(m)
				continue
			}
			total = m.size
			if m.op == wire.OpReadReq {
				total = 0
			}
			off = m.segOff
			n = min(total-off, uint32(s.mp))
			m.segOff += n
			m.segPkts++
			last = m.segPkts == m.npkts
		}
		pi := s.pickPath(-1)
		if pi < 0 {
			// undo: no path has room
			if slot&readJobBit != 0 {
				j := &s.jobs[slot&^readJobBit]
				j.segOff -= n
				j.segPkts--
			} else {
				m := &s.msgs[slot]
				m.segOff -= n
				m.segPkts--
			}
			s.armRingTimer(now)
			return 0, 0
		}
		if last {
			s.segQ.pop()
		}
		psn := s.nextPSN
		if int(psn-s.una) >= len(s.pkts) {
			s.growPkts() // grow.go
		}
		s.nextPSN++
		s.tlpNew = false // the probe, if this was one, is sent
		r := &s.pkts[uint32(psn)&s.pktMask]
		*r = pktRec{msg: slot, off: off, n: n}
		flags := uint16(0)
		if last {
			flags = wire.FlagAckReq
		}
		return c.emit(now, buf, psn, r, pi, flags), pi
	}
	return 0, 0
}

// emit transmits PSN psn (record r) on path pi into buf.
func (c *Conn) emit(now Time, buf []byte, psn wire.PSN, r *pktRec, pi int, flags uint16) int {
	s := &c.snd
	p := &s.paths[pi]
	seq, t := s.claim(p)
	*t = txRec{sent: now, psn: psn, live: true}
	if p.inflight == 0 {
		p.lastProgress = now
	}
	p.inflight++
	if s.pathTimer == 0 && c.healthOn() {
		s.pathTimer = now + Time(c.pathTimeout(p))
	}
	p.sent++
	r.state = psInflight
	r.path = uint16(pi)
	r.pseq = seq
	r.sent = now
	s.ringWait = false
	if r.tx < 255 {
		r.tx++
	}
	s.inflight++
	s.inflightBytes += int(r.n)
	if s.cc != nil {
		s.cc.OnSent(int64(now), int(r.n)+wire.DataLen+wire.TrailerLen)
		s.pace(now, int(r.n)+wire.DataLen+wire.TrailerLen)
	}
	if c.young() {
		// The endpoint's round trips may have grown since this
		// connection's RTO was last set (rtoNow); backoff is kept.
		s.rto = max(s.rto, c.rtoNow(now))
	}
	if !s.tlpFired {
		s.tlpDeadline = now + Time(c.pto())
	}
	if s.rtoDeadline == 0 {
		s.rtoDeadline = now + Time(s.rto)
	}
	// Field by field, not a composite literal: the compiler builds a
	// literal in a temporary with narrow stores and copies it with wide
	// loads, which stall on store forwarding (~8 ns a packet).
	var h wire.DataHeader
	h.Flags, h.DstConn, h.PSN = flags, c.peerID, psn
	h.PathID, h.PathSeq = uint16(pi), seq
	h.Offset, h.PayloadLen, h.Timestamp = r.off, uint16(r.n), uint64(now)
	var payload []byte
	var gather [][]byte // a gather list's message: its bytes are copied from here
	if r.msg&readJobBit != 0 {
		j := &s.jobs[r.msg&^readJobBit]
		h.Opcode = wire.OpReadResp
		h.Stream, h.MsgID, h.StreamSeq = j.stream, j.reqID, j.streamSeq
		h.MsgLen = uint32(len(j.data))
		payload = j.data[r.off : r.off+r.n]
	} else {
		m := &s.msgs[r.msg]
		h.Opcode = m.op
		h.Stream, h.MsgID, h.StreamSeq = m.stream, m.id, m.streamSeq
		h.MsgLen = m.size
		h.RKey, h.Imm = m.rkey, m.imm
		if m.op.IsSend() {
			h.RecvSeq = m.recvSeq
			h.RKey = 0
		} else {
			h.RemoteAddr = m.raddr
		}
		if m.op != wire.OpReadReq {
			if m.sgl != nil {
				gather = m.sgl
			} else {
				payload = m.local[r.off : r.off+r.n]
			}
		}
	}
	if r.void {
		payload, gather = nil, nil
		h.PayloadLen = 0
		h.Flags |= wire.FlagVoid
		c.ep.stats.VoidSent++
	}
	plen := len(payload)
	if gather != nil {
		plen = int(r.n)
	}
	n := wire.DataLen + plen + wire.TrailerLen
	if n > len(buf) {
		// The link's transmit buffer is shorter than the MTU the transport
		// was configured for; the daemon checks this before an engine runs
		// (internal/daemon checkLinkMTU), so reaching here is a wiring bug.
		// Say so rather than fail on a slice bound.
		panic(fmt.Sprintf("transport: a %d-byte data packet (mtu %d) does not fit the link's %d-byte transmit buffer",
			n, c.ep.cfg.MTU, len(buf)))
	}
	h.Put(buf)
	if gather != nil {
		gatherAt(buf[wire.DataLen:wire.DataLen+plen], gather, r.off)
		wire.Seal(buf[:n])
	} else {
		wire.SealCopy(buf[:n], wire.DataLen, payload)
	}
	c.stats.DataSent++
	c.stats.BytesSent += uint64(plen)
	c.ep.stats.DataSent++
	return n
}

// gatherAt fills dst with the bytes of the message that sgl's slices make
// one after the other, from offset off.
func gatherAt(dst []byte, sgl [][]byte, off uint32) {
	for _, b := range sgl {
		if len(dst) == 0 {
			return
		}
		if off >= uint32(len(b)) {
			off -= uint32(len(b))
			continue
		}
		n := copy(dst, b[off:])
		dst, off = dst[n:], 0
	}
}

// scatterAt places src at offset off of the message that sgl's slices
// make one after the other.
func scatterAt(sgl [][]byte, off uint32, src []byte) {
	for _, b := range sgl {
		if len(src) == 0 {
			return
		}
		if off >= uint32(len(b)) {
			off -= uint32(len(b))
			continue
		}
		n := copy(b[off:], src)
		src, off = src[n:], 0
	}
}
