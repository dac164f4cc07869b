package control

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// wrBatch is how many work requests one Step takes from one send queue:
// the engine's packet batch, so one queue cannot starve the others or the
// wire for long.
const wrBatch = 64

// EngineDriver is the engine side of the application interface: a
// dataplane.Sleeper that serves the queue pairs placed on one engine. Every
// field is owned by the engine goroutine; the Server reaches them only
// through Engine.Do. Completions of connections that are not a queue
// pair's go to Inner (the daemon's compliance memory, once exposed).
type EngineDriver struct {
	Inner dataplane.Driver

	qps []*qp // served queue pairs (q.slot is each one's index)
	// hot holds the queue pairs with something to do, the only ones a
	// Step visits (q.hot says which are on it); see Step.
	hot []*qp
	// lastBells is when Step last looked for cold queue pairs' doorbells.
	lastBells transport.Time
	byConn    map[*transport.Conn]*qp // connection -> its queue pair
	byQPN     map[uint32]*qp          // for connections accepted on a QP's number
	// gone holds connections of queue pairs already freed: their last
	// completions (the flush, OpClosed) are dropped, not misrouted.
	gone map[*transport.Conn]bool
	// listeners by service, and the connections waiting in them for the
	// application's decision (listener.go).
	listeners map[uint32]*listener
	waiting   map[*transport.Conn]*listener
	tables    map[*session]*transport.MemoryTable
	reap      []reaping

	// Waking: every queue pair's doorbell end is in the epoll set epfd,
	// which the engine polls beside its link when it sleeps (WakeFD);
	// Woke clears the ends that rang. Per queue pair, so no session can
	// touch another's bell, and each end the daemon's alone (see ring's
	// package doc), so no session can make the engine block on one.
	epfd   int
	events [64]unix.EpollEvent
	byFD   map[int32]*qp

	// Counters, read through Do.
	stats DriverStats
}

// DriverStats count what the driver did.
type DriverStats struct {
	WRs, BadWRs, LocalErrors uint64
	Completions, CQOverflows uint64
	Wakeups                  uint64
	// Visits counts queue pairs a Step looked at, Cooled those it let go
	// cold (their send queue armed, left to their doorbell), Rung cold
	// ones whose doorbell brought them back.
	Visits, Cooled, Rung uint64
}

// How the engine finds the queue pairs with work without looking at every
// one each pass (issue 22: with 4,000 idle connections a ping-pong's p50
// went from 174 to 579 us, each pass reading every send queue's producer
// index, a cache miss apiece). A queue pair is hot or cold. Step visits
// the hot ones: it flushes their completions and drains their send
// queues. One that has had nothing to do for hotLinger goes cold: its
// send queue is armed (the need-wakeup flag the application's Notify
// reads, as before a sleep), so its application's next post rings its
// doorbell, and it leaves the hot list. What makes a queue pair hot
// again: a completion or connection event for it (Completion, a packet's
// or a timer's doing: the transport's own timers are a heap keyed by each
// connection's next deadline, so idle connections cost nothing per pass),
// a change of state, or its doorbell. The doorbells are the engine's epoll
// set, which the engine polls when it sleeps; while it runs, Step looks
// at the set (one epoll_wait, no wait) at most every bellEvery, so a cold
// queue pair's first post waits at most that long, and only the first:
// the queue pair stays hot while it is used. Per pass, the work is the
// hot queue pairs; per idle connection, nothing.
const (
	hotLinger = transport.Time(5 * time.Millisecond)
	bellEvery = transport.Time(20 * time.Microsecond)
)

// reaping is what a closed session left behind: mappings to unmap once the
// connections that could still touch them have closed.
type reaping struct {
	conns   []*transport.Conn
	regions []*region
}

// NewEngineDriver returns a driver with no queue pairs.
func NewEngineDriver(inner dataplane.Driver) (*EngineDriver, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("engine driver: epoll_create1: %w", err)
	}
	return &EngineDriver{Inner: inner, byConn: map[*transport.Conn]*qp{}, byQPN: map[uint32]*qp{}, gone: map[*transport.Conn]bool{},
		listeners: map[uint32]*listener{}, waiting: map[*transport.Conn]*listener{},
		tables: map[*session]*transport.MemoryTable{}, epfd: epfd, byFD: map[int32]*qp{}}, nil
}

// Close frees the driver's epoll set (after its engine has stopped).
func (d *EngineDriver) Close() error {
	if d.epfd < 0 {
		return nil
	}
	err := unix.Close(d.epfd)
	d.epfd = -1
	return err
}

