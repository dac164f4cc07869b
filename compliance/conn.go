package compliance

import (
	"crypto/rand"
	"encoding/binary"
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Parameters the suite announces unless a case says otherwise (§7.2).
const (
	suiteRecvWindow = 1024
	suiteMaxPayload = 1384 // MTU 1500 (§2.5)
	suiteMsgWindow  = 256
	suitePaths      = 16
	// entropyBase is the first source port the suite sends data from:
	// path i uses entropyBase+i (§2.3), inside the IANA dynamic range.
	entropyBase = 50000
)

var clockBase = time.Now()

// stamp is the suite's monotonic clock in ns for Timestamp fields (§4.2);
// never 0, which means "no timestamp".
func stamp() uint64 { return uint64(time.Since(clockBase)) + 1_000_000_000 }

func rand32() uint32 {
	var b [4]byte
	rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

// connOpts shape the suite's side of a handshake.
type connOpts struct {
	initialPSN wire.PSN
	psnSet     bool
	recvWindow uint32
	maxPayload uint16
	msgWindow  uint16
	service    uint32
	from       netip.Addr
	token      uint64 // the service's token (§7.3); the target's services are public
	private    []byte // private data of the CONNECT
	// planes are the suite's addresses on its planes 1.. (§7.9), announced
	// in the CONNECT; a zero Addr announces no address on that plane.
	planes []netip.Addr
}

// Conn is the suite's end of one connection to the target.
type Conn struct {
	t      *T
	ID     uint32 // ours: the target's packets carry it as DstConn
	Peer   uint32 // the target's
	from   netip.Addr
	accept wire.ConnHeader // the target's ACCEPT
	cookie [wire.CookieLen]byte
	// resetTok is the suite's reset token for this connection, announced
	// in its CONNECT; its RESETs carry it (§7.6).
	resetTok [wire.ResetTokenLen]byte

	InitPSN wire.PSN // ours
	next    wire.PSN // our next new PSN
	seq     map[uint16]uint32
	msgID   uint32
	sseq    map[uint16]uint32
	recvSeq uint32

	// The target's data towards us (READ responses): what we received,
	// for our acks.
	cum    wire.PSN
	got    map[wire.PSN]bool
	paths  map[uint16]*rxPath
	credit uint32 // Credit in our acks; 0: suiteRecvWindow

	connectTS uint64                 // Timestamp of our latest CONNECT
	txs       map[[2]uint32]wire.PSN // the target's (PathID, PathSeq) seen, §8.1
}

type rxPath struct {
	highest uint32
	seen    map[uint32]bool
	echo    uint64
	echoPSN wire.PSN
	// echoAt is when the echoed packet arrived: the suite's acks report
	// how long it held them (§5.1 AckDelay), as an honest receiver does,
	// so a case that withholds acks on purpose does not hand the target's
	// RTT estimator (and its congestion controller) a fabric delay of the
	// whole silence.
	echoAt time.Time
}

// connect opens a connection with the full handshake (§7.3).
func (t *T) connect(o connOpts) *Conn {
	c := t.dial(o)
	ch := t.expectConn(c.ID, wire.OpChallenge)
	copy(c.cookie[:], ch.pkt.Conn().Cookie())
	c.sendConnect(o, c.cookie)
	a := t.expectConn(c.ID, wire.OpAccept)
	c.accept.Decode(a.pkt.Conn())
	c.Peer = c.accept.SrcConn
	c.cum = c.accept.InitialPSN
	return c
}

// dial sends the first CONNECT (zero cookie) and registers the connection.
func (t *T) dial(o connOpts) *Conn {
	if o.recvWindow == 0 {
		o.recvWindow = suiteRecvWindow
	}
	if o.maxPayload == 0 {
		o.maxPayload = suiteMaxPayload
	}
	if o.msgWindow == 0 {
		o.msgWindow = suiteMsgWindow
	}
	if o.service == 0 {
		o.service = t.o.Service
	}
	if !o.psnSet {
		o.initialPSN = wire.PSN(rand32())
	}
	c := &Conn{t: t, ID: rand32() | 1, from: o.from, InitPSN: o.initialPSN, next: o.initialPSN,
		seq: map[uint16]uint32{}, sseq: map[uint16]uint32{}, got: map[wire.PSN]bool{}, paths: map[uint16]*rxPath{}}
	t.conns = append(t.conns, c)
	c.sendConnect(o, [wire.CookieLen]byte{})
	return c
}

func (c *Conn) connectHeader(o connOpts, cookie [wire.CookieLen]byte) wire.ConnHeader {
	if o.recvWindow == 0 {
		o.recvWindow = suiteRecvWindow
	}
	if o.maxPayload == 0 {
		o.maxPayload = suiteMaxPayload
	}
	if o.msgWindow == 0 {
		o.msgWindow = suiteMsgWindow
	}
	if o.service == 0 {
		o.service = c.t.o.Service
	}
	if c.resetTok == ([wire.ResetTokenLen]byte{}) {
		for i := 0; i < wire.ResetTokenLen; i += 4 {
			binary.BigEndian.PutUint32(c.resetTok[i:], rand32())
		}
	}
	h := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: c.ID, InitialPSN: c.InitPSN, Service: o.service,
		RecvWindow: o.recvWindow, MaxPayload: o.maxPayload, MsgWindow: o.msgWindow, Paths: suitePaths,
		Timestamp: stamp(), Cookie: cookie, Token: o.token, ResetToken: c.resetTok}
	h.SetPrivate(o.private)
	h.PlaneAddrs = uint16(len(o.planes))
	for i, a := range o.planes {
		if a.IsValid() {
			h.Planes[i] = a.As16()
		}
	}
	return h
}

func (c *Conn) sendConnect(o connOpts, cookie [wire.CookieLen]byte) {
	h := c.connectHeader(o, cookie)
	c.connectTS = h.Timestamp
	c.t.send(wire.AppendConn(nil, &h), sendOpts{from: c.from})
}

// expectConn waits for a connection packet of op addressed to id.
func (t *T) expectConn(id uint32, op wire.Opcode) *rxPacket {
	return t.expect(op.String()+" for connection "+hex32(id), func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassConn && r.pkt.Conn().Opcode() == op && r.pkt.Conn().DstConn() == id
	})
}

