package transport

import (
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"hash"
	"math/rand/v2"
	"net/netip"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/wire"
)

// Datagram describes a packet Transmit wrote: where it goes and on which
// path (the UDP source port is the path entropy, §2.3).
type Datagram struct {
	Dst     netip.Addr
	SrcPort uint16
	Len     int
	// Control is set for acks, nacks and connection packets, which the
	// encapsulation marks with the control DSCP (§2.4).
	Control bool
	// Plane is the fabric plane (NIC port) the path belongs to (§8.7).
	Plane uint8
}

// Endpoint is the transport of one local address: its connections, their
// timers, and the completions they produce. Only one goroutine may use it.
type Endpoint struct {
	cfg   Config
	local netip.Addr
	// planeAddrs: the endpoint's address on each plane, [0] = local
	// (planes.go); nil for one plane or none known.
	planeAddrs []netip.Addr
	rng        *rand.Rand
	// rxArrival is the arrival time of the packet ReceiveAt is handing
	// in (arrival.go), 0 outside it; rxPlane the plane it arrived on
	// (ReceiveOn), 0 when the driver does not tell.
	rxArrival Time
	rxPlane   uint8

	conns  map[uint32]*Conn
	byPeer map[peerKey]*Conn
	// byPlane: connections by the peer's address on a proven plane
	// other than 0 and its id (planes.go), for the connection-management
	// packets that may come from there (§7.7, §7.9).
	byPlane  map[peerKey]*Conn
	services map[uint32]listenEntry
	// rejected: REJECTs of Pending connections, kept to repeat (§7.3).
	rejected map[peerKey]rejectRec

	ready     []*Conn // connections with output owed, FIFO
	readyHead int
	timers    connHeap
	// unsettled: connections that transmitted since the timer heap
	// last looked, whose deadlines settle recomputes (Transmit).
	unsettled []*Conn

	cq     []Completion
	cqHead int

	replies    []reply // stateless connection replies owed
	replyHead  int
	replyLimit replyLimiter
	secret     [32]byte
	mac        hash.Hash // HMAC-SHA256 under secret, for cookies
	macSum     [sha256.Size]byte

	stats Stats

	// hsRTT smooths the round trips of every connection's handshake
	// (§8.4): the first CONNECT interval of new connections (§7.3).
	hsRTT rttEstimator
	// dataRTT smooths every connection's data round trips: the floor of a
	// young connection's RTO and tail probe timeout (rtt.go, youngSamples).
	dataRTT rttEstimator
	// blind: connections whose CONNECT schedule began before hsRTT had
	// a sample (handshake.go, sampleHandshakeRTT).
	blind []*Conn

	// fair shares LineRateBps among the connections sending to this
	// endpoint, for the rate hint in their acks (nil: RateHintOff).
	fair *congestion.FairShare

	// initialPSN picks a connection's first PSN; tests replace it to
	// exercise wraparound.
	initialPSN func() wire.PSN

	// Released connections' windows, for the next ones (spare.go).
	spareSend []sendStore
	spareRecv []recvStore
	spareMax  int
}

type peerKey struct {
	addr netip.Addr
	id   uint32
}

type reply struct {
	dst   netip.Addr
	plane uint8 // the plane the answered packet arrived on
	h     wire.ConnHeader
}

// NewEndpoint validates cfg and returns an endpoint for local.
func NewEndpoint(cfg Config, local netip.Addr) (*Endpoint, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Endpoint{
		cfg: cfg, local: local,
		conns: map[uint32]*Conn{}, byPeer: map[peerKey]*Conn{}, byPlane: map[peerKey]*Conn{}, services: map[uint32]listenEntry{},
		rejected: map[peerKey]rejectRec{},
		ready:    make([]*Conn, 0, 64), cq: make([]Completion, 0, 256),
		replies:  make([]reply, 0, 64),
		spareMax: spareLimit(&cfg),
	}
	seed := cfg.Seed
	if seed == 0 {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			return nil, err
		}
		seed = binary.LittleEndian.Uint64(b[:])
	}
	e.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	// The cookie secret always comes from crypto/rand, even when Seed makes
	// everything else deterministic: nothing observable depends on it.
	if _, err := crand.Read(e.secret[:]); err != nil {
		return nil, err
	}
	var key [16]byte
	if _, err := crand.Read(key[:]); err != nil {
		return nil, err
	}
	e.replyLimit.init(e.cfg.ResetRate, key)
	e.initialPSN = func() wire.PSN { return wire.PSN(e.rng.Uint32()) }
	e.hsRTT.init(&e.cfg)
	e.dataRTT.init(&e.cfg)
	if cfg.RateHint == RateHintFair {
		fs, err := congestion.NewFairShare(congestion.FairShareConfig{LineRate: cfg.LineRateBps,
			MaxSenders: min(cfg.MaxConns, 1024), DemandAware: true})
		if err != nil {
			return nil, err
		}
		e.fair = fs
	}
	return e, nil
}