// add serves q from now on (engine goroutine): its doorbell end joins the
// epoll set.
func (d *EngineDriver) add(q *qp) error {
	fd := q.bell.FD()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}
	if err := unix.EpollCtl(d.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("queue pair %d: add doorbell fd %d to the engine's epoll set: %w", q.qpn, fd, err)
	}
	q.d, q.slot = d, len(d.qps)
	d.qps = append(d.qps, q)
	d.byFD[int32(fd)] = q
	d.wake(q)
	return nil
}

// remove forgets q (engine goroutine): off the served and hot lists, its
// doorbell end out of the epoll set.
func (d *EngineDriver) remove(q *qp) {
	d.unwatch(q)
	if q.slot >= 0 && q.slot < len(d.qps) && d.qps[q.slot] == q {
		last := len(d.qps) - 1
		d.qps[q.slot] = d.qps[last]
		d.qps[q.slot].slot = q.slot
		d.qps[last] = nil
		d.qps = d.qps[:last]
	}
	q.slot = -1
	if q.hot {
		for i, x := range d.hot {
			if x == q {
				d.dropHot(i)
				break
			}
		}
	}
	q.d = nil
}

// wake puts q on the hot list (engine goroutine), its send queue
// disarmed: the engine polls it from now on.
func (d *EngineDriver) wake(q *qp) {
	if q.hot || q.slot < 0 {
		return
	}
	q.hot = true
	if q.armed {
		q.armed = false
		q.sqc.Disarm()
	}
	d.hot = append(d.hot, q)
}

// dropHot takes the i'th queue pair off the hot list (order is not kept).
func (d *EngineDriver) dropHot(i int) {
	q := d.hot[i]
	q.hot = false
	last := len(d.hot) - 1
	d.hot[i] = d.hot[last]
	d.hot[last] = nil
	d.hot = d.hot[:last]
}

// cool lets q go cold if its send queue is empty: armed, so the
// application's next post rings. It reports whether q went cold.
func (d *EngineDriver) cool(q *qp) bool {
	if len(q.cq.pending) > 0 || q.cq.dirty {
		return false
	}
	if ready, err := q.sqc.Arm(); ready && err == nil {
		q.sqc.Disarm() // posted meanwhile: stays hot
		return false
	}
	q.armed = true
	d.stats.Cooled++
	return true
}

// bells wakes the cold queue pairs whose doorbells rang (a non-blocking
// epoll_wait, then a bounded non-blocking read of each end that rang). An
// end in error or hung up leaves the set, so that it cannot keep the
// engine awake; its queue pair is made hot and stays served until it
// goes.
func (d *EngineDriver) bells() {
	n, err := unix.EpollWait(d.epfd, d.events[:], 0)
	if err != nil {
		return
	}
	for _, ev := range d.events[:n] {
		q := d.byFD[ev.Fd]
		if q == nil {
			continue
		}
		q.bell.Clear()
		if !q.hot {
			d.stats.Rung++
		}
		d.wake(q)
		if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			d.unwatch(q)
			q.pinned = true // no doorbell can bring it back: never cold
		}
	}
}

