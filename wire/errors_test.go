package wire_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

// accept marks a case that Parse must accept: it shows that the rule under
// test fires only where it should.
const accept wire.Error = 0

type errCase struct {
	name string
	pkt  []byte
	want wire.Error
}

func runErrCases(t *testing.T, cases []errCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.want == accept {
				mustParse(t, c.pkt)
				return
			}
			wantErr(t, c.pkt, c.want)
		})
	}
}

func TestErrShort(t *testing.T) {
	// Under 12 bytes (prefix + trailer) nothing else is looked at, not
	// even the version.
	for n := 0; n < 12; n++ {
		wantErr(t, make([]byte, n), wire.ErrShort)
		b := bytes.Repeat([]byte{0xff}, n)
		wantErr(t, b, wire.ErrShort)
		for _, op := range allOps() {
			wantErr(t, validPacket(op)[:n], wire.ErrShort)
		}
	}
	// From 12 bytes on, the class decides: a packet shorter than its
	// fixed header and trailer is short, sealed or not.
	for _, op := range allOps() {
		full := validPacket(op)
		need := fixedLen(op.Class())
		for n := 12; n < need; n++ {
			wantErr(t, full[:n], wire.ErrShort)
			wantErr(t, edit(full[:n], func([]byte) {}), wire.ErrShort)
		}
	}
	// The shortest packet of each class is not short.
	h, _ := validData(wire.OpReadReq)
	if pkt := wire.AppendData(nil, &h, nil); len(pkt) != 68 {
		t.Fatalf("empty data packet is %d bytes, want 68", len(pkt))
	} else {
		mustParse(t, pkt)
	}
	for _, op := range []wire.Opcode{wire.OpAck, wire.OpNack, wire.OpConnect} {
		if pkt := validPacket(op); len(pkt) != fixedLen(op.Class()) {
			t.Errorf("%s packet is %d bytes, want %d", op, len(pkt), fixedLen(op.Class()))
		}
	}
}

func TestErrVersion(t *testing.T) {
	for _, op := range allOps() {
		for _, v := range []byte{0, 2, 3, 0x81, 0xff} {
			pkt := edit(validPacket(op), func(b []byte) { b[offVersion] = v })
			wantErr(t, pkt, wire.ErrVersion)
		}
	}
	// The version is checked before the class length: 12 bytes suffice.
	wantErr(t, edit(make([]byte, 12), func(b []byte) { b[offVersion], b[offOpcode] = 2, byte(wire.OpWrite) }), wire.ErrVersion)
}

func TestErrOpcode(t *testing.T) {
	defined := map[wire.Opcode]bool{}
	for _, op := range allOps() {
		defined[op] = true
	}
	data := validPacket(wire.OpWrite)
	for v := 0; v < 256; v++ {
		if defined[wire.Opcode(v)] {
			continue
		}
		wantErr(t, edit(data, func(b []byte) { b[offOpcode] = byte(v) }), wire.ErrOpcode)
		// Checked before any class length, so even a bare prefix says so.
		wantErr(t, edit(make([]byte, 12), func(b []byte) { b[offVersion], b[offOpcode] = 1, byte(v) }), wire.ErrOpcode)
	}
}

