package proto

import "encoding/binary"

// Work requests and completions travel in ring slots (ring/) in host byte
// order: both ends run on the same machine. docs/api.md draws the layouts.

// WRSize and CQESize are the slot sizes of send and completion queues.
const (
	WRSize  = 64
	CQESize = 32
)

// WROp is a work request's operation.
type WROp uint8

const (
	WRWrite    WROp = 1
	WRWriteImm WROp = 2
	WRRead     WROp = 3
	WRSend     WROp = 4
	WRSendImm  WROp = 5
	WRRecv     WROp = 6
)

// Work request flags (byte 1).
const (
	// WRUnsignaled: no completion when the request succeeds (verbs'
	// request without IBV_SEND_SIGNALED); a failure still completes. A
	// RECV always completes.
	WRUnsignaled = 1
	// WRInline: the data is in the slot itself, bytes 44..63 (Length
	// of them, at most MaxInline), copied by the daemon when it takes
	// the request: WRITE, WRITE with immediate, SEND and SEND with
	// immediate only; lkey and local address are ignored (0).
	WRInline = 2
	// WRSGL: the request's local side is a scatter-gather list of
	// byte 44's count (1..MaxSGE) of entries, carried in the slot that
	// follows it in the send queue (its continuation, SGLSlot): WRITE,
	// WRITE with immediate, SEND, SEND with immediate and READ; lkey and
	// local address are 0, length is the sum of the entries' lengths. A
	// slot with this flag is always followed by its continuation,
	// whatever else it holds: the two are taken (and, if malformed,
	// failed) together.
	WRSGL      = 4
	wrFlagsAll = WRUnsignaled | WRInline | WRSGL
)

// MaxSGE is the most scatter-gather entries one request carries: what
// its continuation slot holds (SGESize bytes each).
const MaxSGE = WRSize / SGESize

// SGESize is one scatter-gather entry in a continuation slot: local
// address (8 bytes), length (4), lkey (4).
const SGESize = 16

// SGE is one scatter-gather entry: Length bytes at Addr in the region
// LKey names.
type SGE struct {
	Addr   uint64
	Length uint32
	LKey   uint32
}

// MaxInline is the most data a work request carries inline: the slot's
// bytes after its fields.
const MaxInline = WRSize - wrEnd

// WR is a work request as the application posts it.
type WR struct {
	Op     WROp
	Flags  uint8
	Stream uint16
	LKey   uint32
	WRID   uint64
	LAddr  uint64 // local address, in the region's address space
	Length uint32
	RKey   uint32
	RAddr  uint64
	Imm    uint32
	Inline [MaxInline]byte // WRInline: the data (Length bytes of it)
	// WRSGL: the entries (NSGE of them), which travel in the
	// continuation slot (PutSGL, ParseSGL), not in this one.
	NSGE uint8
	SGL  [MaxSGE]SGE
}

// Slots is how many send queue slots w takes: 2 with a scatter-gather
// list (its continuation), else 1.
func (w *WR) Slots() int {
	if w.Flags&WRSGL != 0 {
		return 2
	}
	return 1
}

// Byte offsets in a WR slot; bytes 44..63 are reserved and zero.
const (
	wrOp     = 0
	wrFlags  = 1
	wrStream = 2
	wrLKey   = 4
	wrWRID   = 8
	wrLAddr  = 16
	wrLength = 24
	wrRKey   = 28
	wrRAddr  = 32
	wrImm    = 40
	wrEnd    = 44
	wrNSGE   = 44 // WRSGL: the entry count; bytes 45..63 zero
)

var ne = binary.NativeEndian

// Put writes w into the slot s (len >= WRSize).
func (w *WR) Put(s []byte) {
	_ = s[WRSize-1]
	s[wrOp], s[wrFlags] = byte(w.Op), w.Flags
	ne.PutUint16(s[wrStream:], w.Stream)
	ne.PutUint32(s[wrLKey:], w.LKey)
	ne.PutUint64(s[wrWRID:], w.WRID)
	ne.PutUint64(s[wrLAddr:], w.LAddr)
	ne.PutUint32(s[wrLength:], w.Length)
	ne.PutUint32(s[wrRKey:], w.RKey)
	ne.PutUint64(s[wrRAddr:], w.RAddr)
	ne.PutUint32(s[wrImm:], w.Imm)
	switch {
	case w.Flags&WRInline != 0:
		copy(s[wrEnd:WRSize], w.Inline[:])
	case w.Flags&WRSGL != 0:
		clear(s[wrEnd:WRSize])
		s[wrNSGE] = w.NSGE
	default:
		clear(s[wrEnd:WRSize])
	}
}

