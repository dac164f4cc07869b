package client

import (
	"errors"
	"fmt"

	"github.com/metaroce/metaroce/control/proto"
)

// CompletionOp says what completed.
type CompletionOp uint8

const (
	CompWrite        = CompletionOp(proto.CQWrite)
	CompRead         = CompletionOp(proto.CQRead)
	CompSend         = CompletionOp(proto.CQSend)
	CompRecv         = CompletionOp(proto.CQRecv)         // a peer's SEND landed in a posted receive
	CompRecvWriteImm = CompletionOp(proto.CQRecvWriteImm) // a peer's WRITE with immediate completed
	// CompEvent: a connection event of queue pair QPN (Event says
	// which, Status the reason), from a shared CQ's Poll only; a queue
	// pair's own PollCQ moves events to its event queue.
	CompEvent = CompletionOp(proto.CQEvent)
)

func (o CompletionOp) String() string {
	switch o {
	case CompWrite:
		return "write"
	case CompRead:
		return "read"
	case CompSend:
		return "send"
	case CompRecv:
		return "recv"
	case CompRecvWriteImm:
		return "recv-write-imm"
	case CompEvent:
		return "event"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

// Status is a completion's outcome; Err maps it onto a typed error.
type Status uint8

// Completion is one finished work request (or a peer's WRITE with
// immediate).
type Completion struct {
	WRID   uint64
	Op     CompletionOp
	Status Status
	Bytes  int // received bytes, for Recv and RecvWriteImm
	Imm    uint32
	HasImm bool
	Stream uint16
	// QPN is the queue pair it is for: what tells apart the entries of a
	// shared CQ (QP.Num).
	QPN uint32
	// Event is the connection event of a CompEvent entry (0 otherwise).
	Event EventType
}

// Completion errors.
var (
	ErrRemoteAccess    = errors.New("metaroce: remote access error (key, range or right refused by the peer)")
	ErrRemoteInvalid   = errors.New("metaroce: remote invalid request")
	ErrRNR             = errors.New("metaroce: receiver not ready (no receive posted) after retries")
	ErrRetryExceeded   = errors.New("metaroce: retries exceeded")
	ErrLocalLength     = errors.New("metaroce: message longer than the peer's receive buffer")
	ErrFlushed         = errors.New("metaroce: flushed (connection closed)")
	ErrReset           = errors.New("metaroce: connection reset by peer")
	ErrRejected        = errors.New("metaroce: connection rejected")
	ErrLocalProtection = errors.New("metaroce: local protection error (unknown lkey, range or right)")
	ErrBadWR           = errors.New("metaroce: malformed work request")
	ErrNotConnected    = errors.New("metaroce: queue pair not connected")
)

var statusErr = map[Status]error{
	Status(proto.StatusRemoteAccess): ErrRemoteAccess, Status(proto.StatusRemoteInvalid): ErrRemoteInvalid,
	Status(proto.StatusRNRExceeded): ErrRNR, Status(proto.StatusRetryExceeded): ErrRetryExceeded,
	Status(proto.StatusLocalLength): ErrLocalLength, Status(proto.StatusFlushed): ErrFlushed,
	Status(proto.StatusReset): ErrReset, Status(proto.StatusRejected): ErrRejected,
	Status(proto.StatusLocalProtection): ErrLocalProtection, Status(proto.StatusBadWR): ErrBadWR,
	Status(proto.StatusNotConnected): ErrNotConnected,
}

// Err is nil for a successful completion, else its typed error.
func (c *Completion) Err() error {
	if c.Status == Status(proto.StatusOK) {
		return nil
	}
	if e, ok := statusErr[c.Status]; ok {
		return e
	}
	return fmt.Errorf("metaroce: completion status %d", c.Status)
}
