package wire_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

func checkConn(t *testing.T, c wire.Conn, h wire.ConnHeader) {
	t.Helper()
	got := []struct {
		name      string
		got, want uint64
	}{
		{"Opcode", uint64(c.Opcode()), uint64(h.Opcode)},
		{"Flags", uint64(c.Flags()), uint64(h.Flags)},
		{"DstConn", uint64(c.DstConn()), uint64(h.DstConn)},
		{"SrcConn", uint64(c.SrcConn()), uint64(h.SrcConn)},
		{"InitialPSN", uint64(c.InitialPSN()), uint64(h.InitialPSN)},
		{"Service", uint64(c.Service()), uint64(h.Service)},
		{"RecvWindow", uint64(c.RecvWindow()), uint64(h.RecvWindow)},
		{"MaxPayload", uint64(c.MaxPayload()), uint64(h.MaxPayload)},
		{"MsgWindow", uint64(c.MsgWindow()), uint64(h.MsgWindow)},
		{"Reason", uint64(c.Reason()), uint64(h.Reason)},
		{"Paths", uint64(c.Paths()), uint64(h.Paths)},
		{"Timestamp", c.Timestamp(), h.Timestamp},
		{"Token", c.Token(), h.Token},
		{"AppReason", uint64(c.AppReason()), uint64(h.AppReason)},
		{"PrivateLen", uint64(c.PrivateLen()), uint64(h.PrivateLen)},
	}
	for _, g := range got {
		if g.got != g.want {
			t.Errorf("%s() = %#x, want %#x", g.name, g.got, g.want)
		}
	}
	if !bytes.Equal(c.Cookie(), h.Cookie[:]) {
		t.Errorf("Cookie() = % x, want % x", c.Cookie(), h.Cookie[:])
	}
	if !bytes.Equal(c.ResetToken(), h.ResetToken[:]) || !bytes.Equal(c.Private(), h.Private[:h.PrivateLen]) {
		t.Errorf("ResetToken() % x, Private() % x: want % x, % x", c.ResetToken(), c.Private(), h.ResetToken[:], h.Private[:h.PrivateLen])
	}
	var dec wire.ConnHeader
	dec.Decode(c)
	if dec != h {
		t.Errorf("Decode:\n got %+v\nwant %+v", dec, h)
	}
}

func TestConnRoundTrip(t *testing.T) {
	variants := []struct {
		name string
		f    func(h *wire.ConnHeader)
	}{
		{"typical", func(h *wire.ConnHeader) {}},
		{"smallest windows", func(h *wire.ConnHeader) { h.RecvWindow, h.MsgWindow, h.MaxPayload = 1, 1, wire.MinMaxPayload }},
		{"largest windows", func(h *wire.ConnHeader) {
			h.RecvWindow, h.MsgWindow, h.MaxPayload = wire.MaxRecvWindow, 1<<15, ^uint16(0)
		}},
		{"max fields", func(h *wire.ConnHeader) {
			h.Flags = wire.FlagAckReq | wire.FlagRetx
			if h.Opcode != wire.OpConnect {
				h.DstConn = ^uint32(0)
			}
			h.SrcConn, h.InitialPSN, h.Service = ^uint32(0), ^wire.PSN(0), ^uint32(0)
			h.Reason, h.Paths, h.Timestamp = ^wire.ConnReason(0), ^uint16(0), ^uint64(0)
			for i := range h.Cookie {
				h.Cookie[i] = 0xff
			}
		}},
	}
	for _, op := range connOps {
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s/%s", op, v.name), func(t *testing.T) {
				h := validConn(op)
				v.f(&h)
				pkt := wire.AppendConn(nil, &h)
				if want := 88 + int(h.PrivateLen); len(pkt) != want {
					t.Fatalf("AppendConn made %d bytes, want %d", len(pkt), want)
				}
				p := mustParse(t, pkt)
				if p.Class != wire.ClassConn {
					t.Fatalf("Class = %d, want ClassConn", p.Class)
				}
				checkConn(t, p.Conn(), h)

				frame := bytes.Repeat([]byte{0xa5}, len(pkt)+20)
				h.Put(frame)
				if !bytes.Equal(frame[:len(pkt)], pkt) || !bytes.Equal(frame[len(pkt):], bytes.Repeat([]byte{0xa5}, 20)) {
					t.Fatalf("Put into a dirty frame differs from AppendConn or wrote past the trailer")
				}
			})
		}
	}
}

// TestConnParamsOnlyOnHandshake: the parameter rules bind CONNECT and
// ACCEPT, which carry the parameters; the other connection packets may
// leave every parameter zero.
func TestConnParamsOnlyOnHandshake(t *testing.T) {
	for _, op := range connOps {
		h := wire.ConnHeader{Opcode: op}
		_, err := wire.Parse(wire.AppendConn(nil, &h))
		handshake := op == wire.OpConnect || op == wire.OpAccept
		switch {
		case handshake && err != wire.ErrField:
			t.Errorf("%s with zero parameters: %v, want ErrField", op, err)
		case !handshake && err != nil:
			t.Errorf("%s with zero parameters: %v, want accepted", op, err)
		}
	}
}

func TestConnLayout(t *testing.T) {
	h := validConn(wire.OpAccept)
	pkt := wire.AppendConn(nil, &h)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"opcode", uint64(pkt[offOpcode]), uint64(wire.OpAccept)},
		{"dst", uint64(get32(pkt, offDst)), uint64(h.DstConn)},
		{"src", uint64(get32(pkt, offConnSrc)), uint64(h.SrcConn)},
		{"initial psn", uint64(get32(pkt, offConnInitPSN)), uint64(h.InitialPSN)},
		{"service", uint64(get32(pkt, offConnService)), uint64(h.Service)},
		{"recv window", uint64(get32(pkt, offConnRecvWindow)), uint64(h.RecvWindow)},
		{"max payload", uint64(get16(pkt, offConnMaxPayload)), uint64(h.MaxPayload)},
		{"msg window", uint64(get16(pkt, offConnMsgWindow)), uint64(h.MsgWindow)},
		{"reason", uint64(get16(pkt, offConnReason)), uint64(h.Reason)},
		{"paths", uint64(get16(pkt, offConnPaths)), uint64(h.Paths)},
		{"timestamp", get64(pkt, offConnTimestamp), h.Timestamp},
		{"token", get64(pkt, offConnToken), h.Token},
		{"app reason", uint64(get16(pkt, offConnAppReason)), uint64(h.AppReason)},
		{"private len", uint64(get16(pkt, offConnPrivLen)), uint64(h.PrivateLen)},
		{"length", uint64(len(pkt)), uint64(88 + h.PrivateLen)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: bytes hold %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if !bytes.Equal(pkt[offConnCookie:offConnCookie+16], h.Cookie[:]) {
		t.Errorf("cookie not at 40..55")
	}
	if !bytes.Equal(pkt[offConnResetToken:offConnResetToken+16], h.ResetToken[:]) {
		t.Errorf("reset token not at 64..79")
	}
	if !bytes.Equal(pkt[offConnPrivate:offConnPrivate+int(h.PrivateLen)], h.Private[:h.PrivateLen]) {
		t.Errorf("private data not at 84..")
	}
}