// Config returns the validated configuration.
func (e *Endpoint) Config() *Config { return &e.cfg }

// Stats returns a pointer to the counters (read them on the owner goroutine).
func (e *Endpoint) Stats() *Stats { return &e.stats }

// MaxPacket is the buffer size Transmit needs.
func (e *Endpoint) MaxPacket() int { return wire.DataLen + e.cfg.MaxPayload() + wire.TrailerLen }

// Listen accepts connections for a public service (token 0), at once;
// their RMA keys resolve in mem. ListenWith says more.
func (e *Endpoint) Listen(service uint32, mem Memory) { e.ListenWith(service, mem, ListenOptions{}) }

// ListenOptions shape a service (§7.3).
type ListenOptions struct {
	// Token is the service's token: a CONNECT must carry it, and one
	// that does not draws the same REJECT NO_SERVICE as a service that
	// does not exist. 0 makes the service public. Draw it from a
	// cryptographically strong source.
	Token uint64
	// Defer holds each new connection Pending, reported by an OpRequest
	// completion, until the application calls Accept or Reject on it;
	// without it a connection is accepted at once (OpConnected).
	Defer bool
	// RNRRetryForever is ConnectOptions.RNRRetryForever for every
	// connection the service takes (a Pending one until AcceptWith says
	// otherwise).
	RNRRetryForever bool
}

type listenEntry struct {
	mem        Memory
	token      uint64
	deferred   bool
	rnrForever bool
}

// ListenWith accepts connections for service as o says; their RMA keys
// resolve in mem.
func (e *Endpoint) ListenWith(service uint32, mem Memory, o ListenOptions) {
	e.services[service] = listenEntry{mem: mem, token: o.Token, deferred: o.Defer, rnrForever: o.RNRRetryForever}
}

// Unlisten stops accepting connections for service; connections already
// made keep their Memory until they close.
func (e *Endpoint) Unlisten(service uint32) { delete(e.services, service) }

// Conns returns the number of connections.
func (e *Endpoint) Conns() int { return len(e.conns) }

// AppendConns appends every connection to dst, in no particular order
// (call on the owner). It is how telemetry walks the connections without
// the endpoint keeping a second index of them: taking the pointers is a
// pass over the map alone, cheap enough for one engine iteration even at
// MaxConns, and the (cache-missing) reads of each connection can then be
// spread over several iterations.
func (e *Endpoint) AppendConns(dst []*Conn) []*Conn {
	for _, c := range e.conns {
		dst = append(dst, c)
	}
	return dst
}

// ErrTooManyConns is returned by Connect beyond MaxConns.
var ErrTooManyConns = errors.New("metaroce: connection limit reached")

var errVersion = errors.New("metaroce: peer does not speak protocol version 1")

func (e *Endpoint) newConn(peer netip.Addr, mem Memory) (*Conn, error) {
	if len(e.conns) >= e.cfg.MaxConns {
		return nil, ErrTooManyConns
	}
	c := &Conn{ep: e, peer: peer, mem: mem, heapIdx: -1}
	for {
		id := e.rng.Uint32()
		if m := e.cfg.IDMask; m != 0 {
			// The low bits name the engine that owns the connection, so
			// a packet that RSS delivers to another queue can be handed
			// to its owner from its destination id alone.
			id = id&^m | e.cfg.IDTag&m
		}
		if id != 0 && e.conns[id] == nil {
			c.localID = id
			break
		}
	}
	c.resetToken = e.resetTokenOf(c.localID)
	c.rcv.init(&e.cfg, take(&e.spareRecv))
	c.snd.rtt.init(&e.cfg) // before establish: the handshake may sample it
	c.initPSN = e.initialPSN()
	c.snd.nextPSN = c.initPSN
	c.snd.una = c.initPSN
	e.conns[c.localID] = c
	return c, nil
}