// close ends the connection (§7.7) without waiting: the target forgets it
// and stops sending to the suite.
func (c *Conn) close() {
	if c.Peer == 0 {
		return
	}
	h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: c.Peer, SrcConn: c.ID, Reason: wire.ReasonClosed, Timestamp: stamp()}
	c.t.p.send(wire.AppendConn(nil, &h), sendOpts{from: c.from})
	c.Peer = 0
}

// pkt is one data packet the suite will send: the header (PSN, message
// fields) and payload; path fields are filled in when it is sent.
type pkt struct {
	h       wire.DataHeader
	payload []byte
}

// msg describes a message to cut into packets.
type msg struct {
	op        wire.Opcode
	stream    uint16
	addr      uint64 // WRITE, READ_REQ
	rkey      uint32
	recvSeq   uint32 // SEND
	recvSet   bool
	imm       uint32
	data      []byte // WRITE, SEND
	readLen   uint32 // READ_REQ
	chunk     int    // payload per packet (default 512)
	msgID     uint32
	idSet     bool
	streamSeq uint32
	seqSet    bool
}

// message cuts m into packets with fresh PSNs, MsgID and StreamSeq
// (§9.1); the last carries ACK_REQ (§3.3).
func (c *Conn) message(m msg) []*pkt {
	if !m.idSet {
		m.msgID = c.msgID
		c.msgID++
	}
	if !m.seqSet {
		m.streamSeq = c.sseq[m.stream]
		c.sseq[m.stream]++
	}
	if m.op.IsSend() && !m.recvSet {
		m.recvSeq = c.recvSeq
		c.recvSeq++
	}
	if m.chunk <= 0 {
		m.chunk = 512
	}
	base := wire.DataHeader{Opcode: m.op, DstConn: c.Peer, Stream: m.stream, MsgID: m.msgID, StreamSeq: m.streamSeq,
		MsgLen: uint32(len(m.data))}
	switch {
	case m.op.IsSend():
		base.RecvSeq = m.recvSeq
	case m.op == wire.OpReadReq:
		base.RemoteAddr, base.RKey, base.MsgLen = m.addr, m.rkey, m.readLen
	default:
		base.RemoteAddr, base.RKey = m.addr, m.rkey
	}
	if m.op.HasImm() {
		base.Imm = m.imm
	}
	var out []*pkt
	for off := 0; off < len(m.data) || (off == 0 && len(out) == 0); off += m.chunk {
		end := min(off+m.chunk, len(m.data))
		p := &pkt{h: base, payload: m.data[off:end]}
		p.h.Offset = uint32(off)
		p.h.PSN = c.next
		c.next++
		out = append(out, p)
		if end >= len(m.data) {
			break
		}
	}
	out[len(out)-1].h.Flags |= wire.FlagAckReq
	return out
}

