package compliance

import (
	"time"

	"github.com/metaroce/metaroce/wire"
)

// The target as a sender: how it treats our acks and NACKs of its READ
// responses (§5.1, §5.3, §6.1, §6.3).

// readStart sends a one-packet READ and returns the first response
// packet, not acknowledged.
func (c *Conn) readStart(n uint32) wire.Data {
	r := c.t.rw()
	rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: n})[0]
	c.sendPkt(rd, tx{path: 1})
	return c.t.expect("READ_RESP", c.isData()).pkt.Data()
}

// sync makes sure the target has processed what the suite sent before:
// a PROBE from the same source port is acknowledged at once (§4.4), and
// packets of one 5-tuple stay in order. Data packets the target sent
// before that (a retransmission already on its way when our ack or NACK
// arrived) are set aside, so that a check afterwards sees only what the
// target did after it heard us.
func (c *Conn) sync() {
	p := &pkt{h: wire.DataHeader{Opcode: wire.OpProbe, Flags: wire.FlagAckReq}}
	c.sendPkt(p, tx{path: 15, sport: entropyBase})
	c.ack(15, p.h.PathSeq)
	for c.t.pull(time.Time{}) {
	}
	for _, r := range c.t.seen {
		if c.isData()(r) {
			r.used = true
		}
	}
}

func (c *Conn) nackData(d wire.Data, reason wire.NackReason, info uint32) []byte {
	n := wire.NackHeader{DstConn: c.Peer, PSN: d.PSN(), PathID: d.PathID(), Reason: reason, PathSeq: d.PathSeq(),
		CumPSN: c.cum, EchoTimestamp: d.Timestamp(), Info: info}
	return wire.AppendNack(nil, &n)
}

