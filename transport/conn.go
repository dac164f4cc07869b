package transport

import (
	"errors"
	"net/netip"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/wire"
)

// State is a connection's place in its life (§7.3):
//
//	            Connect                 ACCEPT
//	(none) ──────────────> Connecting ─────────> Established
//	   │  CONNECT+cookie                             │   │
//	   └─────────────────────────────────────────────┘   │ Close / DISCONNECT
//	                                                      v
//	        Failed <── retries exhausted / RESET ──  Closing ──> Closed
//
// A listener whose application decides (ListenOptions.Defer) holds a new
// connection in Pending until Accept (Established) or Reject (gone).
type State uint8

const (
	StateConnecting State = iota + 1
	StateEstablished
	StateClosing
	StateClosed
	StateFailed
	// StatePending: a listener's connection whose application has not
	// yet accepted or rejected it (§7.3). Numbered last, so the others
	// keep their values.
	StatePending
)

func (s State) String() string {
	return [...]string{"?", "connecting", "established", "closing", "closed", "failed", "pending"}[s]
}

// Errors returned by the Post methods.
var (
	ErrNotEstablished = errors.New("metaroce: connection not established")
	ErrQueueFull      = errors.New("metaroce: message window full")
	ErrRecvQueueFull  = errors.New("metaroce: receive queue full")
	ErrBadStream      = errors.New("metaroce: stream id out of range")
	ErrTooLarge       = errors.New("metaroce: message larger than 4 GiB")
)

// Conn is one reliable connection. All its state is owned by the goroutine
// driving its Endpoint.
type Conn struct {
	ep      *Endpoint
	state   State
	localID uint32
	peerID  uint32
	peer    netip.Addr
	// planes: the planes the connection sprays over and the peer's
	// address on each (planes.go, §7.9).
	planes connPlanes
	// rxPlane is the plane of the peer's address the packet being
	// received came from (ReceivePort).
	rxPlane uint8
	service uint32
	mem     Memory
	initPSN wire.PSN // the first PSN we send, announced in CONNECT/ACCEPT
	// Context is free for the owner (e.g. the session a connection
	// belongs to); the transport never reads it.
	Context any
	// Err says why a connection failed or closed.
	Err error

	// Negotiated (§7.2).
	maxPayload int
	sendWindow int // min(own SendWindow, peer RecvWindow)
	msgWindow  int // min(own, peer) message window

	snd sender
	rcv receiver
	ka  keepalive // keepalive.go

	// rnrForever: an RNR NACK never fails this connection's messages;
	// their waits back off instead (RNRRetryForever, rnr.go). Set by the
	// options it was made or accepted with.
	rnrForever bool

	// Handshake and teardown retransmission.
	ctlDeadline Time
	ctlTries    int
	// connectUntil, if set, keeps CONNECT retransmitting past
	// ConnectRetries until this time (ConnectUntil).
	connectUntil Time
	ctlRTO       Duration
	ctlOwed      wire.Opcode // connection packet owed to the peer, 0 if none
	// ctlPlane is the plane the connection packet just built goes on
	// (buildConn), discSends how many DISCONNECTs have gone (§7.7, §7.9).
	ctlPlane  uint8
	discSends int
	cookie    [wire.CookieLen]byte
	// Handshake round trips (§8.4): when the latest CONNECT left; when
	// the acceptor's ACCEPT left (0 once used) and how many it sent.
	connectAt   Time
	acceptAt    Time
	acceptSends int

	// What the handshake carries besides parameters (§7.1, §7.3, §7.6):
	// the service token the CONNECT presented; this end's reset token
	// (derived from localID, handshake.go) and the peer's, which a RESET
	// must carry; the private data this end sends (CONNECT or ACCEPT) and
	// the peer's (its CONNECT, ACCEPT or REJECT); a REJECT's reasons.
	token      uint64
	resetToken [wire.ResetTokenLen]byte
	peerReset  [wire.ResetTokenLen]byte
	priv       privateData
	peerPriv   privateData
	rejectedBy wire.ConnReason
	appReason  uint16
	// The initiator's parameters, kept while Pending.
	pendWindow    uint32
	pendMsgWindow uint16
	pendPayload   uint16

	// Scheduling (owned by the Endpoint).
	inReady   bool
	unsettled bool // in Endpoint.unsettled: deadline may be stale
	heapIdx   int
	deadline  Time

	stats ConnStats
}

// ConnStats are per-connection counters, plain fields the owner updates.
type ConnStats struct {
	DataSent, Retransmitted, Acked, Lost, Timeouts uint64
	BytesSent                                      uint64 // payload bytes of data packets, retransmissions included
	DataReceived, Duplicates, BytesPlaced          uint64
	NacksSent, NacksReceived                       uint64
	SRTT, MinRTT                                   Duration
	// FabricRTT and FabricMinRTT are the congestion controller's
	// samples, host delay left out (fabric.go): the latest and the
	// smallest; HostDelay is the smoothed rest of the recovery sample
	// (the receiver's hold and this host's receive wait).
	FabricRTT, FabricMinRTT, HostDelay Duration
}

