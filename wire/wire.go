package wire

import (
	"encoding/binary"

	"github.com/metaroce/metaroce/internal/crc32c"
)

// Version is the protocol version this package speaks (§3.1).
const Version = 1

// DefaultPort is the well-known UDP destination port (§2.2). It sits next
// to RoCEv2's 4791 so that operators find it where they look for RDMA
// traffic, without colliding with RoCEv2 receivers that would misparse it.
const DefaultPort = 4792

// Opcode identifies the packet type (§3.2).
type Opcode uint8

// Opcodes. Data opcodes are 0x01-0x0f, acknowledgement opcodes 0x10-0x1f,
// connection opcodes 0x20-0x2f, so the class is a shift away.
const (
	OpWrite         Opcode = 0x01
	OpWriteImm      Opcode = 0x02
	OpSend          Opcode = 0x03
	OpSendImm       Opcode = 0x04
	OpReadReq       Opcode = 0x05
	OpReadResp      Opcode = 0x06
	OpProbe         Opcode = 0x07
	OpAck           Opcode = 0x10
	OpNack          Opcode = 0x11
	OpConnect       Opcode = 0x20
	OpChallenge     Opcode = 0x21
	OpAccept        Opcode = 0x22
	OpReject        Opcode = 0x23
	OpDisconnect    Opcode = 0x24
	OpDisconnectAck Opcode = 0x25
	OpReset         Opcode = 0x26
)

var opNames = [...]string{
	OpWrite: "WRITE", OpWriteImm: "WRITE_IMM", OpSend: "SEND", OpSendImm: "SEND_IMM",
	OpReadReq: "READ_REQ", OpReadResp: "READ_RESP", OpProbe: "PROBE", OpAck: "ACK", OpNack: "NACK",
	OpConnect: "CONNECT", OpChallenge: "CHALLENGE", OpAccept: "ACCEPT", OpReject: "REJECT",
	OpDisconnect: "DISCONNECT", OpDisconnectAck: "DISCONNECT_ACK", OpReset: "RESET",
}

func (o Opcode) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "OPCODE_" + hex8(uint8(o))
}

func hex8(v uint8) string {
	const d = "0123456789abcdef"
	return string([]byte{d[v>>4], d[v&15]})
}

// Class is the header layout an opcode selects.
type Class uint8

const (
	ClassInvalid Class = iota
	ClassData
	ClassAck
	ClassNack
	ClassConn
)

// Class returns the header layout of o, or ClassInvalid.
func (o Opcode) Class() Class {
	switch {
	case o >= OpWrite && o <= OpProbe:
		return ClassData
	case o == OpAck:
		return ClassAck
	case o == OpNack:
		return ClassNack
	case o >= OpConnect && o <= OpReset:
		return ClassConn
	}
	return ClassInvalid
}

// HasImm reports whether o carries immediate data.
func (o Opcode) HasImm() bool { return o == OpWriteImm || o == OpSendImm }

// IsWrite reports whether o is an RDMA WRITE.
func (o Opcode) IsWrite() bool { return o == OpWrite || o == OpWriteImm }

// IsSend reports whether o is a SEND.
func (o Opcode) IsSend() bool { return o == OpSend || o == OpSendImm }

// Flags (§3.3). Bits not defined here must be zero.
const (
	// FlagAckReq asks the receiver to acknowledge at once instead of
	// coalescing: set on the last packet of a message, on retransmissions
	// and on probes, where a delayed ack costs a round trip.
	FlagAckReq uint16 = 1 << 0
	// FlagRetx marks a retransmission. Informative: a receiver may count
	// it; nothing depends on it.
	FlagRetx uint16 = 1 << 1
	// FlagVoid marks a data packet that abandons its PSN (§6.3): the
	// sender got a REMOTE_ACCESS or INVALID_REQUEST NACK for it and sends
	// it once more, without payload, so the receiver consumes the PSN
	// without effect. NACKs never consume a PSN themselves, so a lost NACK
	// cannot make a failed message look delivered.
	FlagVoid uint16 = 1 << 2
	// flagsDefined is every flag v1 knows; the others must be zero.
	flagsDefined = FlagAckReq | FlagRetx | FlagVoid
)

// Sizes of the fixed parts (§3.4, §4.1, §5.1, §6.1, §7.1).
const (
	PrefixLen  = 8
	TrailerLen = 4 // CRC32C
	DataLen    = 64
	AckLen     = 80
	NackLen    = 40
	ConnLen    = 84 // fixed part; CONNECT, ACCEPT and REJECT add private data (§7.1)
	SackBits   = 256
	SackBytes  = SackBits / 8
	// MinPacket is the shortest packet any opcode allows.
	MinPacket = NackLen + TrailerLen
	// MaxPayload bounds the payload of one data packet; the payload length
	// field is 16 bits and a jumbo frame is far smaller.
	MaxPayload = 0xffff
)

