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
			if h.Opcode == wire.OpReadReq || h.Opcode == wire.OpProbe {
				return nil // no payload allowed
			}
			h.Offset = h.MsgLen - 1
			return p[:1]
		}},
		{"flags none", func(h *wire.DataHeader, p []byte) []byte { h.Flags = 0; return p }},
		{"flags all", func(h *wire.DataHeader, p []byte) []byte { h.Flags = wire.FlagAckReq | wire.FlagRetx; return p }},
		{"max fields", func(h *wire.DataHeader, p []byte) []byte {
			if h.Opcode == wire.OpProbe { // only the path's fields are free
				h.DstConn, h.PathID, h.PathSeq, h.Timestamp = ^uint32(0), ^uint16(0), ^uint32(0), ^uint64(0)
				return p
			}
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

// TestProbeRoundTrip runs PROBE through every combination of its free
// fields (DstConn, the ACK_REQ and RETX flags, PathID, PathSeq, Timestamp)
// at zero, a typical value and all ones: each must parse, read back through
// the view and Decode, sit at its offset of §4.1, and leave every byte about
// data zero, the packet 68 bytes long.
func TestProbeRoundTrip(t *testing.T) {
	flags := []uint16{0, wire.FlagAckReq, wire.FlagRetx, wire.FlagAckReq | wire.FlagRetx}
	dsts := []uint32{0, 0x0a0b0c0d, ^uint32(0)}
	pathIDs := []uint16{0, 0x1234, ^uint16(0)}
	pathSeqs := []uint32{0, 0x01020304, ^uint32(0)}
	stamps := []uint64{0, 0x0102030405060708, ^uint64(0)}
	// Bytes a probe must leave zero: PSN, Stream, MsgID to Reserved,
	// RemoteAddr, RKey, Imm.
	zero := [][2]int{{offDataPSN, offDataPathID}, {offDataStream, offDataPathSeq},
		{offDataMsgID, offDataTimestamp}, {offDataAddr, 64}}
	n := 0
	for _, fl := range flags {
		for _, dst := range dsts {
			for _, id := range pathIDs {
				for _, seq := range pathSeqs {
					for _, ts := range stamps {
						h := wire.DataHeader{Opcode: wire.OpProbe, Flags: fl, DstConn: dst,
							PathID: id, PathSeq: seq, Timestamp: ts}
						name := fmt.Sprintf("flags=%d/dst=%#x/path=%#x/seq=%#x/ts=%#x", fl, dst, id, seq, ts)
						pkt := wire.AppendData(nil, &h, nil)
						if len(pkt) != 68 {
							t.Fatalf("%s: AppendData made %d bytes, want 68", name, len(pkt))
						}
						p, err := wire.Parse(pkt)
						if err != nil {
							t.Fatalf("%s: Parse: %v", name, err)
						}
						if p.Class != wire.ClassData || p.Data().Opcode() != wire.OpProbe || pkt[offOpcode] != 0x07 {
							t.Fatalf("%s: class %d opcode %s, byte %#x", name, p.Class, p.Data().Opcode(), pkt[offOpcode])
						}
						checkData(t, p.Data(), h, nil)
						if get16(pkt, offFlags) != fl || get32(pkt, offDst) != dst || get16(pkt, offDataPathID) != id ||
							get32(pkt, offDataPathSeq) != seq || get64(pkt, offDataTimestamp) != ts {
							t.Fatalf("%s: a free field is not at its offset:\n% x", name, pkt)
						}
						for _, z := range zero {
							if !bytes.Equal(pkt[z[0]:z[1]], make([]byte, z[1]-z[0])) {
								t.Fatalf("%s: bytes %d..%d not zero: % x", name, z[0], z[1]-1, pkt[z[0]:z[1]])
							}
						}
						frame := bytes.Repeat([]byte{0xa5}, 80)
						h.Put(frame)
						frame = frame[:68]
						wire.Seal(frame)
						if !bytes.Equal(frame, pkt) {
							t.Fatalf("%s: Put+Seal into a dirty frame differs from AppendData", name)
						}
						n++
					}
				}
			}
		}
	}
	if n != 4*3*3*3*3 {
		t.Fatalf("ran %d combinations", n)
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
