package wire_test

import (
	"bytes"
	"testing"

	"github.com/metaroce/metaroce/wire"
)

func TestOpcodeTable(t *testing.T) {
	tests := []struct {
		op                   wire.Opcode
		name                 string
		class                wire.Class
		imm, isWrite, isSend bool
	}{
		{wire.OpWrite, "WRITE", wire.ClassData, false, true, false},
		{wire.OpWriteImm, "WRITE_IMM", wire.ClassData, true, true, false},
		{wire.OpSend, "SEND", wire.ClassData, false, false, true},
		{wire.OpSendImm, "SEND_IMM", wire.ClassData, true, false, true},
		{wire.OpReadReq, "READ_REQ", wire.ClassData, false, false, false},
		{wire.OpReadResp, "READ_RESP", wire.ClassData, false, false, false},
		{wire.OpProbe, "PROBE", wire.ClassData, false, false, false},
		{wire.OpAck, "ACK", wire.ClassAck, false, false, false},
		{wire.OpNack, "NACK", wire.ClassNack, false, false, false},
		{wire.OpConnect, "CONNECT", wire.ClassConn, false, false, false},
		{wire.OpChallenge, "CHALLENGE", wire.ClassConn, false, false, false},
		{wire.OpAccept, "ACCEPT", wire.ClassConn, false, false, false},
		{wire.OpReject, "REJECT", wire.ClassConn, false, false, false},
		{wire.OpDisconnect, "DISCONNECT", wire.ClassConn, false, false, false},
		{wire.OpDisconnectAck, "DISCONNECT_ACK", wire.ClassConn, false, false, false},
		{wire.OpReset, "RESET", wire.ClassConn, false, false, false},
	}
	if len(tests) != len(allOps()) {
		t.Fatalf("table has %d opcodes, allOps %d", len(tests), len(allOps()))
	}
	defined := map[wire.Opcode]bool{}
	for _, tt := range tests {
		defined[tt.op] = true
		if got := tt.op.String(); got != tt.name {
			t.Errorf("%#x.String() = %q, want %q", uint8(tt.op), got, tt.name)
		}
		if got := tt.op.Class(); got != tt.class {
			t.Errorf("%s.Class() = %d, want %d", tt.name, got, tt.class)
		}
		if got := tt.op.HasImm(); got != tt.imm {
			t.Errorf("%s.HasImm() = %v", tt.name, got)
		}
		if got := tt.op.IsWrite(); got != tt.isWrite {
			t.Errorf("%s.IsWrite() = %v", tt.name, got)
		}
		if got := tt.op.IsSend(); got != tt.isSend {
			t.Errorf("%s.IsSend() = %v", tt.name, got)
		}
	}
	for v := 0; v < 256; v++ {
		op := wire.Opcode(v)
		if defined[op] {
			continue
		}
		if c := op.Class(); c != wire.ClassInvalid {
			t.Errorf("undefined opcode %#02x has class %d", v, c)
		}
		if op.HasImm() || op.IsWrite() || op.IsSend() {
			t.Errorf("undefined opcode %#02x answers true to a kind predicate", v)
		}
	}
	for _, tt := range []struct {
		op   wire.Opcode
		want string
	}{
		// The values of §3.2, written out: the constants above could
		// agree with a wrong table.
		{0x01, "WRITE"}, {0x06, "READ_RESP"}, {0x07, "PROBE"}, {0x10, "ACK"}, {0x11, "NACK"},
		{0x20, "CONNECT"}, {0x26, "RESET"},
		// Undefined values, next to the defined ones.
		{0x00, "OPCODE_00"}, {0x08, "OPCODE_08"}, {0x0f, "OPCODE_0f"}, {0x12, "OPCODE_12"},
		{0x1f, "OPCODE_1f"}, {0x27, "OPCODE_27"}, {0xff, "OPCODE_ff"},
	} {
		if got := tt.op.String(); got != tt.want {
			t.Errorf("Opcode(%#x).String() = %q, want %q", uint8(tt.op), got, tt.want)
		}
	}
}

