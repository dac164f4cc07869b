package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/metaroce/metaroce/wire"
)

// Connect starts the in-band handshake with peer for service (§7.3). The
// connection's RMA keys resolve in mem. An OpConnected completion reports
// success; an OpClosed one failure.
func (e *Endpoint) Connect(now Time, peer netip.Addr, service uint32, mem Memory) (*Conn, error) {
	c, err := e.newConn(peer, mem)
	if err != nil {
		return nil, err
	}
	c.state = StateConnecting
	c.service = service
	c.ctlOwed = wire.OpConnect
	c.ctlRTO = e.ctlRTO(&e.hsRTT)
	c.ctlDeadline = now + Time(c.ctlRTO)
	if !e.hsRTT.have {
		if len(e.blind) == maxBlind {
			// No answer yet from anyone: forget the attempts that ended.
			e.blind = slices.DeleteFunc(e.blind, func(c *Conn) bool { return c.state != StateConnecting })
		}
		if len(e.blind) < maxBlind {
			e.blind = append(e.blind, c)
		}
	}
	e.markReady(c)
	e.reschedule(c)
	return c, nil
}

// buildConn writes the connection packet c owes.
func (c *Conn) buildConn(now Time, buf []byte) int {
	cfg := &c.ep.cfg
	h := wire.ConnHeader{Opcode: c.ctlOwed, DstConn: c.peerID, SrcConn: c.localID,
		Timestamp: uint64(now), Paths: uint16(cfg.Paths)}
	switch c.ctlOwed {
	case wire.OpConnect, wire.OpAccept:
		h.InitialPSN = c.initPSN // not nextPSN: a re-sent ACCEPT may follow data
		h.Service = c.service
		h.RecvWindow = uint32(cfg.RecvWindow)
		h.MsgWindow = uint16(cfg.MsgWindow)
		h.MaxPayload = uint16(cfg.MaxPayload())
		if c.ctlOwed == wire.OpConnect {
			h.DstConn = 0
			h.Cookie = c.cookie
			c.connectAt = now
		} else {
			c.acceptAt = now
			c.acceptSends++
			// Right behind it, on the same route, a PROBE: its ack is
			// the acceptor's first RTT sample (§8.4).
			c.snd.hsProbe = !c.snd.rtt.have
		}
	case wire.OpDisconnect:
		h.Reason = wire.ReasonClosed
	}
	c.ctlOwed = 0
	h.Put(buf)
	return wire.ConnLen + wire.TrailerLen
}

// handshakeRTT bounds the acceptor's RTT by the time from its ACCEPT to
// the first packet of the initiator, which cannot send before the ACCEPT
// reaches it: the bound is the round trip plus whatever the initiator
// waited before sending. It only lowers the RTO of a connection with no
// sample yet, and only when one ACCEPT went out (with two, the packet may
// answer the first). (§8.4.)
func (c *Conn) handshakeRTT(now Time) {
	s := &c.snd
	if c.acceptSends == 1 && !s.rtt.have && now > c.acceptAt {
		s.rtt.bound = Duration(now - c.acceptAt)
		s.rto = s.rtt.rto(c.ep.cfg.InitialRTO)
		if s.rtoDeadline != 0 {
			s.rtoDeadline = min(s.rtoDeadline, now+Time(s.rto))
		}
		if s.tlpDeadline != 0 {
			s.tlpDeadline = min(s.tlpDeadline, now+Time(c.pto()))
		}
	}
	c.acceptAt = 0
}

// maxBlind bounds the connections an endpoint re-arms at its first
// handshake sample: enough for a job's start, when a host connects to
// all its peers at once; later ones keep ConnectTimeout.
const maxBlind = 4096

