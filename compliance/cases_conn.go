package compliance

import (
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Connection set-up and teardown (§7), unknown and stale ids (§7.6),
// stateless replies (§7.8).

func isConnTo(id uint32, op wire.Opcode) func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassConn && r.pkt.Conn().Opcode() == op && r.pkt.Conn().DstConn() == id
	}
}

func isConnOp(op wire.Opcode) func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassConn && r.pkt.Conn().Opcode() == op
	}
}

func isResetFor(id uint32) func(*rxPacket) bool {
	return func(r *rxPacket) bool {
		return r.err == nil && r.pkt.Class == wire.ClassConn && r.pkt.Conn().Opcode() == wire.OpReset && r.pkt.Conn().SrcConn() == id
	}
}

func checkReset(t *T, r *rxPacket, id uint32) {
	c := r.pkt.Conn()
	t.check(c.DstConn() == 0, "RESET DstConn %s, want 0", hex32(c.DstConn()))
	t.check(c.SrcConn() == id, "RESET SrcConn %s, want the unknown id %s", hex32(c.SrcConn()), hex32(id))
	t.check(c.Reason() == wire.ReasonUnknownConn, "RESET reason %d, want UNKNOWN_CONN", c.Reason())
}

var connCases = []Case{
	{ID: "conn-challenge", Clause: "7.3", Also: []string{"7.1", "7.4"}, Title: "CONNECT with a zero cookie draws a CHALLENGE echoing SrcConn, Service and Timestamp",
		Run: func(t *T) {
			c := t.dial(connOpts{})
			r := t.expectConn(c.ID, wire.OpChallenge)
			h := r.pkt.Conn()
			t.check(len(r.b) == 88, "CHALLENGE is %d bytes, want 88", len(r.b))
			t.check(h.SrcConn() == 0, "CHALLENGE SrcConn %s, want 0", hex32(h.SrcConn()))
			t.check(h.Service() == t.o.Service, "CHALLENGE Service %s, want the CONNECT's", hex32(h.Service()))
			t.check(h.Flags() == 0, "CHALLENGE flags %#x", h.Flags())
			zero := true
			for _, b := range h.Cookie() {
				zero = zero && b == 0
			}
			t.check(!zero, "CHALLENGE cookie is zero")
			t.check(h.Timestamp() == c.connectTS, "CHALLENGE Timestamp %d, want the CONNECT's %d", h.Timestamp(), c.connectTS)
		}},
	{ID: "conn-accept", Clause: "7.3", Also: []string{"7.2", "7.1"}, Title: "CONNECT with the cookie draws an ACCEPT with valid parameters",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			a := c.accept
			t.check(a.SrcConn != 0, "ACCEPT SrcConn 0")
			t.check(a.Service == t.o.Service, "ACCEPT Service %s, want %s", hex32(a.Service), hex32(t.o.Service))
			t.check(a.RecvWindow >= 1 && a.RecvWindow <= 65536 && a.RecvWindow&(a.RecvWindow-1) == 0, "ACCEPT RecvWindow %d not a power of two in 1..65536", a.RecvWindow)
			t.check(a.MsgWindow >= 1 && a.MsgWindow <= 32768 && a.MsgWindow&(a.MsgWindow-1) == 0, "ACCEPT MsgWindow %d not a power of two in 1..32768", a.MsgWindow)
			t.check(a.MaxPayload >= 256, "ACCEPT MaxPayload %d below 256", a.MaxPayload)
			t.check(a.Timestamp != 0, "ACCEPT without the sender's clock in Timestamp")
			t.check(a.Flags == 0, "ACCEPT flags %#x", a.Flags)
			t.Notef("target: RecvWindow %d, MsgWindow %d, MaxPayload %d, Paths %d", a.RecvWindow, a.MsgWindow, a.MaxPayload, a.Paths)
		}},
	{ID: "conn-no-service", Clause: "7.5", Also: []string{"7.3"}, Title: "CONNECT for a service not served is challenged like any other, and with the cookie draws REJECT NO_SERVICE",
		Run: func(t *T) {
			o := connOpts{service: t.o.Service ^ 0x5a5a0000}
			c := t.dial(o)
			ch := t.expectConn(c.ID, wire.OpChallenge) // the first step says nothing about services
			copy(c.cookie[:], ch.pkt.Conn().Cookie())
			c.sendConnect(o, c.cookie)
			r := t.expectConn(c.ID, wire.OpReject)
			t.check(r.pkt.Conn().Reason() == wire.ReasonNoService, "REJECT reason %d, want NO_SERVICE", r.pkt.Conn().Reason())
			t.check(r.pkt.Conn().SrcConn() == 0, "REJECT SrcConn %s, want 0", hex32(r.pkt.Conn().SrcConn()))
			t.check(len(r.b) == 88, "REJECT is %d bytes, want 88", len(r.b))
			t.none("no ACCEPT for an unserved service", isConnTo(c.ID, wire.OpAccept))
		}},
	{ID: "conn-wrong-token", Clause: "7.3", Also: []string{"7.5", "13"}, Title: "a CONNECT with the cookie but another token than the service's draws the same REJECT NO_SERVICE as a missing service",
		Run: func(t *T) {
			// The target's service is public (token 0): token 1 is wrong.
			reject := func(o connOpts) *rxPacket {
				c := t.dial(o)
				ch := t.expectConn(c.ID, wire.OpChallenge)
				copy(c.cookie[:], ch.pkt.Conn().Cookie())
				c.sendConnect(o, c.cookie)
				r := t.expectConn(c.ID, wire.OpReject)
				t.none("no ACCEPT", isConnTo(c.ID, wire.OpAccept))
				return r
			}
			wrong := reject(connOpts{token: 0x5ec2e7})
			missing := reject(connOpts{service: t.o.Service ^ 0x5a5a0000})
			// Equal but for DstConn, Timestamp and the CRC over them.
			w, m := wrong.b[8:32], missing.b[8:32]
			t.check(string(w) == string(m) && string(wrong.b[40:len(wrong.b)-4]) == string(missing.b[40:len(missing.b)-4]) &&
				len(wrong.b) == len(missing.b), "REJECT for a wrong token\n% x\ndiffers from one for a missing service\n% x", wrong.b, missing.b)
		}},
	{ID: "conn-private-data", Clause: "7.1", Also: []string{"7.3"}, Title: "a CONNECT with 64 bytes of private data is accepted; 65 draw nothing",
		Run: func(t *T) {
			t.connect(connOpts{private: pattern(64, 9)})
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 7}
			h := c.connectHeader(connOpts{}, [16]byte{})
			b := wire.AppendConn(nil, &h)
			b = append(b[:len(b)-4], make([]byte, 65+4)...)
			b[82], b[83] = 0, 65
			wire.Seal(b)
			t.send(b, sendOpts{})
			t.none("reply to a CONNECT with 65 bytes of private data", isConnTo(c.ID, wire.OpChallenge))
		}},
	{ID: "conn-forged-cookie", Clause: "7.4", Title: "CONNECT with a forged cookie is challenged again, never accepted",
		Run: func(t *T) {
			c := t.dial(connOpts{})
			t.expectConn(c.ID, wire.OpChallenge)
			var forged [16]byte
			copy(forged[:], pattern(16, 7))
			c.sendConnect(connOpts{}, forged)
			r := t.wait(t.o.Timeout, func(r *rxPacket) bool {
				return isConnTo(c.ID, wire.OpChallenge)(r) || isConnTo(c.ID, wire.OpAccept)(r) || isConnTo(c.ID, wire.OpReject)(r)
			})
			t.check(r == nil || r.pkt.Conn().Opcode() != wire.OpAccept, "a forged cookie was accepted")
			if r != nil && r.pkt.Conn().Opcode() == wire.OpReject {
				t.check(r.pkt.Conn().Reason() == wire.ReasonBadCookie, "REJECT reason %d for a bad cookie", r.pkt.Conn().Reason())
			}
		}},
	{ID: "conn-cookie-bound-to-id", Clause: "7.4", Title: "a cookie issued for one SrcConn does not open a connection for another",
		Run: func(t *T) {
			c := t.dial(connOpts{})
			ch := t.expectConn(c.ID, wire.OpChallenge)
			var cookie [16]byte
			copy(cookie[:], ch.pkt.Conn().Cookie())
			d := &Conn{t: t, ID: c.ID ^ 0x00010000, InitPSN: 1, seq: map[uint16]uint32{}, sseq: map[uint16]uint32{}}
			d.sendConnect(connOpts{}, cookie)
			t.none("ACCEPT for a cookie of another connection id", isConnTo(d.ID, wire.OpAccept))
		}},
	{ID: "conn-cookie-bound-to-address", Clause: "7.4", Needs: NeedAlt, Title: "a cookie issued to one address does not open a connection from another",
		Run: func(t *T) {
			c := t.dial(connOpts{})
			ch := t.expectConn(c.ID, wire.OpChallenge)
			var cookie [16]byte
			copy(cookie[:], ch.pkt.Conn().Cookie())
			c.from = t.o.AltLocal
			c.sendConnect(connOpts{}, cookie)
			t.none("ACCEPT for a cookie replayed from another address", isConnTo(c.ID, wire.OpAccept))
		}},
	{ID: "conn-repeat-accept", Clause: "7.3", Title: "a repeated CONNECT with a valid cookie draws the same ACCEPT again",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			c.sendConnect(connOpts{}, c.cookie)
			r := t.expectConn(c.ID, wire.OpAccept)
			var a wire.ConnHeader
			a.Decode(r.pkt.Conn())
			t.check(a.SrcConn == c.accept.SrcConn && a.InitialPSN == c.accept.InitialPSN && a.RecvWindow == c.accept.RecvWindow &&
				a.MsgWindow == c.accept.MsgWindow && a.MaxPayload == c.accept.MaxPayload,
				"second ACCEPT differs: id %s psn %s, first id %s psn %s", hex32(a.SrcConn), hex32(uint32(a.InitialPSN)),
				hex32(c.accept.SrcConn), hex32(uint32(c.accept.InitialPSN)))
		}},
	{ID: "conn-repeat-accept-after-data", Clause: "7.3", Also: []string{"7.1"}, Needs: NeedMemory, Title: "the repeated ACCEPT keeps the first InitialPSN even after the target sent data",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			r := t.rw()
			rd := c.message(msg{op: wire.OpReadReq, addr: r.Addr, rkey: r.RKey, readLen: 600})[0]
			c.sendPkt(rd, tx{path: 1})
			c.readResponses(rd.h.MsgID, 600, true)
			c.sendConnect(connOpts{}, c.cookie)
			var a wire.ConnHeader
			a.Decode(t.expectConn(c.ID, wire.OpAccept).pkt.Conn())
			t.check(a.InitialPSN == c.accept.InitialPSN && a.SrcConn == c.accept.SrcConn, "repeated ACCEPT: id %s InitialPSN %s, first %s %s",
				hex32(a.SrcConn), hex32(uint32(a.InitialPSN)), hex32(c.accept.SrcConn), hex32(uint32(c.accept.InitialPSN)))
		}},
	{ID: "conn-invalid-params", Clause: "7.1", Title: "CONNECTs breaking §7.1 (DstConn set, SrcConn 0, window not a power of two, MaxPayload < 256) draw nothing",
		Run: func(t *T) {
			id := rand32() | 1
			base := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: id, Service: t.o.Service, RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Timestamp: stamp()}
			bad := []func(h *wire.ConnHeader){
				func(h *wire.ConnHeader) { h.DstConn = 5 },
				func(h *wire.ConnHeader) { h.RecvWindow = 1000 },
				func(h *wire.ConnHeader) { h.RecvWindow = 1 << 17 },
				func(h *wire.ConnHeader) { h.MsgWindow = 100 },
				func(h *wire.ConnHeader) { h.MaxPayload = 255 },
			}
			for _, f := range bad {
				h := base
				f(&h)
				t.send(wire.AppendConn(nil, &h), sendOpts{})
			}
			h := base
			h.SrcConn = 0
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.none("reply to an invalid CONNECT", func(r *rxPacket) bool {
				return r.err == nil && r.pkt.Class == wire.ClassConn && (r.pkt.Conn().DstConn() == id || r.pkt.Conn().DstConn() == 0 && r.pkt.Conn().Opcode() != wire.OpReset)
			})
		}},
	{ID: "conn-ignore-unused-fields", Clause: "3.6", Also: []string{"7.1"}, Title: "unused conn fields are ignored: a CONNECT with a Reason and Paths set is still challenged",
		Run: func(t *T) {
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 7}
			h := c.connectHeader(connOpts{}, [16]byte{})
			h.Reason, h.Paths = 0x77, 999
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.expectConn(c.ID, wire.OpChallenge)
		}},
	{ID: "conn-flood-stateless", Clause: "7.8", Also: []string{"7.3", "13"}, Title: "a flood of cookieless CONNECTs draws only CHALLENGEs, at most one each, rate-limited, no state",
		Run: func(t *T) {
			const n = 10000
			ids := map[uint32]bool{}
			base := rand32() &^ 0x3fff
			// Built first, sent in runs of 64 (UDP GSO), so the burst is as
			// fast as the host can make it.
			var bufs [][]byte
			var run []byte
			for i := 0; i < n; i++ {
				id := base | uint32(i+1)
				ids[id] = true
				h := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: id, InitialPSN: 1, Service: t.o.Service, RecvWindow: 1024,
					MaxPayload: 1384, MsgWindow: 256, Timestamp: stamp()}
				run = wire.AppendConn(run, &h)
				if len(run) == 64*88 || i == n-1 {
					bufs = append(bufs, run)
					run = nil
				}
			}
			start := time.Now()
			for _, b := range bufs {
				if err := t.p.sendSegments(b, 88, sendOpts{sport: 50997}); err != nil {
					t.Fatalf("suite: GSO send: %v", err)
				}
			}
			burst := time.Since(start)
			// Collect until the target falls silent, so that the next case
			// does not find its reply queue still full of CHALLENGEs.
			flood := func(r *rxPacket) bool {
				return r.err == nil && r.pkt.Class == wire.ClassConn && ids[r.pkt.Conn().DstConn()]
			}
			got := t.collect(t.o.Timeout, flood)
			for {
				more := t.collect(t.o.Quiet, flood)
				if len(more) == 0 {
					break
				}
				got = append(got, more...)
			}
			per := map[uint32]int{}
			for _, r := range got {
				t.check(r.pkt.Conn().Opcode() == wire.OpChallenge, "flood drew %v", r.pkt.Conn().Opcode())
				t.check(len(r.b) == 88, "stateless reply of %d bytes", len(r.b))
				per[r.pkt.Conn().DstConn()]++
			}
			for id, k := range per {
				t.check(k == 1, "%d replies to the one CONNECT of %s", k, hex32(id))
			}
			t.Notef("%d CONNECTs in %v drew %d CHALLENGEs", n, burst.Round(time.Millisecond), len(got))
			t.check(len(got) > 0, "no CHALLENGE at all")
			if t.o.ReplyRate <= 0 {
				return
			}
			// The limit is the target's (Options.ReplyRate per ms), over the
			// time it took to answer: the rate the replies arrived at, with
			// a millisecond of granularity each side and two queues' worth
			// (a limiter may hold some unsent).
			first, last := got[0].at, got[0].at
			for _, r := range got {
				if r.at.Before(first) {
					first = r.at
				}
				if r.at.After(last) {
					last = r.at
				}
			}
			span := last.Sub(first)
			allowed := int(float64(t.o.ReplyRate)*(span.Seconds()*1000+2)) + 128
			t.Notef("replies over %v: at most %d at %d/ms", span.Round(time.Microsecond), allowed, t.o.ReplyRate)
			t.check(len(got) <= allowed, "%d CHALLENGEs in %v: more than %d/ms allows (%d)", len(got), span, t.o.ReplyRate, allowed)
		}},
	{ID: "conn-reply-fair", Clause: "7.8", Also: []string{"7.3"}, Needs: NeedAlt, Level: Should, Title: "during a flood of CONNECTs from one address, every CONNECT from another address still draws its CHALLENGE",
		Run: func(t *T) {
			// Each round: 192 cookieless CONNECTs from the suite's address
			// in three GSO sends (three times the reference limit of 64 a
			// millisecond), then one from the other address. A target that
			// limits only its total spends its budget on the burst, and
			// the other address's CONNECT goes unanswered.
			const rounds = 20
			base := rand32() &^ 0xffff
			flood := map[uint32]bool{}
			alt := map[uint32]bool{}
			for r := range rounds {
				for k := range 3 { // 64 segments a send: the kernel's UDP GSO limit
					var run []byte
					for i := range 64 {
						id := base | uint32(r*192+k*64+i+1)
						flood[id] = true
						h := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: id, InitialPSN: 1, Service: t.o.Service, RecvWindow: 1024,
							MaxPayload: 1384, MsgWindow: 256, Timestamp: stamp()}
						run = wire.AppendConn(run, &h)
					}
					if err := t.p.sendSegments(run, 88, sendOpts{sport: 50996}); err != nil {
						t.Fatalf("suite: GSO send: %v", err)
					}
				}
				id := (base ^ 0x8000_0000) | uint32(r+1)
				alt[id] = true
				h := wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: id, InitialPSN: 1, Service: t.o.Service, RecvWindow: 1024,
					MaxPayload: 1384, MsgWindow: 256, Timestamp: stamp()}
				t.send(wire.AppendConn(nil, &h), sendOpts{from: t.o.AltLocal})
				time.Sleep(2 * time.Millisecond)
			}
			ours := func(r *rxPacket) bool {
				return r.err == nil && r.pkt.Class == wire.ClassConn && (flood[r.pkt.Conn().DstConn()] || alt[r.pkt.Conn().DstConn()])
			}
			var got []*rxPacket
			for {
				more := t.collect(t.o.Quiet, ours)
				if len(more) == 0 {
					break
				}
				got = append(got, more...)
			}
			answered, floodAnswered := map[uint32]bool{}, 0
			for _, r := range got {
				if id := r.pkt.Conn().DstConn(); alt[id] && r.pkt.Conn().Opcode() == wire.OpChallenge {
					answered[id] = true
				} else if flood[id] {
					floodAnswered++
				}
			}
			t.Notef("%d of %d CONNECTs from the other address challenged; the flood's %d drew %d", len(answered), rounds, len(flood), floodAnswered)
			t.check(len(answered) == rounds, "%d of %d CONNECTs from another address drew a CHALLENGE during a flood from one address", len(answered), rounds)
		}},
	{ID: "conn-accept-unknown", Clause: "7.6", Also: []string{"7.3"}, Title: "an ACCEPT naming no connection draws RESET UNKNOWN_CONN",
		Run: func(t *T) {
			id := rand32() | 1
			h := wire.ConnHeader{Opcode: wire.OpAccept, DstConn: id, SrcConn: rand32() | 1, InitialPSN: 1, Service: t.o.Service,
				RecvWindow: 1024, MaxPayload: 1384, MsgWindow: 256, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			checkReset(t, t.expect("RESET for the unknown ACCEPT", isResetFor(id)), id)
		}},
	{ID: "conn-stale-data", Clause: "7.6", Title: "data, ACK and NACK naming no connection draw RESET UNKNOWN_CONN",
		Run: func(t *T) {
			for _, mk := range []func(id uint32) []byte{
				func(id uint32) []byte {
					h := wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq, DstConn: id, PSN: 9, MsgLen: 4, RKey: 1, Timestamp: stamp()}
					return wire.AppendData(nil, &h, []byte{1, 2, 3, 4})
				},
				func(id uint32) []byte {
					h := wire.AckHeader{DstConn: id, CumPSN: 3, PathAckSeq: 1, Credit: 16}
					h.Sack[0] = 1
					return wire.AppendAck(nil, &h)
				},
				func(id uint32) []byte {
					h := wire.NackHeader{DstConn: id, PSN: 3, Reason: wire.NackRNR}
					return wire.AppendNack(nil, &h)
				},
			} {
				id := rand32() | 1
				t.send(mk(id), sendOpts{sport: entropyBase})
				checkReset(t, t.expect("RESET for "+hex32(id), isResetFor(id)), id)
			}
		}},
	{ID: "conn-zero-id-no-reset", Clause: "7.6", Title: "data with DstConn 0, and CHALLENGE, REJECT or DISCONNECT_ACK naming no connection, draw nothing",
		Run: func(t *T) {
			h := wire.DataHeader{Opcode: wire.OpWrite, Flags: wire.FlagAckReq, PSN: 9, MsgLen: 4, RKey: 1, Timestamp: stamp()}
			t.send(wire.AppendData(nil, &h, []byte{1, 2, 3, 4}), sendOpts{sport: entropyBase})
			id := rand32() | 1
			for _, op := range []wire.Opcode{wire.OpChallenge, wire.OpReject, wire.OpDisconnectAck} {
				ch := wire.ConnHeader{Opcode: op, DstConn: id, SrcConn: rand32() | 1, Service: t.o.Service, Timestamp: stamp()}
				t.send(wire.AppendConn(nil, &ch), sendOpts{})
			}
			t.none("reply to a packet naming no connection", func(r *rxPacket) bool {
				return r.err == nil && r.pkt.Class == wire.ClassConn && (r.pkt.Conn().SrcConn() == 0 && r.pkt.Conn().Opcode() == wire.OpReset || r.pkt.Conn().SrcConn() == id || r.pkt.Conn().DstConn() == id)
			})
		}},
	{ID: "conn-wrong-peer", Clause: "7.6", Needs: NeedAlt, Title: "a packet of a connection from another address is dropped silently",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			p := c.validWrite(pattern(16, 1))
			before := c.cumNow()
			c.sendPkt(p, tx{path: 1, from: t.o.AltLocal})
			t.none("reply to a packet from the wrong address", c.anyFor())
			t.check(c.cumNow() == before, "a packet from the wrong address was consumed")
		}},
	{ID: "conn-disconnect", Clause: "7.7", Title: "DISCONNECT draws DISCONNECT_ACK with the ids swapped, and the connection is forgotten",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			peer := c.Peer
			h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: peer, SrcConn: c.ID, Reason: wire.ReasonClosed, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			r := t.expectConn(c.ID, wire.OpDisconnectAck)
			t.check(r.pkt.Conn().SrcConn() == peer, "DISCONNECT_ACK SrcConn %s, want %s", hex32(r.pkt.Conn().SrcConn()), hex32(peer))
			p := c.validWrite(pattern(8, 2))
			c.sendPkt(p, tx{path: 1})
			r = t.expect("RESET for data on the closed connection", isResetFor(peer))
			checkReset(t, r, peer)
			// The target has forgotten the connection, yet proves the
			// RESET with the token its ACCEPT announced (§7.6).
			t.check(string(r.pkt.Conn().ResetToken()) == string(c.accept.ResetToken[:]),
				"RESET token % x, the ACCEPT announced % x", r.pkt.Conn().ResetToken(), c.accept.ResetToken[:])
			c.Peer = 0
		}},
	{ID: "conn-disconnect-received-psn", Clause: "7.7", Also: []string{"7.1"}, Needs: NeedMemory,
		Title: "a DISCONNECT's ReceivedPSN acknowledges what the target sent before it; one outside the send window acknowledges nothing; both close",
		Run: func(t *T) {
			// ReceivedPSN past the READ response the suite never acked:
			// the target takes it as delivered, answers, and forgets
			// the connection.
			for _, far := range []bool{false, true} {
				c := t.connect(connOpts{})
				d := c.readStart(32)
				rcv := d.PSN() + 1
				if far {
					rcv = d.PSN() + 0x40000000
				}
				peer := c.Peer
				h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: peer, SrcConn: c.ID, InitialPSN: rcv,
					Reason: wire.ReasonClosed, Timestamp: stamp()}
				t.send(wire.AppendConn(nil, &h), sendOpts{})
				r := t.expectConn(c.ID, wire.OpDisconnectAck)
				t.check(r.pkt.Conn().SrcConn() == peer, "DISCONNECT_ACK SrcConn %s, want %s", hex32(r.pkt.Conn().SrcConn()), hex32(peer))
				c.sendPkt(c.validWrite(pattern(8, 4)), tx{path: 1})
				checkReset(t, t.expect("RESET for data on the closed connection", isResetFor(peer)), peer)
				c.Peer = 0
			}
		}},
	{ID: "conn-reset-bad-token", Clause: "7.6", Also: []string{"13"}, Title: "RESET naming the connection but carrying another reset token is ignored",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			for _, dst := range []uint32{0, c.Peer} {
				h := wire.ConnHeader{Opcode: wire.OpReset, DstConn: dst, SrcConn: c.ID, Reason: wire.ReasonUnknownConn, Timestamp: stamp(), ResetToken: c.resetTok}
				h.ResetToken[5] ^= 0x20
				t.send(wire.AppendConn(nil, &h), sendOpts{})
			}
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			c.cumNow() // still acked: the connection lives
		}},
	{ID: "conn-disconnect-unknown", Clause: "7.7", Title: "DISCONNECT for a connection the target does not have still draws DISCONNECT_ACK",
		Run: func(t *T) {
			id, peer := rand32()|1, rand32()|1
			h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: peer, SrcConn: id, Reason: wire.ReasonClosed, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			r := t.expectConn(id, wire.OpDisconnectAck)
			t.check(r.pkt.Conn().SrcConn() == peer, "DISCONNECT_ACK SrcConn %s, want %s", hex32(r.pkt.Conn().SrcConn()), hex32(peer))
		}},
	{ID: "conn-reset-by-peer", Clause: "7.6", Also: []string{"7.5"}, Title: "RESET naming the connection (any reason value) ends it; its id then draws RESET",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			h := wire.ConnHeader{Opcode: wire.OpReset, SrcConn: c.ID, Reason: 0x99, Timestamp: stamp(), ResetToken: c.resetTok}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			peer := c.Peer
			c.sendPkt(c.validWrite(pattern(8, 3)), tx{path: 1})
			checkReset(t, t.expect("RESET for data after the RESET", isResetFor(peer)), peer)
			c.Peer = 0
		}},
	{ID: "conn-reset-wrong-dst", Clause: "7.6", Title: "RESET whose DstConn is neither 0 nor the connection's id is ignored",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			h := wire.ConnHeader{Opcode: wire.OpReset, DstConn: c.Peer ^ 0x100, SrcConn: c.ID, Reason: wire.ReasonUnknownConn, Timestamp: stamp(), ResetToken: c.resetTok}
			t.send(wire.AppendConn(nil, &h), sendOpts{})
			t.wait(t.o.Quiet, func(*rxPacket) bool { return false })
			c.cumNow() // still acked: the connection lives
		}},
	{ID: "conn-initial-psn", Clause: "7.2", Also: []string{"8.1"}, Title: "the target's receive state starts at our InitialPSN",
		Run: func(t *T) {
			c := t.connect(connOpts{})
			t.check(c.cumNow() == c.InitPSN, "CumPSN %s before any data, want our InitialPSN %s", hex32(uint32(c.cumNow())), hex32(uint32(c.InitPSN)))
		}},
	{ID: "conn-reply-port", Clause: "2.2", Title: "replies go to the suite's MetaRoCE port, not to the source port of the packet answered",
		Run: func(t *T) {
			c := &Conn{t: t, ID: rand32() | 1, InitPSN: 1}
			h := c.connectHeader(connOpts{}, [16]byte{})
			const sport = 50999
			t.send(wire.AppendConn(nil, &h), sendOpts{sport: sport})
			t.expectConn(c.ID, wire.OpChallenge)
			stray, err := t.p.strayOn(sport, t.o.Quiet)
			t.must(err)
			t.check(!stray, "a reply went to the source port %d", sport)
		}},
}