// TestErrCRCBitFlips flips every bit of one valid packet of every opcode
// (so every class) and requires Parse to refuse each: CRC32C catches all
// single-bit errors, and a flip in the version or opcode byte is named by
// the check that runs before the CRC. A flipped opcode may also select a
// class whose fixed part is longer than the packet (NACK 0x11 -> WRITE
// 0x01), which is ErrShort, or another class that fits, which is ErrCRC.
func TestErrCRCBitFlips(t *testing.T) {
	for _, op := range allOps() {
		pkt := validPacket(op)
		if op.Class() == wire.ClassData {
			h, _ := validData(op)
			if op != wire.OpReadReq {
				h.Offset = 0
				pkt = wire.AppendData(nil, &h, pattern(100))
			}
		}
		mustParse(t, pkt)
		b := bytes.Clone(pkt)
		for bit := 0; bit < 8*len(b); bit++ {
			i, m := bit/8, byte(1)<<(bit%8)
			b[i] ^= m
			want := wire.ErrCRC
			switch i {
			case offVersion:
				want = wire.ErrVersion
			case offOpcode:
				switch c := wire.Opcode(b[i]).Class(); {
				case c == wire.ClassInvalid:
					want = wire.ErrOpcode
				case len(b) < fixedLen(c):
					want = wire.ErrShort
				}
			}
			p, err := wire.Parse(b)
			if err == nil {
				t.Fatalf("%s: flip of byte %d bit %d parsed as %d", op, i, bit%8, p.Class)
			}
			if err != want {
				t.Fatalf("%s: flip of byte %d bit %d: %v, want %v", op, i, bit%8, err, want)
			}
			b[i] ^= m
		}
		if !bytes.Equal(b, pkt) {
			t.Fatalf("%s: test did not restore the packet", op)
		}
		zero := bytes.Clone(pkt)
		put32(zero, len(zero)-4, 0)
		wantErr(t, zero, wire.ErrCRC)
	}
}

func TestErrReserved(t *testing.T) {
	var cases []errCase
	for _, op := range allOps() {
		for bit := 2; bit < 16; bit++ {
			cases = append(cases, errCase{fmt.Sprintf("%s/flag bit %d", op, bit),
				edit(validPacket(op), func(b []byte) { put16(b, offFlags, get16(b, offFlags)|1<<bit) }),
				wire.ErrReserved})
		}
		cases = append(cases, errCase{fmt.Sprintf("%s/defined flags", op),
			edit(validPacket(op), func(b []byte) { put16(b, offFlags, wire.FlagAckReq|wire.FlagRetx) }),
			accept})
	}
	bits := func(name string, op wire.Opcode, from, to int, want wire.Error) {
		for i := from; i < to; i++ {
			for bit := 0; bit < 8; bit++ {
				cases = append(cases, errCase{fmt.Sprintf("%s/%s byte %d bit %d", op, name, i, bit),
					edit(validPacket(op), func(b []byte) { b[i] |= 1 << bit }), want})
			}
		}
	}
	for _, op := range dataOps {
		bits("reserved", op, offDataRsvd, offDataRsvd+2, wire.ErrReserved)
	}
	// For SEND the second half of the address field is reserved; for
	// WRITE it is the low half of RemoteAddr, which any value may take.
	bits("recv seq pad", wire.OpSend, offDataAddr+4, offDataAddr+8, wire.ErrReserved)
	bits("recv seq pad", wire.OpSendImm, offDataAddr+4, offDataAddr+8, wire.ErrReserved)
	bits("remote addr low", wire.OpWrite, offDataAddr+4, offDataAddr+8, accept)
	bits("recv seq", wire.OpSend, offDataAddr, offDataAddr+4, accept)
	bits("reserved", wire.OpAck, offAckRsvd, offAckRsvd+4, wire.ErrReserved)
	bits("reserved 1", wire.OpNack, offNackRsvd1, offNackRsvd1+1, wire.ErrReserved)
	bits("reserved 2", wire.OpNack, offNackRsvd2, offNackRsvd2+4, wire.ErrReserved)
	runErrCases(t, cases)
}