func TestErrorText(t *testing.T) {
	tests := []struct {
		err        wire.Error
		reason     int
		name, text string
	}{
		{wire.ErrShort, 1, "short", "packet too short"},
		{wire.ErrVersion, 2, "version", "unsupported version"},
		{wire.ErrOpcode, 3, "opcode", "unknown opcode"},
		{wire.ErrCRC, 4, "crc", "crc32c mismatch"},
		{wire.ErrReserved, 5, "reserved", "reserved field not zero"},
		{wire.ErrLength, 6, "length", "inconsistent length"},
		{wire.ErrField, 7, "field", "field not allowed for opcode"},
	}
	if wire.NumReasons != len(tests)+1 {
		t.Fatalf("NumReasons = %d, want %d (the errors plus none)", wire.NumReasons, len(tests)+1)
	}
	for _, tt := range tests {
		if got := tt.err.Reason(); got != tt.reason {
			t.Errorf("%v.Reason() = %d, want %d", tt.err, got, tt.reason)
		}
		if got := wire.ReasonName(tt.err.Reason()); got != tt.name {
			t.Errorf("ReasonName(%d) = %q, want %q", tt.reason, got, tt.name)
		}
		if got := tt.err.Error(); got != "metaroce wire: "+tt.text {
			t.Errorf("%d.Error() = %q", tt.reason, got)
		}
	}
	if got := wire.ReasonName(0); got != "none" {
		t.Errorf("ReasonName(0) = %q", got)
	}
	for _, r := range []int{-1, wire.NumReasons, 255} {
		if got := wire.ReasonName(r); got != "unknown" {
			t.Errorf("ReasonName(%d) = %q, want unknown", r, got)
		}
	}
	if got := wire.Error(200).Error(); got != "metaroce wire: unknown error" {
		t.Errorf("Error(200).Error() = %q", got)
	}
}

func TestNackReasonString(t *testing.T) {
	want := map[wire.NackReason]string{
		0: "NACK_00", wire.NackRemoteAccess: "REMOTE_ACCESS", wire.NackRNR: "RNR",
		wire.NackInvalidRequest: "INVALID_REQUEST", wire.NackOutOfWindow: "OUT_OF_WINDOW",
		wire.NackUnsupportedVersion: "UNSUPPORTED_VERSION", wire.NackSequence: "SEQUENCE",
		7: "NACK_07", 0xab: "NACK_ab",
	}
	if len(want) != len(nackReasons)+3 {
		t.Fatalf("table names %d reasons, nackReasons has %d", len(want)-3, len(nackReasons))
	}
	// The values of §6.2, written out.
	for i, r := range nackReasons {
		if int(r) != i+1 {
			t.Errorf("%s = %d, want %d", r, r, i+1)
		}
	}
	for r, s := range want {
		if got := r.String(); got != s {
			t.Errorf("NackReason(%d).String() = %q, want %q", r, got, s)
		}
	}
}

// TestChecksum pins the polynomial: CRC32C (Castagnoli) of "123456789" is
// the standard check value 0xe3069283 (RFC 3720 appendix B.4); IEEE CRC32
// would give 0xcbf43926.
func TestChecksum(t *testing.T) {
	if got := wire.Checksum([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("Checksum = %#08x, want 0xe3069283 (CRC32C)", got)
	}
	b := []byte("123456789????")
	wire.Seal(b)
	if !bytes.Equal(b[9:], []byte{0xe3, 0x06, 0x92, 0x83}) {
		t.Fatalf("Seal wrote % x, want big-endian e3 06 92 83", b[9:])
	}
}

// TestSealCopy: a data packet sealed as its payload is copied in is the
// packet copy then Seal make, byte for byte, for payloads short and long
// (the folding path starts at 128 bytes).
func TestSealCopy(t *testing.T) {
	h := wire.DataHeader{Opcode: wire.OpWrite, PSN: 7, PathID: 3, MsgLen: 9000, Timestamp: 12345}
	for _, n := range []int{0, 1, 100, 127, 128, 1400, 1401, 8900} {
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i*31 + n)
		}
		h.PayloadLen = uint16(n)
		want := make([]byte, wire.DataLen+n+wire.TrailerLen)
		h.Put(want)
		copy(want[wire.DataLen:], payload)
		wire.Seal(want)
		got := make([]byte, len(want))
		h.Put(got)
		wire.SealCopy(got, wire.DataLen, payload)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d-byte payload: SealCopy's packet differs from copy then Seal", n)
		}
		if _, err := wire.Parse(got); err != nil {
			t.Fatalf("%d-byte payload: %v", n, err)
		}
	}
}

func TestPrefixLayout(t *testing.T) {
	for _, op := range allOps() {
		pkt := validPacket(op)
		p := mustParse(t, pkt)
		pre := p.Prefix()
		if pre.Version() != wire.Version || pkt[offVersion] != 1 {
			t.Errorf("%s: version %d, byte %d", op, pre.Version(), pkt[offVersion])
		}
		if pre.Opcode() != op || pkt[offOpcode] != byte(op) {
			t.Errorf("%s: prefix opcode %s", op, pre.Opcode())
		}
		if pre.Flags() != get16(pkt, offFlags) || pre.DstConn() != get32(pkt, offDst) {
			t.Errorf("%s: prefix flags/dst disagree with bytes 2..7", op)
		}
		if p.Class != op.Class() {
			t.Errorf("%s: Packet.Class %d, want %d", op, p.Class, op.Class())
		}
		if !bytes.Equal(p.Bytes(), pkt) || &p.Bytes()[0] != &pkt[0] {
			t.Errorf("%s: Packet.Bytes is not the input slice", op)
		}
		if len(pkt) < fixedLen(op.Class()) {
			t.Errorf("%s: %d bytes, shorter than its fixed part", op, len(pkt))
		}
		if got := wire.Checksum(pkt[:len(pkt)-4]); got != get32(pkt, len(pkt)-4) {
			t.Errorf("%s: trailer %#08x, CRC32C %#08x", op, get32(pkt, len(pkt)-4), got)
		}
	}
}

