package control

import (
	"errors"
	"net/netip"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
	"github.com/metaroce/metaroce/transport"
)

// Ring sizes: defaults and bounds, in slots.
const (
	DefaultSQSlots = 256  // a perftest-style window of outstanding requests
	DefaultCQSlots = 1024 // room for every posted request plus peers' WRITE_IMMs
	MaxQueueSlots  = 1 << 16
)

// qpState is where a queue pair is in its life.
type qpState uint8

const (
	qpIdle       qpState = iota // made, accepting a connection to its number
	qpConnecting                // Connect sent
	qpConnected
	qpClosed // its connection closed or failed; only destroy_qp is left
)

// qp is one queue pair. The control goroutine builds it and hands it to
// its engine; from then on the engine goroutine owns every field except
// the rings' other ends, which belong to the application.
type qp struct {
	qpn     uint32
	session *session
	mem     *transport.MemoryTable // the session's table on this engine

	sq  *ring.Ring
	sqc *ring.Consumer
	// cq is what it completes into: its own (ownCQ), made and freed with
	// it, or a shared one (cq.go).
	cq    *cq
	ownCQ bool
	// bell is the daemon's end of the queue pair's doorbell: the engine
	// rings the application through it (completions) and polls it (in
	// its driver's epoll set) for the application's rings (posts). The
	// other end, appBell, is passed to the application with the create_qp
	// reply and closed here at once (handOver), with the rings' memfds:
	// the daemon keeps their mappings and one descriptor, bell.
	bell, appBell *ring.Doorbell
	// d is the driver serving it and slot its index in d.qps (-1: not
	// served); hot says it is on d.hot, armed that it is cold with its
	// send queue armed, pinned that it must never go cold (its doorbell
	// end left the epoll set); lastWork is when a visit last found work
	// (driver.go, Step).
	d                  *EngineDriver
	slot               int
	hot, armed, pinned bool
	lastWork           transport.Time
	// cost is what the queue pair holds of its session's budget
	// (budget.go): qpCost, less qpHandedOver once handed over.
	cost        usage
	state       qpState
	conn        *transport.Conn
	peer        netip.Addr
	waiter      chan error // connect or accept waiting for the connection (cap 1)
	outstanding int        // requests taken from the SQ whose completion is owed (also counted in cq.outstanding)
	// events: the application asked for connection events in its CQ
	// (create_qp's events); reason is why the connection closed.
	events bool
	reason proto.CQStatus
	// nowait: its connect answered at once (connect's nowait), so no
	// waiter hears how the attempt ends, and the driver reports it as
	// the event a waiting connect posts when it gives up (Completion,
	// OpClosed).
	nowait bool
	// rnrForever: its connection, made or accepted, never fails on RNR
	// (create_qp's rnr_retry_forever; transport.ConnectOptions). Set
	// at creation, read on the engine goroutine where the queue pair
	// meets its connection.
	rnrForever bool
	// tags: the transport carries a request's index in tags as its WRID
	// (tag.go), so a completion finds the application's wr_id and flags;
	// free stacks the unused indices. Both are sized once: to its own
	// CQ, or to its send queue on a shared CQ; outstanding never exceeds
	// it. sgls holds the gather lists of its requests that have one,
	// sglFree the unused ones (tag.go).
	tags    []wrTag
	free    []uint32
	sgls    [][proto.MaxSGE][]byte
	sglFree []uint16
}

// sglSlots is how many requests with a scatter-gather list a queue pair
// may have outstanding: their lists live in the daemon until completion
// (about 100 bytes each), so they get a pool of their own rather than a
// list per completion slot. A request finding the pool empty waits in the
// send queue for a completion to free one.
const sglSlots = 64

// newQP makes a queue pair's rings and doorbell, charged to s's share of
// the daemon's budget (qpCost): with shared nil, a completion queue of
// cqSlots of its own; else it completes into shared, and has at most
// sqSlots requests outstanding.
func newQP(qpn uint32, s *session, sqSlots, cqSlots int, shared *cq) (q *qp, err error) {
	tags := cqSlots
	if shared != nil {
		cqSlots, tags = 0, sqSlots
	}
	cost := qpCost(sqSlots, cqSlots, tags)
	if err := resources.take(&s.use, cost); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			resources.give(&s.use, cost)
		}
	}()
	sq, err := ring.Create(sqSlots, proto.WRSize)
	if err != nil {
		return nil, err
	}
	bell, appBell, err := ring.NewDoorbellPair()
	if err != nil {
		sq.Close()
		return nil, err
	}
	c := shared
	if c == nil {
		if c, err = newCQ(cqSlots, bell); err != nil {
			sq.Close()
			bell.Close()
			appBell.Close()
			return nil, err
		}
	}
	q = &qp{qpn: qpn, session: s, sq: sq, sqc: sq.Consumer(), cq: c, ownCQ: shared == nil, bell: bell, appBell: appBell,
		cost: cost, slot: -1}
	q.initTags(tags)
	return q, nil
}

