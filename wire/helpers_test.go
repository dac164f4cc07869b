package wire_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

// Offsets of the fields the tests edit or read raw, transcribed from the
// layout tables (§4.1, §5.1, §6.1, §7.1) rather than taken from the package,
// so that a wrong offset constant in the package shows up as a failing
// layout test instead of agreeing with itself.
const (
	offVersion = 0
	offOpcode  = 1
	offFlags   = 2
	offDst     = 4

	offDataPSN       = 8
	offDataPathID    = 12
	offDataStream    = 14
	offDataPathSeq   = 16
	offDataMsgID     = 20
	offDataStreamSeq = 24
	offDataOffset    = 28
	offDataMsgLen    = 32
	offDataPayLen    = 36
	offDataRsvd      = 38 // 2 bytes
	offDataTimestamp = 40
	offDataAddr      = 48 // RemoteAddr; for SEND: RecvSeq then 4 reserved bytes
	offDataRKey      = 56
	offDataImm       = 60

	offAckCumPSN   = 8
	offAckPathID   = 12
	offAckCECount  = 14
	offAckPathAck  = 16
	offAckEchoPSN  = 20
	offAckEchoTS   = 24
	offAckRateHint = 32
	offAckCredit   = 36
	offAckSack     = 40
	offAckDelay    = 72
	offAckRsvd     = 76 // 4 bytes

	offNackPSN     = 8
	offNackPathID  = 12
	offNackReason  = 14
	offNackRsvd1   = 15 // 1 byte
	offNackPathSeq = 16
	offNackCumPSN  = 20
	offNackEchoTS  = 24
	offNackInfo    = 32
	offNackRsvd2   = 36 // 4 bytes

	offConnSrc        = 8
	offConnInitPSN    = 12
	offConnService    = 16
	offConnRecvWindow = 20
	offConnMaxPayload = 24
	offConnMsgWindow  = 26
	offConnReason     = 28
	offConnPaths      = 30
	offConnTimestamp  = 32
	offConnCookie     = 40
	offConnToken      = 56
	offConnResetToken = 64
	offConnAppReason  = 80
	offConnPrivLen    = 82
	offConnPrivate    = 84
)

var (
	// dataOps is every opcode with the data layout (§4.1), PROBE included:
	// it shares the 64-byte header but has its own field rules.
	dataOps = []wire.Opcode{wire.OpWrite, wire.OpWriteImm, wire.OpSend, wire.OpSendImm, wire.OpReadReq, wire.OpReadResp,
		wire.OpProbe}
	connOps = []wire.Opcode{wire.OpConnect, wire.OpChallenge, wire.OpAccept, wire.OpReject,
		wire.OpDisconnect, wire.OpDisconnectAck, wire.OpReset}
	nackReasons = []wire.NackReason{wire.NackRemoteAccess, wire.NackRNR, wire.NackInvalidRequest,
		wire.NackOutOfWindow, wire.NackUnsupportedVersion, wire.NackSequence}
)

// allOps is every opcode v1 defines, in numeric order.
func allOps() []wire.Opcode {
	ops := append([]wire.Opcode(nil), dataOps...)
	ops = append(ops, wire.OpAck, wire.OpNack)
	return append(ops, connOps...)
}

// pattern returns n bytes that differ from their neighbours and from zero,
// so a payload copied to the wrong place or cut short is visible.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// validData returns a data header and payload that v1 accepts for op, with
// every field the opcode carries set to a distinctive nonzero value. For
// PROBE that is the prefix, PathID, PathSeq and Timestamp only: a probe
// speaks for its path, and every field about data must be zero.
func validData(op wire.Opcode) (wire.DataHeader, []byte) {
	h := wire.DataHeader{
		Opcode:    op,
		Flags:     wire.FlagAckReq,
		DstConn:   0x0a0b0c0d,
		PSN:       0xfffffff0,
		PathID:    0x1234,
		Stream:    7,
		PathSeq:   0x01020304,
		MsgID:     0x11223344,
		StreamSeq: 0x55667788,
		Offset:    4096,
		MsgLen:    65536,
		Timestamp: 0x0102030405060708,
	}
	payload := pattern(1400)
	switch op {
	case wire.OpWrite, wire.OpWriteImm:
		h.RemoteAddr = 0x7f0012345678abcd
		h.RKey = 0xdeadbeef
	case wire.OpSend, wire.OpSendImm:
		h.RecvSeq = 42
	case wire.OpReadReq:
		h.RemoteAddr = 0x7f0012345678abcd
		h.RKey = 0xdeadbeef
		h.Offset = 0
		h.MsgLen = 1 << 20
		payload = nil
	case wire.OpReadResp:
	case wire.OpProbe:
		h.PSN, h.Stream, h.MsgID, h.StreamSeq, h.Offset, h.MsgLen = 0, 0, 0, 0, 0, 0
		payload = nil
	}
	if op.HasImm() {
		h.Imm = 0xcafef00d
	}
	return h, payload
}