// privateData is a handshake's private data (at most
// wire.MaxPrivateData bytes), held in place so a connection carries it
// without another allocation.
type privateData struct {
	n uint8
	b [wire.MaxPrivateData]byte
}

func (p *privateData) set(b []byte)  { p.n = uint8(copy(p.b[:], b)) }
func (p *privateData) bytes() []byte { return p.b[:p.n] }

// State returns the connection's state.
func (c *Conn) State() State { return c.state }

// PeerPrivate returns the private data the peer sent: its CONNECT's on a
// listener's connection, its ACCEPT's or REJECT's on an initiator's. The
// slice is the connection's; copy it to keep it.
func (c *Conn) PeerPrivate() []byte { return c.peerPriv.bytes() }

// Rejection returns why the peer rejected the connection (StatusRejected):
// the REJECT's reason and, for wire.ReasonApplication, the application's
// own reason; PeerPrivate has the REJECT's private data.
func (c *Conn) Rejection() (reason wire.ConnReason, appReason uint16) {
	return c.rejectedBy, c.appReason
}

// LocalID and PeerID are the connection ids of the two ends.
func (c *Conn) LocalID() uint32 { return c.localID }
func (c *Conn) PeerID() uint32  { return c.peerID }

// Service is the service the connection was made for (§7.2): the one
// Connect named, or the one the peer's CONNECT asked for.
func (c *Conn) Service() uint32 { return c.service }

// Peer returns the peer's address.
func (c *Conn) Peer() netip.Addr { return c.peer }

// Stats returns a copy of the connection's counters.
func (c *Conn) Stats() ConnStats {
	s := c.stats
	s.SRTT, s.MinRTT = c.snd.rtt.srtt, c.snd.rtt.min
	s.FabricRTT, s.FabricMinRTT, s.HostDelay = c.snd.fabric.latest, c.snd.fabric.min, c.snd.fabric.host
	return s
}

// MaxPayload returns the negotiated payload bytes per packet.
func (c *Conn) MaxPayload() int { return c.maxPayload }

// Op is the kind of a completion.
type Op uint8

const (
	OpWrite Op = iota + 1
	OpRead
	OpSend
	OpRecv         // a SEND from the peer landed in a posted receive buffer
	OpRecvWriteImm // a WRITE with immediate from the peer completed
	OpConnected    // connection established (both sides)
	OpClosed       // connection closed or failed; see Status and Conn.Err
	OpRequest      // a deferring listener's new connection, Pending: Accept or Reject it
)

func (o Op) String() string {
	return [...]string{"?", "write", "read", "send", "recv", "recv_write_imm", "connected", "closed", "request"}[o]
}

// Status is a completion's outcome.
type Status uint8

const (
	StatusOK               Status = iota
	StatusRemoteAccess            // the peer refused the key, range or right
	StatusRemoteInvalid           // the peer could not serve the request
	StatusRNRRetryExceeded        // the peer never posted a receive buffer
	StatusRetryExceeded           // no progress after MaxRetries timeouts
	StatusLocalLength             // a SEND was longer than the posted buffer
	StatusFlushed                 // the connection closed before the message completed
	StatusReset                   // the peer no longer knows the connection
	StatusRejected                // the peer refused the connection
)

func (s Status) String() string {
	return [...]string{"ok", "remote_access", "remote_invalid", "rnr_retry_exceeded",
		"retry_exceeded", "local_length", "flushed", "reset", "rejected"}[s]
}

// Completion reports a finished work request or a connection event.
type Completion struct {
	Conn   *Conn
	WRID   uint64
	Op     Op
	Status Status
	Stream uint16
	Bytes  int
	Imm    uint32
	HasImm bool
}

// WorkRequest describes a message to post. Local is the local buffer: the
// source of a WRITE or SEND, the destination of a READ. It must stay
// untouched until the completion arrives.
type WorkRequest struct {
	WRID   uint64
	Stream uint16
	Local  []byte
	// SGL, if not nil, is the local buffer instead of Local, as a
	// scatter-gather list: the message is its slices one after the other
	// (a WRITE's or SEND's bytes are gathered from them into each packet,
	// a READ's response scattered into them). The list and its slices
	// must stay untouched until the completion, like Local.
	SGL        [][]byte
	RemoteAddr uint64
	RKey       uint32
	Imm        uint32
	HasImm     bool
}

