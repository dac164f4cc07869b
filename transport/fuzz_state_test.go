package transport

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// FuzzConnection is the transport's stateful fuzz target. The input is a
// program for two endpoints on a tlink: 0 connects to 1, then both post
// honest work (WRITE, READ, SEND, receive buffers) both ways, while the
// program drops, duplicates, delays and replays packets, jumps time, and
// injects adversarial packets that pass the CRC and look plausible:
// mutated copies of real ones, acks and NACKs with sequences near the
// window, probes, handshake replays, oversized payloads. After every step
// it checks that nothing panicked, no work request completed twice, no
// completion names a request never posted, the sender's counters stay in
// their bounds, and, while nothing was forged, that every placed byte is
// one the peer sent. At the end the link turns honest and every posted
// operation must complete within a bounded virtual time and a bounded
// number of events (liveness: no stall, no spinning timer), and every
// stream must take effect again (streamsRecover).
func FuzzConnection(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		runFuzzProgram(t, in)
	})
}

// fuzzSeeds are hand-written programs, one per kind of trouble, so the
// fuzzer starts from inputs that reach established traffic.
func fuzzSeeds() [][]byte {
	return [][]byte{
		{0, opWrite, 0, 2, 0, opRead, 1, 3, 0, opSend, 0, 1, opRecv, 1, 2, opTime, 1},
		{1, opWrite, 0, 4, 1, opDrop, 0, 3, opWrite, 1, 5, 2, opTime, 2, opRead, 0, 6, 1, opTime, 3},
		{0, opSend, 0, 2, opTime, 2, opRecv, 1, 3, opSend, 1, 4, opRecv, 0, 4, opTime, 3},
		{0, opWrite, 0, 6, 0, opDup, 5, opReorder, 3, 40, opRead, 1, 6, 2, opStep, 30},
		{0, opWrite, 0, 3, 0, opMutate, 0, 1, 7, 9, opAck, 1, 2, 0xff, 3, opNack, 0, 2, 1, 4},
		{1, opWrite, 0, 3, 0, opNack, 0, 6, 0, 0, opProbe, 1, 0, 200, opHandshake, 0, 1, opTime, 2},
		{0, opRead, 0, 7, 0, opDrop, 1, 60, opTime, 4, opTime, 4},
		{0, opSend, 0, 7, opBig, 0, 1, opGarbage, 1, 9, opRecv, 1, 7, opTime, 2},
		{1, opSend, 1, 2, opRecv, 0, 1, opMutate, 1, 5, 3, 3, opTime, 1, opSend, 1, 2, opTime, 2},
	}
}

// Program opcodes: each is followed by its argument bytes (missing bytes
// read as 0).
const (
	opWrite     = iota // side, size class, offset
	opRead             // side, size class, offset
	opSend             // side, size class
	opRecv             // side, size class
	opTime             // class: jump time and run
	opStep             // n: run n events
	opDrop             // direction, n: drop the next n packets that way
	opDup              // n: duplicate the next n packets
	opReorder          // n, delay: delay the next n packets by delay µs
	opMutate           // history index, field, delta: a mutated copy of a seen packet
	opAck              // target side, path, sack byte, delta
	opNack             // target side, reason, delta, info class
	opProbe            // target side, path, seq delta
	opHandshake        // kind, index: replay or forge a connection packet
	opBig              // target side, kind: an MTU-sized or oversized packet
	opGarbage          // target side, seed: a sealed packet of noise with a plausible prefix
	opReplay           // history index: an exact old copy (an honest late duplicate)
	numOps
)

// fz is one program's run.
type fz struct {
	t   *testing.T
	l   *tlink
	in  []byte
	pos int

	forged   bool // an adversarial packet was injected: content checks off
	events   int
	drop     [2]int
	dup      int
	reorder  int
	rdelay   Duration
	hist     [][]byte // recent packets seen on the link, for replay and mutation
	histFrom []int

	// Posted work and what became of it, per side.
	wr     [2]map[uint64]*fzOp
	nextWR [2]uint64
	sends  [2][]int // lengths of the SENDs side i posted, by RecvSeq
	recvs  [2]map[uint64]*fzRecv
	nrecv  [2]uint32 // receive buffers posted by side i
	// immSeen[i][k] counts the final phase's stream markers side i saw
	// take effect (k = stream).
	immSeen [2][4]int
	// written[i] marks region bytes of side i that a WRITE completed OK
	// has covered (so a READ of them must return them).
	written [2][]bool
}

