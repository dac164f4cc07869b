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
	for _, op := range []wire.Opcode{wire.OpAck, wire.OpNack, wire.OpDisconnect} {
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
// 0x01), which is ErrShort, or another class that fits, which is ErrCRC:
// that includes PROBE 0x07 (from SEND 0x03, READ_REQ 0x05, READ_RESP
// 0x06), whose field rules a packet with payload breaks but which come
// after the CRC. TestOpcodeFlipsResealed covers the flips with a good CRC.
func TestErrCRCBitFlips(t *testing.T) {
	for _, op := range allOps() {
		pkt := validPacket(op)
		if op.Class() == wire.ClassData {
			h, _ := validData(op)
			if op != wire.OpReadReq && op != wire.OpProbe { // both have no payload
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

// TestOpcodeFlipsResealed flips each bit of the opcode byte of a valid
// packet of every opcode and seals it again, as a faulty sender would: the
// CRC no longer stops it, and the packet must be judged by the rules of the
// opcode it now names. Where that is PROBE 0x07 a data packet is FIELD; a
// probe turned into SEND, READ_REQ or READ_RESP is a valid empty packet of
// that opcode. The expected error is the first rule rawRules finds broken
// (fuzz_test.go); the pinned cases, worked out by hand, check that oracle.
func TestOpcodeFlipsResealed(t *testing.T) {
	type flip struct{ from, to wire.Opcode }
	pinned := map[flip]wire.Error{
		{wire.OpProbe, wire.OpSend}:        accept, // every field SEND has is zero
		{wire.OpProbe, wire.OpReadReq}:     accept,
		{wire.OpProbe, wire.OpReadResp}:    accept,
		{wire.OpProbe, 0x17}:               wire.ErrOpcode,
		{wire.OpSend, wire.OpProbe}:        wire.ErrField, // PSN, payload, ...
		{wire.OpReadReq, wire.OpProbe}:     wire.ErrField, // PSN, RemoteAddr, RKey, ...
		{wire.OpReadResp, wire.OpProbe}:    wire.ErrField,
		{wire.OpWrite, wire.OpSend}:        wire.ErrField, // RKey, before the reserved word
		{wire.OpWriteImm, wire.OpSend}:     wire.ErrField, // Imm
		{wire.OpSend, wire.OpWrite}:        accept,        // RecvSeq reads as an address
		{wire.OpWrite, wire.OpNack}:        wire.ErrLength,
		{wire.OpAck, wire.OpNack}:          wire.ErrLength,
		{wire.OpNack, wire.OpAck}:          wire.ErrShort,
		{wire.OpNack, wire.OpWrite}:        wire.ErrShort,
		{wire.OpChallenge, wire.OpConnect}: wire.ErrField,  // DstConn set
		{wire.OpReject, wire.OpAccept}:     wire.ErrLength, // AppReason 0x1234 read as plane addresses (§7.9)
		{wire.OpReset, 0x27}:               wire.ErrOpcode,
		{wire.OpReset, wire.OpReadResp}:    wire.ErrLength, // 88 bytes: long enough, PayloadLen 0
	}
	seen := map[flip]bool{}
	for _, op := range allOps() {
		for bit := 0; bit < 8; bit++ {
			pkt := edit(validPacket(op), func(b []byte) { b[offOpcode] ^= 1 << bit })
			f := flip{op, wire.Opcode(pkt[offOpcode])}
			name := fmt.Sprintf("%s -> %s", f.from, f.to)
			want := accept
			if broken := rawRules(pkt); len(broken) > 0 {
				want = broken[0]
			}
			if w, ok := pinned[f]; ok {
				seen[f] = true
				if w != want {
					t.Fatalf("%s: rawRules gives %v, worked out by hand %v", name, want, w)
				}
			}
			if want != accept {
				wantErr(t, pkt, want)
				continue
			}
			p := mustParse(t, pkt)
			if p.Class != f.to.Class() || p.Prefix().Opcode() != f.to {
				t.Fatalf("%s: parsed as class %d opcode %s", name, p.Class, p.Prefix().Opcode())
			}
		}
	}
	for f := range pinned {
		if !seen[f] {
			t.Errorf("pinned flip %s -> %s is not a single-bit flip of a tested packet", f.from, f.to)
		}
	}
}

func TestErrReserved(t *testing.T) {
	var cases []errCase
	for _, op := range allOps() {
		for bit := 2; bit < 16; bit++ {
			want := wire.ErrReserved
			if bit == 2 && op.Class() == wire.ClassData {
				// FlagVoid: defined on data packets, without payload
				// only, and never on a probe, which abandons no PSN.
				want = wire.ErrField
				if op != wire.OpProbe && len(validPacket(op)) == wire.DataLen+wire.TrailerLen {
					want = accept
				}
			}
			cases = append(cases, errCase{fmt.Sprintf("%s/flag bit %d", op, bit),
				edit(validPacket(op), func(b []byte) { put16(b, offFlags, get16(b, offFlags)|1<<bit) }),
				want})
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
		if op == wire.OpReadReq || op == wire.OpProbe {
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
		if op.IsSend() || op == wire.OpReadResp || op == wire.OpProbe {
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

	// PROBE: a probe speaks for its path only. Each field about data,
	// any byte of it, is refused; the path's fields take any value.
	probe := validPacket(wire.OpProbe)
	probeBytes := func(b []byte, off, size int, v byte) {
		for i := off; i < off+size; i++ {
			b[i] = v
		}
	}
	for _, f := range []struct {
		name      string
		off, size int
	}{
		{"psn", offDataPSN, 4}, {"stream", offDataStream, 2}, {"msg id", offDataMsgID, 4},
		{"stream seq", offDataStreamSeq, 4}, {"msg len", offDataMsgLen, 4},
		// All 8 bytes: 52-55 are RemoteAddr's low half here, not the
		// reserved word they are for SEND, so FIELD, not RESERVED.
		{"remote addr", offDataAddr, 8}, {"rkey", offDataRKey, 4}, {"imm", offDataImm, 4},
	} {
		for i := f.off; i < f.off+f.size; i++ {
			for _, v := range []byte{0x01, 0x80} {
				cases = append(cases, errCase{fmt.Sprintf("PROBE %s byte %d = %#x", f.name, i, v),
					edit(probe, func(b []byte) { b[i] = v }), wire.ErrField})
			}
		}
	}
	for i := offDataOffset; i < offDataOffset+4; i++ {
		// Alone, a nonzero Offset passes MsgLen 0: the message-bound
		// rule (LENGTH) runs before the PROBE rules. With room in the
		// message it is FIELD, though MsgLen then is too: no packet
		// breaks the Offset rule alone.
		cases = append(cases,
			errCase{fmt.Sprintf("PROBE offset byte %d", i), edit(probe, func(b []byte) { b[i] = 1 }), wire.ErrLength},
			errCase{fmt.Sprintf("PROBE offset byte %d within msg len", i),
				edit(probe, func(b []byte) { b[i] = 1; put32(b, offDataMsgLen, ^uint32(0)) }), wire.ErrField})
	}
	for _, f := range []struct {
		name      string
		off, size int
	}{{"dst conn", offDst, 4}, {"path id", offDataPathID, 2}, {"path seq", offDataPathSeq, 4}, {"timestamp", offDataTimestamp, 8}} {
		cases = append(cases, errCase{fmt.Sprintf("PROBE %s all ones", f.name),
			edit(probe, func(b []byte) { probeBytes(b, f.off, f.size, 0xff) }), accept})
	}
	probeData := func(f func(h *wire.DataHeader, p *[]byte)) []byte { return data(wire.OpProbe, f) }
	cases = append(cases,
		errCase{"PROBE as built", probe, accept},
		errCase{"PROBE flags none", probeData(func(h *wire.DataHeader, _ *[]byte) { h.Flags = 0 }), accept},
		errCase{"PROBE ACK_REQ|RETX", probeData(func(h *wire.DataHeader, _ *[]byte) { h.Flags = wire.FlagAckReq | wire.FlagRetx }), accept},
		errCase{"PROBE VOID", probeData(func(h *wire.DataHeader, _ *[]byte) { h.Flags = wire.FlagVoid }), wire.ErrField},
		errCase{"PROBE void-packet flags", probeData(func(h *wire.DataHeader, _ *[]byte) {
			h.Flags = wire.FlagAckReq | wire.FlagRetx | wire.FlagVoid
		}), wire.ErrField},
		// Payload: past MsgLen 0 it is LENGTH (rule 2 first); with the
		// message long enough it is FIELD.
		errCase{"PROBE 1 B payload", probeData(func(h *wire.DataHeader, p *[]byte) { *p = pattern(1) }), wire.ErrLength},
		errCase{"PROBE 1 B payload in msg", probeData(func(h *wire.DataHeader, p *[]byte) { *p, h.MsgLen = pattern(1), 1 }), wire.ErrField},
		errCase{"PROBE 1400 B payload in msg", probeData(func(h *wire.DataHeader, p *[]byte) { *p, h.MsgLen = pattern(1400), 1400 }), wire.ErrField},
		errCase{"PROBE void with payload", probeData(func(h *wire.DataHeader, p *[]byte) {
			*p, h.MsgLen, h.Flags = pattern(1), 1, wire.FlagVoid
		}), wire.ErrField},
		// RecvSeq is a SEND field: the encoder does not write it for a
		// probe, so it cannot make one invalid.
		errCase{"PROBE recv seq dropped", probeData(func(h *wire.DataHeader, _ *[]byte) { h.RecvSeq = ^uint32(0) }), accept},
	)

	ack := validPacket(wire.OpAck)
	cases = append(cases,
		errCase{"sack bit 0 clear", edit(ack, func(b []byte) { b[offAckSack] &^= 1 }), wire.ErrField},
		errCase{"sack empty", edit(ack, func(b []byte) { clear(b[offAckSack : offAckSack+32]) }), wire.ErrField},
		errCase{"sack bit 0 only", edit(ack, func(b []byte) { clear(b[offAckSack : offAckSack+32]); b[offAckSack] = 1 }), accept},
		errCase{"sack bit 7 not bit 0", edit(ack, func(b []byte) { b[offAckSack] = 0x80 }), wire.ErrField},
	)

	nack := validPacket(wire.OpNack)
	for _, r := range []byte{0, 7, 8, 0x80, 0xff} {
		cases = append(cases, errCase{fmt.Sprintf("nack reason %d", r),
			edit(nack, func(b []byte) { b[offNackReason] = r }), wire.ErrField})
	}
	for _, r := range []byte{1, 2, 3, 4, 5, 6} { // REMOTE_ACCESS .. SEQUENCE
		cases = append(cases, errCase{fmt.Sprintf("nack reason %d", r),
			edit(nack, func(b []byte) { b[offNackReason] = r }), accept})
	}

	conn := func(op wire.Opcode, f func(b []byte)) []byte { return edit(validPacket(op), f) }
	cases = append(cases,
		errCase{"CONNECT dst conn set", conn(wire.OpConnect, func(b []byte) { put32(b, offDst, 1) }), wire.ErrField},
		errCase{"ACCEPT dst conn set", conn(wire.OpAccept, func(b []byte) { put32(b, offDst, 1) }), accept},
		errCase{"CONNECT src conn zero", conn(wire.OpConnect, func(b []byte) { put32(b, offConnSrc, 0) }), wire.ErrField},
		errCase{"ACCEPT src conn zero", conn(wire.OpAccept, func(b []byte) { put32(b, offConnSrc, 0) }), wire.ErrField},
		errCase{"CHALLENGE src conn zero", conn(wire.OpChallenge, func(b []byte) { put32(b, offConnSrc, 0) }), accept},
	)
	// Private data (§7.1): the length field must agree with the packet,
	// at most 64 bytes, and only on CONNECT, ACCEPT and REJECT.
	withPrivate := func(op wire.Opcode, n int) []byte {
		h := validConn(op)
		h.PrivateLen = 0
		b := wire.AppendConn(nil, &h)
		b = append(b[:len(b)-4], make([]byte, n+4)...)
		put16(b, offConnPrivLen, uint16(n))
		wire.Seal(b)
		return b
	}
	for _, op := range connOps {
		private := op == wire.OpConnect || op == wire.OpAccept || op == wire.OpReject
		for _, n := range []int{1, 64, 65, 200} {
			want := accept
			if n > 64 || !private {
				want = wire.ErrField
			}
			cases = append(cases, errCase{fmt.Sprintf("%s private %d", op, n), withPrivate(op, n), want})
		}
		long := withPrivate(op, 0)
		put16(long, offConnPrivLen, 1)
		wire.Seal(long)
		cases = append(cases, errCase{fmt.Sprintf("%s private length past the end", op), long, wire.ErrLength})
	}
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