func TestErrLength(t *testing.T) {
	var cases []errCase
	for _, op := range dataOps {
		pkt := validPacket(op)
		pl := get16(pkt, offDataPayLen)
		for _, v := range []uint16{pl + 1, pl - 1, 0xffff} {
			if v == pl {
				continue
			}
			cases = append(cases, errCase{fmt.Sprintf("%s/payload len %d for %d", op, v, pl),
				edit(pkt, func(b []byte) { put16(b, offDataPayLen, v) }), wire.ErrLength})
		}
		cases = append(cases,
			errCase{fmt.Sprintf("%s/1 trailing byte", op), extend(pkt, 1), wire.ErrLength},
			errCase{fmt.Sprintf("%s/4 trailing bytes", op), extend(pkt, 4), wire.ErrLength})
		if op == wire.OpReadReq {
			continue // no payload and offset 0: the message bound cannot be crossed
		}
		h, p := validData(op)
		fits := func(off, msgLen uint32) []byte {
			h := h
			h.Offset, h.MsgLen = off, msgLen
			return wire.AppendData(nil, &h, p)
		}
		n := uint32(len(p))
		cases = append(cases,
			errCase{fmt.Sprintf("%s/ends at message end", op), fits(1000, 1000+n), accept},
			errCase{fmt.Sprintf("%s/ends 1 past message end", op), fits(1001, 1000+n), wire.ErrLength},
			errCase{fmt.Sprintf("%s/message shorter than payload", op), fits(0, n-1), wire.ErrLength},
			errCase{fmt.Sprintf("%s/empty message", op), fits(0, 0), wire.ErrLength},
			// offset+len wraps in 32 bits to a small value: the check
			// must not be fooled by overflow.
			errCase{fmt.Sprintf("%s/offset wraps", op), fits(^uint32(0), ^uint32(0)), wire.ErrLength},
			errCase{fmt.Sprintf("%s/at the 4 GiB end", op), fits(^uint32(0)-n, ^uint32(0)), accept},
		)
	}
	for _, op := range append([]wire.Opcode{wire.OpAck, wire.OpNack}, connOps...) {
		for _, n := range []int{1, 4, 100} {
			cases = append(cases, errCase{fmt.Sprintf("%s/%d trailing bytes", op, n),
				extend(validPacket(op), n), wire.ErrLength})
		}
	}
	runErrCases(t, cases)
}

