package compliance

import (
	"net/netip"
	"time"

	"github.com/metaroce/metaroce/wire"
)

// Planes (§7.9): the suite plays a host of several planes. Its second
// address (Options.AltLocal) stands for its port on plane 1; the target may
// have planes of its own, which its ACCEPT announces, and the cases judge
// it by what it announced.

var planeCases = []Case{
	{ID: "planes-connect", Clause: "7.9", Also: []string{"7.1"}, Title: "a CONNECT announcing seven plane addresses is accepted; one announcing eight draws nothing",
		Run: func(t *T) {
			var seven []netip.Addr
			for i := range wire.MaxPlaneAddrs {
				seven = append(seven, planeAddr(t.o.Local, i+1))
			}
			c := t.connect(connOpts{planes: seven, private: pattern(64, 3)})
			t.check(c.accept.PlaneAddrs <= wire.MaxPlaneAddrs, "ACCEPT announces %d plane addresses", c.accept.PlaneAddrs)
			// Eight: the length agrees with PlaneAddrs, the count is FIELD.
			d := &Conn{t: t, ID: rand32() | 1, InitPSN: 7}
			h := d.connectHeader(connOpts{planes: seven}, [16]byte{})
			b := wire.AppendConn(nil, &h)
			b = append(b[:len(b)-4], make([]byte, wire.PlaneAddrLen+4)...)
			b[80], b[81] = 0, 8
			wire.Seal(b)
			t.send(b, sendOpts{})
			t.none("reply to a CONNECT announcing 8 plane addresses", isConnTo(d.ID, wire.OpChallenge))
		}},
	{ID: "planes-peer-address", Clause: "7.9", Also: []string{"7.6"}, Needs: NeedAlt | NeedMemory,
		Title: "data from the suite's plane-1 address is taken when the target announced a plane 1 of its own, and dropped silently when it did not",
		Run: func(t *T) {
			c := t.connect(connOpts{planes: []netip.Addr{t.o.AltLocal}})
			mine := false
			if c.accept.PlaneAddrs >= 1 {
				a := netip.AddrFrom16(c.accept.Planes[0])
				if t.o.Local.Is4() {
					a = a.Unmap()
				}
				mine = a.IsValid() && !a.IsUnspecified() && a.Is4() == t.o.Local.Is4()
			}
			t.Notef("the target announced %d plane addresses; plane 1 in use: %v", c.accept.PlaneAddrs, mine)
			p := c.validWrite(pattern(16, 1))
			before := c.cumNow()
			// Path 1 is on plane U[1 mod |U|]: plane 1 when both ends
			// have it, plane 0 otherwise.
			c.sendPkt(p, tx{path: 1, from: t.o.AltLocal})
			if !mine {
				t.none("reply to a packet from a plane the target does not use", c.anyFor())
				t.check(c.cumNow() == before, "a packet from an unused plane's address was consumed")
				return
			}
			r := t.expect("ack of path 1", c.isAckSeq(1, c.seq[1]-1))
			t.check(r.to == t.o.AltLocal, "the ack of path 1 arrived at %v, not at the suite's plane-1 address %v", r.to, t.o.AltLocal)
		}},
	{ID: "planes-teardown", Clause: "7.7", Also: []string{"7.9", "7.8"}, Needs: NeedAlt,
		Title: "a DISCONNECT from the suite's plane-1 address closes the connection once the target proved that plane, answered there; from an address the connection does not use, it closes nothing",
		Run: func(t *T) {
			c := t.connect(connOpts{planes: []netip.Addr{t.o.AltLocal}})
			mine := announcedPlane1(t, c)
			t.Notef("the target announced %d plane addresses; plane 1 in use: %v", c.accept.PlaneAddrs, mine)
			if mine {
				// The target proves the suite's plane-1 address by
				// probing it (§7.9): answer every probe that arrives
				// there, from there, for a while.
				answered := 0
				deadline := time.Now().Add(t.o.Quiet)
				for {
					r := t.wait(time.Until(deadline), func(r *rxPacket) bool {
						return r.err == nil && r.pkt.Class == wire.ClassData && r.pkt.Data().DstConn() == c.ID &&
							r.pkt.Data().Opcode() == wire.OpProbe && r.to == t.o.AltLocal
					})
					if r == nil {
						break
					}
					c.record(r.pkt.Data())
					from := c.from
					c.from = t.o.AltLocal
					c.ackPath(r.pkt.Data().PathID())
					c.from = from
					answered++
				}
				t.Notef("answered %d of the target's probes of plane 1", answered)
				t.check(answered > 0, "the target sent no probe to the suite's plane-1 address")
			}
			h := wire.ConnHeader{Opcode: wire.OpDisconnect, DstConn: c.Peer, SrcConn: c.ID, Reason: wire.ReasonClosed, Timestamp: stamp()}
			t.send(wire.AppendConn(nil, &h), sendOpts{from: t.o.AltLocal})
			r := t.expectConn(c.ID, wire.OpDisconnectAck)
			t.check(r.to == t.o.AltLocal, "the DISCONNECT_ACK arrived at %v, not at the DISCONNECT's source %v", r.to, t.o.AltLocal)
			if !mine {
				c.cumNow() // acked: the connection lives
				return
			}
			// Closed: the connection's id names nothing now, so a probe
			// on it draws a RESET (§7.6).
			c.probe(0, wire.FlagAckReq)
			t.expect("RESET for the closed connection", func(r *rxPacket) bool {
				return r.err == nil && r.pkt.Class == wire.ClassConn && r.pkt.Conn().Opcode() == wire.OpReset && r.pkt.Conn().SrcConn() == c.Peer
			})
			c.Peer = 0 // nothing left to close
		}},
}

// announcedPlane1 reports whether the target's ACCEPT named a usable
// address on plane 1, so that plane 1 is one of the connection's (§7.9).
func announcedPlane1(t *T, c *Conn) bool {
	if c.accept.PlaneAddrs < 1 {
		return false
	}
	a := netip.AddrFrom16(c.accept.Planes[0])
	if t.o.Local.Is4() {
		a = a.Unmap()
	}
	return a.IsValid() && !a.IsUnspecified() && a.Is4() == t.o.Local.Is4()
}

// planeAddr makes an address for plane i beside base: a documentation
// prefix of the same family, never one of the target's.
func planeAddr(base netip.Addr, i int) netip.Addr {
	if base.Is4() {
		return netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
	}
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 15: byte(i)})
}