// sampleHandshakeRTT feeds a connection's handshake round trip to the
// endpoint's estimate. The first one also shortens the first CONNECT
// interval of the connections that started without an estimate and have
// not retried or heard a CHALLENGE yet: at a job's start every host
// connects to all its peers before any answer has come back, and a lost
// handshake packet of those would otherwise cost ConnectTimeout.
func (e *Endpoint) sampleHandshakeRTT(now Time, rtt Duration) {
	first := !e.hsRTT.have
	e.hsRTT.sample(rtt)
	if !first {
		return
	}
	d := e.ctlRTO(&e.hsRTT)
	for _, c := range e.blind {
		if c.state != StateConnecting || c.ctlTries != 0 || c.snd.rtt.have {
			continue
		}
		if dl := max(c.connectAt+Time(d), now); dl < c.ctlDeadline {
			c.ctlRTO, c.ctlDeadline = d, dl
			e.reschedule(c)
		}
	}
	clear(e.blind)
	e.blind = nil
}

// ctlRTO is the first interval of the CONNECT or DISCONNECT schedule
// (§7.3): the RTO of the round trips r has measured, but never more than
// ConnectTimeout, which is also what it is before any sample.
func (e *Endpoint) ctlRTO(r *rttEstimator) Duration {
	return min(r.rto(e.cfg.ConnectTimeout), e.cfg.ConnectTimeout)
}

// ctlTimer retransmits CONNECT or DISCONNECT, or gives up. Only expiries
// of ConnectTimeout or longer count against ConnectRetries: the fast
// retries below it, from a measured round trip, must not make a peer
// that is away for a while fail sooner than the fixed schedule would.
func (c *Conn) ctlTimer(now Time) {
	cfg := &c.ep.cfg
	if c.ctlRTO >= min(cfg.ConnectTimeout, cfg.MaxRTO) {
		c.ctlTries++
	}
	if c.ctlTries > cfg.ConnectRetries && !(c.state == StateConnecting && now < c.connectUntil) {
		c.ctlDeadline = 0
		switch c.state {
		case StateConnecting:
			c.fail(StatusRetryExceeded, errConnectFailed)
		case StateClosing:
			c.closed()
		}
		return
	}
	switch c.state {
	case StateConnecting:
		c.ctlOwed = wire.OpConnect
	case StateClosing:
		c.ctlOwed = wire.OpDisconnect
	default:
		c.ctlDeadline = 0
		return
	}
	c.ctlRTO = min(2*c.ctlRTO, cfg.MaxRTO)
	c.ctlDeadline = now + Time(c.ctlRTO)
}

func (c *Conn) closed() {
	c.state = StateClosed
	c.ep.stats.ConnsClosed++
	c.ep.complete(Completion{Conn: c, Op: OpClosed, Status: StatusFlushed})
	c.ep.release(c)
}

