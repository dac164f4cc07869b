package client

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/metaroce/metaroce/control/proto"
)

// Connection events. A queue pair reports what happens to its connection
// (the counterpart of verbs' asynchronous events, rdma_cm's
// ESTABLISHED/DISCONNECTED and libfabric's FI_SHUTDOWN) through its own
// event queue: the daemon writes each event into the completion queue, in
// order with the completions around it, and PollCQ moves it aside, so the
// work requests a closing connection flushes are all in the completion
// queue before its event is in the event queue. WaitCQ returns the
// terminal event's error once the completions are drained, instead of
// waiting for completions that cannot come; PollEvent and WaitEvent take
// the events themselves. Like the rest of a QP, use them from the
// goroutine that polls it.

// EventType says what happened.
type EventType uint8

const (
	EventConnected     = EventType(proto.EventConnected)
	EventPeerClosed    = EventType(proto.EventPeerClosed)    // DISCONNECT from the peer, or the peer no longer knows the connection (Status: ErrReset)
	EventFailed        = EventType(proto.EventFailed)        // the connection failed: Status says why
	EventRetryExceeded = EventType(proto.EventRetryExceeded) // the peer stopped answering (data, keepalive or handshake)
	// EventDaemonGone: the daemon went away; every queue pair of the
	// session reports it, once, after the completions it had written.
	EventDaemonGone EventType = 0x80
)

func (t EventType) String() string {
	switch t {
	case EventConnected:
		return "connected"
	case EventPeerClosed:
		return "peer closed"
	case EventFailed:
		return "failed"
	case EventRetryExceeded:
		return "retry exceeded"
	case EventDaemonGone:
		return "daemon gone"
	}
	return fmt.Sprintf("event(%d)", uint8(t))
}

// Event is one connection event of a queue pair.
type Event struct {
	Type   EventType
	Status Status // the reason (StatusOK for EventConnected)
}

// Terminal reports whether the connection is over after e.
func (e Event) Terminal() bool { return e.Type != EventConnected }

// Err is nil for EventConnected, else an *EventError.
func (e Event) Err() error {
	if !e.Terminal() {
		return nil
	}
	return &EventError{e}
}

// Errors that an EventError matches with errors.Is, beside the reason's
// completion error (ErrReset, ErrRetryExceeded, ErrRejected ...).
var (
	ErrPeerClosed = errors.New("metaroce: connection closed by the peer")
	ErrConnLost   = errors.New("metaroce: connection lost")
)

// EventError is a terminal event as an error. errors.Is matches ErrConnLost
// for every one, ErrPeerClosed for EventPeerClosed, ErrDaemonGone for
// EventDaemonGone, and the reason's completion error.
type EventError struct{ Event Event }

func (e *EventError) Error() string {
	s := "metaroce: queue pair: " + e.Event.Type.String()
	if e.Event.Status != Status(proto.StatusOK) && e.Event.Type != EventDaemonGone {
		s += " (" + proto.StatusName(proto.CQStatus(e.Event.Status)) + ")"
	}
	return s
}

// Is matches the sentinels above.
func (e *EventError) Is(target error) bool {
	switch target {
	case ErrConnLost:
		return true
	case ErrPeerClosed:
		return e.Event.Type == EventPeerClosed
	case ErrDaemonGone:
		return e.Event.Type == EventDaemonGone
	}
	if e.Event.Status != Status(proto.StatusOK) {
		c := Completion{Status: e.Event.Status}
		return c.Err() == target
	}
	return false
}

// maxEvents bounds a queue pair's event queue: a connection has at most
// two events (connected, then how it ended) and the daemon's going one
// more; anything beyond is a daemon bug and is dropped.
const maxEvents = 8

// pushEvent queues an event from the completion queue (or the daemon's
// end) and records the state it implies.
func (q *QP) pushEvent(e Event) {
	if e.Terminal() && q.terminal == nil {
		q.terminal = e.Err()
	}
	switch e.Type {
	case EventConnected:
		q.state = QPConnected
	default:
		q.state = QPClosed
	}
	if len(q.events) < maxEvents {
		q.events = append(q.events, e)
	}
}