func (e *Endpoint) entropy() uint16 {
	span := uint32(e.cfg.EntropyMax-e.cfg.EntropyMin) + 1
	return e.cfg.EntropyMin + uint16(e.rng.Uint32N(span))
}

// establish sizes the sender once the peer's parameters are known.
func (c *Conn) establish(now Time, peerWindow uint32, peerMsgWindow uint16, peerPayload uint16) {
	cfg := &c.ep.cfg
	c.sendWindow = min(cfg.SendWindow, int(peerWindow))
	c.msgWindow = min(cfg.MsgWindow, int(peerMsgWindow))
	c.maxPayload = min(cfg.MaxPayload(), int(peerPayload))
	c.snd.init(cfg, c.sendWindow, c.msgWindow, c.ep.entropy, c.ep.rng.Uint64(), take(&c.ep.spareSend))
	c.snd.rto = c.rtoNow(now)
	for i := range c.snd.paths {
		c.snd.paths[i].plane = c.pathPlane(i) // §8.7.1, §7.9
	}
	c.snd.mp = c.maxPayload
	if cfg.Congestion != CongestionNone {
		cc := congestion.Defaults
		cc.MSS = c.maxPayload
		cc.MaxWindow = c.sendWindow * c.maxPayload
		cc.InitialWindow = min(cc.MaxWindow, max(cc.MSS, cfg.InitialWindow))
		cc.LineRate = cfg.LineRateBps
		cc.BaseRTT = cfg.BaseRTT
		cc.Metaroce.TargetQueue = cfg.TargetQueue
		// Validated at NewEndpoint: cannot fail here.
		c.snd.cc, _ = congestion.New(cfg.Congestion, cc)
	}
	c.state = StateEstablished
	c.startUnproven(now)
}

// release forgets a connection that has closed or failed.
func (e *Endpoint) release(c *Conn) {
	delete(e.conns, c.localID)
	if e.fair != nil {
		e.fair.Remove(uint64(c.localID))
	}
	if k := (peerKey{c.peer, c.peerID}); e.byPeer[k] == c {
		delete(e.byPeer, k)
	}
	c.forgetPlanes()
	e.timers.remove(c)
	c.deadline = 0
	// A released connection owes the peer nothing: a CONNECT or
	// DISCONNECT still queued would speak for a connection that is gone.
	c.ctlOwed = 0
	e.recycle(c)
}

// Receive hands the endpoint one received packet: the UDP payload, the
// source address, and whether the IP header carried a CE mark.
func (e *Endpoint) Receive(now Time, from netip.Addr, ce bool, pkt []byte) {
	e.ReceivePort(now, from, 0, ce, pkt)
}

// ReceivePort is Receive with the packet's UDP source port (its path
// entropy). Acks for a path then carry the entropy its data came with, so
// the sender's choice of entropy steers the ack's route too, and a repath
// moves both directions (§5.5); with port 0 acks spread over the
// receiver's own paths.
func (e *Endpoint) ReceivePort(now Time, from netip.Addr, srcPort uint16, ce bool, pkt []byte) {
	e.stats.RxPackets++
	e.stats.RxBytes += uint64(len(pkt))
	p, err := wire.Parse(pkt)
	if err != nil {
		if we, ok := err.(wire.Error); ok {
			e.stats.RxMalformed[we.Reason()]++
			if we == wire.ErrVersion {
				e.versionMismatch(from, pkt)
			}
		}
		return
	}
	if p.Class == wire.ClassConn {
		e.onConn(now, from, p.Conn())
		return
	}
	c := e.conns[p.Prefix().DstConn()]
	if c == nil {
		e.stats.RxUnknownConn++
		e.replyReset(now, from, p.Prefix().DstConn())
		return
	}
	pl, ok := c.peerPlane(from)
	if !ok {
		e.stats.RxWrongPeer++
		return
	}
	c.rxPlane = pl
	if c.state != StateEstablished {
		e.stats.RxUnexpected++
		return
	}
	if c.acceptAt != 0 {
		c.handshakeRTT(now)
	}
	c.heard(now)
	switch p.Class {
	case wire.ClassData:
		if ce {
			e.stats.RxCE++
		}
		c.onData(now, p.Data(), srcPort, ce)
	case wire.ClassAck:
		c.onAck(now, p.Ack())
	case wire.ClassNack:
		c.onNack(now, p.Nack())
	}
	e.touch(c)
}