type fzOp struct {
	op     Op
	n      int
	off    int
	buf    []byte
	full   bool // READ: the whole range was written before it was posted
	seq    int  // SEND: its RecvSeq
	done   int
	status Status
}

type fzRecv struct {
	seq  uint32
	buf  []byte
	done int
}

const (
	fzRegion  = 1 << 15
	fzImmBase = 0xfeed0000 // the final phase's WRITE_IMM markers: Imm = base + stream
	fzMaxStep = 400_000    // events in the final honest phase: more is a spinning timer
	// fzMaxEvents bounds a whole program's events, so every input is fast;
	// a program that needs more has a timer waking far more often than its
	// traffic needs.
	fzMaxEvents = 1_000_000
	fzHonestT   = 30 * time.Second
)

// fval is the byte every honest WRITE puts at region offset a, whoever
// writes it: writes then commute, and a misplaced byte shows.
func fval(a int) byte { return byte(a*131+a>>8) | 1 }

// sval is byte i of the n-th SEND of a side.
func sval(n, i int) byte { return byte(n*29+i*7+i>>8) | 1 }

func (z *fz) next() byte {
	if z.pos >= len(z.in) {
		return 0
	}
	b := z.in[z.pos]
	z.pos++
	return b
}

func fuzzConfig(mode byte) Config {
	cfg := Config{SendWindow: 64, RecvWindow: 128, MsgWindow: 16, RecvQueue: 16, PathRing: 16,
		MaxStreams: 4, MaxConns: 8, Paths: 4}
	if mode&1 == 1 {
		cfg.Mode, cfg.Paths = ModeRoCEv2, 1
	}
	if mode&2 == 2 {
		cfg.MTU = 9000
	}
	return cfg
}

func runFuzzProgram(t *testing.T, in []byte) {
	if len(in) > 600 {
		in = in[:600] // a bounded program keeps each input fast
	}
	z := &fz{t: t, in: in}
	mode := z.next()
	z.l = newTLink(t, fuzzConfig(mode), fzRegion)
	// Mode bit 8: both ends retry RNR without limit (rnr.go), so the
	// faults meet held PSNs and their release too.
	forever := mode&8 != 0
	for i := range 2 {
		z.wr[i] = map[uint64]*fzOp{}
		z.recvs[i] = map[uint64]*fzRecv{}
		z.written[i] = make([]bool, fzRegion)
		// A secret service, as the daemon's queue pairs are (§7.3).
		z.l.eps[i].ListenWith(tService, z.l.mems[i], ListenOptions{Token: fzToken, RNRRetryForever: forever})
	}
	z.l.filter = z.filter
	if _, err := z.l.eps[0].ConnectWith(z.l.now, z.l.addrs[1], tService, z.l.mems[0],
		ConnectOptions{Token: fzToken, Private: []byte("fuzz"), RNRRetryForever: forever}); err != nil {
		t.Fatal(err)
	}
	if mode&4 == 0 {
		// Most programs start established; the rest run from the
		// CONNECT on, so the handshake meets their faults too.
		z.l.run(Time(10*time.Millisecond), func() bool { return z.l.conns[0] != nil && z.l.conns[1] != nil })
	}
	for z.pos < len(z.in) {
		z.op(z.next() % numOps)
		z.check()
	}
	z.honestEnd()
	if testing.Verbose() {
		n := 0
		for i := range 2 {
			for _, o := range z.wr[i] {
				if o.status == StatusOK {
					n++
				}
			}
		}
		t.Logf("%d requests, %d ok, forged %v, now %v, conns %v %v", z.nextWR[0]+z.nextWR[1], n, z.forged,
			time.Duration(z.l.now), z.l.conns[0] != nil, z.l.conns[1] != nil)
	}
}

// filter applies the program's link faults and records history.
func (z *fz) filter(from int, pkt []byte) (bool, Duration) {
	if len(z.hist) < 64 {
		z.hist = append(z.hist, append([]byte(nil), pkt...))
		z.histFrom = append(z.histFrom, from)
	} else {
		i := int(z.l.now/7) % 64
		z.hist[i] = append(z.hist[i][:0], pkt...)
		z.histFrom[i] = from
	}
	if len(z.l.q) > 4096 {
		return true, 0 // a finite link buffer
	}
	if z.drop[from] > 0 {
		z.drop[from]--
		return true, 0
	}
	if z.dup > 0 {
		z.dup--
		z.l.inject(from, 0, append([]byte(nil), pkt...), z.l.delay+Duration(z.dup)*time.Microsecond)
	}
	if z.reorder > 0 {
		z.reorder--
		return false, z.rdelay
	}
	return false, 0
}