func TestErrField(t *testing.T) {
	data := func(op wire.Opcode, f func(h *wire.DataHeader, p *[]byte)) []byte {
		h, p := validData(op)
		f(&h, &p)
		return wire.AppendData(nil, &h, p)
	}
	var cases []errCase
	for _, op := range dataOps {
		want := wire.ErrField
		if op.HasImm() {
			want = accept
		}
		cases = append(cases, errCase{fmt.Sprintf("imm on %s", op),
			data(op, func(h *wire.DataHeader, _ *[]byte) { h.Imm = 1 }), want})
	}
	for _, op := range dataOps {
		want := accept
		if op.IsSend() || op == wire.OpReadResp {
			want = wire.ErrField
		}
		cases = append(cases, errCase{fmt.Sprintf("rkey on %s", op),
			data(op, func(h *wire.DataHeader, _ *[]byte) { h.RKey = 1 }), want})
	}
	for i := 0; i < 8; i++ {
		cases = append(cases, errCase{fmt.Sprintf("remote addr byte %d on READ_RESP", i),
			data(wire.OpReadResp, func(h *wire.DataHeader, _ *[]byte) { h.RemoteAddr = 1 << (8 * i) }), wire.ErrField})
	}
	cases = append(cases,
		errCase{"payload on READ_REQ", data(wire.OpReadReq, func(h *wire.DataHeader, p *[]byte) { *p = pattern(1) }), wire.ErrField},
		errCase{"1400 B payload on READ_REQ", data(wire.OpReadReq, func(h *wire.DataHeader, p *[]byte) { *p = pattern(1400) }), wire.ErrField},
		errCase{"offset on READ_REQ", data(wire.OpReadReq, func(h *wire.DataHeader, _ *[]byte) { h.Offset = 1 }), wire.ErrField},
		errCase{"empty READ_REQ", data(wire.OpReadReq, func(h *wire.DataHeader, _ *[]byte) { h.MsgLen = 0 }), accept},
		errCase{"empty SEND", data(wire.OpSend, func(h *wire.DataHeader, p *[]byte) { *p, h.Offset, h.MsgLen = nil, 0, 0 }), accept},
	)

	ack := validPacket(wire.OpAck)
	cases = append(cases,
		errCase{"sack bit 0 clear", edit(ack, func(b []byte) { b[offAckSack] &^= 1 }), wire.ErrField},
		errCase{"sack empty", edit(ack, func(b []byte) { clear(b[offAckSack : offAckSack+32]) }), wire.ErrField},
		errCase{"sack bit 0 only", edit(ack, func(b []byte) { clear(b[offAckSack : offAckSack+32]); b[offAckSack] = 1 }), accept},
		errCase{"sack bit 7 not bit 0", edit(ack, func(b []byte) { b[offAckSack] = 0x80 }), wire.ErrField},
	)

	nack := validPacket(wire.OpNack)
	for _, r := range []byte{0, 6, 7, 0x80, 0xff} {
		cases = append(cases, errCase{fmt.Sprintf("nack reason %d", r),
			edit(nack, func(b []byte) { b[offNackReason] = r }), wire.ErrField})
	}
	for _, r := range []wire.NackReason{1, 2, 3, 4} { // 5: see TestNackUnsupportedVersionParses
		cases = append(cases, errCase{fmt.Sprintf("nack reason %d", r),
			edit(nack, func(b []byte) { b[offNackReason] = byte(r) }), accept})
	}

	conn := func(op wire.Opcode, f func(b []byte)) []byte { return edit(validPacket(op), f) }
	cases = append(cases,
		errCase{"CONNECT dst conn set", conn(wire.OpConnect, func(b []byte) { put32(b, offDst, 1) }), wire.ErrField},
		errCase{"ACCEPT dst conn set", conn(wire.OpAccept, func(b []byte) { put32(b, offDst, 1) }), accept},
		errCase{"CONNECT src conn zero", conn(wire.OpConnect, func(b []byte) { put32(b, offConnSrc, 0) }), wire.ErrField},
		errCase{"ACCEPT src conn zero", conn(wire.OpAccept, func(b []byte) { put32(b, offConnSrc, 0) }), wire.ErrField},
		errCase{"CHALLENGE src conn zero", conn(wire.OpChallenge, func(b []byte) { put32(b, offConnSrc, 0) }), accept},
	)
	for _, op := range []wire.Opcode{wire.OpConnect, wire.OpAccept} {
		for _, w := range []uint32{0, 3, 6, 1<<16 + 1, 1 << 17, 1 << 31, ^uint32(0)} {
			cases = append(cases, errCase{fmt.Sprintf("%s recv window %#x", op, w),
				conn(op, func(b []byte) { put32(b, offConnRecvWindow, w) }), wire.ErrField})
		}
		for _, w := range []uint32{1, 2, 1 << 15, wire.MaxRecvWindow} {
			cases = append(cases, errCase{fmt.Sprintf("%s recv window %#x", op, w),
				conn(op, func(b []byte) { put32(b, offConnRecvWindow, w) }), accept})
		}
		for _, w := range []uint16{0, 3, 0x8001, 0xffff} {
			cases = append(cases, errCase{fmt.Sprintf("%s msg window %#x", op, w),
				conn(op, func(b []byte) { put16(b, offConnMsgWindow, w) }), wire.ErrField})
		}
		for _, w := range []uint16{1, 0x8000} {
			cases = append(cases, errCase{fmt.Sprintf("%s msg window %#x", op, w),
				conn(op, func(b []byte) { put16(b, offConnMsgWindow, w) }), accept})
		}
		for _, m := range []uint16{0, 1, wire.MinMaxPayload - 1} {
			cases = append(cases, errCase{fmt.Sprintf("%s max payload %d", op, m),
				conn(op, func(b []byte) { put16(b, offConnMaxPayload, m) }), wire.ErrField})
		}
		for _, m := range []uint16{wire.MinMaxPayload, 0xffff} {
			cases = append(cases, errCase{fmt.Sprintf("%s max payload %d", op, m),
				conn(op, func(b []byte) { put16(b, offConnMaxPayload, m) }), accept})
		}
	}
	runErrCases(t, cases)
}