// handOver closes the daemon's copy of the application's end of the
// doorbell and the rings' memfds, once the reply carrying them has gone
// (or failed): from then on only the application holds that end, and the
// daemon reaches the rings through its mappings. What is left of the
// queue pair's descriptors is one, the daemon's doorbell end. It runs on
// the session's goroutine before the queue pair can be destroyed (the
// session's requests are served in order).
func (q *qp) handOver() {
	if q.appBell == nil {
		return
	}
	q.appBell.Close()
	q.appBell = nil
	q.sq.CloseFD()
	handed := qpHandedOver
	if q.ownCQ {
		q.cq.ring.CloseFD()
	} else {
		handed = sharedQPHandedOver
	}
	resources.give(&q.session.use, handed)
	q.cost.add(handed, -1)
}

// close frees the rings and the doorbell (the application's mappings
// stay valid until it unmaps them: memfd pages live while mapped). A
// shared CQ stays: destroy_cq frees it.
func (q *qp) close() {
	q.handOver()
	q.sq.Close()
	if q.ownCQ {
		q.cq.ring.Close()
	}
	q.bell.Close()
	resources.give(&q.session.use, q.cost)
}

// owe counts n requests taken (n > 0) or settled (n < 0).
func (q *qp) owe(n int) {
	q.outstanding += n
	q.cq.outstanding += n
}

// complete queues one completion for the application, and makes the
// queue pair hot, so the next Step delivers it. It reports false when
// the entry overflowed the CQ's backlog and was dropped (counted).
func (q *qp) complete(c proto.CQE) bool {
	if q.d != nil {
		q.d.wake(q)
	}
	c.QPN = q.qpn
	return q.cq.put(c)
}

// event reports a connection event to the application, in order with
// its completions, if it asked for events. pending has room for it as for
// any completion (and counts it as an overflow if not).
func (q *qp) event(ev proto.QPEvent, st proto.CQStatus) {
	if q.events {
		q.complete(proto.CQE{Op: proto.CQEvent, Event: ev, Status: st})
	}
}

// closedEvent maps why a connected queue pair's connection closed onto
// its event.
func closedEvent(st transport.Status) proto.QPEvent {
	switch st {
	case transport.StatusFlushed, transport.StatusReset:
		// Flushed: the peer's DISCONNECT (a close of ours would have
		// come from destroy_qp, which takes the queue pair away
		// first). Reset: the peer no longer knows the connection (its
		// daemon restarted, or dropped it).
		return proto.EventPeerClosed
	case transport.StatusRetryExceeded:
		return proto.EventRetryExceeded
	}
	return proto.EventFailed
}

// stateName is the queue pair's state as query_qp names it.
func (q *qp) stateName() string {
	switch q.state {
	case qpIdle:
		return proto.QPStateIdle
	case qpConnecting:
		return proto.QPStateConnecting
	case qpConnected:
		return proto.QPStateConnected
	}
	return proto.QPStateClosed
}

// flushCQ moves pending completions into the CQ and wakes the
// application if it sleeps. It reports whether it moved any.
func (q *qp) flushCQ() bool { return q.cq.flush() }

// budget is how many more requests the QP may take from its SQ: every
// one taken is owed a completion, and the CQ must have room for all,
// and a tag for each (on a shared CQ, the tags bound one queue pair's
// share).
func (q *qp) budget() int {
	return min(len(q.free), q.cq.room())
}

var errNotConnected = errors.New("queue pair not connected")

// statusOf maps a transport status onto the completion's.
func statusOf(s transport.Status) proto.CQStatus {
	switch s {
	case transport.StatusOK:
		return proto.StatusOK
	case transport.StatusRemoteAccess:
		return proto.StatusRemoteAccess
	case transport.StatusRemoteInvalid:
		return proto.StatusRemoteInvalid
	case transport.StatusRNRRetryExceeded:
		return proto.StatusRNRExceeded
	case transport.StatusRetryExceeded:
		return proto.StatusRetryExceeded
	case transport.StatusLocalLength:
		return proto.StatusLocalLength
	case transport.StatusFlushed:
		return proto.StatusFlushed
	case transport.StatusReset:
		return proto.StatusReset
	case transport.StatusRejected:
		return proto.StatusRejected
	}
	return proto.StatusRemoteInvalid
}

func opOf(o transport.Op) (proto.CQEOp, bool) {
	switch o {
	case transport.OpWrite:
		return proto.CQWrite, true
	case transport.OpRead:
		return proto.CQRead, true
	case transport.OpSend:
		return proto.CQSend, true
	case transport.OpRecv:
		return proto.CQRecv, true
	case transport.OpRecvWriteImm:
		return proto.CQRecvWriteImm, true
	}
	return 0, false
}
