package wire_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

func checkNack(t *testing.T, n wire.Nack, h wire.NackHeader) {
	t.Helper()
	got := []struct {
		name      string
		got, want uint64
	}{
		{"Flags", uint64(n.Flags()), uint64(h.Flags)},
		{"DstConn", uint64(n.DstConn()), uint64(h.DstConn)},
		{"PSN", uint64(n.PSN()), uint64(h.PSN)},
		{"PathID", uint64(n.PathID()), uint64(h.PathID)},
		{"Reason", uint64(n.Reason()), uint64(h.Reason)},
		{"PathSeq", uint64(n.PathSeq()), uint64(h.PathSeq)},
		{"CumPSN", uint64(n.CumPSN()), uint64(h.CumPSN)},
		{"EchoTimestamp", n.EchoTimestamp(), h.EchoTimestamp},
		{"Info", uint64(n.Info()), uint64(h.Info)},
	}
	for _, g := range got {
		if g.got != g.want {
			t.Errorf("%s() = %#x, want %#x", g.name, g.got, g.want)
		}
	}
	var dec wire.NackHeader
	dec.Decode(n)
	if dec != h {
		t.Errorf("Decode:\n got %+v\nwant %+v", dec, h)
	}
}

func TestNackRoundTrip(t *testing.T) {
	for _, r := range nackReasons {
		for _, flags := range []uint16{0, wire.FlagAckReq, wire.FlagRetx, wire.FlagAckReq | wire.FlagRetx} {
			t.Run(fmt.Sprintf("%s/flags=%d", r, flags), func(t *testing.T) {
				h := validNack(r)
				h.Flags = flags
				pkt := wire.AppendNack(nil, &h)
				if len(pkt) != 44 {
					t.Fatalf("AppendNack made %d bytes, want 44", len(pkt))
				}
				p, err := wire.Parse(pkt)
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if p.Class != wire.ClassNack || p.Prefix().Opcode() != wire.OpNack {
					t.Fatalf("Class %d opcode %s", p.Class, p.Prefix().Opcode())
				}
				checkNack(t, p.Nack(), h)

				frame := bytes.Repeat([]byte{0xa5}, 60)
				h.Put(frame)
				if !bytes.Equal(frame[:44], pkt) || !bytes.Equal(frame[44:], bytes.Repeat([]byte{0xa5}, 16)) {
					t.Fatalf("Put into a dirty frame differs from AppendNack or wrote past the trailer")
				}
			})
		}
	}
	t.Run("max", func(t *testing.T) {
		h := wire.NackHeader{
			Flags: 3, DstConn: ^uint32(0), PSN: ^wire.PSN(0), PathID: ^uint16(0),
			Reason: wire.NackOutOfWindow, PathSeq: ^uint32(0), CumPSN: ^wire.PSN(0),
			EchoTimestamp: ^uint64(0), Info: ^uint32(0),
		}
		checkNack(t, mustParse(t, wire.AppendNack(nil, &h)).Nack(), h)
	})
}

// TestNackUnsupportedVersionParses is the regression test for the reason-5
// defect (numNackReasons once came out as 5, fixed in 4394a85): a receiver
// answers an unknown version with NACK UNSUPPORTED_VERSION (§3.5, §6.2),
// and its peer must be able to parse it.
func TestNackUnsupportedVersionParses(t *testing.T) {
	h := validNack(wire.NackUnsupportedVersion)
	h.Info = wire.Version
	_, err := wire.Parse(wire.AppendNack(nil, &h))
	if err != nil {
		t.Fatalf("Parse of NACK UNSUPPORTED_VERSION: %v", err)
	}
}

// TestNackSequence: the go-back-N receiver's NACK (§6.2, §8.8) is reason
// byte 6 on the wire, parses, and carries CumPSN, where the sender
// resumes, through to the view; 7, one past it, is undefined.
func TestNackSequence(t *testing.T) {
	if wire.NackSequence != 6 {
		t.Fatalf("NackSequence = %d, want 6", wire.NackSequence)
	}
	for _, cum := range []wire.PSN{0, 1, 0x7fffffff, 0x80000000, ^wire.PSN(0)} {
		h := validNack(wire.NackSequence)
		h.CumPSN = cum
		h.PSN = cum.Add(5) // the packet past the gap
		pkt := wire.AppendNack(nil, &h)
		if pkt[offNackReason] != 6 {
			t.Fatalf("reason byte %d, want 6", pkt[offNackReason])
		}
		n := mustParse(t, pkt).Nack()
		checkNack(t, n, h)
		if n.Reason() != wire.NackSequence || n.Reason().String() != "SEQUENCE" {
			t.Errorf("Reason() = %v", n.Reason())
		}
		if n.CumPSN() != cum || get32(pkt, offNackCumPSN) != uint32(cum) {
			t.Errorf("CumPSN() = %#x, bytes %#x, want %#x", n.CumPSN(), get32(pkt, offNackCumPSN), cum)
		}
	}
	wantErr(t, edit(validPacket(wire.OpNack), func(b []byte) { b[offNackReason] = 7 }), wire.ErrField)
}

func TestNackLayout(t *testing.T) {
	h := validNack(wire.NackRNR)
	pkt := wire.AppendNack(nil, &h)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"opcode", uint64(pkt[offOpcode]), uint64(wire.OpNack)},
		{"psn", uint64(get32(pkt, offNackPSN)), uint64(h.PSN)},
		{"path id", uint64(get16(pkt, offNackPathID)), uint64(h.PathID)},
		{"reason", uint64(pkt[offNackReason]), uint64(h.Reason)},
		{"reserved 1", uint64(pkt[offNackRsvd1]), 0},
		{"path seq", uint64(get32(pkt, offNackPathSeq)), uint64(h.PathSeq)},
		{"cum psn", uint64(get32(pkt, offNackCumPSN)), uint64(h.CumPSN)},
		{"echo ts", get64(pkt, offNackEchoTS), h.EchoTimestamp},
		{"info", uint64(get32(pkt, offNackInfo)), uint64(h.Info)},
		{"reserved 2", uint64(get32(pkt, offNackRsvd2)), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: bytes hold %#x, want %#x", c.name, c.got, c.want)
		}
	}
}
