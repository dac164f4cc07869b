package wire_test

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"math/bits"
	"slices"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic, never
// write to its input, and give the verdict rawRules gives: accept exactly
// the packets that break no rule, else fail with the first rule broken.
// When it accepts, decoding into the header struct and encoding again must
// give back the input byte for byte: the format has no slack (reserved
// fields must be zero, lengths must agree, the CRC is a function of the
// rest), so any difference means the parser accepted something the encoder
// cannot say, or the encoder says something the parser did not read.
func FuzzParse(f *testing.F) {
	for _, op := range allOps() {
		pkt := validPacket(op)
		f.Add(pkt)
		f.Add(pkt[:len(pkt)-1])                           // short, or a length mismatch for data
		f.Add(extend(pkt, 1))                             // trailing byte
		f.Add(edit(pkt, func(b []byte) { b[2] = 0x80 }))  // reserved flag
		f.Add(edit(pkt, func(b []byte) { b[0] = 2 }))     // version
		f.Add(edit(pkt, func(b []byte) { b[1] ^= 0x40 })) // opcode
		flipped := bytes.Clone(pkt)
		flipped[len(flipped)/2] ^= 0x10 // CRC
		f.Add(flipped)
	}
	for _, r := range nackReasons {
		h := validNack(r)
		f.Add(wire.AppendNack(nil, &h))
	}
	h, _ := validData(wire.OpSend)
	f.Add(wire.AppendData(nil, &h, nil))
	h.Flags = wire.FlagAckReq | wire.FlagRetx | wire.FlagVoid // a void packet (§6.3)
	f.Add(wire.AppendData(nil, &h, nil))
	f.Add(wire.AppendData(nil, &h, pattern(1))) // void with payload
	h, _ = validData(wire.OpProbe)
	h.Flags = wire.FlagVoid // VOID is refused on a probe
	f.Add(wire.AppendData(nil, &h, nil))
	h, _ = validData(wire.OpProbe)
	h.PSN = 1
	f.Add(wire.AppendData(nil, &h, nil))
	f.Add([]byte{})
	f.Add(make([]byte, 12))

	f.Fuzz(func(t *testing.T, in []byte) {
		checkParse(t, in)
		// A random mutation almost never keeps the CRC right, so the
		// raw input mostly exercises the checks up to the CRC. The same
		// bytes sealed again reach the header rules behind it.
		if len(in) >= wire.TrailerLen {
			sealed := bytes.Clone(in)
			wire.Seal(sealed)
			checkParse(t, sealed)
		}
	})
}

// checkParse is the body of FuzzParse for one input.
func checkParse(t *testing.T, in []byte) {
	t.Helper()
	orig := bytes.Clone(in)
	p, err := wire.Parse(in)
	if !bytes.Equal(in, orig) {
		t.Fatalf("Parse wrote to its input")
	}
	checkVerdict(t, err, rawRules(in))
	if err != nil {
		e, ok := err.(wire.Error)
		if !ok || e.Reason() <= 0 || e.Reason() >= wire.NumReasons {
			t.Fatalf("Parse returned %T %v, not a defined wire.Error", err, err)
		}
		if p.Class != wire.ClassInvalid || p.Bytes() != nil {
			t.Fatalf("Parse failed with %v but returned class %d", err, p.Class)
		}
		return
	}
	if len(in) < 12 || in[0] != wire.Version {
		t.Fatalf("accepted %d bytes with version %d", len(in), in[0])
	}
	if p.Class == wire.ClassInvalid || p.Class != wire.Opcode(in[1]).Class() {
		t.Fatalf("accepted opcode %s as class %d", wire.Opcode(in[1]), p.Class)
	}
	if n := len(in) - 4; binary.BigEndian.Uint32(in[n:]) != wire.Checksum(in[:n]) {
		t.Fatalf("accepted a packet whose CRC does not match")
	}
	var re []byte
	switch p.Class {
	case wire.ClassData:
		d := p.Data()
		var h wire.DataHeader
		h.Decode(d)
		if int(h.PayloadLen) != len(d.Payload()) || len(in) != 64+len(d.Payload())+4 {
			t.Fatalf("payload length %d, payload %d bytes, packet %d", h.PayloadLen, len(d.Payload()), len(in))
		}
		re = wire.AppendData(nil, &h, d.Payload())
	case wire.ClassAck:
		a := p.Ack()
		if !a.Received(0) {
			t.Fatalf("accepted an ack whose PathAckSeq is not marked received")
		}
		for i := uint32(0); i < 300; i++ {
			_ = a.Received(i)
		}
		var h wire.AckHeader
		h.Decode(a)
		re = wire.AppendAck(nil, &h)
	case wire.ClassNack:
		var h wire.NackHeader
		h.Decode(p.Nack())
		re = wire.AppendNack(nil, &h)
	case wire.ClassConn:
		var h wire.ConnHeader
		h.Decode(p.Conn())
		re = wire.AppendConn(nil, &h)
	}
	if !bytes.Equal(re, in) {
		i := 0
		for i < min(len(in), len(re)) && in[i] == re[i] {
			i++
		}
		lo, hi := max(0, i-8), min(i+8, len(in), len(re))
		t.Fatalf("re-encoding a parsed %s (%d bytes) differs from byte %d (re-encoded %d bytes):\n in[%d:%d] % x\nout[%d:%d] % x",
			wire.Opcode(in[1]), len(in), i, len(re), lo, hi, in[lo:hi], lo, hi, re[lo:hi])
	}
}

