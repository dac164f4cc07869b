package compliance

import (
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Sequence handling (§8): in order, out of order, duplicates, PSN wrap,
// reordering across paths; the target as a sender of READ responses
// (§8.1, §8.3 to §8.5, §9.3).

var seqCases = []Case{
	{ID: "seq-in-order", Clause: "8.2", Also: []string{"8.1"}, Needs: NeedMemory, Title: "PSNs in order advance CumPSN one by one",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			for i := 0; i < 4; i++ {
				p := c.validWrite(pattern(8, byte(80+i)))
				c.sendPkt(p, tx{path: 1})
				a := c.ack(1, p.h.PathSeq)
				t.check(a.CumPSN() == p.h.PSN+1, "CumPSN %s after PSN %s", hex32(uint32(a.CumPSN())), hex32(uint32(p.h.PSN)))
			}
		}},
	{ID: "seq-out-of-order", Clause: "8.2", Needs: NeedMemory, Title: "PSNs p+2, p+1 are held; p completes them: CumPSN jumps to p+3",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			ps := []*pkt{c.validWrite(pattern(8, 84)), c.validWrite(pattern(8, 85)), c.validWrite(pattern(8, 86))}
			c.sendPkt(ps[2], tx{path: 1})
			a := c.ack(1, ps[2].h.PathSeq)
			t.check(a.CumPSN() == ps[0].h.PSN, "CumPSN %s with p missing", hex32(uint32(a.CumPSN())))
			c.sendPkt(ps[1], tx{path: 1})
			c.sendPkt(ps[0], tx{path: 1})
			a = c.ack(1, ps[0].h.PathSeq)
			t.check(a.CumPSN() == ps[2].h.PSN+1, "CumPSN %s, want %s", hex32(uint32(a.CumPSN())), hex32(uint32(ps[2].h.PSN+1)))
		}},
	{ID: "seq-duplicate-not-placed", Clause: "8.2", Also: []string{"5.5"}, Needs: NeedMemory, Title: "a duplicate PSN with other bytes is acked at once and not placed again",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(32)
			first := pattern(32, 87)
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: first})[0]
			c.sendPkt(p, tx{path: 1})
			c.ack(1, p.h.PathSeq)
			dup := *p
			dup.payload = pattern(32, 88)
			c.sendPkt(&dup, tx{path: 2})
			c.ack(2, dup.h.PathSeq)
			sameBytes(t, c.readBack(r, addr, 32), first, "memory after a duplicate")
		}},
	{ID: "seq-old-duplicate", Clause: "8.2", Needs: NeedMemory, Title: "a PSN far before CumPSN is a duplicate: acked, not refused",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 89))
			p.h.PSN = c.InitPSN - 5000
			c.sendPkt(p, tx{path: 1})
			a := c.ack(1, p.h.PathSeq)
			t.check(a.CumPSN() == c.InitPSN, "CumPSN %s", hex32(uint32(a.CumPSN())))
			t.none("NACK of an old duplicate", c.isNack(p.h.PSN))
		}},
	{ID: "seq-psn-wrap", Clause: "8.1", Also: []string{"1.4", "8.2"}, Needs: NeedMemory, Title: "PSNs wrap at 2^32: 0xfffffffe..0x00000001 out of order complete to CumPSN 2",
		Run: func(t *T) {
			c := t.connect(connOpts{initialPSN: 0xfffffffe, psnSet: true})
			ps := []*pkt{c.validWrite(pattern(8, 90)), c.validWrite(pattern(8, 91)), c.validWrite(pattern(8, 92)), c.validWrite(pattern(8, 93))}
			for _, i := range []int{2, 3, 1, 0} {
				c.sendPkt(ps[i], tx{path: uint16(i)})
			}
			a := c.ack(0, ps[0].h.PathSeq)
			t.check(a.CumPSN() == 2, "CumPSN %s after the wrap, want 0x00000002", hex32(uint32(a.CumPSN())))
		}},
	{ID: "seq-window-wrap-edge", Clause: "8.2", Also: []string{"1.4"}, Needs: NeedMemory, Title: "the window edge across the wrap: last PSN inside accepted, first outside refused",
		Run: func(t *T) {
			c := t.connect(connOpts{initialPSN: 0xffffff00, psnSet: true})
			w := wire.PSN(c.accept.RecvWindow)
			in := c.validWrite(pattern(8, 94))
			in.h.PSN = c.InitPSN + w - 1
			c.sendPkt(in, tx{path: 1})
			c.ack(1, in.h.PathSeq)
			out := c.validWrite(pattern(8, 95))
			out.h.PSN = c.InitPSN + w
			c.sendPkt(out, tx{path: 1})
			checkNack(t, c.nack(out.h.PSN), wire.NackOutOfWindow)
		}},
	{ID: "seq-spray-paths", Clause: "8.1", Also: []string{"2.3", "5.2", "8.2"}, Needs: NeedMemory, Title: "a WRITE sprayed over 4 paths in shuffled order is placed whole; each path acked with its own sequence",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			data := pattern(8*200, 96)
			addr := r.Addr + 44000
			ps := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: data, chunk: 200})
			for _, i := range []int{5, 0, 7, 2, 6, 1, 4, 3} {
				ps[i].h.Flags |= wire.FlagAckReq
				c.sendPkt(ps[i], tx{path: uint16(i % 4)})
			}
			for path := uint16(0); path < 4; path++ {
				a := c.ack(path, 1)
				t.check(a.PathAckSeq() == 1 && sackBits(a, 2) == "11", "path %d: seq %d SACK %s, want 1 and 11", path, a.PathAckSeq(), sackBits(a, 2))
			}
			t.check(c.cumNow() == c.next, "CumPSN %s after the sprayed WRITE", hex32(uint32(c.cumNow())))
			sameBytes(t, c.readBack(r, addr, len(data)), data, "sprayed WRITE")
		}},
	{ID: "msg-stream-order", Clause: "9.1", Also: []string{"9.3"}, Needs: NeedMemory, Title: "a READ posted after a WRITE on one stream waits for it and reads the written bytes",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(64)
			data := pattern(64, 97)
			w := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: data})[0]
			rd := c.message(msg{op: wire.OpReadReq, addr: addr, rkey: r.RKey, readLen: 64})[0]
			c.sendPkt(rd, tx{path: 1})
			t.none("READ_RESP before the WRITE ahead of it on its stream arrived", c.isData())
			c.sendPkt(w, tx{path: 2})
			got, _ := c.readResponses(rd.h.MsgID, 64, true)
			sameBytes(t, got, data, "READ after WRITE on one stream")
		}},
	{ID: "msg-streams-independent", Clause: "9.1", Needs: NeedMemory, Title: "a READ on another stream is served while stream 0 waits for a missing packet",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWrite, addr: r.Addr + 45000, rkey: r.RKey, data: pattern(600, 98), chunk: 300})
			c.sendPkt(ps[1], tx{path: 1}) // the first packet never comes
			rd := c.message(msg{op: wire.OpReadReq, stream: 3, addr: r.Addr, rkey: r.RKey, readLen: 32})[0]
			c.sendPkt(rd, tx{path: 2})
			c.readResponses(rd.h.MsgID, 32, true)
		}},
	{ID: "read-response", Clause: "9.3", Also: []string{"8.1", "4.1.2", "3.3"}, Needs: NeedMemory, Title: "READ_RESP packets: responder PSNs from its InitialPSN, the request's ids, MsgLen, offsets, ACK_REQ on the last",
		Run: func(t *T) {
			c := t.connect(connOpts{maxPayload: 512})
			r := t.rw()
			data := pattern(1500, 99)
			addr := r.Addr + 46000
			c.write(r, addr, data)
			rd := c.message(msg{op: wire.OpReadReq, stream: 2, addr: addr, rkey: r.RKey, readLen: 1500})[0]
			c.sendPkt(rd, tx{path: 1})
			got, hs := c.readResponses(rd.h.MsgID, 1500, true)
			sameBytes(t, got, data, "READ response")
			t.check(len(hs) == 3, "%d response packets for 1500 bytes at MaxPayload 512, want 3", len(hs))
			psns := map[wire.PSN]bool{}
			for _, h := range hs {
				t.check(h.Stream == 2 && h.StreamSeq == rd.h.StreamSeq && h.MsgLen == 1500 && h.RKey == 0 && h.RemoteAddr == 0,
					"READ_RESP fields stream %d seq %d len %d rkey %#x addr %#x", h.Stream, h.StreamSeq, h.MsgLen, h.RKey, h.RemoteAddr)
				psns[h.PSN] = true
				if int(h.Offset)+int(h.PayloadLen) == 1500 {
					t.check(h.Flags&wire.FlagAckReq != 0, "last READ_RESP without ACK_REQ")
				}
			}
			for i := 0; i < 3; i++ {
				t.check(psns[c.accept.InitialPSN+wire.PSN(i)], "READ_RESP PSNs do not start at the target's InitialPSN %s", hex32(uint32(c.accept.InitialPSN)))
			}
		}},
	{ID: "read-zero-length", Clause: "9.3", Needs: NeedMemory, Title: "a zero-length READ draws one empty READ_RESP with ACK_REQ",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey})[0]
			c.sendPkt(rd, tx{path: 1})
			_, hs := c.readResponses(rd.h.MsgID, 0, true)
			t.check(len(hs) == 1 && hs[0].PayloadLen == 0 && hs[0].MsgLen == 0 && hs[0].Flags&wire.FlagAckReq != 0, "zero-length READ response %+v", hs)
		}},
	{ID: "read-window", Clause: "5.3", Also: []string{"8.5"}, Needs: NeedMemory, Title: "the responder keeps new PSNs inside our RecvWindow (4) until we ack",
		Run: func(t *T) {
			c := t.connect(connOpts{recvWindow: 4, maxPayload: 256})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 10 * 256})[0]
			c.sendPkt(rd, tx{path: 1})
			// No acks for a while: retransmissions may come, new PSNs past
			// the window must not.
			got := t.collect(t.o.Quiet, func(r *rxPacket) bool { return c.isData()(r) && r.pkt.Data().Opcode() == wire.OpReadResp })
			t.check(len(got) > 0, "no READ_RESP")
			for _, g := range got {
				d := g.pkt.Data()
				t.check(int32(d.PSN()-c.accept.InitialPSN) < 4, "PSN %s sent beyond our window of 4", hex32(uint32(d.PSN())))
				g.used = false // serveRead takes them again
			}
			// Now ack as a receiver: the rest of the response flows.
			c.readResponses(rd.h.MsgID, 10*256, true)
		}},
	{ID: "read-retransmit-sack-hole", Clause: "8.3.2", Also: []string{"8.5", "8.1", "3.3"}, Needs: NeedMemory, Title: "a response packet our acks show missing is resent with RETX and ACK_REQ on a new path sequence",
		Run: func(t *T) {
			c := t.connect(connOpts{maxPayload: 256})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 6 * 256})[0]
			c.sendPkt(rd, tx{path: 1})
			// Pretend the first transmission of offset 0 never arrived;
			// ack everything else as it comes.
			var lost *wire.DataHeader
			var re *wire.DataHeader
			c.serveRead(rd.h.MsgID, 6*256, true, func(d wire.Data) bool {
				if d.Offset() != 0 {
					return false
				}
				if lost == nil {
					lost = &wire.DataHeader{}
					lost.Decode(d)
					return true
				}
				re = &wire.DataHeader{}
				re.Decode(d)
				return false
			})
			t.check(lost != nil && re != nil, "no retransmission of the first response packet")
			t.check(re.PSN == lost.PSN, "offset 0 came back with PSN %s, first %s", hex32(uint32(re.PSN)), hex32(uint32(lost.PSN)))
			t.check(re.Flags&(wire.FlagRetx|wire.FlagAckReq) == wire.FlagRetx|wire.FlagAckReq, "retransmission flags %#x, want RETX|ACK_REQ", re.Flags)
			t.check(re.PathID != lost.PathID || int32(re.PathSeq-lost.PathSeq) > 0, "retransmission reused path sequence %d of path %d", re.PathSeq, re.PathID)
		}},
	{ID: "read-retransmit-timeout", Clause: "8.4", Also: []string{"3.3", "4.2"}, Needs: NeedMemory, Title: "an unacknowledged response is resent after a timeout, with RETX",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 32})[0]
			c.sendPkt(rd, tx{path: 1})
			first := t.expect("READ_RESP", c.isData()).pkt.Data()
			start := time.Now()
			re := t.expect("retransmitted READ_RESP", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() == first.PSN()
			}).pkt.Data()
			t.Notef("resent after %v", time.Since(start).Round(time.Microsecond))
			t.check(re.Flags()&wire.FlagRetx != 0, "retransmission without RETX")
			t.check(re.Timestamp() > first.Timestamp(), "retransmission Timestamp %d not after the first's %d (§4.2: a new one, monotonic)", re.Timestamp(), first.Timestamp())
			c.record(first)
			c.record(re)
			c.ackPath(re.PathID())
		}},
	{ID: "read-rto-allows-hold", Clause: "8.4", Also: []string{"5.7", "8.7.4"}, Needs: NeedMemory, Title: "once an ack reported a 20 ms AckDelay, a response the peer does not answer is resent at most once (the tail probe) within 20 ms",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 32})[0]
			c.sendPkt(rd, tx{path: 1})
			first := t.expect("READ_RESP", c.isData()).pkt.Data()
			c.record(first)
			// Hold it, as a descheduled receiver would, and say so: the
			// ack's AckDelay is the time since it arrived.
			const hold = 20 * time.Millisecond
			time.Sleep(hold)
			c.ackPath(first.PathID())
			c.sync()
			rd = c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 32})[0]
			c.sendPkt(rd, tx{path: 1})
			resp := t.expect("second READ_RESP", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() != first.PSN()
			}).pkt.Data()
			again := func(r *rxPacket) bool { return c.isData()(r) && r.pkt.Data().PSN() == resp.PSN() }
			early := t.collect(hold*9/10, again)
			t.Notef("%d resends within %v", len(early), hold*9/10)
			t.check(len(early) <= 1, "%d resends within %v of a response, after the peer reported holding a packet %v: the RTO does not allow for the hold (§8.4)", len(early), hold*9/10, hold)
			re := t.expect("the response resent", again).pkt.Data()
			c.record(resp)
			c.record(re)
			c.ackPath(re.PathID())
		}},
	{ID: "read-cumulative-ack", Clause: "8.3.1", Needs: NeedMemory, Title: "an ack whose CumPSN covers the response ends it: nothing is resent",
		Run: func(t *T) {
			c := t.connect(connOpts{maxPayload: 256})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 3 * 256})[0]
			c.sendPkt(rd, tx{path: 1})
			_, hs := c.readResponses(rd.h.MsgID, 3*256, false)
			// One ack, on the path of the last response packet, whose CumPSN
			// covers every PSN; its SACK speaks only of that packet, so the
			// others are acknowledged by CumPSN alone.
			last := hs[len(hs)-1]
			h := wire.AckHeader{DstConn: c.Peer, CumPSN: c.cum, PathID: last.PathID, PathAckSeq: last.PathSeq,
				EchoPSN: last.PSN, EchoTimestamp: last.Timestamp, Credit: suiteRecvWindow}
			h.Sack[0] = 1
			t.send(wire.AppendAck(nil, &h), sendOpts{sport: entropyBase})
			c.sync()
			t.none("retransmission after a cumulative ack", func(r *rxPacket) bool { return c.isData()(r) && r.pkt.Data().Flags()&wire.FlagRetx != 0 })
		}},
	{ID: "read-bogus-ack-ignored", Clause: "5.7", Needs: NeedMemory, Title: "an ack with CumPSN after the sender's next PSN is dropped: the response is still resent",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 32})[0]
			c.sendPkt(rd, tx{path: 1})
			first := t.expect("READ_RESP", c.isData()).pkt.Data()
			h := wire.AckHeader{DstConn: c.Peer, CumPSN: first.PSN() + 1000, PathID: first.PathID(), PathAckSeq: first.PathSeq(), Credit: suiteRecvWindow}
			h.Sack[0] = 1
			t.send(wire.AppendAck(nil, &h), sendOpts{sport: entropyBase})
			re := t.expect("the response resent despite the bogus ack", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() == first.PSN()
			}).pkt.Data()
			c.record(re)
			c.ackPath(re.PathID())
		}},
	{ID: "read-nack-void", Clause: "6.3", Also: []string{"9.3"}, Needs: NeedMemory, Title: "a READ_RESP we refuse with INVALID_REQUEST is abandoned with a void packet (flags 0x0007)",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 32})[0]
			c.sendPkt(rd, tx{path: 1})
			d := t.expect("READ_RESP", c.isData()).pkt.Data()
			n := wire.NackHeader{DstConn: c.Peer, PSN: d.PSN(), PathID: d.PathID(), Reason: wire.NackInvalidRequest, PathSeq: d.PathSeq(),
				CumPSN: c.cum, EchoTimestamp: d.Timestamp()}
			t.send(wire.AppendNack(nil, &n), sendOpts{sport: entropyBase})
			v := t.expect("void packet for PSN "+hex32(uint32(d.PSN())), func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() == d.PSN() && r.pkt.Data().Flags()&wire.FlagVoid != 0
			}).pkt.Data()
			t.check(v.Flags() == wire.FlagVoid|wire.FlagRetx|wire.FlagAckReq && v.PayloadLen() == 0 && v.Opcode() == wire.OpReadResp && v.MsgID() == d.MsgID(),
				"void packet flags %#x payload %d opcode %v msg %d", v.Flags(), v.PayloadLen(), v.Opcode(), v.MsgID())
			c.record(v)
			c.ackPath(v.PathID())
		}},
}