// PutSGL writes w's scatter-gather entries into its continuation slot s
// (len >= WRSize), unused entries zero.
func (w *WR) PutSGL(s []byte) {
	_ = s[WRSize-1]
	clear(s[:WRSize])
	for i := range min(int(w.NSGE), MaxSGE) {
		e, o := &w.SGL[i], i*SGESize
		ne.PutUint64(s[o:], e.Addr)
		ne.PutUint32(s[o+8:], e.Length)
		ne.PutUint32(s[o+12:], e.LKey)
	}
}

// ParseSGL reads w's continuation slot into w.SGL (copied out first, as
// ParseWR does) and reports false when an entry past NSGE is not zero or
// the entries' lengths do not add up to w.Length.
func ParseSGL(w *WR, s []byte) bool {
	if len(s) < WRSize || w.NSGE < 1 || w.NSGE > MaxSGE {
		return false
	}
	var sum uint64
	for i := range MaxSGE {
		o := i * SGESize
		e := SGE{Addr: ne.Uint64(s[o:]), Length: ne.Uint32(s[o+8:]), LKey: ne.Uint32(s[o+12:])}
		if i >= int(w.NSGE) {
			if e != (SGE{}) {
				return false
			}
			continue
		}
		w.SGL[i] = e
		sum += uint64(e.Length)
	}
	return sum == uint64(w.Length)
}

// ParseWR reads a slot. It copies the fields out first (the application
// may rewrite its slot at any time; the daemon must judge one value of
// each field) and reports false for an unknown operation or nonzero
// reserved bytes.
func ParseWR(s []byte) (WR, bool) {
	if len(s) < WRSize {
		return WR{}, false
	}
	w := WR{Op: WROp(s[wrOp]), Flags: s[wrFlags], Stream: ne.Uint16(s[wrStream:]), LKey: ne.Uint32(s[wrLKey:]),
		WRID: ne.Uint64(s[wrWRID:]), LAddr: ne.Uint64(s[wrLAddr:]), Length: ne.Uint32(s[wrLength:]),
		RKey: ne.Uint32(s[wrRKey:]), RAddr: ne.Uint64(s[wrRAddr:]), Imm: ne.Uint32(s[wrImm:])}
	if w.Op < WRWrite || w.Op > WRRecv || w.Flags&^wrFlagsAll != 0 {
		return w, false
	}
	if w.Flags&WRSGL != 0 {
		w.NSGE = s[wrNSGE]
		ok := w.Flags&WRInline == 0 && w.NSGE >= 1 && w.NSGE <= MaxSGE && w.LKey == 0 && w.LAddr == 0 && w.Op != WRRecv
		for _, b := range s[wrNSGE+1 : WRSize] {
			if b != 0 {
				ok = false
			}
		}
		return w, ok
	}
	if w.Flags&WRInline != 0 {
		copy(w.Inline[:], s[wrEnd:WRSize])
		ok := w.Length <= MaxInline && w.LKey == 0 && w.LAddr == 0 &&
			(w.Op == WRWrite || w.Op == WRWriteImm || w.Op == WRSend || w.Op == WRSendImm)
		return w, ok
	}
	for _, b := range s[wrEnd:WRSize] {
		if b != 0 {
			return w, false
		}
	}
	return w, true
}

// CQEOp says what completed.
type CQEOp uint8