// Checksum returns the CRC32C that Seal writes for a packet whose bytes
// before the trailer are b. internal/crc32c folds with AVX-512 carry-less
// multiplication where the CPU has it (42 ns for a 1464-byte packet against
// hash/crc32's 104 here) and is hash/crc32 elsewhere.
func Checksum(b []byte) uint32 { return crc32c.Checksum(b) }

// Seal writes the CRC32C trailer into the last TrailerLen bytes of pkt,
// computed over everything before them. pkt must be the whole packet,
// header, payload and the room for the trailer.
func Seal(pkt []byte) {
	n := len(pkt) - TrailerLen
	binary.BigEndian.PutUint32(pkt[n:], Checksum(pkt[:n]))
}

// SealCopy copies payload into pkt after its first hdr bytes and writes the
// trailer, as copy then Seal would, reading the payload once where
// internal/crc32c folds (39 ns against 55 for a 60-byte header and a
// 1400-byte payload here). pkt must be exactly hdr + len(payload) +
// TrailerLen bytes.
func SealCopy(pkt []byte, hdr int, payload []byte) {
	n := len(pkt) - TrailerLen
	if hdr+len(payload) != n {
		panic("wire: SealCopy: the packet is not header, payload and trailer")
	}
	binary.BigEndian.PutUint32(pkt[n:], crc32c.CopyAfter(pkt[:n], hdr, payload))
}

// Prefix is the common start of every packet.
type Prefix []byte

func (p Prefix) Version() uint8  { return p[0] }
func (p Prefix) Opcode() Opcode  { return Opcode(p[1]) }
func (p Prefix) Flags() uint16   { return binary.BigEndian.Uint16(p[2:]) }
func (p Prefix) DstConn() uint32 { return binary.BigEndian.Uint32(p[4:]) }

func putPrefix(b []byte, op Opcode, flags uint16, dst uint32) {
	b[0] = Version
	b[1] = byte(op)
	binary.BigEndian.PutUint16(b[2:], flags)
	binary.BigEndian.PutUint32(b[4:], dst)
}

// Packet is a parsed, validated packet: Class says which view applies.
type Packet struct {
	Class Class
	b     []byte
}

// Bytes returns the whole packet, trailer included.
func (p Packet) Bytes() []byte { return p.b }

// Prefix returns the common prefix.
func (p Packet) Prefix() Prefix { return Prefix(p.b) }

// Data returns the Data view; valid only when Class is ClassData.
func (p Packet) Data() Data { return Data(p.b) }

// Ack returns the Ack view; valid only when Class is ClassAck.
func (p Packet) Ack() Ack { return Ack(p.b) }

// Nack returns the Nack view; valid only when Class is ClassNack.
func (p Packet) Nack() Nack { return Nack(p.b) }

// Conn returns the Conn view; valid only when Class is ClassConn.
func (p Packet) Conn() Conn { return Conn(p.b) }

// Parse validates pkt (the UDP payload) and returns it as a typed packet.
// Checks run in the order of §3.5: length, version, opcode, CRC, flags,
// then the header's own rules, so that the reason returned is the first
// that fails.
// Parse does not allocate.
func Parse(pkt []byte) (Packet, error) {
	if len(pkt) < PrefixLen+TrailerLen {
		return Packet{}, ErrShort
	}
	if pkt[0] != Version {
		return Packet{}, ErrVersion
	}
	op := Opcode(pkt[1])
	cls := op.Class()
	var fixed int
	switch cls {
	case ClassData:
		fixed = DataLen
	case ClassAck:
		fixed = AckLen
	case ClassNack:
		fixed = NackLen
	case ClassConn:
		fixed = ConnLen
	default:
		return Packet{}, ErrOpcode
	}
	if len(pkt) < fixed+TrailerLen {
		return Packet{}, ErrShort
	}
	n := len(pkt) - TrailerLen
	if binary.BigEndian.Uint32(pkt[n:]) != Checksum(pkt[:n]) {
		return Packet{}, ErrCRC
	}
	if Prefix(pkt).Flags()&^flagsDefined != 0 {
		return Packet{}, ErrReserved
	}
	if cls != ClassData && Prefix(pkt).Flags()&FlagVoid != 0 {
		return Packet{}, ErrReserved // the flag is reserved outside data packets
	}
	var err error
	switch cls {
	case ClassData:
		err = Data(pkt).validate(len(pkt))
	case ClassAck:
		err = Ack(pkt).validate(len(pkt))
	case ClassNack:
		err = Nack(pkt).validate(len(pkt))
	case ClassConn:
		err = Conn(pkt).validate(len(pkt))
	}
	if err != nil {
		return Packet{}, err
	}
	return Packet{Class: cls, b: pkt}, nil
}

// PeekVersion returns the version byte of a packet too short or too new to
// parse, so a receiver can answer "unsupported version" (§3.5).
func PeekVersion(pkt []byte) (uint8, bool) {
	if len(pkt) == 0 {
		return 0, false
	}
	return pkt[0], true
}