// versionMismatch answers a packet of another protocol version with NACK
// UNSUPPORTED_VERSION, but only on a connection this peer really has: a
// stray packet gets no reply (§3.5).
func (e *Endpoint) versionMismatch(from netip.Addr, pkt []byte) {
	if len(pkt) < wire.PrefixLen+wire.TrailerLen {
		return
	}
	// Only a packet that arrived intact may end a connection: a bit flip
	// in the version byte of a v1 packet must not (the CRC32C is the same
	// polynomial in every version, §3.1).
	n := len(pkt) - wire.TrailerLen
	if binary.BigEndian.Uint32(pkt[n:]) != wire.Checksum(pkt[:n]) {
		return
	}
	c := e.conns[binary.BigEndian.Uint32(pkt[4:8])]
	if c == nil || !c.fromPeer(from) || c.state != StateEstablished {
		return
	}
	var psn uint32
	if len(pkt) >= 12 {
		psn = binary.BigEndian.Uint32(pkt[8:12])
	}
	c.owe(nackRec{psn: wire.PSN(psn), reason: wire.NackUnsupportedVersion, info: wire.Version})
	e.touch(c)
}

// HasOutput reports whether Transmit may have a packet now: a reply or a
// connection with something owed is queued. It is cheap, so a driver can
// skip reserving transmit buffers when nothing is owed.
func (e *Endpoint) HasOutput() bool {
	return e.replyHead < len(e.replies) || e.readyHead < len(e.ready)
}

// Transmit writes the next packet owed into buf (at least MaxPacket
// bytes) and describes it; ok is false when nothing is owed now.
func (e *Endpoint) Transmit(now Time, buf []byte) (d Datagram, ok bool) {
	if e.replyHead < len(e.replies) {
		r := &e.replies[e.replyHead]
		e.replyHead++
		if e.replyHead == len(e.replies) {
			e.replies, e.replyHead = e.replies[:0], 0
		}
		r.h.Put(buf)
		return Datagram{Dst: r.dst, SrcPort: e.cfg.EntropyMin, Len: r.h.Len(), Control: true, Plane: r.plane}, true
	}
	for e.readyHead < len(e.ready) {
		c := e.ready[e.readyHead]
		e.readyHead++
		if e.readyHead == len(e.ready) {
			e.ready, e.readyHead = e.ready[:0], 0
		}
		c.inReady = false
		n, pi, ctl := c.build(now, buf)
		if n == 0 {
			// Held back (by the pacer, say): the deadline that will
			// release it may be new, so the timer heap must know it.
			e.reschedule(c)
			continue
		}
		d := Datagram{Dst: c.peer, SrcPort: e.cfg.EntropyMin, Len: n, Control: ctl}
		if pi >= 0 {
			p := &c.snd.paths[pi]
			d.SrcPort, d.Plane, d.Dst = p.entropy, p.plane, c.planeDst(p.plane)
		}
		if pi == ackPath {
			d.Plane, d.Dst = c.rcv.lastPlane, c.planeDst(c.rcv.lastPlane)
			if c.rcv.lastEntropy != 0 {
				d.SrcPort = c.rcv.lastEntropy
			}
		}
		if ctl && pi == -1 && c.ctlPlane != 0 {
			d.Plane, d.Dst = c.ctlPlane, c.planeDst(c.ctlPlane) // a teardown off plane 0 (§7.7)
		}
		e.stats.TxPackets++
		e.stats.TxBytes += uint64(n)
		if c.hasOutput() {
			e.markReady(c) // round-robin: back of the queue
		}
		// Nearly every packet moves a timer (the tail probe's, at
		// least), and a batch of packets would recompute the deadline
		// and fix the heap once each: 15 ns a packet. The heap is only
		// read by NextTimeout and Timeout, which settle first.
		if !c.unsettled {
			c.unsettled = true
			e.unsettled = append(e.unsettled, c)
		}
		return d, true
	}
	return Datagram{}, false
}