// unwatch takes q's doorbell end out of the epoll set.
func (d *EngineDriver) unwatch(q *qp) {
	fd := q.bell.FD()
	if d.byFD[int32(fd)] == q {
		delete(d.byFD, int32(fd))
		unix.EpollCtl(d.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
}

// table returns the session's memory table on this engine.
func (d *EngineDriver) table(s *session) *transport.MemoryTable {
	t := d.tables[s]
	if t == nil {
		t = transport.NewMemoryTable()
		d.tables[s] = t
	}
	return t
}

// Step drains the hot queue pairs' send queues and flushes their
// completion queues, and lets those idle for hotLinger go cold.
func (d *EngineDriver) Step(e *dataplane.Engine, now transport.Time) bool {
	work := false
	if d.Inner != nil && d.Inner.Step(e, now) {
		work = true
	}
	if now-d.lastBells >= bellEvery || now < d.lastBells {
		d.lastBells = now
		d.bells()
	}
	for i := 0; i < len(d.hot); {
		q := d.hot[i]
		d.stats.Visits++
		did := q.flushCQ()
		if q.state == qpConnected && d.drain(q) {
			did = true
		}
		if q.state == qpClosed && d.failAll(q) {
			did = true
		}
		q.flushCQ()
		if did {
			work = true
			q.lastWork = now
		} else if now-q.lastWork >= hotLinger && !q.pinned && d.cool(q) {
			d.dropHot(i)
			continue
		}
		i++
	}
	if len(d.reap) > 0 {
		d.reapClosed()
	}
	return work
}

// takeWRs hands up to a batch of q's work requests to f (ok false: the
// request did not parse), as many as the completion queue has room to
// answer. f reports whether it took the request; the first it leaves
// stops the batch and stays in the queue. A request with a
// scatter-gather list is its slot and the next (proto.WRSGL), handed over
// together; one whose continuation is not published yet waits. It
// reports whether any was taken.
func takeWRs(q *qp, f func(w proto.WR, ok bool) bool) bool {
	n := min(wrBatch, q.budget())
	if n == 0 {
		return false
	}
	first, got, err := q.sqc.Peek(uint32(2 * n)) // room for every request's continuation
	if err != nil || got == 0 {
		return false
	}
	used := uint32(0)
	for taken := 0; used < got && taken < n; taken++ {
		w, ok := proto.ParseWR(q.sqc.Slot(first + used))
		k := uint32(1)
		if w.Flags&proto.WRSGL != 0 {
			k = 2
			if used+1 >= got {
				break
			}
			ok = ok && proto.ParseSGL(&w, q.sqc.Slot(first+used+1))
		}
		if !f(w, ok) { // by value: a pointer through f would escape (an allocation per request)
			break
		}
		used += k
	}
	q.sqc.Release(used)
	return used > 0
}

// drain takes up to a batch of work requests from q's SQ and posts them.
func (d *EngineDriver) drain(q *qp) bool {
	return takeWRs(q, func(w proto.WR, ok bool) bool {
		if !ok {
			d.stats.BadWRs++
			q.owe(1)
			d.fail(q, &w, proto.StatusBadWR)
			return true
		}
		return d.post(q, &w) // false: the transport's queue is full, retry from this one
	})
}

// post hands one work request to the transport. It reports false when
// the transport cannot take it now (the request stays in the SQ).
func (d *EngineDriver) post(q *qp, w *proto.WR) bool {
	if w.Flags&proto.WRInline != 0 {
		return d.postInline(q, w)
	}
	var want transport.Access
	if w.Op == proto.WRRead || w.Op == proto.WRRecv {
		want = transport.AccessLocalWrite // the transport writes into it
	}
	if w.Flags&proto.WRSGL != 0 {
		return d.postSGL(q, w, want)
	}
	r, ok := q.mem.Lookup(w.LKey)
	var buf []byte
	if ok {
		buf, ok = localSlice(r, w.LAddr, w.Length, want)
	}
	if !ok {
		d.stats.LocalErrors++
		q.owe(1)
		d.fail(q, w, proto.StatusLocalProtection)
		return true
	}
	return d.postBuf(q, w, buf, -1, nil)
}

// postSGL posts a request whose local side is a scatter-gather list:
// every entry is resolved like a single buffer (its lkey in the session,
// its range in the region, the right for a READ), and any that is not
// fails the request with local_protection. The slices wait in the
// queue pair's gather-list pool until the completion.
func (d *EngineDriver) postSGL(q *qp, w *proto.WR, want transport.Access) bool {
	var segs [proto.MaxSGE][]byte
	for i := range int(w.NSGE) {
		e := &w.SGL[i]
		r, ok := q.mem.Lookup(e.LKey)
		if ok {
			segs[i], ok = localSlice(r, e.Addr, e.Length, want)
		}
		if !ok {
			d.stats.LocalErrors++
			q.owe(1)
			d.fail(q, w, proto.StatusLocalProtection)
			return true
		}
	}
	return d.postBuf(q, w, nil, -1, &segs)
}

// postInline posts a request whose data came in its slot: the data moves
// into the request's tag entry, which lives until its completion.
func (d *EngineDriver) postInline(q *qp, w *proto.WR) bool {
	return d.postBuf(q, w, nil, int(w.Length), nil)
}

// postBuf hands w to the transport with buf as its local bytes, or, for
// inline >= 0, that many bytes of its inline data, or with segs (not
// nil) its gather list.
func (d *EngineDriver) postBuf(q *qp, w *proto.WR, buf []byte, inline int, segs *[proto.MaxSGE][]byte) bool {
	var sgl uint16
	if segs != nil {
		var ok bool
		if sgl, ok = q.takeSGL(segs); !ok {
			return false // every list is in flight: wait in the send queue for a completion
		}
	}
	tag, ok := q.tag(w.WRID, w.Flags&proto.WRUnsignaled != 0 && w.Op != proto.WRRecv)
	if !ok {
		q.putSGL(sgl)
		return false
	}
	if inline >= 0 {
		t := &q.tags[tag]
		copy(t.inline[:], w.Inline[:inline])
		buf = t.inline[:inline]
	}
	wr := transport.WorkRequest{WRID: tag, Stream: w.Stream, Local: buf, RemoteAddr: w.RAddr, RKey: w.RKey,
		Imm: w.Imm, HasImm: w.Op == proto.WRWriteImm || w.Op == proto.WRSendImm}
	if sgl != 0 {
		q.tags[tag].sgl = sgl
		wr.SGL = q.sgls[sgl-1][:w.NSGE]
	}
	var err error
	switch w.Op {
	case proto.WRWrite, proto.WRWriteImm:
		err = q.conn.PostWrite(&wr)
	case proto.WRRead:
		err = q.conn.PostRead(&wr)
	case proto.WRSend, proto.WRSendImm:
		err = q.conn.PostSend(&wr)
	case proto.WRRecv:
		err = q.conn.PostRecv(tag, buf)
	}
	if err != nil {
		q.untag(tag)
	}
	switch err {
	case nil:
		d.stats.WRs++
		q.owe(1)
		return true
	case transport.ErrQueueFull, transport.ErrRecvQueueFull:
		return false
	case transport.ErrBadStream, transport.ErrTooLarge:
		d.stats.BadWRs++
		q.owe(1)
		d.fail(q, w, proto.StatusBadWR)
		return true
	}
	q.owe(1)
	d.fail(q, w, proto.StatusNotConnected)
	return true
}

// fail completes w at once with st (the request was taken: outstanding
// was counted, and the completion settles it).
func (d *EngineDriver) fail(q *qp, w *proto.WR, st proto.CQStatus) {
	op := proto.CQWrite
	switch w.Op {
	case proto.WRRead:
		op = proto.CQRead
	case proto.WRSend, proto.WRSendImm:
		op = proto.CQSend
	case proto.WRRecv:
		op = proto.CQRecv
	}
	q.owe(-1)
	q.complete(proto.CQE{WRID: w.WRID, Op: op, Status: st, Stream: w.Stream})
}

// failAll completes whatever the application posts after its connection
// closed with StatusNotConnected, so nothing it posts goes unanswered.
func (d *EngineDriver) failAll(q *qp) bool {
	return takeWRs(q, func(w proto.WR, _ bool) bool {
		q.owe(1)
		d.fail(q, &w, proto.StatusNotConnected)
		return true
	})
}

// Completion routes a transport completion to its queue pair.
func (d *EngineDriver) Completion(e *dataplane.Engine, now transport.Time, c transport.Completion) {
	if d.gone[c.Conn] {
		if c.Op == transport.OpClosed {
			delete(d.gone, c.Conn)
		}
		return
	}
	if l := d.waiting[c.Conn]; l != nil {
		// A request not yet accepted: only its end matters.
		if c.Op == transport.OpClosed {
			d.requestClosed(l, c.Conn)
		}
		return
	}
	q := d.byConn[c.Conn]
	if q == nil && c.Op == transport.OpRequest {
		if l := d.listeners[c.Conn.Service()]; l != nil {
			d.enqueue(now, l, c.Conn)
		} else {
			c.Conn.Close(now) // the listener went away meanwhile
		}
		return
	}
	if q != nil {
		d.wake(q) // its completion queue, its state, its send queue
	}
	if q == nil && c.Op == transport.OpConnected && c.Status == transport.StatusOK {
		q = d.accept(e, now, c.Conn)
		if q != nil {
			return
		}
	}
	if q == nil {
		if d.Inner != nil {
			d.Inner.Completion(e, now, c)
		}
		return
	}
	switch c.Op {
	case transport.OpConnected:
		if q.state == qpConnecting {
			q.state = qpConnected
			q.peer = c.Conn.Peer()
			q.event(proto.EventConnected, proto.StatusOK)
			q.signal(nil)
		}
		return
	case transport.OpClosed:
		delete(d.byConn, c.Conn)
		if q.conn == c.Conn {
			was := q.state
			if was != qpClosed { // else closed by a connect that gave up, which set the reason
				q.state, q.reason = qpClosed, statusOf(c.Status)
			}
			switch was {
			case qpConnecting:
				if q.nowait {
					// No request waits to report it: the event is the
					// only word the application gets (connectNoWait).
					q.event(connectFailedEvent(q.reason), q.reason)
					break
				}
				// The connect request reports it, and its event once it
				// gives up (it may try again: Server.connect).
				q.signal(connectError(c))
			case qpConnected:
				q.event(closedEvent(c.Status), q.reason)
			}
		}
		return
	}
	op, ok := opOf(c.Op)
	if !ok {
		return
	}
	wrid := c.WRID
	if op != proto.CQRecvWriteImm {
		q.owe(-1)
		t, ok := q.settle(c.WRID)
		if !ok {
			return
		}
		wrid = t.wrid
		if t.unsignaled && c.Status == transport.StatusOK {
			return // asked for no completion on success
		}
	}
	d.stats.Completions++
	if !q.complete(proto.CQE{WRID: wrid, Op: op, Status: statusOf(c.Status), HasImm: c.HasImm,
		Bytes: uint32(c.Bytes), Imm: c.Imm, Stream: c.Stream}) {
		d.stats.CQOverflows++
	}
}

// accept binds a connection a peer made to a queue pair's number. The
// transport made it with the queue pair's options (its token, its RNR
// policy), from what createQP listened on that number with.
func (d *EngineDriver) accept(e *dataplane.Engine, now transport.Time, c *transport.Conn) *qp {
	q := d.byQPN[c.Service()]
	if q == nil {
		return nil
	}
	if q.state != qpIdle || q.conn != nil {
		c.Close(now) // one connection per queue pair
		return q
	}
	q.conn, q.state, q.peer = c, qpConnected, c.Peer()
	d.byConn[c] = q
	d.wake(q)
	e.Endpoint().Unlisten(q.qpn)
	q.event(proto.EventConnected, proto.StatusOK)
	q.signal(nil)
	return q
}

// signal answers a waiting connect or accept.
func (q *qp) signal(err error) {
	if q.waiter != nil {
		q.waiter <- err
		q.waiter = nil
	}
}

// PrepareSleep arms the hot queue pairs' send queues (the cold ones are
// armed already); false means one has work.
func (d *EngineDriver) PrepareSleep() bool {
	ok := true
	for _, q := range d.hot {
		if ready, _ := q.sqc.Arm(); ready {
			ok = false
		}
		if len(q.cq.pending) > 0 {
			ok = false
		}
	}
	return ok
}

// WakeFD is the epoll set of the queue pairs' doorbell ends: readable
// when an application has rung.
func (d *EngineDriver) WakeFD() int { return d.epfd }

// Woke disarms the hot queue pairs' send queues and wakes the cold ones
// whose doorbells rang (bells).
func (d *EngineDriver) Woke() {
	for _, q := range d.hot {
		q.sqc.Disarm()
	}
	d.bells()
}

// reapClosed unmaps what closed sessions left once their connections are
// closed: until then a retransmission or a late packet could still read
// or write those pages.
func (d *EngineDriver) reapClosed() {
	k := 0
	for _, r := range d.reap {
		done := true
		for _, c := range r.conns {
			if st := c.State(); st != transport.StateClosed && st != transport.StateFailed {
				done = false
				break
			}
		}
		if !done {
			d.reap[k] = r
			k++
			continue
		}
		for _, reg := range r.regions {
			if reg.refs.Add(-1) == 0 { // the last engine that could reach it
				reg.unmap()
			}
		}
	}
	clear(d.reap[k:])
	d.reap = d.reap[:k]
}

// rejectName names a REJECT's reason for the control protocol.
func rejectName(r wire.ConnReason) string {
	switch r {
	case wire.ReasonNoService:
		return "no_service"
	case wire.ReasonLimit:
		return "limit"
	case wire.ReasonParams:
		return "params"
	case wire.ReasonApplication:
		return "application"
	}
	return "none"
}

// connectError says which step of a connect failed.
func connectError(c transport.Completion) error {
	switch c.Status {
	case transport.StatusRetryExceeded:
		return proto.Errorf(proto.CodeConnect, "no answer from %v to CONNECT for queue pair %d (nothing listens there, or the host is down or unreachable)",
			c.Conn.Peer(), c.Conn.Service())
	case transport.StatusRejected:
		e := proto.Errorf(proto.CodeConnect, "rejected by %v: %v", c.Conn.Peer(), c.Conn.Err)
		r, app := c.Conn.Rejection()
		e.Reject = &proto.Rejection{Reason: rejectName(r), AppReason: app, Private: append(proto.Hex(nil), c.Conn.PeerPrivate()...)}
		return e
	}
	return proto.Errorf(proto.CodeConnect, "connection to %v failed: %v (%v)", c.Conn.Peer(), c.Status, c.Conn.Err)
}