// tx is how one data packet is sent.
type tx struct {
	path  uint16
	sport uint16 // 0: entropyBase + path
	ce    bool
	seq   uint32 // path sequence; 0 with seqSet false: the path's next
	seqOK bool
	flags uint16 // extra flags
	from  netip.Addr
}

// encode fills the path fields of p and returns the sealed packet.
func (c *Conn) encode(p *pkt, x tx) []byte {
	p.h.DstConn = c.Peer
	p.h.PathID = x.path
	if x.seqOK {
		p.h.PathSeq = x.seq
		if x.seq >= c.seq[x.path] {
			c.seq[x.path] = x.seq + 1
		}
	} else {
		p.h.PathSeq = c.seq[x.path]
		c.seq[x.path]++
	}
	p.h.Flags |= x.flags
	p.h.Timestamp = stamp()
	return wire.AppendData(nil, &p.h, p.payload)
}

func (c *Conn) sendRaw(b []byte, x tx) {
	sport := x.sport
	if sport == 0 {
		sport = entropyBase + x.path
	}
	from := x.from
	if !from.IsValid() {
		from = c.from
	}
	c.t.send(b, sendOpts{sport: sport, ce: x.ce, from: from})
}

// sendPkt encodes and sends p.
func (c *Conn) sendPkt(p *pkt, x tx) {
	c.sendRaw(c.encode(p, x), x)
}

// probe sends a PROBE on path (§4.4) and returns its path sequence.
func (c *Conn) probe(path uint16, flags uint16) (seq uint32, ts uint64) {
	p := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: flags}}
	c.sendPkt(p, tx{path: path})
	return p.h.PathSeq, p.h.Timestamp
}

// isAck matches an ack of this connection for path.
func (c *Conn) isAck(path uint16) func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassAck && r.pkt.Ack().DstConn() == c.ID && r.pkt.Ack().PathID() == path
	}
}

// isAckSeq matches an ack of path whose PathAckSeq is at least seq (the
// ack that reports the transmission seq, not an earlier coalesced one).
func (c *Conn) isAckSeq(path uint16, seq uint32) func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return c.isAck(path)(r) && int32(r.pkt.Ack().PathAckSeq()-seq) >= 0
	}
}

// ack waits for the ack of path that reports path sequence seq.
func (c *Conn) ack(path uint16, seq uint32) wire.Ack {
	return c.t.expect("ack of path "+itoa(int(path))+" reporting path sequence "+itoa(int(seq)), c.isAckSeq(path, seq)).pkt.Ack()
}

// isNack matches a NACK of this connection for psn.
func (c *Conn) isNack(psn wire.PSN) func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassNack && r.pkt.Nack().DstConn() == c.ID && r.pkt.Nack().PSN() == psn
	}
}

// nack waits for a NACK of psn.
func (c *Conn) nack(psn wire.PSN) wire.Nack {
	return c.t.expect("NACK of PSN "+hex32(uint32(psn)), c.isNack(psn)).pkt.Nack()
}

// anyFor matches every packet addressed to this connection.
func (c *Conn) anyFor() func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Prefix().DstConn() == c.ID && r.pkt.Prefix().Opcode() != wire.OpProbe
	}
}

// cumPSN asks the target for its CumPSN now: a PROBE on a spare path is
// acknowledged at once and touches nothing else (§4.4).
func (c *Conn) cumPSN() wire.PSN {
	const spare = 15
	seq, _ := c.probe(spare, wire.FlagAckReq)
	return c.ack(spare, seq).CumPSN()
}

// isData matches the target's data packets (READ responses) to us. PROBEs
// are not data: a sender probes paths it holds suspect on its own schedule
// (§8.7.4), and the suite, which acks lazily in some cases, may draw them.
func (c *Conn) isData() func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassData && r.pkt.Data().DstConn() == c.ID && r.pkt.Data().Opcode() != wire.OpProbe
	}
}

// record notes a data packet of the target in our receive state (§5.2,
// §8.2), as a receiver would.
func (c *Conn) record(d wire.Data) { c.recordAt(d, time.Now()) }

