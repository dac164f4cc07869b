package compliance

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/wire"
)

// Data packets (§4): validation, placement, timestamps, immediate data,
// probes.

// malformed builds a data-packet case: f turns a valid one-packet message
// into one that breaks the rule; the target must drop it silently.
func malformed(id, rule, title string, op wire.Opcode, f func(b []byte)) Case {
	return Case{ID: id, Clause: "4.1.1", Title: title + " (" + rule + ")",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			m := msg{op: op, data: pattern(16, 20), rkey: 1}
			switch {
			case op == wire.OpReadReq:
				m.data, m.readLen = nil, 16
			case op.IsSend():
				m.rkey = 0
			case op == wire.OpReadResp:
				m.rkey = 0
			case op == wire.OpProbe:
				m.data, m.rkey = nil, 0
			}
			if op.HasImm() {
				m.imm = 7
			}
			p := c.message(m)[0]
			if op == wire.OpProbe {
				p.h = wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}
			}
			b := c.mutate(p, tx{path: 1}, func(b []byte) []byte { f(b); return b })
			c.mustDrop(b, tx{path: 1}, title)
		}}
}

var dataCases = []Case{
	malformed("data-payload-len", "rule 1, LENGTH", "PayloadLen disagreeing with the packet length", wire.OpWrite,
		func(b []byte) { binary.BigEndian.PutUint16(b[36:], 15) }),
	malformed("data-offset-past-msglen", "rule 2, LENGTH", "Offset + PayloadLen beyond MsgLen", wire.OpWrite,
		func(b []byte) { binary.BigEndian.PutUint32(b[28:], 1) }),
	malformed("data-offset-overflow", "rule 2, LENGTH", "Offset + PayloadLen past MsgLen only once computed without 32-bit overflow", wire.OpWrite,
		func(b []byte) {
			binary.BigEndian.PutUint32(b[28:], 0xfffffff8)
			binary.BigEndian.PutUint32(b[32:], 0xffffffff)
		}),
	malformed("data-reserved-bytes", "rule 3, RESERVED", "nonzero bytes 38-39", wire.OpWrite,
		func(b []byte) { b[39] = 1 }),
	malformed("data-void-with-payload", "rule 4, FIELD", "VOID with a payload", wire.OpWrite,
		func(b []byte) { b[3] |= byte(wire.FlagVoid) }),
	malformed("data-imm-on-write", "rule 5, FIELD", "a nonzero Imm on a WRITE", wire.OpWrite,
		func(b []byte) { b[63] = 9 }),
	malformed("data-read-req-payload", "rule 6, FIELD", "a READ_REQ with a nonzero Offset", wire.OpReadReq,
		func(b []byte) { binary.BigEndian.PutUint32(b[28:], 4) }),
	malformed("data-send-rkey", "rule 7, FIELD", "a SEND with an RKey", wire.OpSend,
		func(b []byte) { b[59] = 1 }),
	malformed("data-send-reserved", "rule 7, RESERVED", "a SEND with nonzero bytes 52-55", wire.OpSend,
		func(b []byte) { b[55] = 1 }),
	malformed("data-read-resp-addr", "rule 8, FIELD", "a READ_RESP with a RemoteAddr", wire.OpReadResp,
		func(b []byte) { b[55] = 1 }),
	malformed("data-probe-psn", "rule 9, FIELD", "a PROBE with a nonzero PSN", wire.OpProbe,
		func(b []byte) { b[11] = 1 }),
	malformed("data-probe-void", "rule 9, FIELD", "a PROBE with VOID set", wire.OpProbe,
		func(b []byte) { b[3] |= byte(wire.FlagVoid) }),

	{ID: "place-out-of-order", Clause: "4.1.2", Also: []string{"8.2", "9.2"}, Needs: NeedMemory, Title: "a 4-packet WRITE sent last packet first is placed whole",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			addr := r.Addr + 20000
			data := pattern(4*300, 21)
			ps := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: data, chunk: 300})
			for i := len(ps) - 1; i >= 0; i-- {
				c.sendPkt(ps[i], tx{path: uint16(i)})
			}
			a := c.ack(0, ps[0].h.PathSeq)
			t.check(a.CumPSN() == c.next, "CumPSN %s after the whole WRITE, want %s", hex32(uint32(a.CumPSN())), hex32(uint32(c.next)))
			sameBytes(t, c.readBack(r, addr, len(data)), data, "WRITE placed out of order")
		}},
	{ID: "place-send-in-buffer", Clause: "4.1.2", Also: []string{"9.4"}, Needs: NeedMemory, Title: "a 2-packet SEND sent in reverse lands at Offset in the buffer RecvSeq names",
		Run: func(t *T) {
			m := t.mem()
			if m.Recv.Count < 2 || m.Recv.Size < 600 {
				t.Skipf("the target posts no receive buffers of 600 bytes")
			}
			c := t.connect(connOpts{})
			data := pattern(600, 22)
			ps := c.message(msg{op: wire.OpSend, data: data, chunk: 300, recvSeq: 1, recvSet: true})
			c.sendPkt(ps[1], tx{path: 1})
			c.sendPkt(ps[0], tx{path: 2})
			c.ack(2, ps[0].h.PathSeq)
			r := t.rw()
			got := c.readBack(r, m.Recv.Addr+uint64(m.Recv.Size), len(data))
			sameBytes(t, got, data, "SEND into buffer 1")
		}},
	{ID: "place-mismatch-rkey", Clause: "4.1.2", Also: []string{"10.3"}, Needs: NeedMemory, Title: "a later packet of a WRITE whose RKey differs from the first's draws REMOTE_ACCESS",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWrite, addr: r.Addr + 24000, rkey: r.RKey, data: pattern(600, 23), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1})
			ps[1].h.RKey ^= 0x10000
			c.sendPkt(ps[1], tx{path: 1})
			n := c.nack(ps[1].h.PSN)
			t.check(n.Reason() == wire.NackRemoteAccess, "NACK %v, want REMOTE_ACCESS", n.Reason())
		}},
	{ID: "place-mismatch-msglen", Clause: "4.1.2", Needs: NeedMemory, Title: "a later packet whose MsgLen differs from its message's is refused (INVALID_REQUEST)",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWrite, addr: r.Addr + 25000, rkey: r.RKey, data: pattern(900, 24), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1})
			ps[1].h.MsgLen = 700
			c.sendPkt(ps[1], tx{path: 1})
			n := c.nack(ps[1].h.PSN)
			t.check(n.Reason() == wire.NackInvalidRequest || n.Reason() == wire.NackRemoteAccess, "NACK %v, want INVALID_REQUEST", n.Reason())
		}},
	{ID: "ts-echo-ack", Clause: "4.2", Also: []string{"5.1"}, Title: "an ack echoes the Timestamp and PSN of the packet that set PathAckSeq",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 25))
			c.sendPkt(p, tx{path: 2})
			a := c.ack(2, p.h.PathSeq)
			t.check(a.EchoTimestamp() == p.h.Timestamp, "EchoTimestamp %d, want %d", a.EchoTimestamp(), p.h.Timestamp)
			t.check(a.EchoPSN() == p.h.PSN, "EchoPSN %s, want %s", hex32(uint32(a.EchoPSN())), hex32(uint32(p.h.PSN)))
		}},
	{ID: "ts-echo-nack", Clause: "4.2", Also: []string{"6.1"}, Title: "a NACK echoes the refused transmission's Timestamp, PathID and PathSeq",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: 0x10, rkey: 0xdeadbeef, data: pattern(8, 26)})[0]
			c.sendPkt(p, tx{path: 5, seq: 7, seqOK: true})
			n := c.nack(p.h.PSN)
			t.check(n.EchoTimestamp() == p.h.Timestamp && n.PathID() == 5 && n.PathSeq() == 7,
				"NACK echo %d path %d seq %d, want %d 5 7", n.EchoTimestamp(), n.PathID(), n.PathSeq(), p.h.Timestamp)
		}},
	{ID: "imm-write-imm", Clause: "4.3", Also: []string{"9.2", "9.1"}, Needs: NeedEvents, Title: "a WRITE_IMM (last packet first, one duplicate) completes once with its immediate and length",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 26000, rkey: r.RKey, imm: 0xc0ffee01, data: pattern(600, 27), chunk: 300})
			c.sendPkt(ps[1], tx{path: 1})
			c.sendPkt(ps[0], tx{path: 2})
			c.sendPkt(ps[0], tx{path: 3, flags: wire.FlagRetx | wire.FlagAckReq})
			c.ack(3, ps[0].h.PathSeq)
			ev := c.eventually("WRITE_IMM completion", func(ev []Event) bool { return len(ev) > 0 })
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			ev = c.events()
			t.check(len(ev) == 1, "%d receive completions, want 1: %+v", len(ev), ev)
			e := ev[0]
			t.check(e.Op == "recv_write_imm" && e.Status == "ok" && e.Imm == 0xc0ffee01 && e.Bytes == 600,
				"completion %+v, want recv_write_imm ok imm 0xc0ffee01 600 bytes", e)
		}},
	{ID: "imm-send-imm", Clause: "4.3", Also: []string{"9.4"}, Needs: NeedEvents, Title: "a SEND_IMM completes its buffer with the immediate and length",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			ps := c.message(msg{op: wire.OpSendImm, imm: 0x5e11d, data: pattern(100, 28)})
			c.sendAll(ps, 1)
			ev := c.eventually("SEND_IMM completion", func(ev []Event) bool { return len(ev) > 0 })
			e := ev[0]
			t.check(e.Op == "recv" && e.Status == "ok" && e.HasImm && e.Imm == 0x5e11d && e.Bytes == 100, "completion %+v", e)
		}},
	{ID: "imm-failed-no-completion", Clause: "9.2", Also: []string{"4.3", "9.1"}, Needs: NeedEvents, Title: "a WRITE_IMM refused for its key, then voided, produces no receive completion",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWriteImm, addr: 0x10, rkey: 0xbad0bad1, imm: 5, data: pattern(16, 29)})[0]
			c.sendPkt(p, tx{path: 1})
			c.nack(p.h.PSN)
			v := *p
			v.payload = nil
			v.h.Flags = wire.FlagVoid | wire.FlagRetx | wire.FlagAckReq
			c.sendPkt(&v, tx{path: 2})
			a := c.ack(2, v.h.PathSeq)
			t.check(a.CumPSN() == p.h.PSN+1, "void packet not consumed: CumPSN %s", hex32(uint32(a.CumPSN())))
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			t.check(len(c.events()) == 0, "a failed WRITE_IMM completed: %+v", c.events())
		}},
	{ID: "probe-acked-at-once", Clause: "4.4", Also: []string{"5.5"}, Title: "a PROBE without ACK_REQ is acked at once: its seq, EchoPSN 0, its Timestamp, CumPSN unchanged",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			seq, ts := c.probe(6, 0)
			a := c.ack(6, seq)
			t.check(a.PathAckSeq() == seq && a.EchoPSN() == 0 && a.EchoTimestamp() == ts, "ack seq %d echo psn %s ts %d", a.PathAckSeq(), hex32(uint32(a.EchoPSN())), a.EchoTimestamp())
			t.check(a.CumPSN() == c.InitPSN, "a PROBE moved CumPSN to %s", hex32(uint32(a.CumPSN())))
		}},
	{ID: "probe-no-ce-count", Clause: "4.4", Also: []string{"5.4"}, Title: "a CE-marked PROBE is not counted in CECount",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}
			c.sendPkt(p, tx{path: 6, ce: true})
			a := c.ack(6, p.h.PathSeq)
			t.check(a.CECount() == 0, "CECount %d after a CE-marked PROBE", a.CECount())
		}},
}