var fzSizes = [...]int{0, 1, 64, 255, 1000, 1400, 1401, 4000, 8192, 9000, 20000, 30000}

func (z *fz) size(mp int) int {
	c := int(z.next())
	if c%4 == 3 {
		return mp*(c/4%4) + c/16%3 - 1 + mp%2 // around packet boundaries
	}
	return fzSizes[c%len(fzSizes)]
}

func (z *fz) conn(i int) *Conn {
	c := z.l.conns[i]
	if c == nil || c.State() != StateEstablished {
		return nil
	}
	return c
}

func (z *fz) op(op byte) {
	l := z.l
	switch op {
	case opWrite, opRead:
		i := int(z.next() & 1)
		c := z.conn(i)
		n := max(0, z.size(l.eps[0].cfg.MaxPayload()))
		off := int(z.next()) * 128
		stream := uint16(z.next() % 4)
		if c == nil || off+n > fzRegion {
			return
		}
		id := z.nextWR[i]
		o := &fzOp{n: n, off: off}
		wr := &WorkRequest{WRID: id, Stream: stream, RemoteAddr: regionBase + uint64(off), RKey: regionKey}
		var err error
		if op == opWrite {
			o.op, o.buf = OpWrite, make([]byte, n)
			for k := range o.buf {
				o.buf[k] = fval(off + k)
			}
			wr.Local = o.buf
			err = c.PostWrite(wr)
		} else {
			o.op, o.buf = OpRead, make([]byte, n)
			o.full = true
			for k := range n {
				o.full = o.full && z.written[1-i][off+k]
			}
			wr.Local = o.buf
			err = c.PostRead(wr)
		}
		if err == nil {
			z.wr[i][id] = o
			z.nextWR[i]++
		}
	case opSend:
		i := int(z.next() & 1)
		c := z.conn(i)
		n := max(0, z.size(l.eps[0].cfg.MaxPayload()))
		if c == nil {
			return
		}
		k := len(z.sends[i])
		b := make([]byte, n)
		for j := range b {
			b[j] = sval(k, j)
		}
		id := z.nextWR[i]
		if c.PostSend(&WorkRequest{WRID: id, Local: b, Stream: uint16(k % 2)}) == nil {
			z.wr[i][id] = &fzOp{op: OpSend, n: n, buf: b, seq: k}
			z.nextWR[i]++
			z.sends[i] = append(z.sends[i], n)
		}
	case opRecv:
		i := int(z.next() & 1)
		z.postRecv(i, max(0, z.size(l.eps[0].cfg.MaxPayload())))
	case opTime:
		d := [...]Duration{time.Microsecond, 20 * time.Microsecond, 300 * time.Microsecond,
			5 * time.Millisecond, 150 * time.Millisecond, 2 * time.Second}[z.next()%6]
		z.run(Time(d))
	case opStep:
		for range int(z.next()) {
			if !l.step(l.now + Time(time.Second)) {
				break
			}
		}
	case opDrop:
		z.drop[z.next()&1] = int(z.next() % 64)
	case opDup:
		z.dup = int(z.next() % 8)
	case opReorder:
		z.reorder, z.rdelay = int(z.next()%16), Duration(z.next())*time.Microsecond
	case opReplay:
		if len(z.hist) > 0 {
			k := int(z.next()) % len(z.hist)
			l.inject(z.histFrom[k], 0, append([]byte(nil), z.hist[k]...), l.delay)
		}
	case opMutate:
		z.mutate()
	case opAck:
		z.forgeAck()
	case opNack:
		z.forgeNack()
	case opProbe:
		z.forgeProbe()
	case opHandshake:
		z.forgeHandshake()
	case opBig:
		z.forgeBig()
	case opGarbage:
		z.forgeGarbage()
	}
}

func (z *fz) postRecv(i, n int) {
	c := z.l.conns[i]
	if c == nil {
		return
	}
	id := z.nextWR[i]
	b := make([]byte, n)
	if c.PostRecv(id, b) == nil {
		z.recvs[i][id] = &fzRecv{seq: z.nrecv[i], buf: b}
		z.nrecv[i]++
		z.nextWR[i]++
	}
}

