package compliance

import (
	"github.com/metaroce/metaroce/wire"
)

// Acknowledgements (§5): layout, the per-path state and its SACK bitmap,
// credit, CE counts, when acks are sent, the entropy echo, rate hints.

var ackCases = []Case{
	{ID: "ack-layout", Clause: "5.1", Also: []string{"5.3", "1.3"}, Title: "an ack is 84 bytes, flags 0, addressed to us, SACK bit 0 set, Credit = the RecvWindow announced",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 30))
			c.sendPkt(p, tx{path: 1})
			r := t.expect("ack", c.isAckSeq(1, p.h.PathSeq))
			a := r.pkt.Ack()
			t.check(len(r.b) == 84 && a.Flags() == 0, "ack of %d bytes, flags %#x", len(r.b), a.Flags())
			t.check(a.Received(0), "SACK bit 0 clear")
			t.check(a.Credit() == c.accept.RecvWindow, "Credit %d, want the RecvWindow %d of the ACCEPT", a.Credit(), c.accept.RecvWindow)
		}},
	{ID: "ack-sack-gaps", Clause: "5.2", Also: []string{"5.1", "1.3"}, Title: "the SACK bitmap shows exactly the path sequences that arrived (0,1,3,5 of 0..5)",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			for _, s := range []uint32{0, 1, 3, 5} {
				p := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}
				c.sendPkt(p, tx{path: 7, seq: s, seqOK: true})
				if s == 5 {
					a := c.ack(7, 5)
					t.check(a.PathAckSeq() == 5, "PathAckSeq %d, want 5", a.PathAckSeq())
					// bit i = seq 5-i: 5 yes, 4 no, 3 yes, 2 no, 1 yes, 0 yes.
					t.check(sackBits(a, 8) == "10101100", "SACK bits 0..7 %s, want 10101100", sackBits(a, 8))
				}
			}
		}},
	{ID: "ack-sack-late-arrival", Clause: "5.2", Title: "a late path sequence sets its bit without moving PathAckSeq or the echo",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p10 := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}
			c.sendPkt(p10, tx{path: 8, seq: 10, seqOK: true})
			c.ack(8, 10)
			p8 := c.validWrite(pattern(8, 31))
			c.sendPkt(p8, tx{path: 8, seq: 8, seqOK: true})
			a := t.expect("ack after the late packet", func(r *rxPacket) bool { return c.isAck(8)(r) && r.pkt.Ack().Received(2) }).pkt.Ack()
			t.check(a.PathAckSeq() == 10 && a.EchoTimestamp() == p10.h.Timestamp && a.EchoPSN() == 0, "ack seq %d echo %d, want 10 and the PROBE's echo", a.PathAckSeq(), a.EchoTimestamp())
			t.check(sackBits(a, 3) == "101", "SACK %s, want 101", sackBits(a, 3))
		}},
	{ID: "ack-sack-shift", Clause: "5.2", Title: "a path sequence 300 ahead shifts the bitmap: only bit 0 remains",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 9, seq: 0, seqOK: true})
			c.ack(9, 0)
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 9, seq: 300, seqOK: true})
			a := c.ack(9, 300)
			for i := uint32(1); i < 256; i++ {
				t.check(!a.Received(i), "SACK bit %d set after a jump of 300", i)
			}
			// 256 or more behind the highest: nothing is recorded.
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 9, seq: 40, seqOK: true})
			r := t.wait(t.o.Timeout, c.isAck(9))
			if r != nil {
				a = r.pkt.Ack()
				t.check(a.PathAckSeq() == 300 && sackBits(a, 2) == "10", "a transmission 260 behind was recorded: seq %d SACK %s", a.PathAckSeq(), sackBits(a, 2))
			}
		}},
	{ID: "ack-per-path", Clause: "5.2", Also: []string{"5.5"}, Title: "each path has its own state: acks of two paths report their own sequences",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 1, seq: 4, seqOK: true})
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 2, seq: 9, seqOK: true})
			a1, a2 := c.ack(1, 4), c.ack(2, 9)
			t.check(a1.PathAckSeq() == 4 && a2.PathAckSeq() == 9, "path 1 seq %d, path 2 seq %d, want 4 and 9", a1.PathAckSeq(), a2.PathAckSeq())
		}},
	{ID: "ack-pathid-over-max", Clause: "5.2", Title: "a packet with PathID 65535 (at least any MaxPathID) draws nothing and is not consumed",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 32))
			c.mustDrop(c.encode(p, tx{path: 0xffff}), tx{path: 0xffff, sport: entropyBase + 20}, "PathID 65535")
		}},
	{ID: "ack-ce-count", Clause: "5.4", Also: []string{"2.4"}, Title: "CECount counts the CE-marked packets of the path since its last ack, then restarts",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			for i := 0; i < 3; i++ {
				p := c.validWrite(pattern(8, byte(40+i)))
				p.h.Flags = 0 // coalesced: the count must add up over acks
				c.sendPkt(p, tx{path: 10, ce: true})
			}
			p := c.validWrite(pattern(8, 43))
			c.sendPkt(p, tx{path: 10})
			acks := t.collect(t.o.Quiet*2, c.isAck(10))
			total := 0
			for _, r := range acks {
				total += int(r.pkt.Ack().CECount())
			}
			t.check(total == 3, "CECount over the path's acks %d, want 3", total)
			p = c.validWrite(pattern(8, 44))
			c.sendPkt(p, tx{path: 10})
			a := c.ack(10, p.h.PathSeq)
			t.check(a.CECount() == 0, "CECount %d after an unmarked packet, want 0 (reset at the last ack)", a.CECount())
		}},
	{ID: "ack-ce-not-dropped", Clause: "2.4", Needs: NeedMemory, Title: "a CE-marked WRITE is accepted and placed, not dropped",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r, addr := t.scratch(32)
			data := pattern(32, 45)
			p := c.message(msg{op: wire.OpWrite, addr: addr, rkey: r.RKey, data: data})[0]
			c.sendPkt(p, tx{path: 11, ce: true})
			a := c.ack(11, p.h.PathSeq)
			t.check(a.CumPSN() == c.next, "CE-marked WRITE not accepted")
			sameBytes(t, c.readBack(r, addr, 32), data, "CE-marked WRITE")
		}},
	{ID: "ack-ce-duplicate", Clause: "5.4", Title: "a CE-marked duplicate is counted",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 46))
			c.sendPkt(p, tx{path: 12})
			c.ack(12, p.h.PathSeq)
			c.sendPkt(p, tx{path: 12, ce: true})
			a := c.ack(12, p.h.PathSeq)
			t.check(a.CECount() == 1, "CECount %d after a CE-marked duplicate, want 1", a.CECount())
		}},
	{ID: "ack-coalesced-delivered", Clause: "5.5", Title: "a packet without ACK_REQ is still acknowledged (AckEvery or AckDelay)",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 47))
			p.h.Flags = 0
			c.sendPkt(p, tx{path: 13})
			a := c.ack(13, p.h.PathSeq)
			t.check(a.CumPSN() == c.next, "CumPSN %s", hex32(uint32(a.CumPSN())))
		}},
	{ID: "ack-duplicate-at-once", Clause: "5.5", Also: []string{"8.2"}, Title: "a duplicate without ACK_REQ is acknowledged at once",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(8, 48))
			c.sendPkt(p, tx{path: 13})
			c.ack(13, p.h.PathSeq)
			p.h.Flags = 0
			c.sendPkt(p, tx{path: 13})
			c.ack(13, p.h.PathSeq)
		}},
	{ID: "ack-refused-not-recorded", Clause: "5.5", Also: []string{"6.2", "5.2"}, Title: "a refused packet is not acknowledged and its path sequence stays clear in the SACK",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.message(msg{op: wire.OpWrite, addr: 0x10, rkey: 0xbadbad01, data: pattern(8, 49)})[0]
			c.sendPkt(p, tx{path: 14, seq: 0, seqOK: true})
			c.nack(p.h.PSN)
			c.sendPkt(&pkt{h: wire.DataHeader{Opcode: wire.OpProbe}}, tx{path: 14, seq: 1, seqOK: true})
			a := c.ack(14, 1)
			t.check(sackBits(a, 2) == "10", "SACK %s: the refused transmission is reported as arrived", sackBits(a, 2))
			t.check(a.CumPSN() == p.h.PSN, "CumPSN %s moved past the refused PSN %s", hex32(uint32(a.CumPSN())), hex32(uint32(p.h.PSN)))
		}},
	{ID: "ack-entropy-echo", Clause: "5.5", Also: []string{"2.3"}, Level: Should, Title: "a path's ack carries the source port of the path's latest packet",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			const sport = 51234
			p := c.validWrite(pattern(8, 50))
			c.sendPkt(p, tx{path: 3, sport: sport})
			r := t.expect("ack", c.isAckSeq(3, p.h.PathSeq))
			t.check(r.from.Port() == sport, "ack from source port %d, want the data's entropy %d", r.from.Port(), sport)
		}},
	{ID: "ack-rate-hint", Clause: "5.1", Also: []string{"8.9.3"}, Level: Should, Title: "two equal senders at once get hints within a factor of two of each other",
		Run: func(t *T) {
			c1, c2 := t.connect(connOpts{}), t.connect(connOpts{})
			rounds, both := 0, 0
			for i := 0; i < 40; i++ {
				// Both connections busy in the same few microseconds: a
				// receiver hints only while two or more are active (§8.9.3).
				p1, p2 := c1.validWrite(pattern(256, byte(i))), c2.validWrite(pattern(256, byte(i)))
				c1.sendPkt(p1, tx{path: 1})
				c2.sendPkt(p2, tx{path: 1})
				h1, h2 := c1.ack(1, p1.h.PathSeq).RateHint(), c2.ack(1, p2.h.PathSeq).RateHint()
				rounds++
				if h1 == 0 || h2 == 0 {
					continue
				}
				both++
				t.check(max(h1, h2) <= 2*min(h1, h2), "equal senders hinted %d and %d Mb/s in one round", h1, h2)
			}
			if both == 0 {
				t.Skipf("no round of %d drew hints for both connections (a target may not hint: 0 means no hint)", rounds)
			}
			t.Notef("%d of %d rounds hinted both connections", both, rounds)
		}},
}
