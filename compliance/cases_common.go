package compliance

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/wire"
)

// Encapsulation (§2) and the common packet structure (§3): versions,
// opcodes, flags, sizes, the CRC, the receive order, reserved fields.

var commonCases = []Case{
	{ID: "enc-zero-udp-checksum", Clause: "2.1", Title: "an IPv4 datagram with a zero UDP checksum is accepted",
		Run: func(t *T) {
			if !t.o.Local.Is4() {
				t.Skipf("IPv4 only")
			}
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 3}
			h := c.connectHeader(connOpts{}, [16]byte{})
			t.send(wire.AppendConn(nil, &h), sendOpts{sport: 50998, noCheck: true})
			t.expectConn(c.ID, wire.OpChallenge)
		}},
	{ID: "enc-ipv4-fragments-dropped", Clause: "2.1", Needs: NeedMemory, Title: "an IPv4-fragmented MetaRoCE packet is dropped, never placed",
		Run: func(t *T) {
			if !t.o.Local.Is4() {
				t.Skipf("IPv4 only")
			}
			c := t.connect(connOpts{})
			r := t.rw()
			addr := r.Addr + 48000
			old := c.readBack(r, addr, 2000)
			// 2000 bytes of payload do not fit a 1500-byte MTU: with DF
			// clear the suite's kernel sends two fragments.
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: pattern(2000, 15), chunk: 2000})[0]
			b := c.encode(p, tx{path: 1})
			before := c.cumNow()
			t.send(b, sendOpts{sport: 50996, frag: true})
			t.none("answer to a fragmented packet", func(r *rxPacket) bool { return c.answers(r, 1, p.h.PathSeq) })
			t.check(c.cumNow() == before, "a fragmented packet was consumed")
			sameBytes(t, c.readBack(r, addr, 2000), old, "memory after a fragmented WRITE")
		}},
	{ID: "enc-ipv6-zero-checksum", Clause: "2.1", Level: Should, Title: "an IPv6 datagram with a zero UDP checksum is dropped",
		Run: func(t *T) {
			if t.o.Local.Is4() {
				t.Skipf("IPv6 only")
			}
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 3}
			h := c.connectHeader(connOpts{}, [16]byte{})
			t.send(wire.AppendConn(nil, &h), sendOpts{sport: 50998, noCheck: true})
			t.none("CHALLENGE to a CONNECT with a zero IPv6 UDP checksum", isConnTo(c.ID, wire.OpChallenge))
		}},
	{ID: "enc-ecn-capable", Clause: "2.4", Title: "the target's packets are sent ECN-capable, ECT(0)",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			seq, _ := c.probe(3, wire.FlagAckReq)
			r := t.expect("ack", c.isAckSeq(3, seq))
			if !r.tosK {
				t.Skipf("the kernel did not report the TOS byte")
			}
			t.check(r.tos&ecnMask == ecnECT0, "ack ECN field %02b, want 10 (ECT(0))", r.tos&ecnMask)
		}},
	{ID: "enc-dscp-control", Clause: "2.4", Title: "acks and connection packets carry the control DSCP (default CS6, 48)",
		Run: func(t *T) {
			if t.o.DSCPControl < 0 {
				t.Skipf("control DSCP not given")
			}
			c := t.dial(connOpts{})
			ch := t.expectConn(c.ID, wire.OpChallenge)
			if !ch.tosK {
				t.Skipf("the kernel did not report the TOS byte")
			}
			t.check(dscpOf(ch.tos) == t.o.DSCPControl, "CHALLENGE DSCP %d, want %d", dscpOf(ch.tos), t.o.DSCPControl)
			copy(c.cookie[:], ch.pkt.Conn().Cookie())
			c.sendConnect(connOpts{}, c.cookie)
			a := t.expectConn(c.ID, wire.OpAccept)
			c.accept.Decode(a.pkt.Conn())
			c.Peer = c.accept.SrcConn
			seq, _ := c.probe(3, wire.FlagAckReq)
			r := t.expect("ack", c.isAckSeq(3, seq))
			t.check(dscpOf(r.tos) == t.o.DSCPControl, "ack DSCP %d, want %d", dscpOf(r.tos), t.o.DSCPControl)
		}},
	{ID: "enc-dscp-data", Clause: "2.4", Needs: NeedMemory, Title: "data packets (READ responses) carry the data DSCP (default AF31, 26)",
		Run: func(t *T) {
			if t.o.DSCPData < 0 {
				t.Skipf("data DSCP not given")
			}
			c := t.connect(connOpts{})
			r, addr := t.scratch(64)
			ps := c.message(msg{op: wire.OpReadReq, addr: addr, rkey: r.RKey, readLen: 64})
			c.sendAll(ps, 1)
			d := t.expect("READ_RESP", c.isData())
			c.record(d.pkt.Data())
			c.ackPath(d.pkt.Data().PathID())
			if !d.tosK {
				t.Skipf("the kernel did not report the TOS byte")
			}
			t.check(dscpOf(d.tos) == t.o.DSCPData, "READ_RESP DSCP %d, want %d", dscpOf(d.tos), t.o.DSCPData)
		}},
	{ID: "enc-entropy-not-identity", Clause: "2.3", Also: []string{"5.2"}, Title: "a path whose source port changes stays the same path: its state carries over",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			c.probe(4, 0)
			c.ack(4, 0)
			p := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}
			c.sendPkt(p, tx{path: 4, sport: 61111})
			a := c.ack(4, 1)
			t.check(a.PathAckSeq() == 1 && a.Received(0) && a.Received(1), "after a repath the ack of path 4 is seq %d SACK %s, want 1 and 11", a.PathAckSeq(), sackBits(a, 2))
		}},
	{ID: "enc-max-payload", Clause: "2.5", Needs: NeedMemory, Title: "the target sends no more payload per packet than the smaller MaxPayload (ours: 256)",
		Run: func(t *T) {
			c := t.connect(connOpts{maxPayload: 256})
			r := t.rw()
			ps := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 1000})
			c.sendAll(ps, 1)
			_, hs := c.readResponses(ps[0].h.MsgID, 1000, true)
			for _, h := range hs {
				t.check(h.PayloadLen <= 256, "READ_RESP with %d bytes of payload, peer's MaxPayload 256", h.PayloadLen)
			}
		}},
	{ID: "enc-accept-any-payload", Clause: "2.5", Needs: NeedMemory, Title: "a receiver accepts a payload larger than it announced, if consistent with the header",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			big := int(c.accept.MaxPayload) + 100
			if big > 1400 {
				big = 1400 // stay inside a 1500-byte MTU
				if big <= int(c.accept.MaxPayload) {
					t.Skipf("target MaxPayload %d leaves no room below the MTU", c.accept.MaxPayload)
				}
			}
			data := pattern(big, 9)
			c.write(r, r.Addr+16384, data)
			sameBytes(t, c.readBack(r, r.Addr+16384, big), data, "WRITE of a large packet")
		}},
	{ID: "ver-unsupported", Clause: "3.5", Also: []string{"3.1", "6.1"}, Title: "a version-2 packet on an established connection draws nothing or a well-formed NACK UNSUPPORTED_VERSION",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 4))
			b := c.mutate(p, tx{path: 1}, func(b []byte) []byte { b[0] = 2; return b })
			c.sendRaw(b, tx{path: 1})
			r := t.wait(t.o.Quiet*2, c.anyFor())
			if r == nil {
				t.Notef("no answer (allowed: MAY)")
				return
			}
			t.check(r.err == nil && r.pkt.Class == wire.ClassNack, "answered with %v", r)
			n := r.pkt.Nack()
			t.check(n.Reason() == wire.NackUnsupportedVersion, "NACK reason %v", n.Reason())
			t.check(n.PSN() == wire.PSN(binary.BigEndian.Uint32(b[8:12])) && n.PathID() == 0 && n.PathSeq() == 0 && n.EchoTimestamp() == 0 && n.Info() == 1,
				"NACK UNSUPPORTED_VERSION fields: psn %s path %d seq %d echo %d info %d", hex32(uint32(n.PSN())), n.PathID(), n.PathSeq(), n.EchoTimestamp(), n.Info())
		}},
	{ID: "ver-bad-crc-silent", Clause: "3.5", Title: "a version-2 packet whose CRC does not verify draws nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			b := c.mutate(c.validWrite(pattern(8, 5)), tx{path: 1}, func(b []byte) []byte { b[0] = 2; return b })
			b[len(b)-1] ^= 0xff
			c.sendRaw(b, tx{path: 1})
			t.none("answer to a corrupted version-2 packet", c.anyFor())
		}},
	{ID: "ver-unknown-conn-silent", Clause: "3.5", Title: "a version-2 packet naming no connection draws nothing, not even RESET",
		Run: func(t *T) {
			id := rand32() | 1
			h := wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq, DstConn: id, PSN: 9, MsgLen: 4, RKey: 1, Timestamp: stamp()}
			b := wire.AppendData(nil, &h, []byte{1, 2, 3, 4})
			b[0] = 2
			wire.Seal(b)
			t.send(b, sendOpts{sport: entropyBase})
			t.none("answer to a version-2 packet naming no connection", func(r *rxPacket) bool {
				return r.err == nil && (r.pkt.Prefix().DstConn() == id || r.pkt.Class == wire.ClassConn && r.pkt.Conn().SrcConn() == id)
			})
		}},
	{ID: "opcode-undefined", Clause: "3.2", Title: "packets with undefined opcodes are dropped and change nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			for _, op := range []byte{0x00, 0x08, 0x0f, 0x12, 0x1f, 0x27, 0x30, 0xff} {
				b := c.mutate(c.validWrite(pattern(8, op)), tx{path: 1}, func(b []byte) []byte { b[1] = op; return b })
				c.next-- // the PSN was not used
				c.mustDrop(b, tx{path: 1}, "opcode "+hex32(uint32(op)))
			}
		}},
	{ID: "flags-reserved-data", Clause: "3.3", Also: []string{"3.6"}, Title: "a data packet with a reserved flag set is dropped",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			b := c.mutate(c.validWrite(pattern(8, 6)), tx{path: 1}, func(b []byte) []byte { b[2] |= 0x80; return b })
			c.mustDrop(b, tx{path: 1}, "WRITE with flag 0x8000")
		}},
	{ID: "flags-void-reserved-outside-data", Clause: "3.3", Title: "VOID and other reserved flags on a CONNECT make it a dropped packet",
		Run: func(t *T) {
			for _, f := range []uint16{wire.FlagVoid, 0x0100} {
				c := &Conn{t: t, ID: rand32() | 1, InitPSN: 3}
				h := c.connectHeader(connOpts{}, [16]byte{})
				h.Flags = f
				t.send(wire.AppendConn(nil, &h), sendOpts{})
				t.none("CHALLENGE to a CONNECT with flags "+hex32(uint32(f)), isConnTo(c.ID, wire.OpChallenge))
			}
		}},
	{ID: "flags-ignored-outside-data", Clause: "3.3", Title: "ACK_REQ and RETX on a CONNECT are ignored: it is still challenged",
		Run: func(t *T) {
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 3}
			h := c.connectHeader(connOpts{}, [16]byte{})
			h.Flags = wire.FlagAckReq | wire.FlagRetx
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.expectConn(c.ID, wire.OpChallenge)
		}},
	{ID: "crc-data-never-placed", Clause: "3.4", Needs: NeedMemory, Title: "a WRITE with a bad CRC draws nothing and is never placed",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(64)
			old := pattern(64, 10)
			c.write(r, addr, old)
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: pattern(64, 11)})[0]
			b := c.encode(p, tx{path: 1})
			b[wire.DataLen+5] ^= 0x20 // one flipped payload bit
			c.mustDrop(b, tx{path: 1}, "WRITE with a bad CRC")
			sameBytes(t, c.readBack(r, addr, 64), old, "memory after a corrupted WRITE")
		}},
	{ID: "crc-conn-dropped", Clause: "3.4", Title: "a CONNECT with a bad CRC draws nothing",
		Run: func(t *T) {
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 3}
			h := c.connectHeader(connOpts{}, [16]byte{})
			b := wire.AppendConn(nil, &h)
			b[39] ^= 1 // a Timestamp bit: a target that skips the check would answer
			t.send(b, sendOpts{})
			t.none("reply to a corrupted CONNECT", func(r *rxPacket) bool {
				return r.err == nil && r.pkt.Class == wire.ClassConn && r.pkt.Conn().DstConn() == c.ID
			})
		}},
	{ID: "size-conn-wrong-length", Clause: "3.4", Also: []string{"7.1"}, Title: "CONNECTs of 59 and 61 bytes (CRC valid) are dropped",
		Run: func(t *T) {
			for _, n := range []int{59, 61} {
				c := &Conn{t: t, ID: rand32() | 1, InitPSN: 3}
				h := c.connectHeader(connOpts{}, [16]byte{})
				b := wire.AppendConn(nil, &h)
				b = append(b[:56], make([]byte, n-56)...)
				wire.Seal(b)
				t.send(b, sendOpts{})
				t.none("CHALLENGE to a CONNECT of "+itoa(n)+" bytes", isConnTo(c.ID, wire.OpChallenge))
			}
		}},
	{ID: "short-packets", Clause: "3.5", Title: "packets of 0, 11 and 12 bytes and a truncated data header draw nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			before := c.cumNow()
			for _, n := range []int{0, 1, 11} {
				t.send(make([]byte, n), sendOpts{sport: entropyBase})
			}
			b := make([]byte, 12)
			b[0], b[1] = 1, byte(wire.OpWrite)
			binary.BigEndian.PutUint32(b[4:], c.Peer)
			wire.Seal(b)
			c.sendRaw(b, tx{path: 1})
			full := c.encode(c.validWrite(pattern(8, 12)), tx{path: 1})
			trunc := append([]byte(nil), full[:50]...)
			wire.Seal(trunc)
			c.sendRaw(trunc, tx{path: 1})
			t.none("answer to a short packet", c.anyFor())
			t.check(c.cumNow() == before, "a short packet was consumed")
		}},
	{ID: "malformed-unknown-conn-silent", Clause: "3.5", Also: []string{"7.6"}, Title: "a malformed packet naming no connection draws no RESET",
		Run: func(t *T) {
			id := rand32() | 1
			h := wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq, DstConn: id, PSN: 9, MsgLen: 4, RKey: 1, Timestamp: stamp()}
			b := wire.AppendData(nil, &h, []byte{1, 2, 3, 4})
			b[len(b)-2] ^= 0xff // bad CRC
			t.send(b, sendOpts{sport: entropyBase})
			h.DstConn = id + 2
			b = wire.AppendData(nil, &h, []byte{1, 2, 3, 4})
			b[38] = 1 // reserved bytes
			wire.Seal(b)
			t.send(b, sendOpts{sport: entropyBase})
			t.none("RESET for a malformed packet", func(r *rxPacket) bool { return isResetFor(id)(r) || isResetFor(id+2)(r) })
		}},
}
