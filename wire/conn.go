package wire

import "encoding/binary"

// Conn header offsets (§7.1).
const (
	cSrcConn    = 8
	cInitPSN    = 12
	cService    = 16
	cRecvWindow = 20
	cMaxPayload = 24
	cMsgWindow  = 26
	cReason     = 28
	cPaths      = 30
	cTimestamp  = 32
	cCookie     = 40
	CookieLen   = 16
)

// ConnReason explains a REJECT or RESET (§7.5).
type ConnReason uint16

const (
	ReasonNone        ConnReason = 0
	ReasonNoService   ConnReason = 1 // no listener for the service id
	ReasonBadCookie   ConnReason = 2 // cookie invalid or expired: start again
	ReasonParams      ConnReason = 3 // parameters not acceptable
	ReasonUnknownConn ConnReason = 4 // RESET: the destination id names no connection
	ReasonLimit       ConnReason = 5 // too many connections
	ReasonClosed      ConnReason = 6 // application closed the connection
	ReasonFailed      ConnReason = 7 // retry limit exceeded
)

// Conn is a validated view of a connection-management packet (§7).
type Conn []byte

func (c Conn) Opcode() Opcode     { return Opcode(c[1]) }
func (c Conn) Flags() uint16      { return binary.BigEndian.Uint16(c[2:]) }
func (c Conn) DstConn() uint32    { return binary.BigEndian.Uint32(c[4:]) }
func (c Conn) SrcConn() uint32    { return binary.BigEndian.Uint32(c[cSrcConn:]) }
func (c Conn) InitialPSN() PSN    { return PSN(binary.BigEndian.Uint32(c[cInitPSN:])) }
func (c Conn) Service() uint32    { return binary.BigEndian.Uint32(c[cService:]) }
func (c Conn) RecvWindow() uint32 { return binary.BigEndian.Uint32(c[cRecvWindow:]) }
func (c Conn) MaxPayload() uint16 { return binary.BigEndian.Uint16(c[cMaxPayload:]) }
func (c Conn) MsgWindow() uint16  { return binary.BigEndian.Uint16(c[cMsgWindow:]) }
func (c Conn) Reason() ConnReason { return ConnReason(binary.BigEndian.Uint16(c[cReason:])) }
func (c Conn) Paths() uint16      { return binary.BigEndian.Uint16(c[cPaths:]) }
func (c Conn) Timestamp() uint64  { return binary.BigEndian.Uint64(c[cTimestamp:]) }
func (c Conn) Cookie() []byte     { return c[cCookie : cCookie+CookieLen] }

func isPow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

// MinMaxPayload is the smallest max-payload a peer may announce (§7.2):
// below it headers dominate and the 16-bit message window could not
// cover a window of packets.
const MinMaxPayload = 256

// MaxRecvWindow bounds the receive window (§5.3): PSN comparison is
// serial-number arithmetic, safe for distances below 2^31; 2^16 keeps the
// receive bitmap at 8 KiB per connection.
const MaxRecvWindow = 1 << 16

func (c Conn) validate(n int) error {
	if n != ConnLen+TrailerLen {
		return ErrLength
	}
	switch c.Opcode() {
	case OpConnect, OpAccept:
		if c.Opcode() == OpConnect && c.DstConn() != 0 {
			return ErrField
		}
		if c.SrcConn() == 0 {
			return ErrField
		}
		w := c.RecvWindow()
		if !isPow2(w) || w > MaxRecvWindow || !isPow2(uint32(c.MsgWindow())) {
			return ErrField
		}
		if c.MaxPayload() < MinMaxPayload {
			return ErrField
		}
	}
	return nil
}

// ConnHeader holds the fields of a connection packet for encoding.
type ConnHeader struct {
	Opcode     Opcode
	Flags      uint16
	DstConn    uint32
	SrcConn    uint32
	InitialPSN PSN
	Service    uint32
	RecvWindow uint32
	MaxPayload uint16
	MsgWindow  uint16
	Reason     ConnReason
	Paths      uint16
	Timestamp  uint64
	Cookie     [CookieLen]byte
}

// Put writes the packet into b[:ConnLen+TrailerLen], trailer included.
func (h *ConnHeader) Put(b []byte) {
	_ = b[ConnLen+TrailerLen-1]
	putPrefix(b, h.Opcode, h.Flags, h.DstConn)
	binary.BigEndian.PutUint32(b[cSrcConn:], h.SrcConn)
	binary.BigEndian.PutUint32(b[cInitPSN:], uint32(h.InitialPSN))
	binary.BigEndian.PutUint32(b[cService:], h.Service)
	binary.BigEndian.PutUint32(b[cRecvWindow:], h.RecvWindow)
	binary.BigEndian.PutUint16(b[cMaxPayload:], h.MaxPayload)
	binary.BigEndian.PutUint16(b[cMsgWindow:], h.MsgWindow)
	binary.BigEndian.PutUint16(b[cReason:], uint16(h.Reason))
	binary.BigEndian.PutUint16(b[cPaths:], h.Paths)
	binary.BigEndian.PutUint64(b[cTimestamp:], h.Timestamp)
	copy(b[cCookie:cCookie+CookieLen], h.Cookie[:])
	Seal(b[:ConnLen+TrailerLen])
}

// Decode fills h from a validated view.
func (h *ConnHeader) Decode(c Conn) {
	*h = ConnHeader{
		Opcode: c.Opcode(), Flags: c.Flags(), DstConn: c.DstConn(), SrcConn: c.SrcConn(),
		InitialPSN: c.InitialPSN(), Service: c.Service(), RecvWindow: c.RecvWindow(),
		MaxPayload: c.MaxPayload(), MsgWindow: c.MsgWindow(), Reason: c.Reason(),
		Paths: c.Paths(), Timestamp: c.Timestamp(),
	}
	copy(h.Cookie[:], c.Cookie())
}

// AppendConn appends a sealed connection packet to b.
func AppendConn(b []byte, h *ConnHeader) []byte {
	n := len(b)
	b = grow(b, ConnLen+TrailerLen)
	h.Put(b[n:])
	return b
}
