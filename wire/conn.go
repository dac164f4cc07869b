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
	cToken      = 56
	cResetToken = 64
	cAppReason  = 80
	cPrivateLen = 82
	CookieLen   = 16
	// ResetTokenLen is the size of a reset token (§7.6): 128 bits, so
	// that guessing one against a live connection is hopeless at any
	// packet rate.
	ResetTokenLen = 16
	// MaxPrivateData bounds the private data of a CONNECT, ACCEPT or
	// REJECT (§7.1): room for what rdma_cm carries on a connect (56
	// bytes) with the largest conn packet still 152 bytes, and the copy a
	// listener keeps per connection (to repeat its ACCEPT, §7.3) small.
	MaxPrivateData = 64
	// MaxPlaneAddrs bounds the plane addresses of a CONNECT or ACCEPT
	// (§7.9): a host of up to 8 planes names its planes 1..7 (plane 0's
	// address is the packet's source), so the largest conn packet is 264
	// bytes.
	MaxPlaneAddrs = 7
	// PlaneAddrLen is the size of one plane address: IPv6, or IPv4 in its
	// IPv4-mapped form, as the cookie takes addresses (§7.4).
	PlaneAddrLen = 16
)

// ConnReason explains a REJECT or RESET (§7.5).
type ConnReason uint16