// PollEvent takes the oldest connection event, if there is one. It looks
// at the completion queue too, keeping any completions it finds for
// PollCQ.
func (q *QP) PollEvent() (Event, bool) {
	if len(q.events) == 0 {
		q.stashRing()
	}
	if len(q.events) == 0 {
		return Event{}, false
	}
	e := q.events[0]
	q.events = q.events[:copy(q.events, q.events[1:])]
	return e, true
}

// WaitEvent blocks until a connection event is there or ctx ends, keeping
// completions that arrive meanwhile for PollCQ.
func (q *QP) WaitEvent(ctx context.Context) (Event, error) {
	if q.shared != nil {
		return Event{}, ErrSharedCQ // its events are its CQ's entries
	}
	for {
		if e, ok := q.PollEvent(); ok {
			return e, nil
		}
		if err := q.waitRing(ctx); err != nil {
			if e, ok := q.PollEvent(); ok {
				return e, nil
			}
			return Event{}, err
		}
	}
}

// stashRing moves what the completion queue holds into the stash (and
// events into the event queue), without blocking.
func (q *QP) stashRing() {
	if q.cqc == nil {
		return // a shared CQ's: its events are the CQ's entries
	}
	for len(q.stash) < cap(q.stash) {
		n := len(q.stash)
		got, _ := q.pollRing(q.stash[n:cap(q.stash)])
		q.stash = q.stash[:n+got]
		if got == 0 {
			break
		}
	}
	q.noteGone()
}

// noteGone queues EventDaemonGone once the daemon has gone and the
// completion queue holds nothing more.
func (q *QP) noteGone() {
	if q.goneNoted || !q.c.goneFlag.Load() || q.cqc == nil {
		return
	}
	if _, got, err := q.cqc.Peek(1); err == nil && got > 0 {
		return
	}
	q.goneNoted = true
	q.pushEvent(Event{Type: EventDaemonGone})
}

// QPState is where a queue pair is, as its events have told (State) or
// the daemon answers (Query).
type QPState uint8

const (
	QPIdle QPState = iota
	QPConnecting
	QPConnected
	QPClosed
)

func (s QPState) String() string {
	switch s {
	case QPIdle:
		return proto.QPStateIdle
	case QPConnecting:
		return proto.QPStateConnecting
	case QPConnected:
		return proto.QPStateConnected
	}
	return proto.QPStateClosed
}

// State is the queue pair's state as the events taken so far (PollCQ,
// PollEvent) say: no call to the daemon.
func (q *QP) State() QPState { return q.state }

// QPAttr is what Query answers.
type QPAttr struct {
	State  QPState
	Peer   netip.Addr // zero while idle
	Reason string     // once closed: why ("flushed", "reset", "retry_exceeded" ...)
}

// Query asks the daemon for the queue pair's state (ibv_query_qp's
// qp_state): a round trip on the control socket.
func (q *QP) Query(ctx context.Context) (QPAttr, error) {
	var r proto.Response
	if _, err := q.c.do(proto.Request{Header: proto.Header{Op: proto.OpQueryQP}, QPN: q.Num}, &r); err != nil {
		return QPAttr{}, err
	}
	a := QPAttr{Reason: r.Reason}
	switch r.State {
	case proto.QPStateIdle:
		a.State = QPIdle
	case proto.QPStateConnecting:
		a.State = QPConnecting
	case proto.QPStateConnected:
		a.State = QPConnected
	case proto.QPStateClosed:
		a.State = QPClosed
	default:
		return a, fmt.Errorf("%w: query_qp: state %q", ErrDaemonError, r.State)
	}
	if r.Peer != "" {
		p, err := netip.ParseAddr(r.Peer)
		if err != nil {
			return a, fmt.Errorf("%w: query_qp: peer %q", ErrDaemonError, r.Peer)
		}
		a.Peer = p
	}
	return a, nil
}
