package transport

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"errors"
	"hash"
	"net/netip"
	"slices"
	"strconv"

	"github.com/metaroce/metaroce/wire"
)

// Connect starts the in-band handshake with peer for a public service
// (token 0, no private data): ConnectWith.
func (e *Endpoint) Connect(now Time, peer netip.Addr, service uint32, mem Memory) (*Conn, error) {
	return e.ConnectWith(now, peer, service, mem, ConnectOptions{})
}

// ConnectOptions are what a CONNECT carries besides parameters (§7.3).
type ConnectOptions struct {
	// Token is the service's token, which the listener's application
	// shipped out of band; 0 for a public service.
	Token uint64
	// Private is up to wire.MaxPrivateData bytes for the listening
	// application (more is an error).
	Private []byte
	// RNRRetryForever: a message of this connection that the peer
	// refuses with RNR (no receive buffer posted) is sent again without
	// limit, its waits backing off up to a millisecond, instead of
	// failing the connection after Config.RNRRetries NACKs (InfiniBand's
	// rnr_retry = 7; rnr.go). A peer that is gone still fails it
	// (MaxRetries, keepalive). Sender-side policy: the CONNECT does not
	// carry it.
	RNRRetryForever bool
}

// ErrPrivateTooLong is returned for private data over wire.MaxPrivateData.
var ErrPrivateTooLong = errors.New("metaroce: private data longer than 64 bytes")

// ConnectWith starts the in-band handshake with peer for service (§7.3).
// The connection's RMA keys resolve in mem. An OpConnected completion
// reports success (PeerPrivate then has the ACCEPT's private data); an
// OpClosed one failure (StatusRejected: Rejection and PeerPrivate say
// why).
func (e *Endpoint) ConnectWith(now Time, peer netip.Addr, service uint32, mem Memory, o ConnectOptions) (*Conn, error) {
	if len(o.Private) > wire.MaxPrivateData {
		return nil, ErrPrivateTooLong
	}
	c, err := e.newConn(peer, mem)
	if err != nil {
		return nil, err
	}
	c.state = StateConnecting
	c.service = service
	c.token = o.Token
	c.priv.set(o.Private)
	c.rnrForever = o.RNRRetryForever
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
	c.ctlPlane = 0
	h := wire.ConnHeader{Opcode: c.ctlOwed, DstConn: c.peerID, SrcConn: c.localID,
		Timestamp: uint64(now), Paths: uint16(cfg.Paths)}
	switch c.ctlOwed {
	case wire.OpConnect, wire.OpAccept:
		h.InitialPSN = c.initPSN // not nextPSN: a re-sent ACCEPT may follow data
		h.Service = c.service
		h.RecvWindow = uint32(cfg.RecvWindow)
		h.MsgWindow = uint16(cfg.MsgWindow)
		h.MaxPayload = uint16(cfg.MaxPayload())
		h.ResetToken = c.resetToken
		h.SetPrivate(c.priv.bytes())
		c.ep.putPlanes(&h)
		if c.ctlOwed == wire.OpConnect {
			h.DstConn = 0
			h.Cookie = c.cookie
			h.Token = c.token
			c.connectAt = now
		} else {
			c.acceptAt = now
			c.acceptSends++
			// Right behind it, on the same route, a PROBE: its ack is
			// the acceptor's first RTT sample (§8.4).
			c.snd.hsProbe = !c.snd.rtt.have
		}
	case wire.OpDisconnect:
		c.ctlPlane = c.teardownPlane(c.discSends)
		c.discSends++
		h.Reason = wire.ReasonClosed
		// What arrived before the close (§7.7): data is dropped in
		// Closing, so this no longer moves, and the peer completes what
		// it sent before it as delivered even if the acks for it were
		// lost or never sent.
		h.InitialPSN = c.rcv.cum
	}
	c.ctlOwed = 0
	h.Put(buf)
	return h.Len()
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
		s.rto = c.rtoNow(now)
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
			c.snd.rto = c.rtoNow(now)
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
		copy(c.peerReset[:], p.ResetToken())
		c.peerPriv.set(p.Private())
		c.learnPlanes(p)
		c.establish(now, p.RecvWindow(), p.MsgWindow(), p.MaxPayload())
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
		c.rejectedBy, c.appReason = p.Reason(), p.AppReason()
		c.peerPriv.set(p.Private())
		c.fail(StatusRejected, rejectError{p.Reason(), p.AppReason()})
	case wire.OpDisconnect:
		c := e.connOfPeer(from, p.SrcConn())
		plane := e.rxPlane
		if c != nil && c.localID == p.DstConn() {
			plane, _ = c.peerPlane(from)
			if c.state == StateEstablished {
				c.snd.ackThrough(c, p.ReceivedPSN())
			}
			c.Err = errClosedByPeer
			c.flush(StatusFlushed)
			c.closed()
		}
		// Answer even when the connection is already gone, so a peer
		// whose DISCONNECT_ACK was lost can finish; back to the address
		// and plane the DISCONNECT came from (§7.7, §7.9).
		h := wire.ConnHeader{Opcode: wire.OpDisconnectAck, DstConn: p.SrcConn(), SrcConn: p.DstConn(), Timestamp: uint64(now)}
		e.queueReplyOn(now, from, plane, &h)
	case wire.OpDisconnectAck:
		c := e.conns[p.DstConn()]
		if c == nil || c.state != StateClosing || !c.fromTeardownPeer(from) {
			return
		}
		c.closed()
	case wire.OpReset:
		c := e.connOfPeer(from, p.SrcConn())
		if c == nil || c.localID != p.DstConn() && p.DstConn() != 0 {
			e.stats.RxUnexpected++
			return
		}
		// Only the end that announced the token can make it (§7.6): an
		// id and an address, which telemetry or a capture may show, do
		// not suffice.
		if subtle.ConstantTimeCompare(p.ResetToken(), c.peerReset[:]) != 1 {
			e.stats.RxResetBadToken++
			return
		}
		c.fail(StatusReset, errReset)
	}
}