var senderCases = []Case{
	{ID: "sender-nack-not-outstanding", Clause: "6.3", Needs: NeedMemory, Title: "NACKs of a PSN already acknowledged, or never sent, are ignored: no void packet",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			d := c.readStart(32)
			c.record(d)
			c.ackPath(d.PathID())
			c.sync()
			t.send(c.nackData(d, wire.NackInvalidRequest, 0), sendOpts{sport: entropyBase})
			n := wire.NackHeader{DstConn: c.Peer, PSN: d.PSN() + 100, Reason: wire.NackRemoteAccess, CumPSN: c.cum}
			t.send(wire.AppendNack(nil, &n), sendOpts{sport: entropyBase})
			t.none("void packet after a NACK of nothing outstanding", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().Flags()&wire.FlagVoid != 0
			})
		}},
	{ID: "sender-ack-malformed-ignored", Clause: "5.1", Needs: NeedMemory, Title: "an ack with SACK bit 0 clear (FIELD) is dropped: the response is resent",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			d := c.readStart(32)
			h := wire.AckHeader{DstConn: c.Peer, CumPSN: d.PSN() + 1, PathID: d.PathID(), PathAckSeq: d.PathSeq(), Credit: suiteRecvWindow}
			b := wire.AppendAck(nil, &h) // SACK all clear
			t.send(b, sendOpts{sport: entropyBase})
			re := t.expect("the response resent despite the malformed ack", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() == d.PSN()
			}).pkt.Data()
			c.record(re)
			c.ackPath(re.PathID())
		}},
	{ID: "sender-nack-malformed-ignored", Clause: "6.1", Needs: NeedMemory, Title: "a NACK with a reserved byte set is dropped: no void packet follows",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			d := c.readStart(32)
			b := c.nackData(d, wire.NackInvalidRequest, 0)
			b[15] = 1
			wire.Seal(b)
			t.send(b, sendOpts{sport: entropyBase})
			t.none("void packet after a malformed NACK", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().Flags()&wire.FlagVoid != 0
			})
			c.record(d)
			c.ackPath(d.PathID())
		}},
	{ID: "sender-rnr-delay", Clause: "6.3", Needs: NeedMemory, Title: "after NACK RNR with Info 20000 us, the response is not resent before 20 ms, then resent with RETX",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			d := c.readStart(32)
			var sent time.Time
			for try := 1; ; try++ {
				sent = time.Now()
				t.send(c.nackData(d, wire.NackRNR, 20000), sendOpts{sport: entropyBase})
				c.sync()
				// If the target's timer resent the response before our
				// NACK arrived (the suite, on a loaded host, can take
				// milliseconds to answer), the NACK names an older
				// transmission than the one out, which §6.3 step 4 has
				// the target ignore: the newer one draws its own answer.
				// NACK the newest transmission instead.
				newest := d
				for _, r := range t.seen {
					if r.err == nil && r.pkt.Class == wire.ClassData && r.pkt.Data().DstConn() == c.ID && r.pkt.Data().PSN() == d.PSN() {
						newest = r.pkt.Data()
					}
				}
				if newest.PathID() == d.PathID() && newest.PathSeq() == d.PathSeq() {
					break
				}
				if try == 5 {
					t.Fatalf("the target resent the response before each of %d NACKs arrived", try)
				}
				t.Notef("the target resent the response (path %d seq %d) before our NACK of path %d seq %d arrived: NACKing that one",
					newest.PathID(), newest.PathSeq(), d.PathID(), d.PathSeq())
				d = newest
			}
			// The target counts the delay from when it got the NACK, which
			// is after we sent it: an arrival earlier than 20 ms after the
			// send is early whatever the machine's load.
			re := t.expect("the response resent after the RNR delay", func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() == d.PSN()
			})
			t.check(!re.at.Before(sent.Add(20*time.Millisecond)), "resent %v after an RNR that asked for 20 ms", re.at.Sub(sent).Round(time.Microsecond))
			t.Notef("resent %v after the RNR", re.at.Sub(sent).Round(time.Microsecond))
			t.check(re.pkt.Data().Flags()&wire.FlagRetx != 0, "resend without RETX")
			c.record(re.pkt.Data())
			c.ackPath(re.pkt.Data().PathID())
		}},
	{ID: "sender-unsupported-version-fails", Clause: "6.3", Also: []string{"7.3"}, Needs: NeedMemory, Title: "NACK UNSUPPORTED_VERSION fails the connection at once: its id then draws RESET",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			d := c.readStart(32)
			n := wire.NackHeader{DstConn: c.Peer, PSN: 12345, Reason: wire.NackUnsupportedVersion, CumPSN: c.cum, Info: 1}
			t.send(wire.AppendNack(nil, &n), sendOpts{sport: entropyBase})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			peer := c.Peer
			c.record(d)
			c.ackPath(d.PathID())
			checkReset(t, t.expect("RESET for the failed connection", isResetFor(peer)), peer)
			c.Peer = 0
		}},
	{ID: "sender-credit", Clause: "5.3", Also: []string{"5.7"}, Needs: NeedMemory, Title: "a Credit of 2 in our acks keeps the responder within 2 unacknowledged PSNs",
		Run: func(t *T) {
			c := t.connect(connOpts{maxPayload: 256})
			c.credit = 2
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 64})[0]
			c.sendPkt(rd, tx{path: 1})
			c.readResponses(rd.h.MsgID, 64, true) // its ack carries Credit 2
			rd = c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 8 * 256})[0]
			c.sendPkt(rd, tx{path: 1})
			una := c.cum
			got := t.collect(t.o.Quiet, func(r *rxPacket) bool { return c.isData()(r) && r.pkt.Data().Opcode() == wire.OpReadResp })
			t.check(len(got) > 0, "no READ_RESP")
			for _, g := range got {
				d := g.pkt.Data()
				t.check(int32(d.PSN()-una) < 2, "PSN %s sent with una %s and our Credit 2", hex32(uint32(d.PSN())), hex32(uint32(una)))
				g.used = false
			}
			c.credit = 0
			c.readResponses(rd.h.MsgID, 8*256, true)
		}},
	{ID: "sender-hole-repair", Clause: "8.10", Also: []string{"8.3.1", "13"}, Needs: NeedMemory,
		Title: "after an ack whose CumPSN covered a response we lack, the ack of a later response proves the hole: the target voids the PSN with a zero-field WRITE (flags 0x0007), and only once",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			d := c.readStart(32)
			// Acknowledge the response without keeping it, as a forged
			// ack does (§13): the target now holds PSN d delivered.
			h := wire.AckHeader{DstConn: c.Peer, CumPSN: d.PSN() + 1, PathID: d.PathID(), PathAckSeq: d.PathSeq(),
				Credit: suiteRecvWindow}
			h.Sack[0] = 1
			t.send(wire.AppendAck(nil, &h), sendOpts{sport: entropyBase + d.PathID()})
			c.sync()
			// A second response, sent after the target's una passed d:
			// our honest ack of it carries CumPSN d and echoes it.
			d2 := c.readStart(32)
			c.record(d2)
			t.check(c.cum == d.PSN(), "our CumPSN %s, want the hole %s", hex32(uint32(c.cum)), hex32(uint32(d.PSN())))
			c.ackPath(d2.PathID())
			isVoid := func(r *rxPacket) bool {
				return c.isData()(r) && r.pkt.Data().PSN() == d.PSN() && r.pkt.Data().Flags()&wire.FlagVoid != 0
			}
			v := t.expect("a repair void of the PSN our CumPSN names", isVoid).pkt.Data()
			t.check(v.Flags() == wire.FlagVoid|wire.FlagRetx|wire.FlagAckReq, "repair void flags %#04x, want 0x0007", v.Flags())
			t.check(v.Opcode() == wire.OpWrite, "repair void opcode %v, want WRITE", v.Opcode())
			t.check(v.Stream() == 0 && v.MsgID() == 0 && v.StreamSeq() == 0 && v.Offset() == 0 && v.MsgLen() == 0 &&
				v.RemoteAddr() == 0 && v.RKey() == 0 && v.Imm() == 0 && v.PayloadLen() == 0,
				"repair void fields: stream %d msg %d seq %d offset %d len %d addr %#x rkey %#x imm %#x payload %d; want all zero",
				v.Stream(), v.MsgID(), v.StreamSeq(), v.Offset(), v.MsgLen(), v.RemoteAddr(), v.RKey(), v.Imm(), v.PayloadLen())
			c.record(v)
			c.ackPath(v.PathID())
			t.check(c.cum == d2.PSN()+1, "our CumPSN %s after the void, want %s", hex32(uint32(c.cum)), hex32(uint32(d2.PSN()+1)))
			t.none("a second repair void once our CumPSN passed the hole", isVoid)
			// The target goes on: a third READ is served and acknowledged.
			d3 := c.readStart(32)
			t.check(d3.PSN() == d2.PSN()+1, "next response PSN %s, want %s", hex32(uint32(d3.PSN())), hex32(uint32(d2.PSN()+1)))
			c.record(d3)
			c.ackPath(d3.PathID())
		}},
}