// run runs the link for d, with a bound on events: a timer that spins
// fails the input rather than hang the fuzzer.
func (z *fz) run(d Time) {
	until := z.l.now + d
	for steps := 0; ; steps++ {
		if z.events++; steps > fzMaxStep || z.events > fzMaxEvents {
			z.t.Fatalf("%d events in %v of virtual time (%d in the program): a spinning timer (now %v)",
				steps, time.Duration(d), z.events, time.Duration(z.l.now))
		}
		if !z.l.step(until) {
			z.l.now = until
			return
		}
		z.collect()
	}
}

// inject puts an adversarial packet before side `to`, as if from its peer.
func (z *fz) forge(to int, b []byte) {
	z.forged = true
	z.l.inject(1-to, 0, b, z.l.delay)
}

func (z *fz) peerOf(to int) (*Conn, *Conn) {
	return z.conn(to), z.conn(1 - to) // a released connection has no state to aim at
}

func (z *fz) mutate() {
	if len(z.hist) == 0 {
		return
	}
	k := int(z.next()) % len(z.hist)
	b := append([]byte(nil), z.hist[k]...)
	field, delta := z.next(), int8(z.next())
	if len(b) < wire.PrefixLen+wire.TrailerLen {
		return
	}
	// Offsets of the fields a mutation may touch: the header's words
	// (data, ack or nack alike share the prefix), chosen by field.
	span := len(b) - wire.TrailerLen - 4
	if span <= 4 {
		return
	}
	at := 4 + int(field)%span&^1
	v := binary.BigEndian.Uint16(b[at:])
	binary.BigEndian.PutUint16(b[at:], v+uint16(delta))
	wire.Seal(b)
	if _, err := wire.Parse(b); err != nil {
		return // the fuzzer's own mutation made it invalid: nothing forged
	}
	z.forge(1-z.histFrom[k], b)
}

func (z *fz) forgeAck() {
	to := int(z.next() & 1)
	c, _ := z.peerOf(to)
	pid, sack, delta := z.next(), z.next(), int8(z.next())
	if c == nil || len(c.snd.paths) == 0 {
		return
	}
	p := &c.snd.paths[int(pid)%len(c.snd.paths)]
	h := wire.AckHeader{DstConn: c.localID, CumPSN: c.snd.una + wire.PSN(delta/8),
		PathID: uint16(int(pid) % len(c.snd.paths)), PathAckSeq: p.nextSeq - 1 + uint32(delta%4),
		EchoTimestamp: uint64(z.l.now) - uint64(sack), Credit: uint32(sack)}
	for j := range h.Sack {
		h.Sack[j] = sack ^ byte(j*int(delta))
	}
	h.Sack[0] |= 1 // the bit of PathAckSeq itself
	b := make([]byte, wire.AckLen+wire.TrailerLen)
	h.Put(b)
	if _, err := wire.Parse(b); err == nil {
		z.forge(to, b)
	}
}

func (z *fz) forgeNack() {
	to := int(z.next() & 1)
	c, _ := z.peerOf(to)
	reason, delta, info := wire.NackReason(z.next()%6+1), int8(z.next()), z.next()
	if c == nil || len(c.snd.paths) == 0 {
		return
	}
	psn := c.snd.una + wire.PSN(delta)
	h := wire.NackHeader{DstConn: c.localID, PSN: psn, Reason: reason, CumPSN: c.snd.una + wire.PSN(delta/4),
		Info: [...]uint32{0, 1, 20, 1000, 0xffffffff}[int(info)%5]}
	if r := &c.snd.pkts[uint32(psn)&c.snd.pktMask]; info&8 != 0 {
		h.PathID, h.PathSeq = r.path, r.pseq // name its latest transmission
	}
	b := make([]byte, wire.NackLen+wire.TrailerLen)
	h.Put(b)
	z.forge(to, b)
}

func (z *fz) forgeProbe() {
	to := int(z.next() & 1)
	c, _ := z.peerOf(to)
	pid, delta := z.next(), int8(z.next())
	if c == nil {
		return
	}
	var seq uint32
	if r := c.rcv.paths[int(pid)%len(c.rcv.paths)]; r != nil {
		seq = r.highest
	}
	b := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq, DstConn: c.localID,
		PathID: uint16(pid % 8), PathSeq: seq + uint32(int32(delta)*int32(delta)/4), Timestamp: uint64(z.l.now)}, nil)
	z.forge(to, b)
}

