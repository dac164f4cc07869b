package wire_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

// wantData is what Decode must give back for h: the encoder carries
// RemoteAddr only for RMA and READ opcodes and RecvSeq only for SEND, so the
// other one legitimately reads back as zero.
func wantData(h wire.DataHeader, payloadLen int) wire.DataHeader {
	if h.Opcode.IsSend() {
		h.RemoteAddr = 0
	} else {
		h.RecvSeq = 0
	}
	h.PayloadLen = uint16(payloadLen)
	return h
}

// checkData compares every accessor of d with the header and payload it
// was built from.
func checkData(t *testing.T, d wire.Data, h wire.DataHeader, payload []byte) {
	t.Helper()
	w := wantData(h, len(payload))
	got := []struct {
		name      string
		got, want uint64
	}{
		{"Opcode", uint64(d.Opcode()), uint64(w.Opcode)},
		{"Flags", uint64(d.Flags()), uint64(w.Flags)},
		{"DstConn", uint64(d.DstConn()), uint64(w.DstConn)},
		{"PSN", uint64(d.PSN()), uint64(w.PSN)},
		{"PathID", uint64(d.PathID()), uint64(w.PathID)},
		{"Stream", uint64(d.Stream()), uint64(w.Stream)},
		{"PathSeq", uint64(d.PathSeq()), uint64(w.PathSeq)},
		{"MsgID", uint64(d.MsgID()), uint64(w.MsgID)},
		{"StreamSeq", uint64(d.StreamSeq()), uint64(w.StreamSeq)},
		{"Offset", uint64(d.Offset()), uint64(w.Offset)},
		{"MsgLen", uint64(d.MsgLen()), uint64(w.MsgLen)},
		{"PayloadLen", uint64(d.PayloadLen()), uint64(len(payload))},
		{"Timestamp", d.Timestamp(), w.Timestamp},
		{"RKey", uint64(d.RKey()), uint64(w.RKey)},
		{"Imm", uint64(d.Imm()), uint64(w.Imm)},
	}
	for _, g := range got {
		if g.got != g.want {
			t.Errorf("%s() = %#x, want %#x", g.name, g.got, g.want)
		}
	}
	if w.Opcode.IsSend() {
		if d.RecvSeq() != w.RecvSeq {
			t.Errorf("RecvSeq() = %d, want %d", d.RecvSeq(), w.RecvSeq)
		}
	} else if d.RemoteAddr() != w.RemoteAddr {
		t.Errorf("RemoteAddr() = %#x, want %#x", d.RemoteAddr(), w.RemoteAddr)
	}
	if !bytes.Equal(d.Payload(), payload) {
		t.Errorf("Payload() is %d bytes, differs from the %d sent", len(d.Payload()), len(payload))
	}
	var dec wire.DataHeader
	dec.Decode(d)
	if dec != w {
		t.Errorf("Decode:\n got %+v\nwant %+v", dec, w)
	}
}

func TestDataRoundTrip(t *testing.T) {
	type variant struct {
		name string
		f    func(h *wire.DataHeader, p []byte) []byte
	}
	variants := []variant{
		{"base", func(h *wire.DataHeader, p []byte) []byte { return p }},
		{"empty", func(h *wire.DataHeader, p []byte) []byte {
			if h.Opcode != wire.OpReadReq {
				h.Offset = h.MsgLen
			}
			return nil
		}},
		{"one byte at end", func(h *wire.DataHeader, p []byte) []byte {
			if h.Opcode == wire.OpReadReq {
				return nil
			}
			h.Offset = h.MsgLen - 1
			return p[:1]
		}},
		{"flags none", func(h *wire.DataHeader, p []byte) []byte { h.Flags = 0; return p }},
		{"flags all", func(h *wire.DataHeader, p []byte) []byte { h.Flags = wire.FlagAckReq | wire.FlagRetx; return p }},
		{"max fields", func(h *wire.DataHeader, p []byte) []byte {
			h.DstConn, h.PSN, h.PathID, h.Stream = ^uint32(0), ^wire.PSN(0), ^uint16(0), ^uint16(0)
			h.PathSeq, h.MsgID, h.StreamSeq, h.Timestamp = ^uint32(0), ^uint32(0), ^uint32(0), ^uint64(0)
			h.MsgLen = ^uint32(0)
			h.Offset = h.MsgLen - uint32(len(p))
			switch {
			case h.Opcode == wire.OpReadReq:
				h.Offset = 0
				h.RemoteAddr, h.RKey = ^uint64(0), ^uint32(0)
			case h.Opcode.IsWrite():
				h.RemoteAddr, h.RKey = ^uint64(0), ^uint32(0)
			case h.Opcode.IsSend():
				h.RecvSeq = ^uint32(0)
			}
			if h.Opcode.HasImm() {
				h.Imm = ^uint32(0)
			}
			return p
		}},
		// Fields the encoder must drop for the opcode, without leaking
		// them into the bytes (a SEND's RemoteAddr would land in the
		// reserved half of the address field and fail validation).
		{"dropped field", func(h *wire.DataHeader, p []byte) []byte {
			if h.Opcode.IsSend() {
				h.RemoteAddr = 0xffffffffffffffff
			} else {
				h.RecvSeq = 0xffffffff
			}
			return p
		}},
	}
	for _, op := range dataOps {
		for _, v := range variants {
			t.Run(fmt.Sprintf("%s/%s", op, v.name), func(t *testing.T) {
				h, p := validData(op)
				p = v.f(&h, p)
				pkt := wire.AppendData(nil, &h, p)
				if want := 64 + len(p) + 4; len(pkt) != want {
					t.Fatalf("AppendData made %d bytes, want %d", len(pkt), want)
				}
				if h.PayloadLen != uint16(len(p)) {
					t.Fatalf("AppendData left PayloadLen %d for a %d-byte payload", h.PayloadLen, len(p))
				}
				pk := mustParse(t, pkt)
				if pk.Class != wire.ClassData {
					t.Fatalf("Class = %d, want ClassData", pk.Class)
				}
				checkData(t, pk.Data(), h, p)

				// The in-place path an engine uses: Put into a dirty
				// frame, copy the payload, Seal; it must give the same
				// bytes as AppendData.
				frame := bytes.Repeat([]byte{0xa5}, len(pkt)+16)
				h.Put(frame)
				if !bytes.Equal(frame[64:], bytes.Repeat([]byte{0xa5}, len(frame)-64)) {
					t.Fatalf("Put wrote past the 64-byte header")
				}
				frame = frame[:len(pkt)]
				copy(frame[64:], p)
				wire.Seal(frame)
				if !bytes.Equal(frame, pkt) {
					t.Fatalf("Put+Seal into a dirty frame differs from AppendData:\n% x\n% x", frame[:64], pkt[:64])
				}
			})
		}
	}
}

