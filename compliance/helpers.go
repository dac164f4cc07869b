package compliance

import (
	"bytes"
	"encoding/binary"

	"github.com/metaroce/metaroce/wire"
)

// Helpers the cases share. Each hides a few packets behind a name that
// says what the case is doing (write, read back, check a drop).

// pattern is n bytes that differ with seed, so a misplaced or stale byte
// shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

// rw returns the target's readable and writable region, or skips.
func (t *T) rw() Region {
	r, ok := t.mem().region(true, true)
	if !ok {
		t.Skipf("the target exposes no region with remote read and write")
	}
	return r
}

// scratch is an area of rw for this case: cases use distinct offsets so
// one case's leftovers never pass another's check.
func (t *T) scratch(n int) (Region, uint64) {
	r := t.rw()
	// The area is picked by the case id (not its index in Cases, which
	// would make an initialization cycle).
	idx := 0
	for _, ch := range t.c.ID {
		idx = idx*31 + int(ch)
	}
	idx &= 0x7fffffff
	area := 256
	if n > area {
		t.Fatalf("suite: scratch of %d bytes", n)
	}
	// The first half of rw holds 128 areas; receive buffers may follow.
	off := uint64(idx%112) * uint64(area)
	if int(off)+n > r.Len {
		t.Skipf("region rw too small")
	}
	return r, r.Addr + off
}

// sendAll sends packets in the given order on path.
func (c *Conn) sendAll(ps []*pkt, path uint16) (lastSeq uint32) {
	for _, p := range ps {
		c.sendPkt(p, tx{path: path})
		lastSeq = p.h.PathSeq
	}
	return lastSeq
}

// write places data at addr with a WRITE (one path) and waits until the
// target acknowledged every PSN of it.
func (c *Conn) write(r Region, addr uint64, data []byte) {
	ps := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: data})
	seq := c.sendAll(ps, 1)
	a := c.ack(1, seq)
	c.t.check(a.CumPSN() == c.next, "WRITE not acknowledged: CumPSN %s, want %s", hex32(uint32(a.CumPSN())), hex32(uint32(c.next)))
}

// readBack READs n bytes at addr (on stream 9, so an unfinished message
// of a case's stream 0 cannot hold it up, §9.1) and acks the response.
func (c *Conn) readBack(r Region, addr uint64, n int) []byte {
	ps := c.message(msg{op: wire.OpReadReq, stream: 9, addr: addr, rkey: r.RKey, readLen: uint32(n)})
	c.sendAll(ps, 2)
	b, _ := c.readResponses(ps[0].h.MsgID, n, true)
	return b
}

// cumNow is the target's CumPSN for this connection, asked with a probe.
func (c *Conn) cumNow() wire.PSN { return c.cumPSN() }

// mustDrop sends b (a malformed or refused-silently packet), checks that
// nothing at all comes back for the connection, and that the target's
// CumPSN did not move (nothing was consumed).
func (c *Conn) mustDrop(b []byte, x tx, what string) {
	before := c.cumNow()
	c.sendRaw(b, x)
	var seq uint32
	if len(b) >= 20 {
		seq = binary.BigEndian.Uint32(b[16:20])
	}
	c.t.none(what+" must be dropped without reply", func(r *rxPacket) bool {
		if !c.anyFor()(r) {
			return false
		}
		return c.answers(r, x.path, seq)
	})
	after := c.cumNow()
	c.t.check(after == before, "%s was consumed: CumPSN moved from %s to %s", what, hex32(uint32(before)), hex32(uint32(after)))
}

// answers reports whether r could be the target's answer to a packet the
// suite sent on path with path sequence seq: anything for the connection
// but an ack that cannot be about it (another path's, or one reporting an
// earlier path sequence: a late coalesced ack) and a retransmission of
// the target's own earlier data (a READ response it resends).
func (c *Conn) answers(r *rxPacket, path uint16, seq uint32) bool {
	if !c.anyFor()(r) {
		return false
	}
	switch r.pkt.Class {
	case wire.ClassAck:
		a := r.pkt.Ack()
		return a.PathID() == path && int32(a.PathAckSeq()-seq) >= 0
	case wire.ClassData:
		return r.pkt.Data().Flags()&wire.FlagRetx == 0
	}
	return true
}

// validWrite is a one-packet WRITE with ACK_REQ at the next PSN, to a
// valid place when the target exposes memory (so that only the mutation
// under test can make a target refuse it).
func (c *Conn) validWrite(data []byte) *pkt {
	r := c.t.rw() // without memory no WRITE can be accepted: skip
	return c.message(msg{op: wire.OpWrite, addr: r.Addr + 30000, rkey: r.RKey, data: data})[0]
}

// mutate encodes p, lets f change the bytes, and reseals the CRC (so the
// packet fails only the rule under test).
func (c *Conn) mutate(p *pkt, x tx, f func(b []byte) []byte) []byte {
	b := f(c.encode(p, x))
	if len(b) >= 12 {
		wire.Seal(b)
	}
	return b
}

// events returns the target's receive completions for this connection.
func (c *Conn) events() []Event {
	ev, err := c.t.mem().Events()
	c.t.must(err)
	var out []Event
	for _, e := range ev {
		if e.PeerConn == c.ID {
			out = append(out, e)
		}
	}
	return out
}

// eventually polls the target's events until f accepts them.
func (c *Conn) eventually(what string, f func([]Event) bool) []Event {
	var ev []Event
	for i := 0; i < 20; i++ {
		ev = c.events()
		if f(ev) {
			return ev
		}
		c.t.wait(c.t.o.Timeout/20, func(*rxPacket) bool { return false })
	}
	c.t.Fatalf("%s: target events %+v", what, ev)
	return nil
}

func sameBytes(t *T, got, want []byte, what string) {
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: bytes differ from offset %d (%d bytes)", what, i, len(want))
	}
}

func sackBits(a wire.Ack, n uint32) string {
	s := ""
	for i := uint32(0); i < n; i++ {
		if a.Received(i) {
			s += "1"
		} else {
			s += "0"
		}
	}
	return s
}

func dscpOf(tos uint8) int { return int(tos >> 2) }