// fzToken is the programs' service token.
const fzToken = 0x7e57_0ced_5eed_0001

func (z *fz) forgeHandshake() {
	kind, k := z.next(), z.next()
	if kind%2 == 0 {
		// Replay a connection packet seen earlier, to either side.
		for j := range z.hist {
			h := z.hist[(j+int(k))%len(z.hist)]
			if p, err := wire.Parse(h); err == nil && p.Class == wire.ClassConn {
				z.l.inject(z.histFrom[(j+int(k))%len(z.hist)], 0, append([]byte(nil), h...), z.l.delay)
				return
			}
		}
		return
	}
	to := int(k & 1)
	c, _ := z.peerOf(to)
	ops := [...]wire.Opcode{wire.OpConnect, wire.OpChallenge, wire.OpAccept, wire.OpDisconnectAck, wire.OpReset, wire.OpReject}
	op := ops[int(kind/2)%len(ops)]
	h := wire.ConnHeader{Opcode: op, Service: tService, RecvWindow: 128, MsgWindow: 16, MaxPayload: 1400,
		Paths: 4, Timestamp: uint64(z.l.now), Token: fzToken * uint64(k>>7), AppReason: uint16(k)}
	h.SetPrivate([]byte("forged private data")[:k%20])
	if c != nil {
		h.DstConn, h.SrcConn = c.localID, c.peerID
		switch op {
		case wire.OpConnect:
			h.DstConn = 0
		case wire.OpReset:
			// A RESET for the connection; with the peer's true token
			// only when the program says (an on-path forger saw the
			// handshake), else a guess that must be refused.
			h.DstConn, h.SrcConn = [2]uint32{0, c.localID}[k>>7&1], c.peerID
			h.ResetToken[0] = k
			if k&0x40 != 0 {
				h.ResetToken = c.peerReset
			}
		}
	}
	b := make([]byte, h.Len())
	h.Put(b)
	if _, err := wire.Parse(b); err == nil {
		z.forge(to, b)
	}
}

func (z *fz) forgeBig() {
	to, kind := int(z.next()&1), z.next()
	c, _ := z.peerOf(to)
	if c == nil {
		return
	}
	n := c.maxPayload + int(kind%3) - 1 // MTU-sized, one under, one over
	if kind&4 != 0 {
		n = 9000 // oversized for a 1500 MTU
	}
	payload := make([]byte, max(0, n))
	for j := range payload {
		payload[j] = fval(j)
	}
	b := wire.AppendData(nil, &wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq, DstConn: c.localID,
		PSN: c.rcv.cum + wire.PSN(kind/8), PathID: uint16(kind % 4), MsgID: uint32(kind), MsgLen: uint32(n),
		RemoteAddr: regionBase, RKey: regionKey, Timestamp: uint64(z.l.now)}, payload)
	z.forge(to, b)
}

func (z *fz) forgeGarbage() {
	to, seed := int(z.next()&1), z.next()
	c, _ := z.peerOf(to)
	if c == nil {
		return
	}
	n := wire.DataLen + int(seed)%300 + wire.TrailerLen
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for j := range b {
		x = x*1664525 + 1013904223
		b[j] = byte(x >> 24)
	}
	copy(b, z.hist0())
	binary.BigEndian.PutUint32(b[4:], c.localID)
	wire.Seal(b)
	if _, err := wire.Parse(b); err == nil {
		z.forge(to, b)
	}
}

// hist0 is the first 4 bytes of some seen packet (a valid version and
// opcode), or nothing.
func (z *fz) hist0() []byte {
	if len(z.hist) == 0 {
		return nil
	}
	return z.hist[0][:4]
}

// collect checks new completions: each names a posted request, completes
// it once, and, while nothing was forged, carries the bytes sent.
func (z *fz) collect() {
	for i := range 2 {
		for _, c := range z.l.cq[i] {
			z.completion(i, c)
		}
		z.l.cq[i] = z.l.cq[i][:0]
	}
}