// TestDataLayout checks each field's bytes at the offsets of §4.1.
func TestDataLayout(t *testing.T) {
	h, p := validData(wire.OpWriteImm)
	pkt := wire.AppendData(nil, &h, p)
	checks := []struct {
		name      string
		got, want uint64
	}{
		{"version", uint64(pkt[offVersion]), 1},
		{"opcode", uint64(pkt[offOpcode]), uint64(wire.OpWriteImm)},
		{"flags", uint64(get16(pkt, offFlags)), uint64(h.Flags)},
		{"dst", uint64(get32(pkt, offDst)), uint64(h.DstConn)},
		{"psn", uint64(get32(pkt, offDataPSN)), uint64(h.PSN)},
		{"path id", uint64(get16(pkt, offDataPathID)), uint64(h.PathID)},
		{"stream", uint64(get16(pkt, offDataStream)), uint64(h.Stream)},
		{"path seq", uint64(get32(pkt, offDataPathSeq)), uint64(h.PathSeq)},
		{"msg id", uint64(get32(pkt, offDataMsgID)), uint64(h.MsgID)},
		{"stream seq", uint64(get32(pkt, offDataStreamSeq)), uint64(h.StreamSeq)},
		{"offset", uint64(get32(pkt, offDataOffset)), uint64(h.Offset)},
		{"msg len", uint64(get32(pkt, offDataMsgLen)), uint64(h.MsgLen)},
		{"payload len", uint64(get16(pkt, offDataPayLen)), uint64(len(p))},
		{"reserved", uint64(get16(pkt, offDataRsvd)), 0},
		{"timestamp", get64(pkt, offDataTimestamp), h.Timestamp},
		{"remote addr", get64(pkt, offDataAddr), h.RemoteAddr},
		{"rkey", uint64(get32(pkt, offDataRKey)), uint64(h.RKey)},
		{"imm", uint64(get32(pkt, offDataImm)), uint64(h.Imm)},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: bytes hold %#x, want %#x", c.name, c.got, c.want)
		}
	}
	if !bytes.Equal(pkt[64:64+len(p)], p) {
		t.Errorf("payload not at offset 64")
	}

	h, p = validData(wire.OpSend)
	h.RemoteAddr = 0xffffffffffffffff // must not reach the wire for SEND
	pkt = wire.AppendData(nil, &h, p)
	if got := get32(pkt, offDataAddr); got != h.RecvSeq {
		t.Errorf("SEND recv seq at 48: %#x, want %#x", got, h.RecvSeq)
	}
	if got := get32(pkt, offDataAddr+4); got != 0 {
		t.Errorf("SEND reserved word at 52: %#x, want 0", got)
	}
}

// TestAppendData checks that AppendData keeps what b held, uses spare
// capacity in place and grows when there is none.
func TestAppendData(t *testing.T) {
	h, p := validData(wire.OpWrite)
	want := wire.AppendData(nil, &h, p)

	head := []byte("earlier packets")
	got := wire.AppendData(bytes.Clone(head), &h, p)
	if !bytes.Equal(got[:len(head)], head) || !bytes.Equal(got[len(head):], want) {
		t.Fatalf("AppendData after %d bytes: prefix or packet changed", len(head))
	}

	buf := make([]byte, 3, 3+len(want)+10)
	got = wire.AppendData(buf, &h, p)
	if &got[0] != &buf[0] {
		t.Fatalf("AppendData reallocated although capacity sufficed")
	}
	if !bytes.Equal(got[3:], want) {
		t.Fatalf("AppendData into spare capacity differs")
	}
	mustParse(t, got[3:])
}

// TestDataMaxPayload checks the boundary of the 16-bit length field: a
// MaxPayload-byte payload round-trips; one byte more cannot be described,
// and the packet AppendData then makes must never parse (it would otherwise
// place a truncated payload).
func TestDataMaxPayload(t *testing.T) {
	h, _ := validData(wire.OpWrite)
	h.Offset, h.MsgLen = 0, 1<<20
	p := pattern(wire.MaxPayload)
	pkt := wire.AppendData(nil, &h, p)
	checkData(t, mustParse(t, pkt).Data(), h, p)

	// A payload the 16-bit length field cannot describe is refused by
	// the encoder rather than written with a wrapped length.
	for _, n := range []int{wire.MaxPayload + 1, 2 * (wire.MaxPayload + 1)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendData accepted a %d-byte payload", n)
				}
			}()
			wire.AppendData(nil, &h, pattern(n))
		}()
	}
}