const (
	ReasonNone        ConnReason = 0
	ReasonNoService   ConnReason = 1 // no listener for the service id, or not with that token
	ReasonBadCookie   ConnReason = 2 // cookie invalid or expired: start again
	ReasonParams      ConnReason = 3 // parameters not acceptable
	ReasonUnknownConn ConnReason = 4 // RESET: the destination id names no connection
	ReasonLimit       ConnReason = 5 // too many connections
	ReasonClosed      ConnReason = 6 // application closed the connection
	ReasonFailed      ConnReason = 7 // retry limit exceeded
	ReasonApplication ConnReason = 8 // REJECT: the listening application refused; AppReason says why
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

// Token is the service token a CONNECT presents (§7.3): 0 for a public
// service.
func (c Conn) Token() uint64 { return binary.BigEndian.Uint64(c[cToken:]) }

// ResetToken is the sender's reset token in CONNECT and ACCEPT, and the
// token proving a RESET (§7.6).
func (c Conn) ResetToken() []byte { return c[cResetToken : cResetToken+ResetTokenLen] }

// AppReason is the application's reason in a REJECT APPLICATION (§7.5).
func (c Conn) AppReason() uint16 { return binary.BigEndian.Uint16(c[cAppReason:]) }

// PlaneAddrs is the number of plane addresses after the private data of
// a CONNECT or ACCEPT (§7.9): the field that is AppReason in a REJECT.
// Other opcodes carry none.
func (c Conn) PlaneAddrs() int {
	if !carriesPlanes(c.Opcode()) {
		return 0
	}
	return int(binary.BigEndian.Uint16(c[cAppReason:]))
}

// PlaneAddr is the sender's address on plane i+1 (16 bytes; all zero:
// it has none there), i < PlaneAddrs.
func (c Conn) PlaneAddr(i int) []byte {
	o := ConnLen + c.PrivateLen() + i*PlaneAddrLen
	return c[o : o+PlaneAddrLen]
}

// PrivateLen is the length of the private data after the fixed header.
func (c Conn) PrivateLen() int { return int(binary.BigEndian.Uint16(c[cPrivateLen:])) }

// Private is the private data of a CONNECT, ACCEPT or REJECT (§7.1).
func (c Conn) Private() []byte { return c[ConnLen : ConnLen+c.PrivateLen()] }

// ReceivedPSN is the InitialPSN field of a DISCONNECT: the first of the
// peer's PSNs its sender had not received when it closed; every earlier
// one had arrived (§7.7).
func (c Conn) ReceivedPSN() PSN { return c.InitialPSN() }

func isPow2(v uint32) bool { return v != 0 && v&(v-1) == 0 }

// MinMaxPayload is the smallest max-payload a peer may announce (§7.2):
// below it headers dominate and the 16-bit message window could not
// cover a window of packets.
const MinMaxPayload = 256

// MaxRecvWindow bounds the receive window (§5.3): PSN comparison is
// serial-number arithmetic, safe for distances below 2^31; 2^16 keeps the
// receive bitmap at 8 KiB per connection.
const MaxRecvWindow = 1 << 16

// carriesPrivate reports whether op may carry private data (§7.1).
func carriesPrivate(op Opcode) bool { return op == OpConnect || op == OpAccept || op == OpReject }

// carriesPlanes reports whether op may carry plane addresses (§7.9).
func carriesPlanes(op Opcode) bool { return op == OpConnect || op == OpAccept }

func (c Conn) validate(n int) error {
	pl := c.PrivateLen()
	if n != ConnLen+pl+c.PlaneAddrs()*PlaneAddrLen+TrailerLen {
		return ErrLength
	}
	if pl > MaxPrivateData || pl != 0 && !carriesPrivate(c.Opcode()) {
		return ErrField
	}
	if c.PlaneAddrs() > MaxPlaneAddrs {
		return ErrField
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

// ConnHeader holds the fields of a connection packet for encoding. The
// private data lives in a fixed array, so a header is a plain value that
// a reply queue can hold without allocating.
type ConnHeader struct {
	Opcode     Opcode
	Flags      uint16
	DstConn    uint32
	SrcConn    uint32
	InitialPSN PSN // DISCONNECT: the sender's ReceivedPSN (§7.7)
	Service    uint32
	RecvWindow uint32
	MaxPayload uint16
	MsgWindow  uint16
	Reason     ConnReason
	Paths      uint16
	Timestamp  uint64
	Cookie     [CookieLen]byte
	Token      uint64
	ResetToken [ResetTokenLen]byte
	AppReason  uint16 // REJECT; CONNECT and ACCEPT write PlaneAddrs in its place
	PrivateLen uint16 // bytes of Private used, at most MaxPrivateData
	Private    [MaxPrivateData]byte
	// PlaneAddrs (CONNECT, ACCEPT) is how many of Planes are sent, at
	// most MaxPlaneAddrs: the sender's addresses on its planes 1..
	// PlaneAddrs (§7.9). 0, a single-plane sender's, adds no bytes.
	PlaneAddrs uint16
	Planes     [MaxPlaneAddrs][PlaneAddrLen]byte
}

// planeAddrs is how many plane addresses Put writes.
func (h *ConnHeader) planeAddrs() int {
	if !carriesPlanes(h.Opcode) {
		return 0
	}
	return int(min(h.PlaneAddrs, MaxPlaneAddrs))
}

// SetPrivate copies p (at most MaxPrivateData bytes; more are cut) into
// the header and clears the rest of the array.
func (h *ConnHeader) SetPrivate(p []byte) {
	n := copy(h.Private[:], p)
	clear(h.Private[n:])
	h.PrivateLen = uint16(n)
}

// Len is the size of the packet Put writes, trailer included.
func (h *ConnHeader) Len() int {
	return ConnLen + int(min(h.PrivateLen, MaxPrivateData)) + h.planeAddrs()*PlaneAddrLen + TrailerLen
}

// Put writes the packet into b[:h.Len()], trailer included.
func (h *ConnHeader) Put(b []byte) {
	pl := int(min(h.PrivateLen, MaxPrivateData))
	np := h.planeAddrs()
	n := ConnLen + pl + np*PlaneAddrLen + TrailerLen
	_ = b[n-1]
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
	binary.BigEndian.PutUint64(b[cToken:], h.Token)
	copy(b[cResetToken:cResetToken+ResetTokenLen], h.ResetToken[:])
	if carriesPlanes(h.Opcode) {
		binary.BigEndian.PutUint16(b[cAppReason:], uint16(np))
	} else {
		binary.BigEndian.PutUint16(b[cAppReason:], h.AppReason)
	}
	binary.BigEndian.PutUint16(b[cPrivateLen:], uint16(pl))
	copy(b[ConnLen:ConnLen+pl], h.Private[:pl])
	for i := range np {
		o := ConnLen + pl + i*PlaneAddrLen
		copy(b[o:o+PlaneAddrLen], h.Planes[i][:])
	}
	Seal(b[:n])
}

// Decode fills h from a validated view.
func (h *ConnHeader) Decode(c Conn) {
	*h = ConnHeader{
		Opcode: c.Opcode(), Flags: c.Flags(), DstConn: c.DstConn(), SrcConn: c.SrcConn(),
		InitialPSN: c.InitialPSN(), Service: c.Service(), RecvWindow: c.RecvWindow(),
		MaxPayload: c.MaxPayload(), MsgWindow: c.MsgWindow(), Reason: c.Reason(),
		Paths: c.Paths(), Timestamp: c.Timestamp(), Token: c.Token(),
	}
	if carriesPlanes(h.Opcode) {
		h.PlaneAddrs = uint16(c.PlaneAddrs())
		for i := range c.PlaneAddrs() {
			copy(h.Planes[i][:], c.PlaneAddr(i))
		}
	} else {
		h.AppReason = c.AppReason()
	}
	copy(h.Cookie[:], c.Cookie())
	copy(h.ResetToken[:], c.ResetToken())
	h.SetPrivate(c.Private())
}

// AppendConn appends a sealed connection packet to b.
func AppendConn(b []byte, h *ConnHeader) []byte {
	n := len(b)
	b = grow(b, h.Len())
	h.Put(b[n:])
	return b
}