func validAck() wire.AckHeader {
	h := wire.AckHeader{
		Flags:         wire.FlagRetx,
		DstConn:       0x01020304,
		CumPSN:        0xfffffffe,
		PathID:        513,
		CECount:       3,
		PathAckSeq:    0x0badf00d,
		EchoPSN:       0x00000010,
		EchoTimestamp: 0x1122334455667788,
		RateHint:      100000,
		Credit:        4096,
		AckDelay:      2500,
	}
	for i := range h.Sack {
		h.Sack[i] = byte(0x81 ^ i)
	}
	h.Sack[0] |= 1
	return h
}

func validNack(r wire.NackReason) wire.NackHeader {
	return wire.NackHeader{
		Flags:         wire.FlagAckReq,
		DstConn:       0x0c0d0e0f,
		PSN:           0x80000001,
		PathID:        9,
		Reason:        r,
		PathSeq:       0x12345678,
		CumPSN:        0x7fffffff,
		EchoTimestamp: 0x0807060504030201,
		Info:          1000,
	}
}

func validConn(op wire.Opcode) wire.ConnHeader {
	h := wire.ConnHeader{
		Opcode:     op,
		Flags:      0,
		DstConn:    0x11111111,
		SrcConn:    0x22222222,
		InitialPSN: 0xfffff000,
		Service:    0x00c0ffee,
		RecvWindow: 1 << 12,
		MaxPayload: 1400,
		MsgWindow:  256,
		Paths:      64,
		Timestamp:  0x0123456789abcdef,
	}
	for i := range h.Cookie {
		h.Cookie[i] = byte(0xf0 - i)
	}
	for i := range h.ResetToken {
		h.ResetToken[i] = byte(0x30 + i)
	}
	switch op {
	case wire.OpConnect:
		h.DstConn = 0
		h.Token = 0x5ec2e7_70ce_0001
		h.SetPrivate([]byte("hello, listener"))
	case wire.OpAccept:
		h.SetPrivate([]byte("welcome"))
	case wire.OpReject:
		h.Reason, h.AppReason = wire.ReasonApplication, 0x1234
		h.SetPrivate([]byte("go away"))
	case wire.OpReset:
		h.Reason = wire.ReasonUnknownConn
	case wire.OpDisconnect:
		h.Reason = wire.ReasonClosed
	}
	return h
}

// validPacket returns one sealed packet that v1 accepts for op.
func validPacket(op wire.Opcode) []byte {
	switch op.Class() {
	case wire.ClassData:
		h, p := validData(op)
		return wire.AppendData(nil, &h, p)
	case wire.ClassAck:
		h := validAck()
		return wire.AppendAck(nil, &h)
	case wire.ClassNack:
		h := validNack(wire.NackOutOfWindow)
		return wire.AppendNack(nil, &h)
	case wire.ClassConn:
		h := validConn(op)
		return wire.AppendConn(nil, &h)
	}
	panic("validPacket: no class for " + op.String())
}

// fixedLen is the header-plus-trailer size of a class, as the spec gives it.
func fixedLen(c wire.Class) int {
	switch c {
	case wire.ClassData:
		return 64 + 4
	case wire.ClassAck:
		return 80 + 4
	case wire.ClassNack:
		return 40 + 4
	case wire.ClassConn:
		return 84 + 4
	}
	return 0
}

// edit returns a copy of pkt changed by f and sealed again, so that Parse
// sees a correct CRC and judges the field f changed.
func edit(pkt []byte, f func(b []byte)) []byte {
	b := bytes.Clone(pkt)
	f(b)
	wire.Seal(b)
	return b
}

// extend returns a copy of pkt with n more bytes before a fresh trailer.
func extend(pkt []byte, n int) []byte {
	b := append(bytes.Clone(pkt), make([]byte, n)...)
	wire.Seal(b)
	return b
}

func put16(b []byte, off int, v uint16) { binary.BigEndian.PutUint16(b[off:], v) }
func put32(b []byte, off int, v uint32) { binary.BigEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.BigEndian.PutUint64(b[off:], v) }
func get16(b []byte, off int) uint16    { return binary.BigEndian.Uint16(b[off:]) }
func get32(b []byte, off int) uint32    { return binary.BigEndian.Uint32(b[off:]) }
func get64(b []byte, off int) uint64    { return binary.BigEndian.Uint64(b[off:]) }

// mustParse parses a packet the test built to be valid.
func mustParse(t testing.TB, pkt []byte) wire.Packet {
	t.Helper()
	p, err := wire.Parse(pkt)
	if err != nil {
		t.Fatalf("Parse of a valid %s packet: %v", wire.Opcode(pkt[1]), err)
	}
	return p
}

// wantErr checks that Parse rejects pkt with exactly want and returns a
// zero Packet with it.
func wantErr(t testing.TB, pkt []byte, want wire.Error) {
	t.Helper()
	p, err := wire.Parse(pkt)
	if err != want {
		t.Fatalf("Parse = %v, want %v", err, want)
	}
	if !errors.Is(err, want) {
		t.Fatalf("errors.Is(%v, %v) is false", err, want)
	}
	if p.Class != wire.ClassInvalid || p.Bytes() != nil {
		t.Fatalf("Parse failed with %v but returned a non-zero Packet (class %d)", err, p.Class)
	}
}