// onConn handles connection management packets (§7).
func (e *Endpoint) onConn(now Time, from netip.Addr, p wire.Conn) {
	switch p.Opcode() {
	case wire.OpConnect:
		e.onConnect(now, from, p)
	case wire.OpChallenge:
		c := e.conns[p.DstConn()]
		if c == nil || c.state != StateConnecting || c.peer != from {
			e.stats.RxUnexpected++
			return
		}
		copy(c.cookie[:], p.Cookie())
		c.ctlOwed = wire.OpConnect
		// The CHALLENGE echoes our latest CONNECT's Timestamp: the
		// connection's first RTT sample, so its first data does not wait
		// on the InitialRTO (§8.4). An echo of an earlier CONNECT would
		// overstate the round trip, so only the latest counts.
		// It also restarts the CONNECT schedule from that round trip
		// (once: a listener that challenged every CONNECT must not keep
		// the timer from ever expiring).
		if Time(p.Timestamp()) == c.connectAt && !c.snd.rtt.have {
			rtt := Duration(now - c.connectAt)
			c.snd.rtt.sampleHandshake(rtt)
			c.snd.rto = c.snd.rtt.rto(e.cfg.InitialRTO)
			e.sampleHandshakeRTT(now, rtt)
			c.ctlRTO = e.ctlRTO(&c.snd.rtt)
			c.ctlDeadline = now + Time(c.ctlRTO)
		}
		e.touch(c)
	case wire.OpAccept:
		c := e.conns[p.DstConn()]
		if c == nil {
			// We gave up on (or never made) this connection while the
			// peer accepted it: tell it, so it does not keep a
			// half-open connection (§7.6).
			e.stats.RxUnknownConn++
			e.replyReset(now, from, p.DstConn())
			return
		}
		if c.peer != from {
			e.stats.RxUnexpected++
			return
		}
		if c.state != StateConnecting {
			return // a duplicate ACCEPT
		}
		c.peerID = p.SrcConn()
		c.rcv.cum = p.InitialPSN()
		c.establish(p.RecvWindow(), p.MsgWindow(), p.MaxPayload())
		c.heard(now) // the ACCEPT: arms the keepalive (keepalive.go)
		c.ctlDeadline, c.ctlOwed = 0, 0
		e.byPeer[peerKey{from, c.peerID}] = c
		e.complete(Completion{Conn: c, Op: OpConnected})
		e.touch(c)
	case wire.OpReject:
		c := e.conns[p.DstConn()]
		if c == nil || c.state != StateConnecting || c.peer != from {
			e.stats.RxUnexpected++
			return
		}
		c.fail(StatusRejected, rejectError(p.Reason()))
	case wire.OpDisconnect:
		c := e.byPeer[peerKey{from, p.SrcConn()}]
		if c != nil && c.localID == p.DstConn() {
			c.Err = errClosedByPeer
			c.flush(StatusFlushed)
			c.closed()
		}
		// Answer even when the connection is already gone, so a peer
		// whose DISCONNECT_ACK was lost can finish.
		e.queueReply(now, from, wire.ConnHeader{Opcode: wire.OpDisconnectAck,
			DstConn: p.SrcConn(), SrcConn: p.DstConn(), Timestamp: uint64(now)})
	case wire.OpDisconnectAck:
		c := e.conns[p.DstConn()]
		if c == nil || c.state != StateClosing || c.peer != from {
			return
		}
		c.closed()
	case wire.OpReset:
		c := e.byPeer[peerKey{from, p.SrcConn()}]
		if c == nil || c.localID != p.DstConn() && p.DstConn() != 0 {
			e.stats.RxUnexpected++
			return
		}
		c.fail(StatusReset, errReset)
	}
}

func (e *Endpoint) onConnect(now Time, from netip.Addr, p wire.Conn) {
	// A CONNECT of a connection we have is answered from the connection,
	// before the service is looked up: the application may have stopped
	// listening once it had its connection (a queue pair accepts one
	// peer), and the initiator whose ACCEPT was lost must still get one
	// (§7.3), not a REJECT that fails it and leaves our side half-open.
	if c := e.byPeer[peerKey{from, p.SrcConn()}]; c != nil && c.service == p.Service() &&
		e.cookieValid(now, from, p) {
		if c.state == StateEstablished {
			c.ctlOwed = wire.OpAccept // our ACCEPT was lost: say it again
			e.touch(c)
		}
		return
	}
	mem, ok := e.services[p.Service()]
	if !ok {
		e.stats.RejectsSent++
		e.queueReply(now, from, wire.ConnHeader{Opcode: wire.OpReject, DstConn: p.SrcConn(),
			Reason: wire.ReasonNoService, Timestamp: uint64(now)})
		return
	}
	if !e.cookieValid(now, from, p) {
		// Stateless: nothing is kept until the peer proves it receives
		// at its source address (§7.4).
		h := wire.ConnHeader{Opcode: wire.OpChallenge, DstConn: p.SrcConn(), Service: p.Service(),
			Timestamp: p.Timestamp()}
		h.Cookie = e.makeCookie(now, from, p.SrcConn(), p.Service())
		e.stats.ChallengesSent++
		e.queueReply(now, from, h)
		return
	}
	if c := e.byPeer[peerKey{from, p.SrcConn()}]; c != nil {
		return // a valid cookie for another service from the same id: nothing (§7.3)
	}
	c, err := e.newConn(from, mem)
	if err != nil {
		e.stats.RejectsSent++
		e.queueReply(now, from, wire.ConnHeader{Opcode: wire.OpReject, DstConn: p.SrcConn(),
			Reason: wire.ReasonLimit, Timestamp: uint64(now)})
		return
	}
	c.service = p.Service()
	c.peerID = p.SrcConn()
	c.rcv.cum = p.InitialPSN()
	c.establish(p.RecvWindow(), p.MsgWindow(), p.MaxPayload())
	c.heard(now) // the CONNECT: arms the keepalive (keepalive.go)
	c.ctlOwed = wire.OpAccept
	e.byPeer[peerKey{from, c.peerID}] = c
	e.stats.ConnsAccepted++
	e.complete(Completion{Conn: c, Op: OpConnected})
	e.touch(c)
}