func TestPeekVersion(t *testing.T) {
	if v, ok := wire.PeekVersion(nil); ok || v != 0 {
		t.Errorf("PeekVersion(nil) = %d, %v", v, ok)
	}
	if v, ok := wire.PeekVersion([]byte{7}); !ok || v != 7 {
		t.Errorf("PeekVersion([7]) = %d, %v", v, ok)
	}
	pkt := edit(validPacket(wire.OpWrite), func(b []byte) { b[offVersion] = 2 })
	wantErr(t, pkt, wire.ErrVersion)
	if v, ok := wire.PeekVersion(pkt); !ok || v != 2 {
		t.Errorf("PeekVersion of a v2 packet = %d, %v", v, ok)
	}
}

// TestParseOrder checks the order of §3.5: when a packet breaks several
// rules, the earlier check names it, so drop counters are deterministic.
func TestParseOrder(t *testing.T) {
	data := validPacket(wire.OpWrite)
	tests := []struct {
		name string
		pkt  []byte
		want wire.Error
	}{
		{"short before version", []byte{2, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0}, wire.ErrShort},
		{"version before opcode", edit(make([]byte, 100), func(b []byte) { b[0], b[1] = 2, 0xff }), wire.ErrVersion},
		{"opcode before class length", []byte{1, 0xff, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, wire.ErrOpcode},
		{"class length before crc", data[:67], wire.ErrShort},
		{"crc before flags", func() []byte {
			b := bytes.Clone(data)
			b[offFlags] = 0x80 // reserved flag, not resealed
			return b
		}(), wire.ErrCRC},
		{"crc before header rules", func() []byte {
			b := bytes.Clone(data)
			put32(b, offDataImm, 1) // imm on WRITE, not resealed
			return b
		}(), wire.ErrCRC},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantErr(t, tt.pkt, tt.want) })
	}
}

// TestNoAllocs holds the hot-path promise: parsing (accepting or
// rejecting), accessors, Put, Seal and appending into spare capacity
// never allocate.
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts need a normal run")
	}
	h, payload := validData(wire.OpWriteImm)
	data := wire.AppendData(nil, &h, payload)
	bad := edit(data, func(b []byte) { put32(b, offDataRKey, 1); b[offOpcode] = byte(wire.OpSend) })
	ack := validPacket(wire.OpAck)
	nack := validPacket(wire.OpNack)
	conn := validPacket(wire.OpConnect)
	probe := validPacket(wire.OpProbe)
	buf := make([]byte, len(data))
	copy(buf[64:], payload)
	ah, nh, ch := validAck(), validNack(wire.NackRNR), validConn(wire.OpAccept)
	scratch := make([]byte, 0, 2048)
	var sink uint64
	cases := map[string]func(){
		"Parse data": func() {
			p, _ := wire.Parse(data)
			d := p.Data()
			sink += uint64(d.PSN()) + uint64(len(d.Payload())) + d.RemoteAddr()
		},
		"Parse reject": func() {
			_, err := wire.Parse(bad)
			if err == nil {
				panic("accepted")
			}
		},
		"Parse ack": func() {
			p, _ := wire.Parse(ack)
			a := p.Ack()
			if a.Received(3) {
				sink++
			}
		},
		"Parse probe": func() {
			p, _ := wire.Parse(probe)
			sink += uint64(p.Data().PathSeq())
		},
		"Parse nack":    func() { p, _ := wire.Parse(nack); sink += uint64(p.Nack().Reason()) },
		"Parse conn":    func() { p, _ := wire.Parse(conn); sink += uint64(len(p.Conn().Cookie())) },
		"Put+Seal data": func() { h.Put(buf); wire.Seal(buf) },
		"Put+SealCopy data": func() {
			h.Put(buf)
			wire.SealCopy(buf, wire.DataLen, buf[wire.DataLen:len(buf)-wire.TrailerLen])
		},
		"Put ack":    func() { ah.Put(buf) },
		"Put nack":   func() { nh.Put(buf) },
		"Put conn":   func() { ch.Put(buf) },
		"AppendData": func() { scratch = wire.AppendData(scratch[:0], &h, payload[:100]) },
		"AppendAck":  func() { scratch = wire.AppendAck(scratch[:0], &ah) },
		"Decode data": func() {
			var got wire.DataHeader
			got.Decode(wire.Data(data))
			sink += uint64(got.PSN)
		},
	}
	for name, f := range cases {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocs/op, want 0", name, n)
		}
	}
	_ = sink
}
