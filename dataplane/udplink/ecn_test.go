package udplink

import (
	"net/netip"
	"testing"

	"github.com/metaroce/metaroce/dataplane"
)

// TestReceiveCE: datagrams from a plain socket with a crafted TOS: CE sets
// RxPacket.CE, ECT(0), ECT(1) and not-ECT do not.
func TestReceiveCE(t *testing.T) {
	for _, gso := range []bool{false, true} {
		t.Run(onOff(gso), func(t *testing.T) {
			b := openLinks(t, Config{Local: lo2, GSO: gso})[0]
			fd := plainSocket(t, lo3, b.Config().Port)
			for _, tc := range []struct {
				tos int
				ce  bool
			}{{26<<2 | 3, true}, {26<<2 | 2, false}, {0, false}, {3, true}, {1, false}, {48<<2 | 3, true}} {
				sendTOS(t, fd, b.LocalAddr(), want(1, 64), tc.tos)
				p := recvN(t, b, 1, 4)[0]
				if p.ce != tc.ce {
					t.Errorf("TOS %#x: CE %v, want %v", tc.tos, p.ce, tc.ce)
				}
			}
		})
	}
}

// TestReceiveCEIPv6 does the same over ::1, with the plain socket on its own
// port sending to the link's.
func TestReceiveCEIPv6(t *testing.T) {
	b := openLinks(t, Config{Local: lo6})[0]
	fd := plainSocket(t, lo6, 0)
	for _, tc := range []struct {
		tclass int
		ce     bool
	}{{26<<2 | 3, true}, {26<<2 | 2, false}, {0, false}} {
		sendTOS(t, fd, b.LocalAddr(), want(1, 64), tc.tclass)
		if p := recvN(t, b, 1, 4)[0]; p.ce != tc.ce {
			t.Errorf("TCLASS %#x: CE %v, want %v", tc.tclass, p.ce, tc.ce)
		}
	}
}

// TestSendMarking: what the link puts on the wire, read by a plain socket:
// the data DSCP or the control DSCP, with ECT(0).
func TestSendMarking(t *testing.T) {
	a := openLinks(t, Config{Local: lo1, DSCPData: 10, GSO: true})[0]
	fd := plainSocket(t, lo3, a.Config().Port)
	tx := make([]dataplane.TxPacket, 3)
	a.ReserveTx(tx)
	for i := range tx {
		tx[i].Dst, tx[i].Len, tx[i].Control = lo3, 100, i == 1
		fill(tx[i].Buf[:100], uint32(i))
	}
	if err := a.SubmitTx(tx); err != nil {
		t.Fatal(err)
	}
	for i, w := range []uint8{10<<2 | ecnECT0, 48<<2 | ecnECT0, 10<<2 | ecnECT0} {
		b, tos := recvTOS(t, fd)
		checkSeq(t, []got{{b, lo1, false}}, uint32(i), lo1, func(uint32) int { return 100 })
		if tos != w {
			t.Errorf("packet %d: TOS %#x, want %#x", i, tos, w)
		}
	}
}

// TestSendMarkingIPv6 checks the traffic class of a link sending to itself
// over ::1, read from the parsed control message.
func TestSendMarkingIPv6(t *testing.T) {
	l := openLinks(t, Config{Local: lo6})[0]
	for _, ctl := range []bool{false, true} {
		tx := make([]dataplane.TxPacket, 1)
		l.ReserveTx(tx)
		tx[0].Dst, tx[0].Len, tx[0].Control = lo6, 40, ctl
		if err := l.SubmitTx(tx); err != nil {
			t.Fatal(err)
		}
		if p := recvN(t, l, 1, 1)[0]; p.ce {
			t.Errorf("control %v: CE set on an ECT(0) packet", ctl)
		}
		w := uint8(26<<2 | ecnECT0)
		if ctl {
			w = 48<<2 | ecnECT0
		}
		if tc := l.rx.res[0].tos; tc != w {
			t.Errorf("control %v: traffic class %#x, want %#x", ctl, tc, w)
		}
	}
}

// TestCEEndToEnd makes the sender mark CE itself (a test-only change of its
// TOS table, what a congested switch would do) and checks that link to link,
// IPv4 and IPv6, with and without GSO/GRO, CE arrives on exactly those
// packets.
func TestCEEndToEnd(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		for _, gso := range []bool{false, true} {
			name := "v4/" + onOff(gso)
			var from, to *Link
			if v6 {
				name = "v6/" + onOff(gso)
				from = openLinks(t, Config{Local: lo6, GSO: gso})[0]
				to = from
			} else {
				ls := openLinks(t, Config{Local: lo1, GSO: gso}, Config{Local: lo2, GSO: gso})
				from, to = ls[0], ls[1]
			}
			t.Run(name, func(t *testing.T) {
				ceEndToEnd(t, from, to.LocalAddr().Addr(), to)
			})
		}
	}
}

func ceEndToEnd(t *testing.T, from *Link, dst netip.Addr, to *Link) {
	length := func(uint32) int { return 500 }
	for _, ce := range []bool{false, true, false} {
		saved := from.tx.tos
		if ce {
			from.tx.tos[0] |= ecnCE
		}
		sendBatch(t, from, dst, 0, 16, length)
		from.tx.tos = saved
		pkts := recvN(t, to, 16, 64)
		checkSeq(t, pkts, 0, from.LocalAddr().Addr(), length)
		for i, p := range pkts {
			if p.ce != ce {
				t.Fatalf("packet %d: CE %v, want %v", i, p.ce, ce)
			}
		}
	}
}
