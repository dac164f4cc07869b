package wire_test

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

func checkAck(t *testing.T, a wire.Ack, h wire.AckHeader) {
	t.Helper()
	got := []struct {
		name      string
		got, want uint64
	}{
		{"Flags", uint64(a.Flags()), uint64(h.Flags)},
		{"DstConn", uint64(a.DstConn()), uint64(h.DstConn)},
		{"CumPSN", uint64(a.CumPSN()), uint64(h.CumPSN)},
		{"PathID", uint64(a.PathID()), uint64(h.PathID)},
		{"CECount", uint64(a.CECount()), uint64(h.CECount)},
		{"PathAckSeq", uint64(a.PathAckSeq()), uint64(h.PathAckSeq)},
		{"EchoPSN", uint64(a.EchoPSN()), uint64(h.EchoPSN)},
		{"EchoTimestamp", a.EchoTimestamp(), h.EchoTimestamp},
		{"RateHint", uint64(a.RateHint()), uint64(h.RateHint)},
		{"Credit", uint64(a.Credit()), uint64(h.Credit)},
		{"AckDelay", uint64(a.AckDelay()), uint64(h.AckDelay)},
	}
	for _, g := range got {
		if g.got != g.want {
			t.Errorf("%s() = %#x, want %#x", g.name, g.got, g.want)
		}
	}
	if !bytes.Equal(a.Sack(), h.Sack[:]) {
		t.Errorf("Sack() = % x, want % x", a.Sack(), h.Sack[:])
	}
	var dec wire.AckHeader
	dec.Decode(a)
	if dec != h {
		t.Errorf("Decode:\n got %+v\nwant %+v", dec, h)
	}
}

func TestAckRoundTrip(t *testing.T) {
	max := wire.AckHeader{
		Flags: wire.FlagAckReq | wire.FlagRetx, DstConn: ^uint32(0), CumPSN: ^wire.PSN(0),
		PathID: ^uint16(0), CECount: ^uint16(0), PathAckSeq: ^uint32(0), EchoPSN: ^wire.PSN(0),
		EchoTimestamp: ^uint64(0), RateHint: ^uint32(0), Credit: ^uint32(0), AckDelay: ^uint32(0),
	}
	for i := range max.Sack {
		max.Sack[i] = 0xff
	}
	tests := []struct {
		name string
		h    wire.AckHeader
	}{
		{"typical", validAck()},
		{"minimal", wire.AckHeader{Sack: [wire.SackBytes]byte{1}}},
		{"max", max},
		{"last bit only", func() wire.AckHeader {
			h := validAck()
			h.Sack = [wire.SackBytes]byte{1}
			h.Sack[wire.SackBytes-1] = 0x80
			return h
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			pkt := wire.AppendAck(nil, &h)
			if len(pkt) != 84 {
				t.Fatalf("AppendAck made %d bytes, want 84", len(pkt))
			}
			p := mustParse(t, pkt)
			if p.Class != wire.ClassAck || p.Prefix().Opcode() != wire.OpAck {
				t.Fatalf("Class %d opcode %s", p.Class, p.Prefix().Opcode())
			}
			checkAck(t, p.Ack(), h)

			frame := bytes.Repeat([]byte{0xa5}, 100)
			h.Put(frame)
			if !bytes.Equal(frame[:84], pkt) {
				t.Fatalf("Put into a dirty frame differs from AppendAck")
			}
			if !bytes.Equal(frame[84:], bytes.Repeat([]byte{0xa5}, 16)) {
				t.Fatalf("Put wrote past the trailer")
			}
		})
	}
}

func TestAckLayout(t *testing.T) {
	h := validAck()
	pkt := wire.AppendAck(nil, &h)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"opcode", uint64(pkt[offOpcode]), uint64(wire.OpAck)},
		{"cum psn", uint64(get32(pkt, offAckCumPSN)), uint64(h.CumPSN)},
		{"path id", uint64(get16(pkt, offAckPathID)), uint64(h.PathID)},
		{"ce count", uint64(get16(pkt, offAckCECount)), uint64(h.CECount)},
		{"path ack seq", uint64(get32(pkt, offAckPathAck)), uint64(h.PathAckSeq)},
		{"echo psn", uint64(get32(pkt, offAckEchoPSN)), uint64(h.EchoPSN)},
		{"echo ts", get64(pkt, offAckEchoTS), h.EchoTimestamp},
		{"rate hint", uint64(get32(pkt, offAckRateHint)), uint64(h.RateHint)},
		{"credit", uint64(get32(pkt, offAckCredit)), uint64(h.Credit)},
		{"ack delay", uint64(get32(pkt, offAckDelay)), uint64(h.AckDelay)},
		{"reserved", uint64(get32(pkt, offAckRsvd)), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: bytes hold %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if !bytes.Equal(pkt[offAckSack:offAckSack+32], h.Sack[:]) {
		t.Errorf("sack not at 40..71")
	}
}

// TestAckReceivedBitOrder: bit i of the bitmap is byte i/8, bit i%8 counted
// from the least significant, and it says whether PathAckSeq-i arrived.
func TestAckReceivedBitOrder(t *testing.T) {
	for i := uint32(0); i < wire.SackBits; i++ {
		h := validAck()
		h.Sack = [wire.SackBytes]byte{}
		h.Sack[0] = 1 // bit 0 (PathAckSeq itself) is always set
		h.Sack[i/8] |= 1 << (i % 8)
		a := mustParse(t, wire.AppendAck(nil, &h)).Ack()
		if got := a[offAckSack+i/8]; got&(1<<(i%8)) == 0 {
			t.Fatalf("bit %d: wire byte %d = %#02x", i, i/8, got)
		}
		for j := uint32(0); j < wire.SackBits; j++ {
			if got, want := a.Received(j), j == 0 || j == i; got != want {
				t.Fatalf("only bit %d set: Received(%d) = %v", i, j, got)
			}
		}
	}

	// Concrete bytes: byte 0 = 0x05 is bits 0 and 2; byte 1 = 0x80 is bit 15.
	h := validAck()
	h.Sack = [wire.SackBytes]byte{0x05, 0x80}
	a := mustParse(t, wire.AppendAck(nil, &h)).Ack()
	for j, want := range map[uint32]bool{0: true, 1: false, 2: true, 7: false, 8: false, 15: true, 16: false} {
		if a.Received(j) != want {
			t.Errorf("sack 05 80: Received(%d) = %v", j, !want)
		}
	}

	// Beyond the bitmap nothing is known: false, even with every bit set
	// and the bytes after the bitmap (AckDelay) all ones, so that an
	// off-by-one bound would read a set bit.
	for i := range h.Sack {
		h.Sack[i] = 0xff
	}
	h.AckDelay = ^uint32(0)
	a = mustParse(t, wire.AppendAck(nil, &h)).Ack()
	if !a.Received(255) {
		t.Errorf("all set: Received(255) = false")
	}
	for _, back := range []uint32{256, 257, 1000, 1 << 31, ^uint32(0)} {
		if a.Received(back) {
			t.Errorf("Received(%d) = true beyond the %d-bit bitmap", back, wire.SackBits)
		}
	}
}