func (z *fz) completion(i int, c Completion) {
	t := z.t
	switch c.Op {
	case OpConnected, OpClosed:
		return
	case OpRecvWriteImm:
		if c.Imm >= fzImmBase {
			z.immSeen[i][c.Imm-fzImmBase]++
		}
		return
	case OpRecv:
		r := z.recvs[i][c.WRID]
		if r == nil {
			t.Fatalf("side %d: receive completion for wrid %d never posted", i, c.WRID)
		}
		if r.done++; r.done > 1 {
			t.Fatalf("side %d: receive buffer %d completed twice", i, c.WRID)
		}
		if c.Status != StatusOK || z.forged {
			return
		}
		if int(r.seq) >= len(z.sends[1-i]) || c.Bytes != z.sends[1-i][r.seq] {
			t.Fatalf("side %d: buffer %d (recv seq %d) completed with %d bytes; the peer's SENDs %v", i, c.WRID, r.seq, c.Bytes, z.sends[1-i])
		}
		for j := range c.Bytes {
			if r.buf[j] != sval(int(r.seq), j) {
				t.Fatalf("side %d: buffer %d byte %d is %#x, the peer sent %#x", i, c.WRID, j, r.buf[j], sval(int(r.seq), j))
			}
		}
		return
	}
	o := z.wr[i][c.WRID]
	if o == nil || o.op != c.Op {
		t.Fatalf("side %d: completion %v for a request never posted", i, c)
	}
	if o.done++; o.done > 1 {
		t.Fatalf("side %d: %v wrid %d completed twice", i, c.Op, c.WRID)
	}
	o.status = c.Status
	if c.Status != StatusOK {
		return
	}
	switch o.op {
	case OpWrite:
		for k := range o.n {
			z.written[1-i][o.off+k] = true
		}
	case OpRead:
		if z.forged {
			return
		}
		for k, v := range o.buf {
			want := fval(o.off + k)
			if v != want && (v != 0 || o.full) {
				t.Fatalf("side %d: READ wrid %d byte %d is %#x, want %#x (range written before: %v)", i, c.WRID, k, v, want, o.full)
			}
		}
	}
}

// check runs the invariants that hold after every step.
func (z *fz) check() {
	z.collect()
	t := z.t
	for i := range 2 {
		if n := z.l.eps[i].Conns(); n > 2 {
			t.Fatalf("side %d holds %d connections", i, n)
		}
		c := z.l.conns[i]
		if c == nil || c.State() != StateEstablished {
			continue
		}
		if err := c.snd.checkBounds(); err != nil {
			t.Fatalf("side %d: %v", i, err)
		}
		if z.forged {
			continue
		}
		for k, v := range z.l.regions[i] {
			if v != 0 && v != fval(k) {
				t.Fatalf("side %d: region byte %d is %#x, no honest WRITE put it there (want 0 or %#x)", i, k, v, fval(k))
			}
		}
	}
}

// checkBounds reports a sender counter out of its bounds.
func (s *sender) checkBounds() error {
	if s.inflight < 0 || s.rnrWaiting < 0 || s.inflightBytes < 0 || s.readsWaiting < 0 || s.jobCount < 0 {
		return fmt.Errorf("negative counter: inflight %d rnr %d bytes %d reads %d jobs %d",
			s.inflight, s.rnrWaiting, s.inflightBytes, s.readsWaiting, s.jobCount)
	}
	if d := int(s.una.Distance(s.nextPSN)); d < 0 || d > len(s.pkts) {
		return fmt.Errorf("%d PSNs outstanding with %d records", d, len(s.pkts))
	}
	if d := s.repairNext.Distance(s.repairEnd); d < 0 || int(d) > s.window {
		return fmt.Errorf("%d repair voids queued with a window of %d", d, s.window)
	}
	if s.inflight > int(s.una.Distance(s.nextPSN)) {
		return fmt.Errorf("%d in flight of %d outstanding", s.inflight, s.una.Distance(s.nextPSN))
	}
	for i := range s.paths {
		p := &s.paths[i]
		if u := p.nextSeq - p.oldest; u > p.mask+1 || p.inflight < 0 || p.inflight > int(u) {
			return fmt.Errorf("path %d: %d unresolved in a ring of %d, inflight %d", i, u, p.mask+1, p.inflight)
		}
	}
	return nil
}