// The acceptance rules below are transcribed from the format's rules, not
// from the validate methods, and name opcodes explicitly, so that a wrong
// predicate helper in the package does not vouch for itself. Each returns
// the rules a packet breaks in the order the receiver checks them (§3.5,
// then the class's own list, §4.1.1, §5.1, §6.1, §7.1), so the first is the
// error Parse must name: empty means the packet is valid.

const definedFlags = 0x0003 // ACK_REQ | RETX, on every packet

// voidFlag is VOID (bit 2): defined on data packets without payload only.
const voidFlag = 0x0004

// maxNackReason is the highest reason v1 defines: SEQUENCE (§6.2).
const maxNackReason = 6

// dataRules judges h encoded with an n-byte payload: AppendData writes
// PayloadLen = n and zero reserved words itself.
func dataRules(h wire.DataHeader, n int) []wire.Error {
	h.PayloadLen = uint16(n)
	return dataFieldRules(h, n, 0, 0)
}

// dataFieldRules judges a data header as it stands in the bytes: h with
// PayloadLen the length field, RemoteAddr the 8 bytes at 48 and RecvSeq the
// first 4 of them whatever the opcode; n the payload bytes the packet
// really holds; rsvd bytes 38-39; pad bytes 52-55.
func dataFieldRules(h wire.DataHeader, n int, rsvd uint16, pad uint32) []wire.Error {
	var v []wire.Error
	op := h.Opcode
	hasImm := op == wire.OpWriteImm || op == wire.OpSendImm
	pl := int(h.PayloadLen)
	void := h.Flags&voidFlag != 0
	if h.Flags&^(definedFlags|voidFlag) != 0 { // §3.5 step 6
		v = append(v, wire.ErrReserved)
	}
	if pl != n { // §4.1.1 rule 1
		v = append(v, wire.ErrLength)
	}
	if uint64(h.Offset)+uint64(pl) > uint64(h.MsgLen) { // 2
		v = append(v, wire.ErrLength)
	}
	if rsvd != 0 { // 3
		v = append(v, wire.ErrReserved)
	}
	if void && pl != 0 { // 4
		v = append(v, wire.ErrField)
	}
	if !hasImm && h.Imm != 0 { // 5
		v = append(v, wire.ErrField)
	}
	switch op { // 6-8 and PROBE: one opcode each, so their order is moot
	case wire.OpProbe:
		// A probe speaks for its path only: DstConn, ACK_REQ, RETX,
		// PathID, PathSeq and Timestamp are free, all else is zero.
		if pl != 0 || void || h.PSN != 0 || h.Stream != 0 || h.MsgID != 0 || h.StreamSeq != 0 ||
			h.Offset != 0 || h.MsgLen != 0 || h.RemoteAddr != 0 || h.RKey != 0 {
			v = append(v, wire.ErrField)
		}
	case wire.OpReadReq:
		if pl != 0 || h.Offset != 0 {
			v = append(v, wire.ErrField)
		}
	case wire.OpSend, wire.OpSendImm:
		if h.RKey != 0 {
			v = append(v, wire.ErrField)
		}
		if pad != 0 {
			v = append(v, wire.ErrReserved)
		}
	case wire.OpReadResp:
		if h.RKey != 0 || h.RemoteAddr != 0 {
			v = append(v, wire.ErrField)
		}
	}
	return v
}