const (
	CQWrite        CQEOp = 1
	CQRead         CQEOp = 2
	CQSend         CQEOp = 3
	CQRecv         CQEOp = 4 // a SEND from the peer landed in a posted receive
	CQRecvWriteImm CQEOp = 5 // a WRITE with immediate from the peer completed
	// CQEvent is not a work request's completion but an event of the
	// queue pair's connection (Event says which, Status the reason), in
	// order with the completions around it. Only queue pairs made with
	// Request.Events get them (an older client would refuse the op).
	CQEvent CQEOp = 6
)

// QPEvent is what happened to a queue pair's connection (a CQEvent's
// byte 11).
type QPEvent uint8

const (
	EventConnected     QPEvent = 1 // the connection is up (connect or accept)
	EventPeerClosed    QPEvent = 2 // the peer closed it (DISCONNECT), or no longer knows it (RESET: Status reset)
	EventFailed        QPEvent = 3 // it failed; Status says why (rejected, remote invalid, RNR ...)
	EventRetryExceeded QPEvent = 4 // the peer stopped answering: data, a keepalive or the handshake went unanswered after the retries
)

// CQStatus is a completion's outcome.
type CQStatus uint8

const (
	StatusOK              CQStatus = 0
	StatusRemoteAccess    CQStatus = 1 // the peer refused the key, range or right
	StatusRemoteInvalid   CQStatus = 2
	StatusRNRExceeded     CQStatus = 3
	StatusRetryExceeded   CQStatus = 4
	StatusLocalLength     CQStatus = 5 // a SEND longer than the posted receive
	StatusFlushed         CQStatus = 6
	StatusReset           CQStatus = 7
	StatusRejected        CQStatus = 8
	StatusLocalProtection CQStatus = 9  // bad lkey, range or right on this side
	StatusBadWR           CQStatus = 10 // malformed work request (unknown op, reserved bytes, stream)
	StatusNotConnected    CQStatus = 11
)

// CQE is a completion.
type CQE struct {
	WRID   uint64
	Op     CQEOp
	Status CQStatus
	HasImm bool
	Bytes  uint32
	Imm    uint32
	Stream uint16
	Event  QPEvent // CQEvent only
	// QPN is the queue pair the entry is for: what tells the entries of
	// a completion queue shared by several queue pairs apart (create_cq;
	// in a queue pair's own completion queue it is that queue pair's).
	QPN uint32
}

const (
	cqWRID   = 0
	cqOp     = 8
	cqStatus = 9
	cqFlags  = 10
	cqEvent  = 11 // CQEvent's QPEvent; 0 in a completion
	cqBytes  = 12
	cqImm    = 16
	cqStream = 20
	cqEnd    = 22 // bytes 22..23 and 28..31 reserved, 0
	cqQPN    = 24
)

// Put writes c into the slot s (len >= CQESize).
func (c *CQE) Put(s []byte) {
	_ = s[CQESize-1]
	ne.PutUint64(s[cqWRID:], c.WRID)
	s[cqOp], s[cqStatus], s[cqFlags], s[cqEvent] = byte(c.Op), byte(c.Status), 0, byte(c.Event)
	if c.HasImm {
		s[cqFlags] = 1
	}
	ne.PutUint32(s[cqBytes:], c.Bytes)
	ne.PutUint32(s[cqImm:], c.Imm)
	ne.PutUint16(s[cqStream:], c.Stream)
	clear(s[cqEnd:CQESize])
	ne.PutUint32(s[cqQPN:], c.QPN)
}

// ParseCQE reads a completion slot.
func ParseCQE(s []byte) (CQE, bool) {
	if len(s) < CQESize {
		return CQE{}, false
	}
	c := CQE{WRID: ne.Uint64(s[cqWRID:]), Op: CQEOp(s[cqOp]), Status: CQStatus(s[cqStatus]),
		HasImm: s[cqFlags]&1 != 0, Bytes: ne.Uint32(s[cqBytes:]), Imm: ne.Uint32(s[cqImm:]),
		Stream: ne.Uint16(s[cqStream:]), Event: QPEvent(s[cqEvent]), QPN: ne.Uint32(s[cqQPN:])}
	if c.Op == CQEvent {
		return c, c.Event >= EventConnected && c.Event <= EventRetryExceeded
	}
	return c, c.Op >= CQWrite && c.Op <= CQRecvWriteImm && c.Event == 0
}