// Cookies (§7.4): 4 bytes of issue time in seconds, then the first 12
// bytes of HMAC-SHA256(secret, peer address | peer conn id | service |
// issue time). Only this endpoint can make one, it binds the peer's
// address, and it expires after CookieLifetime.
func (e *Endpoint) makeCookie(now Time, from netip.Addr, src, service uint32) [wire.CookieLen]byte {
	var ck [wire.CookieLen]byte
	t := uint32(now / 1e9)
	binary.BigEndian.PutUint32(ck[:4], t)
	mac := e.cookieMAC(from, src, service, t)
	copy(ck[4:], mac[:12])
	return ck
}

// cookieMAC uses the endpoint's one keyed HMAC: a CONNECT flood is what
// cookies are for, so answering one costs a MAC, not an HMAC's set-up and
// three allocations as well.
func (e *Endpoint) cookieMAC(from netip.Addr, src, service, t uint32) []byte {
	if e.mac == nil {
		e.mac = hmac.New(sha256.New, e.secret[:])
	}
	m := e.mac
	m.Reset()
	a := from.As16()
	m.Write(a[:])
	var b [12]byte
	binary.BigEndian.PutUint32(b[0:], src)
	binary.BigEndian.PutUint32(b[4:], service)
	binary.BigEndian.PutUint32(b[8:], t)
	m.Write(b[:])
	return m.Sum(e.macSum[:0])
}

func (e *Endpoint) cookieValid(now Time, from netip.Addr, p wire.Conn) bool {
	ck := p.Cookie()
	t := binary.BigEndian.Uint32(ck[:4])
	nowS := uint32(now / 1e9)
	if int32(nowS-t) < 0 || Duration(nowS-t)*1e9 > e.cfg.CookieLifetime {
		return false
	}
	return hmac.Equal(ck[4:], e.cookieMAC(from, p.SrcConn(), p.Service(), t)[:12])
}

// queueReply owes a stateless connection packet, within the reply rates
// (replylimit.go).
func (e *Endpoint) queueReply(now Time, dst netip.Addr, h wire.ConnHeader) {
	if len(e.replies) >= cap(e.replies) || !e.replyLimit.allow(now, dst) {
		e.stats.ReplyRateLimited++
		return
	}
	e.replies = append(e.replies, reply{dst: dst, h: h})
}

// replyReset tells the sender of a packet for an unknown connection id
// that the id names nothing here (§7.6).
func (e *Endpoint) replyReset(now Time, from netip.Addr, id uint32) {
	if id == 0 {
		return
	}
	e.stats.ResetsSent++
	e.queueReply(now, from, wire.ConnHeader{Opcode: wire.OpReset, SrcConn: id,
		Reason: wire.ReasonUnknownConn, Timestamp: uint64(now)})
}

type rejectError wire.ConnReason

func (r rejectError) Error() string {
	switch wire.ConnReason(r) {
	case wire.ReasonNoService:
		return "metaroce: connect rejected: no such service"
	case wire.ReasonLimit:
		return "metaroce: connect rejected: connection limit"
	case wire.ReasonParams:
		return "metaroce: connect rejected: parameters"
	}
	return "metaroce: connect rejected"
}