// ackRules judges h as AckHeader.Put encodes it.
func ackRules(h wire.AckHeader) []wire.Error { return ackFieldRules(h, 84, 0) }

// ackFieldRules judges an ack of size bytes with reserved word rsvd.
func ackFieldRules(h wire.AckHeader, size int, rsvd uint32) []wire.Error {
	var v []wire.Error
	if h.Flags&^definedFlags != 0 {
		v = append(v, wire.ErrReserved)
	}
	if size != 84 {
		v = append(v, wire.ErrLength)
	}
	if rsvd != 0 {
		v = append(v, wire.ErrReserved)
	}
	if h.Sack[0]&1 == 0 {
		v = append(v, wire.ErrField)
	}
	return v
}

// nackRules judges h as NackHeader.Put encodes it.
func nackRules(h wire.NackHeader) []wire.Error { return nackFieldRules(h, 44, 0, 0) }

// nackFieldRules judges a nack of size bytes with reserved byte rsvd1 (15)
// and reserved word rsvd2 (36-39).
func nackFieldRules(h wire.NackHeader, size int, rsvd1 uint8, rsvd2 uint32) []wire.Error {
	var v []wire.Error
	if h.Flags&^definedFlags != 0 {
		v = append(v, wire.ErrReserved)
	}
	if size != 44 {
		v = append(v, wire.ErrLength)
	}
	if rsvd1 != 0 || rsvd2 != 0 {
		v = append(v, wire.ErrReserved)
	}
	if h.Reason < 1 || h.Reason > maxNackReason {
		v = append(v, wire.ErrField)
	}
	return v
}

// connRules judges h as ConnHeader.Put encodes it.
func connRules(h wire.ConnHeader) []wire.Error {
	planes := 0
	if h.Opcode == wire.OpConnect || h.Opcode == wire.OpAccept {
		h.PlaneAddrs = min(h.PlaneAddrs, 7) // what Put writes
		planes = int(h.PlaneAddrs)
	}
	return connFieldRules(h, 88+int(min(h.PrivateLen, 64))+16*planes)
}