// size is the message's length: Local's, or the sum of SGL's.
func (wr *WorkRequest) size() uint64 {
	if wr.SGL == nil {
		return uint64(len(wr.Local))
	}
	var n uint64
	for _, b := range wr.SGL {
		n += uint64(len(b))
	}
	return n
}

// PostWrite posts an RDMA WRITE of Local to RemoteAddr under RKey (§9.2).
func (c *Conn) PostWrite(wr *WorkRequest) error {
	op := wire.OpWrite
	if wr.HasImm {
		op = wire.OpWriteImm
	}
	return c.post(op, wr)
}

// PostRead posts an RDMA READ of len(Local) bytes from RemoteAddr (§9.3).
func (c *Conn) PostRead(wr *WorkRequest) error { return c.post(wire.OpReadReq, wr) }

// PostSend posts a SEND of Local, consumed by the peer's next receive
// buffer (§9.4).
func (c *Conn) PostSend(wr *WorkRequest) error {
	op := wire.OpSend
	if wr.HasImm {
		op = wire.OpSendImm
	}
	return c.post(op, wr)
}

// PostRecv posts a receive buffer for the peer's SENDs, matched in
// posting order.
func (c *Conn) PostRecv(wrid uint64, buf []byte) error {
	if c.state != StateEstablished && c.state != StateConnecting {
		return ErrNotEstablished
	}
	return c.rcv.postRecv(wrid, buf)
}

func (c *Conn) post(op wire.Opcode, wr *WorkRequest) error {
	if c.state != StateEstablished {
		return ErrNotEstablished
	}
	if int(wr.Stream) >= c.ep.cfg.MaxStreams {
		return ErrBadStream
	}
	if wr.size() > 0xffffffff {
		return ErrTooLarge
	}
	if err := c.snd.post(op, wr); err != nil {
		return err
	}
	c.ep.markReady(c)
	return nil
}

// ConnectUntil keeps a connection in Connecting retransmitting CONNECT
// past ConnectRetries until t, at the schedule's interval (at most
// MaxRTO), so an application's deadline, not the transport's half second,
// decides when an unanswered connect gives up. It is one connection
// throughout: a new connection per try would race the listener's ACCEPT
// of the previous one, whose RESET closes the listening side (§7.3).
func (c *Conn) ConnectUntil(t Time) {
	if c.state == StateConnecting {
		c.connectUntil = t
	}
}

// Close starts an orderly close: outstanding messages complete with
// StatusFlushed, the peer is told, and an OpClosed completion follows.
func (c *Conn) Close(now Time) {
	if c.state == StatePending {
		// Nothing was said yet: refuse it, as if no one listened.
		c.Reject(now, wire.ReasonNoService, 0, nil)
		return
	}
	if c.state != StateEstablished && c.state != StateConnecting {
		return
	}
	c.Err = errClosedLocally
	c.flush(StatusFlushed)
	if c.state == StateConnecting {
		// The peer has no id of ours to match a DISCONNECT against; if
		// its ACCEPT arrives later, the RESET it draws closes its side.
		c.closed()
		return
	}
	c.state = StateClosing
	c.ctlOwed = wire.OpDisconnect
	c.ctlTries = 0
	c.ctlRTO = c.ep.ctlRTO(&c.snd.rtt)
	c.ctlDeadline = now + Time(c.ctlRTO)
	c.ep.markReady(c)
	c.ep.reschedule(c)
}

var (
	errClosedLocally = errors.New("metaroce: closed locally")
	errClosedByPeer  = errors.New("metaroce: closed by peer")
	errReset         = errors.New("metaroce: reset by peer (connection unknown there)")
	errRetries       = errors.New("metaroce: peer unreachable: retry limit exceeded")
	errConnectFailed = errors.New("metaroce: connect: no answer from peer")
	errRNR           = errors.New("metaroce: peer posted no receive buffer within the RNR retry limit")
	errWindow        = errors.New("metaroce: peer kept refusing packets as out of its window")
)

// fail ends the connection with status st and err, completing everything
// outstanding with st.
func (c *Conn) fail(st Status, err error) {
	if c.state == StateFailed || c.state == StateClosed {
		return
	}
	c.Err = err
	c.flush(st)
	c.state = StateFailed
	c.ep.stats.ConnsFailed++
	c.ep.complete(Completion{Conn: c, Op: OpClosed, Status: st})
	c.ep.release(c)
}

// flush completes every outstanding message and receive with st.
func (c *Conn) flush(st Status) {
	c.snd.flush(c, st)
	c.rcv.flush(c, st)
}

// Congestion returns a snapshot of the connection's congestion controller
// (window, rate, target, last signals); ok is false when it has none
// (Config.Congestion "none"). Call on the owner.
func (c *Conn) Congestion() (st congestion.State, ok bool) {
	if c.snd.cc == nil {
		return st, false
	}
	return c.snd.cc.State(), true
}