// build writes one packet of c: connection control, then nacks and acks,
// then data.
// ackPath marks an ack or nack that echoes the entropy of the data it
// speaks for.
const ackPath = -2

// The path index -1 means the connection's fixed control entropy.
func (c *Conn) build(now Time, buf []byte) (n int, path int, control bool) {
	if c.ctlOwed != 0 {
		n = c.buildConn(now, buf)
		return n, -1, true
	}
	if c.state != StateEstablished {
		return 0, 0, false
	}
	if c.snd.hsProbe {
		c.snd.hsProbe = false
		if n = c.buildHandshakeProbe(now, buf); n > 0 {
			return n, -1, false // the ACCEPT's entropy, so its route
		}
	}
	if c.snd.keepalive {
		if n, pi := c.buildKeepalive(now, buf); n > 0 {
			return n, pi, false
		}
	}
	if c.rcv.hasControl() {
		n = c.buildControl(now, buf)
		// Acks ride the connection's own active paths, round-robin, so
		// they are sprayed too and avoid paths known to be bad.
		s := &c.snd
		pi := s.nextPath % len(s.paths)
		if !s.proven(s.paths[pi].plane) {
			pi = 0 // plane 0's (§7.9)
		}
		if len(s.active) > 0 {
			pi = int(s.active[s.nextPath%len(s.active)])
		}
		s.nextPath++
		if c.rcv.lastEntropy != 0 || c.planes.n > 1 {
			// Back with the entropy of the path it speaks for, and on
			// its plane (§7.9: the peer proves the plane by these acks
			// coming from our address there) even when the driver did
			// not say which entropy the packets came with.
			return n, ackPath, true
		}
		return n, pi, true
	}
	if n, pi := c.buildProbe(now, buf); n > 0 {
		// Data class on purpose: a probe must queue where data queues,
		// or a path slow only for data would pass its probes.
		return n, pi, false
	}
	n, pi := c.buildData(now, buf)
	if n == 0 {
		return 0, 0, false
	}
	return n, pi, false
}

func (c *Conn) hasOutput() bool {
	if c.ctlOwed != 0 {
		return true
	}
	if c.state != StateEstablished {
		return false
	}
	return c.rcv.hasControl() || len(c.snd.probesOwed) > 0 || c.snd.hsProbe || c.snd.keepalive || c.snd.hasData()
}

func (e *Endpoint) markReady(c *Conn) {
	if c.inReady || !c.hasOutput() {
		return
	}
	c.inReady = true
	e.ready = append(e.ready, c)
}

// touch refreshes c's place in the ready queue and the timer heap.
func (e *Endpoint) touch(c *Conn) {
	if c.state == StateFailed || c.state == StateClosed {
		return
	}
	e.markReady(c)
	e.reschedule(c)
}

func (c *Conn) nextDeadline() Time {
	if c.state != StateEstablished {
		// Only the handshake or teardown timer runs (onTimer): the data
		// timers left over from an established connection that is now
		// closing would be due forever and spin the timer loop.
		if c.ctlDeadline != 0 {
			return c.ctlDeadline
		}
		return Never
	}
	d := Never
	for _, t := range [...]Time{c.ctlDeadline, c.rcv.ackTimer, c.snd.rtoDeadline, c.snd.lossDeadline, c.snd.rnrDeadline, c.snd.pathTimer, c.snd.tlpDeadline, c.snd.paceTimer, c.ka.deadline, c.snd.frtoDeadline} {
		if t != 0 && t < d {
			d = t
		}
	}
	return d
}

func (e *Endpoint) reschedule(c *Conn) {
	if c.state == StateFailed || c.state == StateClosed {
		return
	}
	d := c.nextDeadline()
	if d == c.deadline && (c.heapIdx >= 0) == (d != Never) {
		return // where it is (about half the calls: a packet often moves no timer)
	}
	c.deadline = d
	e.timers.fix(c)
}

// settle brings the timer heap up to date with the connections that
// transmitted since it was last read.
func (e *Endpoint) settle() {
	for i, c := range e.unsettled {
		c.unsettled = false
		e.reschedule(c)
		e.unsettled[i] = nil
	}
	e.unsettled = e.unsettled[:0]
}

