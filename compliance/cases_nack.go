package compliance

import (
	"github.com/metaroce/metaroce/wire"
)

// NACK reasons (§6), messages and streams (§9), memory protection (§10).

// void is the abandoning retransmission of p (§6.3 step 6).
func void(p *pkt) *pkt {
	v := *p
	v.payload = nil
	v.h.Flags = wire.FlagVoid | wire.FlagRetx | wire.FlagAckReq
	return &v
}

func checkNack(t *T, n wire.Nack, want wire.NackReason) {
	t.check(n.Reason() == want, "NACK %v, want %v", n.Reason(), want)
}

var nackCases = []Case{
	{ID: "nack-layout-rnr", Clause: "6.1", Also: []string{"6.2", "9.4"}, Needs: NeedMemory, Title: "a SEND to an unposted buffer draws NACK RNR: 44 bytes, the refused PSN, path, seq, CumPSN",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			rs := uint32(t.mem().Recv.Count + 5)
			p := c.message(msg{op: wire.OpSend, data: pattern(32, 60), recvSeq: rs, recvSet: true})[0]
			c.sendPkt(p, tx{path: 4, seq: 3, seqOK: true})
			r := t.expect("NACK RNR", c.isNack(p.h.PSN))
			n := r.pkt.Nack()
			t.check(len(r.b) == 44 && n.Flags() == 0, "NACK of %d bytes, flags %#x", len(r.b), n.Flags())
			checkNack(t, n, wire.NackRNR)
			t.check(n.PathID() == 4 && n.PathSeq() == 3, "NACK path %d seq %d, want 4 and 3", n.PathID(), n.PathSeq())
			t.check(n.CumPSN() == p.h.PSN, "NACK CumPSN %s, want %s", hex32(uint32(n.CumPSN())), hex32(uint32(p.h.PSN)))
			t.Notef("RNR Info (suggested delay) %d us", n.Info())
		}},
	{ID: "nack-once-per-transmission", Clause: "6.2", Needs: NeedMemory, Title: "one NACK per refused transmission: a resend draws a new one, nothing repeats on its own",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpSend, data: pattern(32, 61), recvSeq: uint32(t.mem().Recv.Count + 6), recvSet: true})[0]
			c.sendPkt(p, tx{path: 4})
			c.nack(p.h.PSN)
			t.none("a second NACK for one transmission", c.isNack(p.h.PSN))
			c.sendPkt(p, tx{path: 5, flags: wire.FlagRetx})
			checkNack(t, c.nack(p.h.PSN), wire.NackRNR)
		}},
	{ID: "nack-bad-key", Clause: "10.3", Also: []string{"6.2"}, Title: "a WRITE with an unknown RKey draws NACK REMOTE_ACCESS with Info 0",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: 0x1000, rkey: 0x0badc0de, data: pattern(16, 62)})[0]
			if m := t.o.Memory; m != nil {
				for _, r := range m.Regions {
					if r.RKey == p.h.RKey {
						p.h.RKey ^= 0x80000000
					}
				}
			}
			c.sendPkt(p, tx{path: 1})
			n := c.nack(p.h.PSN)
			checkNack(t, n, wire.NackRemoteAccess)
			t.check(n.Info() == 0, "REMOTE_ACCESS Info %d", n.Info())
		}},
	{ID: "nack-range", Clause: "10.3", Needs: NeedMemory, Title: "a WRITE whose message range ends past the region draws REMOTE_ACCESS and writes nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			end := r.Addr + uint64(r.Len)
			old := c.readBack(r, end-64, 64)
			// The first packet lies inside; the message (MsgLen) does not.
			ps := c.message(msg{op: wire.OpWrite, addr: end - 64, rkey: r.RKey, data: pattern(128, 63), chunk: 64})
			c.sendPkt(ps[0], tx{path: 1})
			checkNack(t, c.nack(ps[0].h.PSN), wire.NackRemoteAccess)
			sameBytes(t, c.readBack(r, end-64, 64), old, "region after a refused WRITE")
		}},
	{ID: "nack-right-write", Clause: "10.2", Also: []string{"10.3"}, Needs: NeedMemory, Title: "a WRITE to a region without remote write draws REMOTE_ACCESS",
		Run: func(t *T) {
			ro, ok := t.mem().region(true, false)
			if !ok {
				t.Skipf("the target exposes no read-only region")
			}
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: ro.Addr, rkey: ro.RKey, data: pattern(16, 64)})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackRemoteAccess)
		}},
	{ID: "nack-right-read", Clause: "10.2", Also: []string{"9.3"}, Needs: NeedMemory, Title: "a READ of a region without remote read draws REMOTE_ACCESS and no response",
		Run: func(t *T) {
			wo, ok := t.mem().region(false, true)
			if !ok {
				t.Skipf("the target exposes no write-only region")
			}
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpReadReq, addr: wo.Addr, rkey: wo.RKey, readLen: 16})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackRemoteAccess)
			v := void(p)
			c.sendPkt(v, tx{path: 2})
			c.ack(2, v.h.PathSeq)
			t.none("READ_RESP for a refused READ", c.isData())
		}},
	{ID: "nack-later-packets-refused", Clause: "10.3", Also: []string{"9.1", "6.2"}, Needs: NeedMemory, Title: "after a message fails, its later packets are refused too (REMOTE_ACCESS or INVALID_REQUEST)",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			ps := c.message(msg{op: wire.OpWrite, addr: 0x1000, rkey: 0x0badc0de, data: pattern(900, 65), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1})
			checkNack(t, c.nack(ps[0].h.PSN), wire.NackRemoteAccess)
			c.sendPkt(ps[1], tx{path: 1})
			n := c.nack(ps[1].h.PSN)
			t.check(n.Reason() == wire.NackRemoteAccess || n.Reason() == wire.NackInvalidRequest, "later packet NACK %v", n.Reason())
		}},
	{ID: "nack-not-consumed", Clause: "6.2", Also: []string{"8.2"}, Title: "a refused PSN is not consumed: CumPSN stops at it",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: 0x1000, rkey: 0x0badc0de, data: pattern(16, 66)})[0]
			c.sendPkt(p, tx{path: 1})
			c.nack(p.h.PSN)
			t.check(c.cumNow() == p.h.PSN, "CumPSN %s after a refusal of %s", hex32(uint32(c.cumNow())), hex32(uint32(p.h.PSN)))
		}},
	{ID: "void-consumed", Clause: "6.3", Also: []string{"8.2", "3.3"}, Needs: NeedMemory, Title: "the void packet abandoning a refused PSN is consumed and places nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(16)
			old := c.readBack(r, addr, 16)
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey ^ 0x40000000, data: pattern(16, 67)})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackRemoteAccess)
			v := void(p)
			c.sendPkt(v, tx{path: 2})
			a := c.ack(2, v.h.PathSeq)
			t.check(a.CumPSN() == p.h.PSN+1, "void packet not consumed: CumPSN %s", hex32(uint32(a.CumPSN())))
			sameBytes(t, c.readBack(r, addr, 16), old, "memory after a void packet")
		}},
	{ID: "void-fresh-psn", Clause: "8.2", Title: "a void packet for a PSN never seen is consumed without looking at its message",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, stream: 60000, addr: 0x42, rkey: 0x77, data: pattern(16, 68)})[0]
			v := void(p)
			c.sendPkt(v, tx{path: 1})
			a := c.ack(1, v.h.PathSeq)
			t.check(a.CumPSN() == p.h.PSN+1, "void packet not consumed: CumPSN %s", hex32(uint32(a.CumPSN())))
		}},
	{ID: "nack-invalid-stream", Clause: "6.2", Also: []string{"9.1"}, Needs: NeedMemory, Title: "a message on stream 65535 draws INVALID_REQUEST",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			p := c.message(msg{op: wire.OpWrite, stream: 0xffff, addr: r.Addr, rkey: r.RKey, data: pattern(16, 69)})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackInvalidRequest)
		}},
	{ID: "nack-send-too-long", Clause: "9.4", Also: []string{"6.2"}, Needs: NeedMemory, Title: "a SEND longer than its buffer draws INVALID_REQUEST at its first packet",
		Run: func(t *T) {
			m := t.mem()
			if m.Recv.Count == 0 {
				t.Skipf("no receive buffers")
			}
			c := t.connect(connOpts{})
			ps := c.message(msg{op: wire.OpSend, data: pattern(m.Recv.Size+300, 70), chunk: 300})
			c.sendPkt(ps[len(ps)-1], tx{path: 1})
			checkNack(t, c.nack(ps[len(ps)-1].h.PSN), wire.NackInvalidRequest)
		}},
	{ID: "nack-read-resp-unsolicited", Clause: "9.3", Also: []string{"6.2"}, Title: "a READ_RESP for no outstanding READ draws INVALID_REQUEST",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpReadResp, data: pattern(16, 71)})[0]
			p.h.RKey, p.h.RemoteAddr = 0, 0
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackInvalidRequest)
		}},
	{ID: "nack-out-of-window", Clause: "6.2", Also: []string{"5.3", "8.2"}, Title: "PSN = CumPSN + RecvWindow draws OUT_OF_WINDOW with Info = the window; one less is accepted",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			w := c.accept.RecvWindow
			p := c.validWrite(pattern(8, 72))
			p.h.PSN = c.InitPSN + wire.PSN(w)
			c.sendPkt(p, tx{path: 1})
			n := c.nack(p.h.PSN)
			checkNack(t, n, wire.NackOutOfWindow)
			t.check(n.Info() == w, "OUT_OF_WINDOW Info %d, want the window %d", n.Info(), w)
			q := c.validWrite(pattern(8, 73))
			q.h.PSN = c.InitPSN + wire.PSN(w) - 1
			c.sendPkt(q, tx{path: 2})
			a := c.ack(2, q.h.PathSeq)
			t.check(a.CumPSN() == c.InitPSN, "CumPSN %s", hex32(uint32(a.CumPSN())))
		}},
	{ID: "nack-slot-busy", Clause: "9.1", Also: []string{"6.2"}, Needs: NeedMemory, Title: "a new message whose MsgID slot holds an unfinished one draws OUT_OF_WINDOW, Info 0",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWrite, addr: r.Addr + 40000, rkey: r.RKey, data: pattern(600, 74), chunk: 300})
			c.sendPkt(ps[0], tx{path: 1}) // message 0 stays unfinished
			mw := uint32(c.accept.MsgWindow)
			q := c.message(msg{op: wire.OpWrite, stream: 1, addr: r.Addr + 41000, rkey: r.RKey, data: pattern(16, 75), msgID: mw, idSet: true})[0]
			c.sendPkt(q, tx{path: 2})
			n := c.nack(q.h.PSN)
			checkNack(t, n, wire.NackOutOfWindow)
			t.check(n.Info() == 0, "slot-busy OUT_OF_WINDOW Info %d, want 0", n.Info())
		}},
	{ID: "nack-stream-seq-passed", Clause: "9.1", Also: []string{"6.2"}, Needs: NeedMemory, Title: "a new message with a StreamSeq its stream has passed draws INVALID_REQUEST",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			c.write(r, r.Addr+42000, pattern(16, 76))
			p := c.message(msg{op: wire.OpWrite, addr: r.Addr + 42000, rkey: r.RKey, data: pattern(16, 77), streamSeq: 0, seqSet: true})[0]
			c.sendPkt(p, tx{path: 1})
			checkNack(t, c.nack(p.h.PSN), wire.NackInvalidRequest)
		}},
	{ID: "nack-never-sequence", Clause: "6.2", Also: []string{"8.2"}, Needs: NeedMemory, Title: "a MetaRoCE receiver never sends NACK SEQUENCE, whatever the order",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			ps := c.message(msg{op: wire.OpWrite, addr: r.Addr + 43000, rkey: r.RKey, data: pattern(1200, 78), chunk: 300})
			for _, i := range []int{3, 1, 2, 0} {
				c.sendPkt(ps[i], tx{path: uint16(i)})
			}
			c.ack(0, ps[0].h.PathSeq)
			t.none("NACK SEQUENCE", func(r *rxPacket) bool {
				return c.anyFor()(r) && r.pkt.Class == wire.ClassNack && r.pkt.Nack().Reason() == wire.NackSequence
			})
		}},
	{ID: "flush-on-reset", Clause: "9.5", Needs: NeedEvents, Title: "a connection reset by its peer completes its posted receive buffers with an error",
		Run: func(t *T) {
			if t.mem().Recv.Count == 0 {
				t.Skipf("no receive buffers")
			}
			c := t.connect(connOpts{})
			c.cumNow()
			h := wire.ConnHeader{Opcode: wire.OpReset, SrcConn: c.ID, Reason: wire.ReasonUnknownConn, Timestamp: stamp(), ResetToken: c.resetTok}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			c.Peer = 0
			ev := c.eventually("flushed receive buffers", func(ev []Event) bool { return len(ev) > 0 })
			for _, e := range ev {
				t.check(e.Status != "ok", "a buffer completed ok after a RESET: %+v", e)
			}
		}},
}