// recordAt is record for a packet that arrived at at.
func (c *Conn) recordAt(d wire.Data, at time.Time) {
	// A path sequence is never reused, not even by a retransmission (§8.1).
	if c.txs == nil {
		c.txs = map[[2]uint32]wire.PSN{}
	}
	k := [2]uint32{uint32(d.PathID()), d.PathSeq()}
	if psn, dup := c.txs[k]; dup {
		c.t.Fatalf("the target reused path sequence %d of path %d (PSN %s, earlier %s)", d.PathSeq(), d.PathID(), hex32(uint32(d.PSN())), hex32(uint32(psn)))
	}
	c.txs[k] = d.PSN()
	p := c.paths[d.PathID()]
	s := d.PathSeq()
	if p == nil {
		p = &rxPath{highest: s, seen: map[uint32]bool{}}
		c.paths[d.PathID()] = p
	}
	p.seen[s] = true
	if int32(s-p.highest) >= 0 {
		p.highest, p.echo, p.echoPSN, p.echoAt = s, d.Timestamp(), d.PSN(), at
	}
	if d.Opcode() == wire.OpProbe {
		return
	}
	c.got[d.PSN()] = true
	for c.got[c.cum] {
		delete(c.got, c.cum)
		c.cum++
	}
}

// forgetTarget drops what was recorded of the target's connection, for
// a case that reaches a new one under the same id of ours.
func (c *Conn) forgetTarget() {
	c.txs = nil
	c.paths = map[uint16]*rxPath{}
	c.got = map[wire.PSN]bool{}
}

// ackPath sends the target an ack of its path (§5.1) from our state.
func (c *Conn) ackPath(path uint16) {
	p := c.paths[path]
	if p == nil {
		return
	}
	h := wire.AckHeader{DstConn: c.Peer, CumPSN: c.cum, PathID: path, PathAckSeq: p.highest, EchoPSN: p.echoPSN,
		EchoTimestamp: p.echo, Credit: suiteRecvWindow, AckDelay: holdNs(p.echoAt)}
	if c.credit != 0 {
		h.Credit = c.credit
	}
	for i := uint32(0); i < wire.SackBits; i++ {
		if p.seen[p.highest-i] {
			h.Sack[i/8] |= 1 << (i % 8)
		}
	}
	c.t.send(wire.AppendAck(nil, &h), sendOpts{sport: entropyBase + path, from: c.from})
}

// readResponses collects the target's READ_RESP packets for msgID until
// want bytes arrived (or the timeout), acking each path as a receiver
// would; it returns the bytes by offset and every packet's header.
func (c *Conn) readResponses(msgID uint32, want int, ackThem bool) ([]byte, []wire.DataHeader) {
	return c.serveRead(msgID, want, ackThem, nil)
}

// serveRead is readResponses with a filter: packets drop reports true for
// are treated as lost (neither recorded nor acked).
func (c *Conn) serveRead(msgID uint32, want int, ackThem bool, drop func(wire.Data) bool) ([]byte, []wire.DataHeader) {
	buf := make([]byte, want)
	have := map[uint32]bool{}
	got := 0
	var hs []wire.DataHeader
	deadline := time.Now().Add(c.t.o.Timeout)
	for got < want || len(hs) == 0 {
		r := c.t.wait(time.Until(deadline), func(r *rxPacket) bool {
			return c.isData()(r) && r.pkt.Data().Opcode() == wire.OpReadResp && r.pkt.Data().MsgID() == msgID
		})
		if r == nil {
			break
		}
		deadline = time.Now().Add(c.t.o.Timeout) // progress: wait on
		d := r.pkt.Data()
		if drop != nil && drop(d) {
			continue
		}
		var h wire.DataHeader
		h.Decode(d)
		hs = append(hs, h)
		c.recordAt(d, r.at)
		if ackThem {
			c.ackPath(d.PathID())
		}
		if !have[d.Offset()] && int(d.Offset())+d.PayloadLen() <= want {
			have[d.Offset()] = true
			copy(buf[d.Offset():], d.Payload())
			got += d.PayloadLen()
		}
	}
	if got < want || len(hs) == 0 {
		c.t.Fatalf("READ response: %d of %d bytes within %v", got, want, c.t.o.Timeout)
	}
	return buf, hs
}

// holdNs is the time since at in nanoseconds, as AckDelay carries it.
func holdNs(at time.Time) uint32 {
	if at.IsZero() {
		return 0
	}
	return uint32(min(max(time.Since(at), 0), time.Duration(^uint32(0))))
}

func hex32(v uint32) string {
	const d = "0123456789abcdef"
	b := []byte("0x00000000")
	for i := 0; i < 8; i++ {
		b[9-i] = d[v>>(4*i)&15]
	}
	return string(b)
}

func itoa(v int) string {
	if v == 0 {
		return "0"
	}
	neg := v < 0
	if neg {
		v = -v
	}
	var b []byte
	for v > 0 {
		b = append([]byte{byte('0' + v%10)}, b...)
		v /= 10
	}
	if neg {
		b = append([]byte{'-'}, b...)
	}
	return string(b)
}
