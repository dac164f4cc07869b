package compliance

import (
	"github.com/metaroce/metaroce/wire"
)

// Receiver rules beyond the basics of the other files: protection
// domains, messages that fail or complete, the window's bits, echo and CE
// corner cases, wrong addresses and ids, void packets.

var recvCases = []Case{
	{ID: "stream-lost-position", Clause: "9.1", Also: []string{"13"}, Needs: NeedEvents, Title: "a stream position whose PSNs were all taken by other packets is failed, and the stream goes on",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			m0 := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 52000, rkey: r.RKey, imm: 0xa0, data: pattern(16, 180)})[0]
			c.sendPkt(m0, tx{path: 1})
			c.ack(1, m0.h.PathSeq)
			// Position 1 of stream 0 never comes: its PSN goes to a
			// message of stream 1, as a forged packet that won the race
			// for it would (§13).
			other := c.message(msg{op: wire.OpWrite, stream: 1, addr: r.Addr + 52100, rkey: r.RKey, data: pattern(16, 181)})[0]
			c.sseq[0]++
			m2 := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 52200, rkey: r.RKey, imm: 0xa2, data: pattern(16, 182)})[0]
			c.sendPkt(m2, tx{path: 2})
			c.sendPkt(other, tx{path: 3})
			a := c.ack(3, other.h.PathSeq)
			t.check(a.CumPSN() == c.next, "CumPSN %s, want %s", hex32(uint32(a.CumPSN())), hex32(uint32(c.next)))
			c.eventually("position 2 of stream 0 takes effect once every PSN before it has arrived (§9.1: lost positions)",
				func(ev []Event) bool {
					for _, e := range ev {
						if e.Op == "recv_write_imm" && e.Imm == 0xa2 {
							return true
						}
					}
					return false
				})
		}},
	{ID: "stream-lost-run", Clause: "9.1", Also: []string{"13"}, Needs: NeedEvents, Title: "two consecutive stream positions whose PSNs were all taken by other packets (one incomplete, one missing) are failed, and the stream goes on",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			m0 := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 52400, rkey: r.RKey, imm: 0xb0, data: pattern(16, 185)})[0]
			c.sendPkt(m0, tx{path: 1})
			c.ack(1, m0.h.PathSeq)
			// Position 1 is two packets; its second PSN goes to a message
			// of stream 1, so it never completes. Position 2 never comes:
			// its PSN goes to another message of stream 1. Both as forged
			// packets that won the race for those PSNs would (§13).
			m1 := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 52500, rkey: r.RKey, imm: 0xb1, data: pattern(32, 186), chunk: 16})
			o1 := c.message(msg{op: wire.OpWrite, stream: 1, addr: r.Addr + 52600, rkey: r.RKey, data: pattern(16, 187)})[0]
			o1.h.PSN = m1[1].h.PSN
			c.next--
			c.sseq[0]++
			o2 := c.message(msg{op: wire.OpWrite, stream: 1, addr: r.Addr + 52700, rkey: r.RKey, data: pattern(16, 188)})[0]
			m3 := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 52800, rkey: r.RKey, imm: 0xb3, data: pattern(16, 189)})[0]
			c.sendPkt(m1[0], tx{path: 2})
			c.sendPkt(m3, tx{path: 3})
			c.sendPkt(o1, tx{path: 4})
			c.sendPkt(o2, tx{path: 5})
			a := c.ack(5, o2.h.PathSeq)
			t.check(a.CumPSN() == c.next, "CumPSN %s, want %s", hex32(uint32(a.CumPSN())), hex32(uint32(c.next)))
			c.eventually("position 3 of stream 0 takes effect once every PSN before it has arrived (§9.1: lost positions)",
				func(ev []Event) bool {
					for _, e := range ev {
						if e.Op == "recv_write_imm" && e.Imm == 0xb3 {
							return true
						}
					}
					return false
				})
			for _, e := range c.events() {
				t.check(e.Op != "recv_write_imm" || e.Imm != 0xb1, "the incomplete position 1 took effect with its immediate: %+v", e)
			}
		}},
	{ID: "send-buffer-contested", Clause: "9.4", Also: []string{"9.1", "13"}, Needs: NeedEvents, Title: "of two SENDs naming one receive buffer, the earlier in the stream takes it; the buffer completes once",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			// A later position names buffer 0 first, and stays incomplete.
			late := c.message(msg{op: wire.OpSend, recvSeq: 0, recvSet: true, streamSeq: 1, seqSet: true, data: pattern(400, 183), chunk: 200})
			c.sendPkt(late[0], tx{path: 1})
			c.ack(1, late[0].h.PathSeq)
			early := c.message(msg{op: wire.OpSend, recvSeq: 0, recvSet: true, streamSeq: 0, seqSet: true, data: pattern(64, 184)})[0]
			c.sendPkt(early, tx{path: 2})
			c.ack(2, early.h.PathSeq)
			// The later one has lost the buffer: its next packet is refused.
			c.sendPkt(late[1], tx{path: 3})
			checkNack(t, c.nack(late[1].h.PSN), wire.NackInvalidRequest)
			c.eventually("the earlier SEND completes buffer 0", func(ev []Event) bool {
				for _, e := range ev {
					if e.Op == "recv" && e.Bytes == 64 {
						return true
					}
				}
				return false
			})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			n := 0
			for _, e := range c.events() {
				if e.Op == "recv" && e.Status == "ok" {
					n++
				}
			}
			t.check(n == 1, "%d successful receive completions, want 1: %+v", n, c.events())
		}},
	{ID: "key-other-domain", Clause: "10.1", Also: []string{"10.3"}, Needs: NeedMemory, Title: "a key of another service's protection domain is not found: REMOTE_ACCESS",
		Run: func(t *T) {
			f, ok := t.mem().foreign()
			if !ok {
				t.Skipf("the target exposes no region of another protection domain")
			}
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: f.Addr, rkey: f.RKey, data: pattern(16, 170)})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackRemoteAccess)
			// The same region through its own service: reachable, so the
			// refusal above was the domain's doing.
			d := t.connect(connOpts{service: f.Service})
			q := d.message(msg{op: wire.OpWrite, addr: f.Addr, rkey: f.RKey, data: pattern(16, 171)})[0]
			d.sendPkt(q, tx{path: 1})
			a := d.ack(1, q.h.PathSeq)
			t.check(a.CumPSN() == d.next, "WRITE through the region's own service refused")
		}},
	{ID: "msg-mismatch-stream-continues", Clause: "9.1", Also: []string{"4.1.2", "6.3"}, Needs: NeedEvents, Title: "a message refused for a mismatched MsgLen, then voided, does not hold up its stream",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWriteImm, addr: r.Addr + 50000, rkey: r.RKey, imm: 1, data: pattern(600, 160), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1})
			ps[1].h.MsgLen = 700 // breaks §4.1.2: the receiver refuses it
			c.sendPkt(ps[1], tx{path: 1})
			checkNack(t, c.nack(ps[1].h.PSN), wire.NackInvalidRequest)
			v := void(ps[1])
			c.sendPkt(v, tx{path: 2})
			a := c.ack(2, v.h.PathSeq)
			t.check(a.CumPSN() == c.next, "void packet not consumed: CumPSN %s", hex32(uint32(a.CumPSN())))
			s := c.message(msg{op: wire.OpSend, data: pattern(64, 161)})[0]
			c.sendPkt(s, tx{path: 3})
			c.ack(3, s.h.PathSeq)
			c.eventually("the SEND after the refused message on its stream completes (§9.1: a failed message never holds up its stream)",
				func(ev []Event) bool {
					for _, e := range ev {
						if e.Op == "recv" && e.Bytes == 64 {
							return true
						}
					}
					return false
				})
		}},
	{ID: "conn-cookie-replay-after-close", Clause: "7.4", Also: []string{"7.3"}, Title: "a cookie replayed after its connection closed opens a new one, which a RESET ends",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			first := c.Peer
			h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: c.Peer, SrcConn: c.ID, Reason: wire.ReasonClosed, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.expectConn(c.ID, wire.OpDisconnectAck)
			// The replay reaches a new target connection under our same
			// id: its path sequences start afresh (its handshake PROBE
			// takes path 0's first, §8.4).
			c.forgetTarget()
			c.sendConnect(connOpts{}, c.cookie)
			var a wire.ConnHeader
			a.Decode(t.expectConn(c.ID, wire.OpAccept).pkt.Conn())
			t.Notef("first id %s, new id %s", hex32(first), hex32(a.SrcConn))
			rs := wire.ConnHeader{Opcode: wire.OpReset, SrcConn: c.ID, Reason: wire.ReasonUnknownConn, Timestamp: stamp(), ResetToken: c.resetTok}
			t.send(wire.AppendConn(nil, &rs), sendOpts{})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			c.Peer = a.SrcConn
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}, tx{path: 1})
			checkReset(t, t.expect("RESET: the replayed connection was ended", isResetFor(a.SrcConn)), a.SrcConn)
			c.Peer = 0
		}},
	{ID: "conn-disconnect-wrong-srcconn", Clause: "7.7", Title: "a DISCONNECT naming our connection but another SrcConn is answered and closes nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: c.Peer, SrcConn: c.ID ^ 0x40, Reason: wire.ReasonClosed, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.expectConn(c.ID^0x40, wire.OpDisconnectAck)
			c.cumNow()
		}},
	{ID: "conn-reset-own-id", Clause: "7.6", Title: "a RESET whose DstConn is the connection's own id ends it",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			h := wire.ConnHeader{Opcode: wire.OpReset, DstConn: c.Peer, SrcConn: c.ID, Reason: wire.ReasonUnknownConn, Timestamp: stamp(), ResetToken: c.resetTok}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			peer := c.Peer
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}, tx{path: 1})
			checkReset(t, t.expect("RESET for the reset connection", isResetFor(peer)), peer)
			c.Peer = 0
		}},
	{ID: "msg-slot-reuse", Clause: "9.1", Needs: NeedMemory, Title: "MsgID n + MsgWindow is accepted once message n is complete",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(32)
			c.write(r, addr, pattern(16, 150))
			mw := uint32(c.accept.MsgWindow)
			p := c.message(msg{op: wire.OpWrite, addr: addr + 16, rkey: r.RKey, data: pattern(16, 151), msgID: mw, idSet: true})[0]
			c.sendPkt(p, tx{path: 1})
			a := c.ack(1, p.h.PathSeq)
			t.check(a.CumPSN() == p.h.PSN+1, "MsgID %d refused after MsgID 0 completed: CumPSN %s", mw, hex32(uint32(a.CumPSN())))
		}},
	{ID: "ack-ce-too-old", Clause: "5.4", Needs: NeedMemory, Title: "a CE-marked duplicate too old for the bitmap is still counted",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 140))
			c.sendPkt(p, tx{path: 6, seq: 0, seqOK: true})
			c.ack(6, 0)
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 6, seq: 400, seqOK: true})
			c.ack(6, 400)
			c.sendPkt(p, tx{path: 6, seq: 5, seqOK: true, ce: true}) // a duplicate, 395 behind
			a := t.expect("ack of the duplicate", c.isAck(6)).pkt.Ack()
			t.check(a.PathAckSeq() == 400 && a.CECount() == 1, "ack seq %d CECount %d, want 400 and 1", a.PathAckSeq(), a.CECount())
		}},
	{ID: "nack-source-port", Clause: "5.5", Also: []string{"2.3"}, Level: Should, Needs: NeedMemory, Title: "a NACK carries the source port of the latest packet recorded on its path, not the refused one's",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 141))
			c.sendPkt(p, tx{path: 7, sport: 52001})
			c.ack(7, p.h.PathSeq)
			q := c.message(msg{op: wire.OpWrite, addr: 0x10, rkey: 0x0badc0de, data: pattern(8, 142)})[0]
			c.sendPkt(q, tx{path: 7, sport: 52002})
			r := t.expect("NACK", c.isNack(q.h.PSN))
			t.check(r.from.Port() == 52001, "NACK from source port %d, want 52001 (the latest recorded on path 7)", r.from.Port())
		}},
	{ID: "nack-range-overflow", Clause: "10.3", Needs: NeedMemory, Title: "a WRITE whose RemoteAddr + MsgLen wraps past 2^64 draws REMOTE_ACCESS",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			p := c.message(msg{op: wire.OpWrite, addr: 0xffffffffffffff00, rkey: r.RKey, data: pattern(512, 143)})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackRemoteAccess)
		}},
	{ID: "seq-window-cycles", Clause: "8.2", Also: []string{"5.3"}, Needs: NeedMemory, Title: "CumPSN runs past twice the receive window: arrival bits are cleared for reuse",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(64)
			w := int(c.accept.RecvWindow)
			if w > 4096 {
				t.Skipf("receive window %d: too many packets for the runtime budget", w)
			}
			total := 2*w + 100
			const round = 64
			for sent := 0; sent < total; sent += round {
				var ps []*pkt
				for i := 0; i < round; i++ {
					ps = append(ps, c.message(msg{op: wire.OpWrite, stream: uint16(i % 8), addr: addr + uint64(i%64), rkey: r.RKey, data: []byte{byte(i)}})[0])
				}
				want := c.next
				// A round that a busy target partly dropped is sent again:
				// copies of what arrived are duplicates, harmless.
				for try := 0; ; try++ {
					for _, p := range ps {
						c.sendPkt(p, tx{path: uint16(len(ps) % 8)})
					}
					a := t.wait(t.o.Timeout, func(r *rxPacket) bool {
						return c.isAck(uint16(len(ps)%8))(r) && r.pkt.Ack().CumPSN() == want
					})
					if a != nil {
						break
					}
					t.check(try < 3, "CumPSN did not reach %s after %d packets", hex32(uint32(want)), sent+round)
				}
			}
		}},
	{ID: "send-completions-in-order", Clause: "9.1", Also: []string{"9.4"}, Needs: NeedEvents, Title: "two SENDs of one stream arriving in reverse complete in sending order",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			a := c.message(msg{op: wire.OpSend, data: pattern(100, 130)})[0]
			b := c.message(msg{op: wire.OpSend, data: pattern(200, 131)})[0]
			c.sendPkt(b, tx{path: 1})
			c.sendPkt(a, tx{path: 2})
			c.ack(2, a.h.PathSeq)
			ev := c.eventually("two receive completions", func(ev []Event) bool { return len(ev) >= 2 })
			t.check(ev[0].Bytes == 100 && ev[1].Bytes == 200 && ev[0].Status == "ok" && ev[1].Status == "ok", "completions %+v, want 100 bytes then 200", ev)
		}},
	{ID: "ack-echo-highest-copy", Clause: "5.2", Also: []string{"4.2"}, Title: "a copy of the highest path sequence refreshes the echo fields",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}
			c.sendPkt(p, tx{path: 5, seq: 20, seqOK: true})
			c.ack(5, 20)
			q := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}
			c.sendPkt(q, tx{path: 5, seq: 20, seqOK: true})
			a := c.ack(5, 20)
			t.check(q.h.Timestamp != p.h.Timestamp && a.EchoTimestamp() == q.h.Timestamp, "EchoTimestamp %d after a copy of the highest, want the copy's %d (first %d)",
				a.EchoTimestamp(), q.h.Timestamp, p.h.Timestamp)
		}},
	{ID: "seq-duplicate-in-window", Clause: "8.2", Also: []string{"5.5"}, Needs: NeedMemory, Title: "a duplicate of a PSN held beyond CumPSN is acked at once and changes nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			ps := []*pkt{c.validWrite(pattern(8, 120)), c.validWrite(pattern(8, 121)), c.validWrite(pattern(8, 122))}
			c.sendPkt(ps[2], tx{path: 1})
			c.ack(1, ps[2].h.PathSeq)
			ps[2].h.Flags = 0
			c.sendPkt(ps[2], tx{path: 1})
			a := c.ack(1, ps[2].h.PathSeq)
			t.check(a.CumPSN() == ps[0].h.PSN, "CumPSN %s", hex32(uint32(a.CumPSN())))
			c.sendPkt(ps[0], tx{path: 1})
			c.sendPkt(ps[1], tx{path: 1})
			a = c.ack(1, ps[1].h.PathSeq)
			t.check(a.CumPSN() == ps[2].h.PSN+1, "CumPSN %s, want %s", hex32(uint32(a.CumPSN())), hex32(uint32(ps[2].h.PSN+1)))
		}},
	{ID: "read-duplicate-request", Clause: "8.2", Also: []string{"9.3"}, Needs: NeedMemory, Title: "a duplicate READ_REQ is not served twice",
		Run: func(t *T) {
			c := t.connect(connOpts{maxPayload: 256})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 3 * 256})[0]
			c.sendPkt(rd, tx{path: 1})
			c.readResponses(rd.h.MsgID, 3*256, true)
			c.sendPkt(rd, tx{path: 2, flags: wire.FlagRetx})
			c.ack(2, rd.h.PathSeq)
			t.none("a second READ response (new PSNs) for a duplicate READ_REQ", func(r *rxPacket) bool {
				return c.isData()(r) && int32(r.pkt.Data().PSN()-(c.accept.InitialPSN+3)) >= 0
			})
		}},
	{ID: "place-mismatch-addr", Clause: "10.3", Also: []string{"4.1.2"}, Needs: NeedMemory, Title: "a later packet of a WRITE whose RemoteAddr differs from the first's draws REMOTE_ACCESS",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWrite, addr: r.Addr + 24000, rkey: r.RKey, data: pattern(600, 123), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1})
			ps[1].h.RemoteAddr += 8
			c.sendPkt(ps[1], tx{path: 1})
			checkNack(t, c.nack(ps[1].h.PSN), wire.NackRemoteAccess)
		}},
	{ID: "ver-wrong-peer-silent", Clause: "3.5", Needs: NeedAlt | NeedMemory, Title: "a version-2 packet naming a connection but from another address draws nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			b := c.mutate(c.validWrite(pattern(8, 110)), tx{path: 1}, func(b []byte) []byte { b[0] = 2; return b })
			c.sendRaw(b, tx{path: 1, from: t.o.AltLocal})
			t.none("answer to a version-2 packet from the wrong address", c.anyFor())
		}},
	{ID: "conn-reset-wrong-address", Clause: "7.6", Needs: NeedAlt, Title: "a RESET from another address than the peer's is ignored",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			h := wire.ConnHeader{Opcode: wire.OpReset, SrcConn: c.ID, Reason: wire.ReasonUnknownConn, Timestamp: stamp(), ResetToken: c.resetTok}
			t.send(wire.AppendConn(nil, &h), sendOpts{from: t.o.AltLocal})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			c.cumNow() // acked: the connection lives
		}},
	{ID: "conn-disconnect-wrong-address", Clause: "7.7", Needs: NeedAlt, Title: "a DISCONNECT from another address is answered but does not close the connection",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: c.Peer, SrcConn: c.ID, Reason: wire.ReasonClosed, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{from: t.o.AltLocal})
			t.expectConn(c.ID, wire.OpDisconnectAck)
			c.cumNow()
		}},
	{ID: "void-beyond-window", Clause: "8.2", Title: "a void packet beyond the window is refused with OUT_OF_WINDOW, not consumed",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: 0x42, rkey: 0x77, data: pattern(16, 111)})[0]
			v := void(p)
			v.h.PSN = c.InitPSN + wire.PSN(c.accept.RecvWindow)
			c.sendPkt(v, tx{path: 1})
			checkNack(t, c.nack(v.h.PSN), wire.NackOutOfWindow)
		}},
	{ID: "void-duplicate", Clause: "8.2", Also: []string{"6.3"}, Needs: NeedMemory, Title: "a void packet for a PSN already placed is a duplicate: acked, the bytes stay",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(32)
			data := pattern(32, 112)
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: data})[0]
			c.sendPkt(p, tx{path: 1})
			c.ack(1, p.h.PathSeq)
			v := void(p)
			c.sendPkt(v, tx{path: 2})
			c.ack(2, v.h.PathSeq)
			sameBytes(t, c.readBack(r, addr, 32), data, "memory after a void duplicate")
		}},
	{ID: "nack-message-complete", Clause: "9.1", Also: []string{"6.2"}, Needs: NeedMemory, Title: "a new PSN for a message already complete draws INVALID_REQUEST",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(16)
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: pattern(16, 113)})[0]
			c.sendPkt(p, tx{path: 1})
			c.ack(1, p.h.PathSeq)
			again := *p
			again.h.PSN = c.next
			c.next++
			c.sendPkt(&again, tx{path: 1})
			checkNack(t, c.nack(again.h.PSN), wire.NackInvalidRequest)
		}},
	{ID: "send-too-long-completes-buffer", Clause: "9.4", Also: []string{"9.1"}, Needs: NeedEvents, Title: "a SEND longer than its buffer completes the buffer with a length error",
		Run: func(t *T) {
			m := t.mem()
			if m.Recv.Count == 0 {
				t.Skipf("no receive buffers")
			}
			c := t.connect(connOpts{})
			ps := c.message(msg{op: wire.OpSend, data: pattern(m.Recv.Size+300, 114), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1})
			checkNack(t, c.nack(ps[0].h.PSN), wire.NackInvalidRequest)
			ev := c.eventually("the buffer's completion", func(ev []Event) bool { return len(ev) > 0 })
			t.check(ev[0].Op == "recv" && ev[0].Status == "local_length", "completion %+v, want recv local_length", ev[0])
		}},
	{ID: "nack-read-range", Clause: "10.3", Needs: NeedMemory, Title: "a READ whose range ends past the region draws REMOTE_ACCESS and no response",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			p := c.message(msg{op: wire.OpReadReq, addr: r.Addr + uint64(r.Len) - 8, rkey: r.RKey, readLen: 16})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackRemoteAccess)
			t.none("READ_RESP for a refused READ", c.isData())
		}},
}
