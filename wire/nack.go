package wire

import "encoding/binary"

// NackReason says why a receiver refused a data packet (§6.2).
type NackReason uint8

const (
	// NackRemoteAccess: bad rkey, range outside the region, or the region
	// lacks the access right. Nothing was written; the message fails.
	NackRemoteAccess NackReason = 1
	// NackRNR: no receive buffer is posted for this SEND yet. The packet
	// was not accepted; the sender retries after the hinted delay.
	NackRNR NackReason = 2
	// NackInvalidRequest: the request is well formed but cannot be
	// served (a SEND longer than the posted buffer, a packet of a message
	// that already took effect, a READ response nobody asked for). The
	// message fails.
	NackInvalidRequest NackReason = 3
	// NackOutOfWindow: the PSN lies beyond the receive window. The packet
	// was not accepted; the sender resends it when the window opens.
	NackOutOfWindow NackReason = 4
	// NackUnsupportedVersion: the receiver does not speak the packet's
	// version; Info holds the highest version it does.
	NackUnsupportedVersion NackReason = 5
	// NackSequence: a go-back-N receiver (the rocev2 baseline mode, §8.8)
	// got a packet past a gap and dropped it; CumPSN says where to resume.
	// Sent once per gap. Not accepted.
	NackSequence   NackReason = 6
	numNackReasons            = NackSequence + 1
)

func (r NackReason) String() string {
	switch r {
	case NackRemoteAccess:
		return "REMOTE_ACCESS"
	case NackRNR:
		return "RNR"
	case NackInvalidRequest:
		return "INVALID_REQUEST"
	case NackOutOfWindow:
		return "OUT_OF_WINDOW"
	case NackUnsupportedVersion:
		return "UNSUPPORTED_VERSION"
	case NackSequence:
		return "SEQUENCE"
	}
	return "NACK_" + hex8(uint8(r))
}

const (
	nPSN     = 8
	nPathID  = 12
	nReason  = 14
	nRsvd1   = 15
	nPathSeq = 16
	nCumPSN  = 20
	nEchoTS  = 24
	nInfo    = 32
	nRsvd2   = 36
)

// Nack is a validated view of a negative acknowledgement (§6).
type Nack []byte

func (n Nack) Flags() uint16         { return binary.BigEndian.Uint16(n[2:]) }
func (n Nack) DstConn() uint32       { return binary.BigEndian.Uint32(n[4:]) }
func (n Nack) PSN() PSN              { return PSN(binary.BigEndian.Uint32(n[nPSN:])) }
func (n Nack) PathID() uint16        { return binary.BigEndian.Uint16(n[nPathID:]) }
func (n Nack) Reason() NackReason    { return NackReason(n[nReason]) }
func (n Nack) PathSeq() uint32       { return binary.BigEndian.Uint32(n[nPathSeq:]) }
func (n Nack) CumPSN() PSN           { return PSN(binary.BigEndian.Uint32(n[nCumPSN:])) }
func (n Nack) EchoTimestamp() uint64 { return binary.BigEndian.Uint64(n[nEchoTS:]) }
func (n Nack) Info() uint32          { return binary.BigEndian.Uint32(n[nInfo:]) }

func (n Nack) validate(l int) error {
	if l != NackLen+TrailerLen {
		return ErrLength
	}
	if n[nRsvd1] != 0 || binary.BigEndian.Uint32(n[nRsvd2:]) != 0 {
		return ErrReserved
	}
	if r := n.Reason(); r == 0 || r >= numNackReasons {
		return ErrField
	}
	return nil
}

// NackHeader holds the fields of a nack for encoding.
type NackHeader struct {
	Flags         uint16
	DstConn       uint32
	PSN           PSN
	PathID        uint16
	Reason        NackReason
	PathSeq       uint32
	CumPSN        PSN
	EchoTimestamp uint64
	Info          uint32
}

// Put writes the nack into b[:NackLen+TrailerLen], trailer included.
func (h *NackHeader) Put(b []byte) {
	_ = b[NackLen+TrailerLen-1]
	putPrefix(b, OpNack, h.Flags, h.DstConn)
	binary.BigEndian.PutUint32(b[nPSN:], uint32(h.PSN))
	binary.BigEndian.PutUint16(b[nPathID:], h.PathID)
	b[nReason] = byte(h.Reason)
	b[nRsvd1] = 0
	binary.BigEndian.PutUint32(b[nPathSeq:], h.PathSeq)
	binary.BigEndian.PutUint32(b[nCumPSN:], uint32(h.CumPSN))
	binary.BigEndian.PutUint64(b[nEchoTS:], h.EchoTimestamp)
	binary.BigEndian.PutUint32(b[nInfo:], h.Info)
	binary.BigEndian.PutUint32(b[nRsvd2:], 0)
	Seal(b[:NackLen+TrailerLen])
}

// Decode fills h from a validated view.
func (h *NackHeader) Decode(n Nack) {
	*h = NackHeader{
		Flags: n.Flags(), DstConn: n.DstConn(), PSN: n.PSN(), PathID: n.PathID(),
		Reason: n.Reason(), PathSeq: n.PathSeq(), CumPSN: n.CumPSN(),
		EchoTimestamp: n.EchoTimestamp(), Info: n.Info(),
	}
}

// AppendNack appends a sealed nack to b.
func AppendNack(b []byte, h *NackHeader) []byte {
	n := len(b)
	b = grow(b, NackLen+TrailerLen)
	h.Put(b[n:])
	return b
}
