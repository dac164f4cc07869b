package control

import (
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
)

// Completion queues. Every queue pair completes into a cq: by default its
// own, made with it (create_qp), or a shared one the session made with
// create_cq and named in create_qp, which many queue pairs complete into
// (verbs' ibv_create_cq passed to several ibv_create_qp).
//
// A ring has one producer, and the producer is an engine goroutine, which
// takes no lock and makes no syscall per completion. So a shared CQ is
// bound to one engine, the one named at create_cq, and a queue pair that
// completes into it is placed on that engine: every write to the ring, to
// its backlog and to its counters is that engine's. (Queue pairs on
// several engines completing into one descriptor would need a ring per
// engine behind it; the application gets the same by making one CQ per
// engine and putting all their descriptors in one epoll set.)
//
// A CQ has room for so many entries, and the engine takes a work request
// only while the CQ it completes into has room for the completions of
// everything its queue pairs have outstanding (outstanding, summed over
// them), so the application's own requests never overflow it. What the
// application does not post, a peer's WRITE with immediate and the
// connection events, waits in pending, bounded by the CQ's slots, when the
// ring is full, and is counted in overflow if even that is full: a full
// shared CQ behaves as a full private one.
type cq struct {
	id   uint32 // create_cq's number; 0 for a queue pair's own
	ring *ring.Ring
	prod *ring.Producer
	// bell is the daemon's end of the doorbell the engine rings (through
	// the ring's need-wakeup flag) when entries arrive: a queue pair's
	// own CQ rings the queue pair's doorbell, a shared CQ its own, whose
	// other end, appBell, goes to the application with the create_cq
	// reply (and is closed here then, with the ring's memfd: handOver).
	// A shared CQ's daemon end is in no epoll set: the application has
	// nothing to tell the engine through it.
	bell, appBell *ring.Doorbell
	pending       []proto.CQE
	overflow      uint64
	dirty         bool // entries committed since the last Notify
	// outstanding: requests its queue pairs took whose completion is
	// owed (engine goroutine).
	outstanding int

	// Shared CQs only. session is its owner; engine the engine its queue
	// pairs are placed on; users how many queue pairs complete into it
	// (the session's goroutine counts them: destroy_cq refuses while any
	// do); cost what it holds of the session's budget.
	session *session
	engine  *Engine
	users   int
	cost    usage
}

func newCQ(slots int, bell *ring.Doorbell) (*cq, error) {
	r, err := ring.Create(slots, proto.CQESize)
	if err != nil {
		return nil, err
	}
	return &cq{ring: r, prod: r.Producer(), bell: bell, pending: make([]proto.CQE, 0, slots)}, nil
}

// newSharedCQ makes a shared completion queue and its doorbell, charged to
// s's share of the daemon's budget (cqCost).
func newSharedCQ(id uint32, s *session, e *Engine, slots int) (c *cq, err error) {
	cost := cqCost(slots)
	if err := resources.take(&s.use, cost); err != nil {
		return nil, err
	}
	bell, appBell, err := ring.NewDoorbellPair()
	if err != nil {
		resources.give(&s.use, cost)
		return nil, err
	}
	c, err = newCQ(slots, bell)
	if err != nil {
		bell.Close()
		appBell.Close()
		resources.give(&s.use, cost)
		return nil, err
	}
	c.id, c.session, c.engine, c.appBell, c.cost = id, s, e, appBell, cost
	return c, nil
}

// handOver closes the daemon's copies of what the create_cq reply
// carried (the ring's memfd, the application's doorbell end), once it has
// gone.
func (c *cq) handOver() {
	if c.appBell == nil {
		return
	}
	c.appBell.Close()
	c.appBell = nil
	c.ring.CloseFD()
	resources.give(&c.session.use, cqHandedOver)
	c.cost.add(cqHandedOver, -1)
}

// close frees a shared CQ (no queue pair completes into it any more).
func (c *cq) close() {
	c.handOver()
	c.ring.Close()
	c.bell.Close()
	resources.give(&c.session.use, c.cost)
}

// room is how many more completions the CQ can promise.
func (c *cq) room() int {
	return max(0, c.ring.Slots()-c.outstanding-len(c.pending))
}

// put writes one entry into the ring, or into the backlog when the ring
// is full, or counts it as an overflow; it reports false for an overflow.
func (c *cq) put(e proto.CQE) bool {
	if len(c.pending) == 0 {
		if first, got, err := c.prod.Reserve(1); err == nil && got == 1 {
			e.Put(c.prod.Slot(first))
			c.prod.Commit(1)
			c.dirty = true
			return true
		}
	}
	if len(c.pending) == cap(c.pending) {
		c.overflow++
		return false
	}
	c.pending = append(c.pending, e)
	return true
}

// flush moves the backlog into the ring and rings the application if it
// sleeps. It reports whether it moved any.
func (c *cq) flush() bool {
	moved := false
	if len(c.pending) > 0 {
		first, got, err := c.prod.Reserve(uint32(len(c.pending)))
		if err == nil && got > 0 {
			for i := range got {
				c.pending[i].Put(c.prod.Slot(first + i))
			}
			c.prod.Commit(got)
			n := copy(c.pending, c.pending[got:])
			c.pending = c.pending[:n]
			c.dirty, moved = true, true
		}
	}
	if c.dirty {
		c.dirty = false
		c.prod.Notify(c.bell) // never blocks; an error means the application is gone, and the session reaps it
	}
	return moved
}