// connFieldRules judges a conn packet of size bytes whose offset 80 holds
// h.PlaneAddrs (CONNECT, ACCEPT: §7.9) or h.AppReason (others).
func connFieldRules(h wire.ConnHeader, size int) []wire.Error {
	var v []wire.Error
	if h.Flags&^definedFlags != 0 {
		v = append(v, wire.ErrReserved)
	}
	planes := h.Opcode == wire.OpConnect || h.Opcode == wire.OpAccept
	addrs := 0
	if planes {
		addrs = int(h.PlaneAddrs)
	}
	if size != 88+int(h.PrivateLen)+16*addrs {
		v = append(v, wire.ErrLength)
	}
	private := h.Opcode == wire.OpConnect || h.Opcode == wire.OpAccept || h.Opcode == wire.OpReject
	if h.PrivateLen > 64 || h.PrivateLen != 0 && !private {
		v = append(v, wire.ErrField)
	}
	if addrs > 7 {
		v = append(v, wire.ErrField)
	}
	if h.Opcode != wire.OpConnect && h.Opcode != wire.OpAccept {
		return v
	}
	if h.Opcode == wire.OpConnect && h.DstConn != 0 {
		v = append(v, wire.ErrField)
	}
	if h.SrcConn == 0 {
		v = append(v, wire.ErrField)
	}
	if bits.OnesCount32(h.RecvWindow) != 1 || h.RecvWindow > 1<<16 {
		v = append(v, wire.ErrField)
	}
	if bits.OnesCount16(h.MsgWindow) != 1 {
		v = append(v, wire.ErrField)
	}
	if h.MaxPayload < 256 {
		v = append(v, wire.ErrField)
	}
	return v
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// rawRules judges arbitrary bytes as a receiver must (§3.5): the steps up
// to the CRC here, with the opcode values and class sizes of §3.2 and §3.4
// written out, then the class's rules on the fields read at the offsets of
// the layout tables.
func rawRules(b []byte) []wire.Error {
	one := func(e wire.Error) []wire.Error { return []wire.Error{e} }
	if len(b) < 12 {
		return one(wire.ErrShort)
	}
	if b[offVersion] != 1 {
		return one(wire.ErrVersion)
	}
	var fixed int
	switch b[offOpcode] {
	case 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07: // WRITE .. READ_RESP, PROBE
		fixed = 64
	case 0x10: // ACK
		fixed = 80
	case 0x11: // NACK
		fixed = 40
	case 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26: // CONNECT .. RESET
		fixed = 84
	default:
		return one(wire.ErrOpcode)
	}
	size := len(b)
	if size < fixed+4 {
		return one(wire.ErrShort)
	}
	if get32(b, size-4) != crc32.Checksum(b[:size-4], castagnoli) {
		return one(wire.ErrCRC)
	}
	op, flags, dst := wire.Opcode(b[offOpcode]), get16(b, offFlags), get32(b, offDst)
	switch fixed {
	case 64:
		h := wire.DataHeader{
			Opcode: op, Flags: flags, DstConn: dst, PSN: wire.PSN(get32(b, offDataPSN)),
			PathID: get16(b, offDataPathID), Stream: get16(b, offDataStream), PathSeq: get32(b, offDataPathSeq),
			MsgID: get32(b, offDataMsgID), StreamSeq: get32(b, offDataStreamSeq), Offset: get32(b, offDataOffset),
			MsgLen: get32(b, offDataMsgLen), PayloadLen: get16(b, offDataPayLen),
			Timestamp: get64(b, offDataTimestamp), RemoteAddr: get64(b, offDataAddr), RecvSeq: get32(b, offDataAddr),
			RKey: get32(b, offDataRKey), Imm: get32(b, offDataImm),
		}
		return dataFieldRules(h, size-68, get16(b, offDataRsvd), get32(b, offDataAddr+4))
	case 80:
		h := wire.AckHeader{Flags: flags}
		copy(h.Sack[:], b[offAckSack:offAckSack+32])
		return ackFieldRules(h, size, get32(b, offAckRsvd))
	case 40:
		h := wire.NackHeader{Flags: flags, Reason: wire.NackReason(b[offNackReason])}
		return nackFieldRules(h, size, b[offNackRsvd1], get32(b, offNackRsvd2))
	default:
		h := wire.ConnHeader{
			Opcode: op, Flags: flags, DstConn: dst, SrcConn: get32(b, offConnSrc),
			RecvWindow: get32(b, offConnRecvWindow), MaxPayload: get16(b, offConnMaxPayload),
			MsgWindow: get16(b, offConnMsgWindow), PrivateLen: get16(b, offConnPrivLen),
			PlaneAddrs: get16(b, offConnAppReason),
		}
		return connFieldRules(h, size)
	}
}

// checkVerdict requires Parse to accept exactly when no rule is broken,
// and otherwise to reject with the error of the first broken rule: the
// receiver stops at the first failure (§3.5), so drop counters agree
// between implementations.
func checkVerdict(t *testing.T, err error, broken []wire.Error) bool {
	t.Helper()
	if len(broken) == 0 {
		if err != nil {
			t.Fatalf("Parse rejected a valid packet: %v", err)
		}
		return true
	}
	if err == nil {
		t.Fatalf("Parse accepted a packet that breaks %v", broken)
	}
	if e, ok := err.(wire.Error); !ok || e != broken[0] {
		t.Fatalf("Parse = %v, want %v (the first of the broken rules %v)", err, broken[0], broken)
	}
	return false
}

func addData(f *testing.F, h wire.DataHeader, payload []byte) {
	f.Add(uint8(slices.Index(dataOps, h.Opcode)), h.Flags, h.DstConn, uint32(h.PSN), h.PathID, h.Stream,
		h.PathSeq, h.MsgID, h.StreamSeq, h.Offset, h.MsgLen, h.Timestamp, h.RemoteAddr, h.RecvSeq,
		h.RKey, h.Imm, payload)
}

func FuzzData(f *testing.F) {
	for _, op := range dataOps {
		h, p := validData(op)
		addData(f, h, p[:min(len(p), 64)])
		h.Imm, h.RKey, h.RemoteAddr, h.Flags = 1, 1, 1, 0x8000
		addData(f, h, p)
	}
	// A probe breaking one rule at a time, so the fuzzer starts next to
	// each edge of the PROBE rules.
	for _, mod := range []func(h *wire.DataHeader, p *[]byte){
		func(h *wire.DataHeader, p *[]byte) { h.Flags = wire.FlagAckReq | wire.FlagRetx },
		func(h *wire.DataHeader, p *[]byte) { h.Flags |= wire.FlagVoid },
		func(h *wire.DataHeader, p *[]byte) { *p = pattern(1) },
		func(h *wire.DataHeader, p *[]byte) { *p, h.MsgLen = pattern(1), 1 },
		func(h *wire.DataHeader, p *[]byte) { h.PSN = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.Stream = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.MsgID = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.StreamSeq = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.Offset = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.MsgLen = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.RemoteAddr = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.RecvSeq = 1 }, // not encoded for PROBE
		func(h *wire.DataHeader, p *[]byte) { h.RKey = 1 },
		func(h *wire.DataHeader, p *[]byte) { h.Imm = 1 },
	} {
		h, p := validData(wire.OpProbe)
		mod(&h, &p)
		addData(f, h, p)
	}
	f.Fuzz(func(t *testing.T, opSel uint8, flags uint16, dst, psn uint32, pathID, stream uint16,
		pathSeq, msgID, streamSeq, offset, msgLen uint32, ts, addr uint64, recvSeq, rkey, imm uint32,
		payload []byte) {
		if len(payload) > wire.MaxPayload {
			payload = payload[:wire.MaxPayload]
		}
		in := wire.DataHeader{
			Opcode: dataOps[int(opSel)%len(dataOps)], Flags: flags, DstConn: dst, PSN: wire.PSN(psn),
			PathID: pathID, Stream: stream, PathSeq: pathSeq, MsgID: msgID, StreamSeq: streamSeq,
			Offset: offset, MsgLen: msgLen, Timestamp: ts, RemoteAddr: addr, RecvSeq: recvSeq,
			RKey: rkey, Imm: imm,
		}
		h := in
		pkt := wire.AppendData(nil, &h, payload)
		p, err := wire.Parse(pkt)
		if !checkVerdict(t, err, dataRules(in, len(payload))) {
			return
		}
		var got wire.DataHeader
		got.Decode(p.Data())
		if want := wantData(in, len(payload)); got != want {
			t.Fatalf("Decode:\n got %+v\nwant %+v", got, want)
		}
		if !bytes.Equal(p.Data().Payload(), payload) {
			t.Fatalf("payload differs")
		}
	})
}

func FuzzAck(f *testing.F) {
	seed := func(h wire.AckHeader) {
		var s [4]uint64
		for i := range s {
			s[i] = binary.LittleEndian.Uint64(h.Sack[8*i:])
		}
		f.Add(h.Flags, h.DstConn, uint32(h.CumPSN), h.PathID, h.CECount, h.PathAckSeq, uint32(h.EchoPSN),
			h.EchoTimestamp, h.RateHint, h.Credit, s[0], s[1], s[2], s[3], h.AckDelay)
	}
	seed(validAck())
	bad := validAck()
	bad.Sack[0] = 0xfe
	bad.Flags = 4
	seed(bad)
	f.Fuzz(func(t *testing.T, flags uint16, dst, cum uint32, pathID, ce uint16, pathAck, echoPSN uint32,
		echoTS uint64, rate, credit uint32, s0, s1, s2, s3 uint64, delay uint32) {
		// The bitmap as a 256-bit little-endian number: bit i of the
		// number is bit i of the bitmap.
		words := [4]uint64{s0, s1, s2, s3}
		in := wire.AckHeader{
			Flags: flags, DstConn: dst, CumPSN: wire.PSN(cum), PathID: pathID, CECount: ce,
			PathAckSeq: pathAck, EchoPSN: wire.PSN(echoPSN), EchoTimestamp: echoTS,
			RateHint: rate, Credit: credit, AckDelay: delay,
		}
		for i, w := range words {
			binary.LittleEndian.PutUint64(in.Sack[8*i:], w)
		}
		h := in
		p, err := wire.Parse(wire.AppendAck(nil, &h))
		if !checkVerdict(t, err, ackRules(in)) {
			return
		}
		a := p.Ack()
		var got wire.AckHeader
		got.Decode(a)
		if got != in {
			t.Fatalf("Decode:\n got %+v\nwant %+v", got, in)
		}
		for i := uint32(0); i < 256; i++ {
			if want := words[i/64]>>(i%64)&1 == 1; a.Received(i) != want {
				t.Fatalf("Received(%d) = %v, want %v", i, !want, want)
			}
		}
		if a.Received(256) || a.Received(^uint32(0)) {
			t.Fatalf("Received beyond the bitmap")
		}
	})
}

func FuzzNack(f *testing.F) {
	for _, r := range append([]wire.NackReason{0, maxNackReason + 1, 0xff}, nackReasons...) {
		h := validNack(r)
		f.Add(h.Flags, h.DstConn, uint32(h.PSN), h.PathID, uint8(h.Reason), h.PathSeq, uint32(h.CumPSN),
			h.EchoTimestamp, h.Info)
	}
	f.Fuzz(func(t *testing.T, flags uint16, dst, psn uint32, pathID uint16, reason uint8, pathSeq, cum uint32,
		echoTS uint64, info uint32) {
		in := wire.NackHeader{
			Flags: flags, DstConn: dst, PSN: wire.PSN(psn), PathID: pathID, Reason: wire.NackReason(reason),
			PathSeq: pathSeq, CumPSN: wire.PSN(cum), EchoTimestamp: echoTS, Info: info,
		}
		h := in
		p, err := wire.Parse(wire.AppendNack(nil, &h))
		if !checkVerdict(t, err, nackRules(in)) {
			return
		}
		var got wire.NackHeader
		got.Decode(p.Nack())
		if got != in {
			t.Fatalf("Decode:\n got %+v\nwant %+v", got, in)
		}
	})
}

func FuzzConn(f *testing.F) {
	seed := func(h wire.ConnHeader) {
		f.Add(uint8(slices.Index(connOps, h.Opcode)), h.Flags, h.DstConn, h.SrcConn, uint32(h.InitialPSN),
			h.Service, h.RecvWindow, h.MaxPayload, h.MsgWindow, uint16(h.Reason), h.Paths, h.Timestamp,
			binary.BigEndian.Uint64(h.Cookie[:]), binary.BigEndian.Uint64(h.Cookie[8:]),
			h.Token, binary.BigEndian.Uint64(h.ResetToken[:]), h.AppReason|h.PlaneAddrs, h.Private[:h.PrivateLen])
	}
	for _, op := range connOps {
		h := validConn(op)
		seed(h)
		h.DstConn, h.SrcConn, h.RecvWindow, h.MsgWindow, h.MaxPayload = 1, 0, 3, 0, 255
		seed(h)
	}
	h := validConn(wire.OpConnect)
	h.PlaneAddrs = 3 // a 4-plane host (§7.9)
	seed(h)
	f.Fuzz(func(t *testing.T, opSel uint8, flags uint16, dst, src, initPSN, service, recvWin uint32,
		maxPayload, msgWin, reason, paths uint16, ts, cookieHi, cookieLo, token, resetHi uint64,
		appReason uint16, private []byte) {
		in := wire.ConnHeader{
			Opcode: connOps[int(opSel)%len(connOps)], Flags: flags, DstConn: dst, SrcConn: src,
			InitialPSN: wire.PSN(initPSN), Service: service, RecvWindow: recvWin, MaxPayload: maxPayload,
			MsgWindow: msgWin, Reason: wire.ConnReason(reason), Paths: paths, Timestamp: ts,
			Token: token, AppReason: appReason,
		}
		binary.BigEndian.PutUint64(in.Cookie[:], cookieHi)
		binary.BigEndian.PutUint64(in.Cookie[8:], cookieLo)
		binary.BigEndian.PutUint64(in.ResetToken[:], resetHi)
		in.SetPrivate(private) // at most 64 bytes; more are cut
		if in.Opcode == wire.OpConnect || in.Opcode == wire.OpAccept {
			// Offset 80 is the plane-address count here (§7.9): Put
			// writes at most 7 addresses, each from the token's bytes.
			in.AppReason, in.PlaneAddrs = 0, min(appReason, wire.MaxPlaneAddrs)
			for i := range int(in.PlaneAddrs) {
				binary.BigEndian.PutUint64(in.Planes[i][:], token+uint64(i))
				binary.BigEndian.PutUint64(in.Planes[i][8:], resetHi^uint64(i))
			}
		}
		h := in
		p, err := wire.Parse(wire.AppendConn(nil, &h))
		if !checkVerdict(t, err, connRules(in)) {
			return
		}
		var got wire.ConnHeader
		got.Decode(p.Conn())
		if got != in {
			t.Fatalf("Decode:\n got %+v\nwant %+v", got, in)
		}
	})
}