// honestEnd turns the link honest and demands that everything posted
// completes: every WRITE, READ and SEND of either side, and, when nothing
// was forged, every receive buffer a completed SEND was for.
func (z *fz) honestEnd() {
	z.drop, z.dup, z.reorder = [2]int{}, 0, 0
	// Buffers for the SENDs still unmatched, so honest SENDs can land.
	for i := range 2 {
		for z.nrecv[i] < uint32(len(z.sends[1-i])) {
			before := z.nrecv[i]
			z.postRecv(i, 30000)
			if z.nrecv[i] == before {
				break
			}
		}
	}
	start := z.l.now
	pending := func() bool {
		z.collect()
		for i := range 2 {
			for _, o := range z.wr[i] {
				if o.done == 0 {
					return true
				}
			}
		}
		return false
	}
	for steps := 0; pending(); steps++ {
		if steps > fzMaxStep {
			z.t.Fatalf("%d events in the honest phase (%v virtual): a spinning timer", steps, time.Duration(z.l.now-start))
		}
		if !z.l.step(start + Time(fzHonestT)) {
			break
		}
	}
	z.requireDone()
	z.streamsRecover()
}

// streamsRecover checks that every stream still takes effect at the
// receiver once the link is honest, whatever was forged before (issue 22:
// a stream recovers after any burst of forged or mutated packets ends;
// §9.1 lost positions): each side that is still established sends
// WRITE_IMM markers on every stream, and the peer must see one of each
// stream's take effect (its completion reports it), unless the connection
// ends: a sender made to forget PSNs the receiver lacks (a forged CumPSN
// or SACK) must have proven and repaired the hole (§8.10). While nothing
// was forged it also requires every SEND that completed at its sender to
// have completed its receive buffer.
func (z *fz) streamsRecover() {
	var posted [2]bool
	for i := range 2 {
		c := z.conn(i)
		if c == nil || z.conn(1-i) == nil {
			continue
		}
		posted[i] = true
		// Three markers a stream: a forgery may have taken the stream
		// positions the first ones get (they then fail, and the
		// sender hears so); what must not happen is that none of them
		// ever takes effect.
		for k := range 12 {
			st := k % 4
			id := z.nextWR[i]
			wr := &WorkRequest{WRID: id, Stream: uint16(st), HasImm: true, Imm: fzImmBase + uint32(st),
				RemoteAddr: regionBase, RKey: regionKey}
			if c.PostWrite(wr) != nil {
				posted[i] = false // the message window is full: nothing to conclude
				continue
			}
			z.wr[i][id] = &fzOp{op: OpWrite}
			z.nextWR[i]++
		}
	}
	start := z.l.now
	seen := func() bool {
		z.collect()
		for i := range 2 {
			if !posted[i] || z.conn(i) == nil || z.conn(1-i) == nil {
				continue
			}
			for st := range 4 {
				if z.immSeen[1-i][st] == 0 {
					return false
				}
			}
		}
		return true
	}
	for steps := 0; !seen(); steps++ {
		if steps > fzMaxStep {
			z.t.Fatalf("%d events waiting for the stream markers: a spinning timer", steps)
		}
		if !z.l.step(start + Time(fzHonestT)) {
			break
		}
	}
	for i := range 2 {
		if !posted[i] || z.conn(i) == nil || z.conn(1-i) == nil {
			continue
		}
		for st := range 4 {
			if z.immSeen[1-i][st] == 0 {
				z.t.Fatalf("side %d: stream %d of side %d does not take effect %v after the link turned honest (forged %v)",
					1-i, st, i, fzHonestT, z.forged)
			}
		}
	}
	if z.forged {
		return
	}
	for i := range 2 {
		for id, r := range z.recvs[1-i] {
			if int(r.seq) < len(z.sends[i]) && z.sendOK(i, int(r.seq)) && r.done == 0 && z.conn(1-i) != nil {
				z.t.Fatalf("side %d: the SEND for buffer %d (recv seq %d) completed at its sender, the buffer never did", 1-i, id, r.seq)
			}
		}
	}
}

// sendOK reports whether side i's k-th SEND completed OK.
func (z *fz) sendOK(i, k int) bool {
	for _, o := range z.wr[i] {
		if o.op == OpSend && o.seq == k {
			return o.status == StatusOK && o.done > 0
		}
	}
	return false
}

// requireDone fails unless every posted request has completed.
func (z *fz) requireDone() {
	for i := range 2 {
		for id, o := range z.wr[i] {
			if o.done == 0 {
				c := z.l.conns[i]
				st := State(0)
				if c != nil {
					st = c.State()
				}
				z.t.Fatalf("side %d: %v wrid %d (%d bytes) not complete %v after the link turned honest (conn %v, forged %v)",
					i, o.op, id, o.n, fzHonestT, st, z.forged)
			}
		}
	}
}