// NextTimeout is when Timeout should next be called (Never if idle).
func (e *Endpoint) NextTimeout() Time {
	e.settle()
	if len(e.timers) == 0 {
		return Never
	}
	return e.timers[0].at
}

// Timeout runs every timer due at now.
func (e *Endpoint) Timeout(now Time) {
	e.settle()
	for len(e.timers) > 0 && e.timers[0].at <= now {
		c := e.timers[0].c
		c.onTimer(now)
		if c.state == StateFailed || c.state == StateClosed {
			e.timers.remove(c)
			continue
		}
		e.touch(c)
		if c.deadline <= now { // nothing moved it: never spin on it
			c.deadline = now + 1
			e.timers.fix(c)
		}
	}
}

func (c *Conn) onTimer(now Time) {
	if c.ctlDeadline != 0 && now >= c.ctlDeadline {
		c.ctlTimer(now)
		if c.state == StateFailed || c.state == StateClosed {
			return
		}
	}
	if c.state != StateEstablished {
		return
	}
	if c.rcv.ackTimer != 0 && now >= c.rcv.ackTimer {
		c.rcv.ackTimerFired(now, c.ep.cfg.AckDelay)
	}
	if c.snd.paceTimer != 0 && now >= c.snd.paceTimer {
		c.snd.paceTimer = 0 // touch puts the connection back in the ready queue
	}
	c.senderTimer(now)
	if c.state == StateEstablished && c.snd.pathTimer != 0 && now >= c.snd.pathTimer {
		c.snd.pathTimer = c.pathTick(now)
	}
	if c.state == StateEstablished && c.ka.deadline != 0 && now >= c.ka.deadline {
		c.keepaliveTimer(now)
	}
}

func (e *Endpoint) complete(cq Completion) { e.cq = append(e.cq, cq) }

// PollCompletions moves up to len(dst) completions into dst.
func (e *Endpoint) PollCompletions(dst []Completion) int {
	n := copy(dst, e.cq[e.cqHead:])
	for i := e.cqHead; i < e.cqHead+n; i++ {
		e.cq[i] = Completion{} // drop references
	}
	e.cqHead += n
	if e.cqHead == len(e.cq) {
		e.cq, e.cqHead = e.cq[:0], 0
	}
	return n
}

// PendingCompletions reports how many completions wait to be polled.
func (e *Endpoint) PendingCompletions() int { return len(e.cq) - e.cqHead }

// connHeap is a binary min-heap of connections by deadline; each Conn
// knows its index so fix and remove are O(log n) without searching. Each
// entry carries its deadline: comparing entries reads only the heap's own
// array, not two connections' cache lines (the heap is fixed on every
// packet; with thousands of connections per host that was a seventh of
// the fabric simulation).
type connHeap []heapEnt

type heapEnt struct {
	at Time // c.deadline
	c  *Conn
}

func (h *connHeap) less(i, j int) bool { return (*h)[i].at < (*h)[j].at }

func (h *connHeap) swap(i, j int) {
	a := *h
	a[i], a[j] = a[j], a[i]
	a[i].c.heapIdx, a[j].c.heapIdx = i, j
}

// up moves entry i towards the root while it is earlier than its parent,
// and reports whether it moved.
func (h *connHeap) up(i int) bool {
	moved := false
	for i > 0 {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h.swap(i, p)
		i, moved = p, true
	}
	return moved
}

func (h *connHeap) down(i int) {
	n := len(*h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h.swap(i, m)
		i = m
	}
}

// fix inserts, moves or (deadline Never) removes c.
func (h *connHeap) fix(c *Conn) {
	if c.deadline == Never {
		h.remove(c)
		return
	}
	if c.heapIdx < 0 {
		c.heapIdx = len(*h)
		*h = append(*h, heapEnt{c.deadline, c})
		h.up(c.heapIdx)
		return
	}
	i := c.heapIdx
	(*h)[i].at = c.deadline
	if !h.up(i) {
		h.down(i)
	}
}

func (h *connHeap) remove(c *Conn) {
	i := c.heapIdx
	if i < 0 {
		return
	}
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = heapEnt{}
	*h = (*h)[:last]
	c.heapIdx = -1
	if i != last && !h.up(i) {
		h.down(i)
	}
}