func (e *Endpoint) onConnect(now Time, from netip.Addr, p wire.Conn) {
	if !e.cookieValid(now, from, p) {
		// Stateless: nothing is kept until the peer proves it receives
		// at its source address (§7.4). Every service is challenged,
		// served or not, so this step tells a scanner nothing (§7.3).
		// The budget is taken first, so a flood costs a MAC per reply
		// sent, not per CONNECT.
		e.stats.ChallengesSent++
		if !e.replyAllowed(now, from) {
			return
		}
		h := wire.ConnHeader{Opcode: wire.OpChallenge, DstConn: p.SrcConn(), Service: p.Service(),
			Timestamp: p.Timestamp()}
		h.Cookie = e.makeCookie(now, from, p.SrcConn(), p.Service())
		e.replies = append(e.replies, reply{dst: from, h: h})
		return
	}
	key := peerKey{from, p.SrcConn()}
	// A CONNECT of a connection we have is answered from the connection,
	// before the service is looked up: the application may have stopped
	// listening once it had its connection (a queue pair accepts one
	// peer), and the initiator whose ACCEPT was lost must still get one
	// (§7.3), not a REJECT that fails it and leaves our side half-open.
	if c := e.byPeer[key]; c != nil {
		if c.service == p.Service() && c.token == p.Token() && c.state == StateEstablished {
			c.ctlOwed = wire.OpAccept // our ACCEPT was lost: say it again
			e.touch(c)
		}
		return // Pending (the application decides), or another service: nothing
	}
	if r, ok := e.rejected[key]; ok {
		if now < r.until && r.service == p.Service() {
			e.queueReply(now, from, &r.h) // our REJECT was lost: say it again
			return
		}
		if now >= r.until {
			delete(e.rejected, key)
		}
	}
	// The token is compared whether or not the service exists (a missing
	// one against 0 with "missing" folded in), and both failures take
	// the one path below: same packet, same work (§7.3).
	l, ok := e.services[p.Service()]
	if subtle.ConstantTimeEq(int32(l.token>>32), int32(p.Token()>>32))&
		subtle.ConstantTimeEq(int32(l.token), int32(p.Token()))&b2i(ok) != 1 {
		e.stats.RejectsSent++
		h := wire.ConnHeader{Opcode: wire.OpReject, DstConn: p.SrcConn(), Reason: wire.ReasonNoService, Timestamp: uint64(now)}
		e.queueReply(now, from, &h)
		return
	}
	c, err := e.newConn(from, l.mem)
	if err != nil {
		e.stats.RejectsSent++
		h := wire.ConnHeader{Opcode: wire.OpReject, DstConn: p.SrcConn(), Reason: wire.ReasonLimit, Timestamp: uint64(now)}
		e.queueReply(now, from, &h)
		return
	}
	c.service = p.Service()
	c.token = p.Token()
	c.rnrForever = l.rnrForever
	c.peerID = p.SrcConn()
	c.rcv.cum = p.InitialPSN()
	copy(c.peerReset[:], p.ResetToken())
	c.peerPriv.set(p.Private())
	c.learnPlanes(p)
	e.byPeer[key] = c
	if l.deferred {
		// The application decides (Accept or Reject); until then the
		// initiator's retries draw nothing.
		c.state = StatePending
		c.pendWindow, c.pendMsgWindow, c.pendPayload = p.RecvWindow(), p.MsgWindow(), p.MaxPayload()
		e.stats.ConnRequests++
		e.complete(Completion{Conn: c, Op: OpRequest})
		return
	}
	c.establish(now, p.RecvWindow(), p.MsgWindow(), p.MaxPayload())
	c.heard(now) // the CONNECT: arms the keepalive (keepalive.go)
	c.ctlOwed = wire.OpAccept
	e.stats.ConnsAccepted++
	e.complete(Completion{Conn: c, Op: OpConnected})
	e.touch(c)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Accept accepts a Pending connection (a request of a listener with
// ListenOptions.Defer): it becomes Established and the peer gets ACCEPT
// with private (at most wire.MaxPrivateData bytes). No OpConnected
// completion follows: the caller is the one that knows. The connection
// keeps its listener's RNRRetryForever; AcceptWith says otherwise.
func (c *Conn) Accept(now Time, private []byte) error {
	return c.AcceptWith(now, AcceptOptions{Private: private, RNRRetryForever: c.rnrForever})
}

// AcceptOptions are what the application that accepts a Pending
// connection gives it.
type AcceptOptions struct {
	// Private is up to wire.MaxPrivateData bytes for the ACCEPT.
	Private []byte
	// RNRRetryForever is ConnectOptions.RNRRetryForever, for the
	// accepted connection: the one who accepts it (a queue pair taking a
	// listener's request) decides, not the listener.
	RNRRetryForever bool
}

// AcceptWith is Accept with the connection's options in o.
func (c *Conn) AcceptWith(now Time, o AcceptOptions) error {
	if c.state != StatePending {
		return ErrNotPending
	}
	if len(o.Private) > wire.MaxPrivateData {
		return ErrPrivateTooLong
	}
	c.priv.set(o.Private)
	c.rnrForever = o.RNRRetryForever
	c.establish(now, c.pendWindow, c.pendMsgWindow, c.pendPayload)
	c.heard(now)
	c.ctlOwed = wire.OpAccept
	c.ep.stats.ConnsAccepted++
	c.ep.touch(c)
	return nil
}

// Reject refuses a Pending connection: the peer gets REJECT with reason
// (wire.ReasonApplication, with appReason and private, for the
// application's own refusal), the connection is released (an OpClosed
// completion with StatusRejected follows), and the REJECT is kept for
// CookieLifetime to answer the initiator's retries (§7.3).
func (c *Conn) Reject(now Time, reason wire.ConnReason, appReason uint16, private []byte) error {
	if c.state != StatePending {
		return ErrNotPending
	}
	if len(private) > wire.MaxPrivateData {
		return ErrPrivateTooLong
	}
	e := c.ep
	h := wire.ConnHeader{Opcode: wire.OpReject, DstConn: c.peerID, Reason: reason, Timestamp: uint64(now)}
	if reason == wire.ReasonApplication {
		h.AppReason = appReason
		h.SetPrivate(private)
	}
	e.stats.RejectsSent++
	e.queueReply(now, c.peer, &h)
	e.remember(now, peerKey{c.peer, c.peerID}, c.service, &h)
	c.Err = errRejectedLocally
	c.fail(StatusRejected, errRejectedLocally)
	return nil
}

// maxRejected bounds the REJECTs an endpoint keeps to repeat (§7.3).
const maxRejected = 1024

// remember keeps a REJECT of a Pending connection for CookieLifetime,
// with the service it refused (to match a retry against; the REJECT does
// not carry it).
func (e *Endpoint) remember(now Time, k peerKey, service uint32, h *wire.ConnHeader) {
	if len(e.rejected) >= maxRejected {
		for k, r := range e.rejected {
			if now >= r.until {
				delete(e.rejected, k)
			}
		}
		if len(e.rejected) >= maxRejected {
			return // the retry then makes a new request: no worse than no memory
		}
	}
	e.rejected[k] = rejectRec{until: now + Time(e.cfg.CookieLifetime), service: service, h: *h}
}

// rejectRec is a REJECT kept to repeat, and the service it refused.
type rejectRec struct {
	until   Time
	service uint32
	h       wire.ConnHeader
}

// ErrNotPending: Accept or Reject of a connection that is not Pending.
var ErrNotPending = errors.New("metaroce: connection is not a pending request")

var errRejectedLocally = errors.New("metaroce: connection request rejected")

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
	m := e.keyedMAC()
	a := from.As16()
	m.Write(a[:])
	var b [12]byte
	binary.BigEndian.PutUint32(b[0:], src)
	binary.BigEndian.PutUint32(b[4:], service)
	binary.BigEndian.PutUint32(b[8:], t)
	m.Write(b[:])
	return m.Sum(e.macSum[:0])
}

// keyedMAC returns the endpoint's HMAC under its secret, reset.
func (e *Endpoint) keyedMAC() hash.Hash {
	if e.mac == nil {
		e.mac = hmac.New(sha256.New, e.secret[:])
	}
	e.mac.Reset()
	return e.mac
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

// replyAllowed takes one reply to dst from the rate budgets (§7.8,
// replylimit.go), or counts the reply as limited.
func (e *Endpoint) replyAllowed(now Time, dst netip.Addr) bool {
	if len(e.replies) >= cap(e.replies) || !e.replyLimit.allow(now, dst) {
		e.stats.ReplyRateLimited++
		return false
	}
	return true
}

// queueReply owes a stateless connection packet, within the reply rates.
// It goes back on the plane the packet it answers arrived on (§7.9).
func (e *Endpoint) queueReply(now Time, dst netip.Addr, h *wire.ConnHeader) {
	e.queueReplyOn(now, dst, e.rxPlane, h)
}

// queueReplyOn is queueReply on a plane the caller knows.
func (e *Endpoint) queueReplyOn(now Time, dst netip.Addr, plane uint8, h *wire.ConnHeader) {
	if e.replyAllowed(now, dst) {
		e.replies = append(e.replies, reply{dst: dst, plane: plane, h: *h})
	}
}

// replyReset tells the sender of a packet for an unknown connection id
// that the id names nothing here (§7.6), proving it with the id's reset
// token, which is derived from the id alone: it is right even when the
// connection is long forgotten. The budget is checked first, so a flood
// costs a MAC per reply sent, not per packet.
func (e *Endpoint) replyReset(now Time, from netip.Addr, id uint32) {
	if id == 0 {
		return
	}
	e.stats.ResetsSent++
	if !e.replyAllowed(now, from) {
		return
	}
	e.replies = append(e.replies, reply{dst: from, plane: e.rxPlane, h: wire.ConnHeader{Opcode: wire.OpReset, SrcConn: id,
		Reason: wire.ReasonUnknownConn, Timestamp: uint64(now), ResetToken: e.resetTokenOf(id)}})
}

// resetTokenOf is the reset token of this endpoint's connection id (§7.6):
// the first 16 bytes of HMAC-SHA256(secret, "RST" | id). The MAC input is
// 7 bytes, a cookie's 28 (cookieMAC), so the two never share an input.
func (e *Endpoint) resetTokenOf(id uint32) (t [wire.ResetTokenLen]byte) {
	m := e.keyedMAC()
	var b [7]byte
	b[0], b[1], b[2] = 'R', 'S', 'T'
	binary.BigEndian.PutUint32(b[3:], id)
	m.Write(b[:])
	copy(t[:], m.Sum(e.macSum[:0]))
	return t
}

// rejectError is the error of a connection the peer rejected.
type rejectError struct {
	reason wire.ConnReason
	app    uint16
}

func (r rejectError) Error() string {
	switch r.reason {
	case wire.ReasonNoService:
		return "metaroce: connect rejected: no such service (or not with this token)"
	case wire.ReasonLimit:
		return "metaroce: connect rejected: connection limit"
	case wire.ReasonParams:
		return "metaroce: connect rejected: parameters"
	case wire.ReasonApplication:
		return "metaroce: connect rejected by the application: reason " + strconv.Itoa(int(r.app))
	}
	return "metaroce: connect rejected"
}
