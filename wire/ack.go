package wire

import "encoding/binary"

// Ack header offsets (§5.1).
const (
	aCumPSN   = 8
	aPathID   = 12
	aCECount  = 14
	aPathAck  = 16
	aEchoPSN  = 20
	aEchoTS   = 24
	aRateHint = 32
	aCredit   = 36
	aSack     = 40
	aAckDelay = 72
	aRsvd     = 76
)

// Ack is a validated view of an acknowledgement (§5).
//
// An ack speaks for the whole connection through CumPSN and for one path
// through the rest: PathAckSeq is the highest per-path sequence number the
// receiver has seen on PathID, and bit i of the SACK bitmap says whether
// PathAckSeq-i arrived (bit 0 is PathAckSeq itself and is always set).
type Ack []byte

func (a Ack) Flags() uint16         { return binary.BigEndian.Uint16(a[2:]) }
func (a Ack) DstConn() uint32       { return binary.BigEndian.Uint32(a[4:]) }
func (a Ack) CumPSN() PSN           { return PSN(binary.BigEndian.Uint32(a[aCumPSN:])) }
func (a Ack) PathID() uint16        { return binary.BigEndian.Uint16(a[aPathID:]) }
func (a Ack) CECount() uint16       { return binary.BigEndian.Uint16(a[aCECount:]) }
func (a Ack) PathAckSeq() uint32    { return binary.BigEndian.Uint32(a[aPathAck:]) }
func (a Ack) EchoPSN() PSN          { return PSN(binary.BigEndian.Uint32(a[aEchoPSN:])) }
func (a Ack) EchoTimestamp() uint64 { return binary.BigEndian.Uint64(a[aEchoTS:]) }
func (a Ack) RateHint() uint32      { return binary.BigEndian.Uint32(a[aRateHint:]) }
func (a Ack) Credit() uint32        { return binary.BigEndian.Uint32(a[aCredit:]) }
func (a Ack) AckDelay() uint32      { return binary.BigEndian.Uint32(a[aAckDelay:]) }

// Sack returns the bitmap bytes: bit i is byte i/8, bit i%8 (LSB first).
func (a Ack) Sack() []byte { return a[aSack : aSack+SackBytes] }

// Received reports whether PathAckSeq-back arrived, for back in [0, 256).
func (a Ack) Received(back uint32) bool {
	if back >= SackBits {
		return false
	}
	return a[aSack+back/8]&(1<<(back%8)) != 0
}

func (a Ack) validate(n int) error {
	if n != AckLen+TrailerLen {
		return ErrLength
	}
	if binary.BigEndian.Uint32(a[aRsvd:]) != 0 {
		return ErrReserved
	}
	if a[aSack]&1 == 0 {
		return ErrField
	}
	return nil
}

// AckHeader holds the fields of an ack for encoding.
type AckHeader struct {
	Flags         uint16
	DstConn       uint32
	CumPSN        PSN
	PathID        uint16
	CECount       uint16
	PathAckSeq    uint32
	EchoPSN       PSN
	EchoTimestamp uint64
	RateHint      uint32 // Mb/s the sender may use towards this receiver; 0: no hint
	Credit        uint32 // packets the sender may have beyond CumPSN
	Sack          [SackBytes]byte
	AckDelay      uint32 // ns the receiver held the ack after the echoed packet arrived
}

// Put writes the ack into b[:AckLen+TrailerLen], trailer included.
func (h *AckHeader) Put(b []byte) {
	_ = b[AckLen+TrailerLen-1]
	putPrefix(b, OpAck, h.Flags, h.DstConn)
	binary.BigEndian.PutUint32(b[aCumPSN:], uint32(h.CumPSN))
	binary.BigEndian.PutUint16(b[aPathID:], h.PathID)
	binary.BigEndian.PutUint16(b[aCECount:], h.CECount)
	binary.BigEndian.PutUint32(b[aPathAck:], h.PathAckSeq)
	binary.BigEndian.PutUint32(b[aEchoPSN:], uint32(h.EchoPSN))
	binary.BigEndian.PutUint64(b[aEchoTS:], h.EchoTimestamp)
	binary.BigEndian.PutUint32(b[aRateHint:], h.RateHint)
	binary.BigEndian.PutUint32(b[aCredit:], h.Credit)
	copy(b[aSack:aSack+SackBytes], h.Sack[:])
	binary.BigEndian.PutUint32(b[aAckDelay:], h.AckDelay)
	binary.BigEndian.PutUint32(b[aRsvd:], 0)
	Seal(b[:AckLen+TrailerLen])
}

// Decode fills h from a validated view.
func (h *AckHeader) Decode(a Ack) {
	*h = AckHeader{
		Flags: a.Flags(), DstConn: a.DstConn(), CumPSN: a.CumPSN(), PathID: a.PathID(),
		CECount: a.CECount(), PathAckSeq: a.PathAckSeq(), EchoPSN: a.EchoPSN(),
		EchoTimestamp: a.EchoTimestamp(), RateHint: a.RateHint(), Credit: a.Credit(),
		AckDelay: a.AckDelay(),
	}
	copy(h.Sack[:], a.Sack())
}

// AppendAck appends a sealed ack to b.
func AppendAck(b []byte, h *AckHeader) []byte {
	n := len(b)
	b = grow(b, AckLen+TrailerLen)
	h.Put(b[n:])
	return b
}
