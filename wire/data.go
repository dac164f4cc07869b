package wire

import "encoding/binary"

// Data header offsets (§4.1). Aligned to their size so a reader of a hex
// dump finds every field on a natural boundary.
const (
	dPSN       = 8
	dPathID    = 12
	dStream    = 14
	dPathSeq   = 16
	dMsgID     = 20
	dStreamSeq = 24
	dOffset    = 28
	dMsgLen    = 32
	dPayLen    = 36
	dRsvd      = 38
	dTimestamp = 40
	dAddr      = 48 // RemoteAddr for RMA; RecvSeq (+4 reserved) for SEND
	dRKey      = 56
	dImm       = 60
)

// Data is a validated view of a data packet: header, payload, trailer.
type Data []byte

func (d Data) Opcode() Opcode     { return Opcode(d[1]) }
func (d Data) Flags() uint16      { return binary.BigEndian.Uint16(d[2:]) }
func (d Data) DstConn() uint32    { return binary.BigEndian.Uint32(d[4:]) }
func (d Data) PSN() PSN           { return PSN(binary.BigEndian.Uint32(d[dPSN:])) }
func (d Data) PathID() uint16     { return binary.BigEndian.Uint16(d[dPathID:]) }
func (d Data) Stream() uint16     { return binary.BigEndian.Uint16(d[dStream:]) }
func (d Data) PathSeq() uint32    { return binary.BigEndian.Uint32(d[dPathSeq:]) }
func (d Data) MsgID() uint32      { return binary.BigEndian.Uint32(d[dMsgID:]) }
func (d Data) StreamSeq() uint32  { return binary.BigEndian.Uint32(d[dStreamSeq:]) }
func (d Data) Offset() uint32     { return binary.BigEndian.Uint32(d[dOffset:]) }
func (d Data) MsgLen() uint32     { return binary.BigEndian.Uint32(d[dMsgLen:]) }
func (d Data) PayloadLen() int    { return int(binary.BigEndian.Uint16(d[dPayLen:])) }
func (d Data) Timestamp() uint64  { return binary.BigEndian.Uint64(d[dTimestamp:]) }
func (d Data) RemoteAddr() uint64 { return binary.BigEndian.Uint64(d[dAddr:]) }
func (d Data) RecvSeq() uint32    { return binary.BigEndian.Uint32(d[dAddr:]) }
func (d Data) RKey() uint32       { return binary.BigEndian.Uint32(d[dRKey:]) }
func (d Data) Imm() uint32        { return binary.BigEndian.Uint32(d[dImm:]) }

// Payload returns the payload bytes (between header and trailer).
func (d Data) Payload() []byte { return d[DataLen : len(d)-TrailerLen] }

func (d Data) validate(n int) error {
	pl := d.PayloadLen()
	if pl != n-DataLen-TrailerLen {
		return ErrLength
	}
	if uint64(d.Offset())+uint64(pl) > uint64(d.MsgLen()) {
		return ErrLength
	}
	if binary.BigEndian.Uint16(d[dRsvd:]) != 0 {
		return ErrReserved
	}
	if d.Flags()&FlagVoid != 0 && pl != 0 {
		return ErrField // a void packet carries no payload
	}
	op := d.Opcode()
	if !op.HasImm() && d.Imm() != 0 {
		return ErrField
	}
	switch {
	case op == OpProbe:
		// A probe speaks for its path only: everything about data is zero.
		if pl != 0 || d.Flags()&FlagVoid != 0 || d.PSN() != 0 || d.Stream() != 0 || d.MsgID() != 0 ||
			d.StreamSeq() != 0 || d.Offset() != 0 || d.MsgLen() != 0 || d.RemoteAddr() != 0 || d.RKey() != 0 {
			return ErrField
		}
	case op == OpReadReq:
		if pl != 0 || d.Offset() != 0 {
			return ErrField
		}
	case op.IsSend():
		if d.RKey() != 0 {
			return ErrField
		}
		if binary.BigEndian.Uint32(d[dAddr+4:]) != 0 {
			return ErrReserved
		}
	case op == OpReadResp:
		if d.RKey() != 0 || d.RemoteAddr() != 0 {
			return ErrField
		}
	}
	return nil
}

