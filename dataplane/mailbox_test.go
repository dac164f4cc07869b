package dataplane

import (
	"net/netip"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

// BenchmarkMailbox: the cost of handing one 1452-byte packet to another
// engine (copy in, publish, drain), per packet.
func BenchmarkMailbox(b *testing.B) {
	m := NewMailbox(256, 1500)
	p := RxPacket{Payload: make([]byte, 1452), From: netip.MustParseAddr("10.0.0.1")}
	sink := 0
	f := func(s *mailSlot) { sink += s.n }
	b.ReportAllocs()
	b.SetBytes(1452)
	for i := 0; i < b.N; i += 32 {
		for k := 0; k < 32; k++ {
			m.put(&p)
		}
		m.publish()
		m.drain(f)
	}
	_ = sink
}

// TestOwnerOfConnect: a CONNECT, which names no connection yet, belongs to
// the engine its service is tagged with; other packets to the tag of
// their destination connection; set-up replies to whoever got them.
func TestOwnerOfConnect(t *testing.T) {
	mask := IDMask(4)
	pkt := make([]byte, wire.ConnLen+wire.TrailerLen)
	for _, tc := range []struct {
		h    wire.ConnHeader
		want int
	}{
		{wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: 0x77, Service: 0x123456}, int(0x123456 & mask)},
		{wire.ConnHeader{Opcode: wire.OpConnect, SrcConn: 0x77, Service: 0x123457}, int(0x123457 & mask)},
		{wire.ConnHeader{Opcode: wire.OpAccept, DstConn: 0x1002, SrcConn: 0x77, Service: 0x123457}, int(0x1002 & mask)},
		{wire.ConnHeader{Opcode: wire.OpReject, SrcConn: 0x77, Service: 0x123457}, -1},
	} {
		tc.h.Put(pkt)
		if got := owner(pkt, mask); got != tc.want {
			t.Errorf("%v to conn %#x for service %#x: owner %d, want %d", tc.h.Opcode, tc.h.DstConn, tc.h.Service, got, tc.want)
		}
	}
	if got := owner(pkt[:10], mask); got != -1 {
		t.Errorf("truncated: owner %d", got)
	}
}