// DataHeader holds the fields of a data header for encoding (§4.1).
type DataHeader struct {
	Opcode     Opcode
	Flags      uint16
	DstConn    uint32
	PSN        PSN
	PathID     uint16
	Stream     uint16
	PathSeq    uint32
	MsgID      uint32
	StreamSeq  uint32
	Offset     uint32
	MsgLen     uint32
	PayloadLen uint16
	Timestamp  uint64
	RemoteAddr uint64 // WRITE, WRITE_IMM, READ_REQ
	RecvSeq    uint32 // SEND, SEND_IMM
	RKey       uint32
	Imm        uint32
}

// Put writes the header into b[:DataLen]. The caller places PayloadLen
// bytes of payload at b[DataLen:] and then calls Seal on the whole packet.
func (h *DataHeader) Put(b []byte) {
	_ = b[DataLen-1]
	putPrefix(b, h.Opcode, h.Flags, h.DstConn)
	binary.BigEndian.PutUint32(b[dPSN:], uint32(h.PSN))
	binary.BigEndian.PutUint16(b[dPathID:], h.PathID)
	binary.BigEndian.PutUint16(b[dStream:], h.Stream)
	binary.BigEndian.PutUint32(b[dPathSeq:], h.PathSeq)
	binary.BigEndian.PutUint32(b[dMsgID:], h.MsgID)
	binary.BigEndian.PutUint32(b[dStreamSeq:], h.StreamSeq)
	binary.BigEndian.PutUint32(b[dOffset:], h.Offset)
	binary.BigEndian.PutUint32(b[dMsgLen:], h.MsgLen)
	binary.BigEndian.PutUint16(b[dPayLen:], h.PayloadLen)
	binary.BigEndian.PutUint16(b[dRsvd:], 0)
	binary.BigEndian.PutUint64(b[dTimestamp:], h.Timestamp)
	if h.Opcode.IsSend() {
		binary.BigEndian.PutUint32(b[dAddr:], h.RecvSeq)
		binary.BigEndian.PutUint32(b[dAddr+4:], 0)
	} else {
		binary.BigEndian.PutUint64(b[dAddr:], h.RemoteAddr)
	}
	binary.BigEndian.PutUint32(b[dRKey:], h.RKey)
	binary.BigEndian.PutUint32(b[dImm:], h.Imm)
}

// Decode fills h from a validated view.
func (h *DataHeader) Decode(d Data) {
	*h = DataHeader{
		Opcode: d.Opcode(), Flags: d.Flags(), DstConn: d.DstConn(), PSN: d.PSN(),
		PathID: d.PathID(), Stream: d.Stream(), PathSeq: d.PathSeq(), MsgID: d.MsgID(),
		StreamSeq: d.StreamSeq(), Offset: d.Offset(), MsgLen: d.MsgLen(),
		PayloadLen: uint16(d.PayloadLen()), Timestamp: d.Timestamp(), RKey: d.RKey(), Imm: d.Imm(),
	}
	if h.Opcode.IsSend() {
		h.RecvSeq = d.RecvSeq()
	} else {
		h.RemoteAddr = d.RemoteAddr()
	}
}

// AppendData appends a complete sealed data packet (header, payload,
// trailer) to b. h.PayloadLen is set from payload. It is the convenient
// form for tests and tools; the engine writes frames in place with Put.
func AppendData(b []byte, h *DataHeader, payload []byte) []byte {
	if len(payload) > MaxPayload {
		panic("wire: payload longer than the 16-bit length field")
	}
	h.PayloadLen = uint16(len(payload))
	n := len(b)
	b = grow(b, DataLen+len(payload)+TrailerLen)
	h.Put(b[n:])
	copy(b[n+DataLen:], payload)
	Seal(b[n:])
	return b
}

func grow(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		nb := make([]byte, len(b), len(b)+n)
		copy(nb, b)
		b = nb
	}
	return b[:len(b)+n]
}
