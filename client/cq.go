package client

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
)

// Shared completion queues. A CQ is one completion queue that many queue
// pairs complete into (ibv_create_cq handed to several ibv_create_qp,
// fi_cq_open bound to several endpoints): make it with CreateCQ and name
// it in QPOptions.CQ. Each Completion says which queue pair it is for
// (QPN), and each queue pair's connection events come through it too, as
// completions with Op CompEvent. A server with one listener and hundreds
// of connections then serves them all from one goroutine waiting on one
// CQ.
//
// A CQ lives on one of the daemon's engines (CQOptions.Engine): its ring
// has one producer, that engine, which writes it without a lock or a
// syscall. Every queue pair completing into it is placed on that engine,
// so the listener whose connections it serves must be there too (the
// daemon refuses a QPOptions.Engine that names another). An application
// spreading queue pairs over several engines makes one CQ per engine and
// waits on their descriptors together (one epoll set, or one goroutine
// per CQ).
//
// Its room is shared: the engine takes a queue pair's work request only
// while the CQ has room for the completions of everything its queue pairs
// have outstanding, and a queue pair on a shared CQ has at most its send
// queue's slots outstanding, so size the CQ for the sum. A peer's WRITEs
// with immediate and the connection events, which nobody posts, wait in
// a backlog the size of the CQ while it is full (counted if even that
// overflows), as with a queue pair's own CQ.
//
// # Waiting and the descriptor
//
// FD is the CQ's doorbell end: it becomes readable when the engine rings
// it, and the engine rings it only while the CQ is armed. ReqNotify arms
// it (ibv_req_notify_cq) and refuses, reporting false, when entries are
// already there; after the descriptor turned readable, AckNotify clears
// it and disarms; then poll. Arming is one-shot, like verbs': one
// notification per ReqNotify, however many entries arrive after it, so
// the loop is
//
//	for {
//		n, _ := cq.Poll(wcs)       // drain first
//		if n > 0 { handle(wcs[:n]); continue }
//		if armed, _ := cq.ReqNotify(); armed {
//			epoll_wait(...)         // until cq.FD() is readable
//			cq.AckNotify()
//		}
//	}
//
// Wait does exactly that with Go's netpoller (the descriptor is
// non-blocking), after polling for CQOptions.Spin: a goroutine blocked
// in Wait holds no thread, and ctx or the daemon's going ends it.
//
// Use a CQ (Poll, Wait, ReqNotify, AckNotify) from one goroutine; its
// queue pairs may be made, posted to and destroyed from others (each
// queue pair from one at a time).
type CQ struct {
	c      *Client
	Num    uint32 // the daemon's number (create_cq)
	Engine int
	Slots  int

	ring *ring.Ring
	cons *ring.Consumer
	bell *ring.Doorbell
	// file is a duplicate of the doorbell end the netpoller waits on
	// (Wait); the Doorbell keeps the end FD hands out.
	file *os.File
	spin time.Duration
}

// CQOptions shape a completion queue (zero: the daemon's defaults).
type CQOptions struct {
	Slots  int // a power of two (0: 1024)
	Engine int // the engine it and its queue pairs are on
	// Spin is how long Wait polls, yielding the CPU between looks,
	// before it sleeps (0: SpinBeforeSleep; negative: no spin).
	Spin time.Duration
}

// ErrSharedCQ is returned by a queue pair's own polling and waiting
// (PollCQ, WaitCQ, ReqNotify, WaitEvent) when it completes into a shared
// CQ: poll the CQ.
var ErrSharedCQ = errors.New("metaroce: the queue pair completes into a shared CQ: poll the CQ")

// CreateCQ makes a shared completion queue (create_cq).
func (c *Client) CreateCQ(o CQOptions) (*CQ, error) {
	var r proto.Response
	files, err := c.do(proto.Request{Header: proto.Header{Op: proto.OpCreateCQ}, CQSlots: o.Slots, Engine: o.Engine}, &r)
	if err != nil {
		return nil, err
	}
	defer closeAll(files)
	if len(files) != 2 {
		return nil, fmt.Errorf("%w: create_cq: %d descriptors, want 2", ErrDaemonError, len(files))
	}
	cq := &CQ{c: c, Num: r.CQ, Engine: o.Engine, spin: o.Spin}
	if cq.spin == 0 {
		cq.spin = SpinBeforeSleep
	}
	if err := cq.attach(files); err != nil {
		cq.release()
		return nil, err
	}
	return cq, nil
}

func (cq *CQ) attach(files []*os.File) error {
	fd, err := unix.FcntlInt(files[0].Fd(), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	if cq.ring, err = ring.Attach(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("metaroce: completion queue: %w", err)
	}
	cq.ring.CloseFD()
	if cq.ring.SlotSize() < proto.CQESize {
		return fmt.Errorf("%w: completion queue slots of %d bytes", ErrDaemonError, cq.ring.SlotSize())
	}
	if fd, err = unix.FcntlInt(files[1].Fd(), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		return err
	}
	if cq.bell, err = ring.OpenDoorbell(fd); err != nil {
		unix.Close(fd)
		return fmt.Errorf("metaroce: doorbell: %w", err)
	}
	// The netpoller's own descriptor on the same end (the daemon made it
	// non-blocking, which os.NewFile takes as pollable).
	if fd, err = unix.FcntlInt(uintptr(cq.bell.FD()), unix.F_DUPFD_CLOEXEC, 0); err != nil {
		return err
	}
	cq.file = os.NewFile(uintptr(fd), "metaroce-cq")
	cq.cons = cq.ring.Consumer()
	cq.Slots = cq.ring.Slots()
	return nil
}

func (cq *CQ) release() {
	if cq.ring != nil {
		cq.ring.Close()
	}
	if cq.bell != nil {
		cq.bell.Close()
	}
	if cq.file != nil {
		cq.file.Close()
	}
}

// Destroy frees the CQ in the daemon. The daemon refuses (ErrBusy) while
// a queue pair still completes into it: destroy those first.
func (cq *CQ) Destroy() error {
	var r proto.Response
	if _, err := cq.c.do(proto.Request{Header: proto.Header{Op: proto.OpDestroyCQ}, CQ: cq.Num}, &r); err != nil {
		if errors.Is(err, ErrBusy) {
			return err // still in use: it stays
		}
		cq.release()
		return err
	}
	cq.release()
	return nil
}

// Poll takes up to len(dst) entries without blocking: completions of its
// queue pairs' work requests and their connection events (Op CompEvent),
// each with its QPN. (A queue pair on a shared CQ has no event queue of
// its own: its State says what Connect and Accept saw, and its events
// are the CQ's entries.)
func (cq *CQ) Poll(dst []Completion) (int, error) {
	first, got, err := cq.cons.Peek(uint32(len(dst)))
	if err != nil {
		return 0, err
	}
	for i := range got {
		c, ok := proto.ParseCQE(cq.cons.Slot(first + i))
		if !ok {
			cq.cons.Release(i)
			return int(i), fmt.Errorf("%w: malformed completion", ErrDaemonError)
		}
		dst[i] = Completion{WRID: c.WRID, Op: CompletionOp(c.Op), Status: Status(c.Status), Bytes: int(c.Bytes),
			Imm: c.Imm, HasImm: c.HasImm, Stream: c.Stream, QPN: c.QPN}
		if c.Op == proto.CQEvent {
			dst[i].Event = EventType(c.Event)
		}
	}
	cq.cons.Release(got)
	if got == 0 && cq.c.goneFlag.Load() {
		return 0, ErrDaemonGone
	}
	return int(got), nil
}

// FD is the CQ's notification descriptor, readable after ReqNotify once
// the CQ has an entry. It belongs to the CQ (closed by Destroy): do not
// read from it or close it.
func (cq *CQ) FD() int { return cq.bell.FD() }

// ReqNotify arms the notification (ibv_req_notify_cq): the next entry
// makes FD readable, once. It reports false, without arming, when entries
// are already there: poll them first.
func (cq *CQ) ReqNotify() (bool, error) {
	ready, err := cq.cons.Arm()
	if ready || err != nil {
		cq.cons.Disarm()
		return false, err
	}
	return true, nil
}

// AckNotify clears a readable FD and disarms the notification.
func (cq *CQ) AckNotify() {
	cq.cons.Disarm()
	cq.bell.Clear()
}

// Wait blocks until at least one entry is there, ctx ends or the daemon
// goes, then takes up to len(dst). It polls for the CQ's Spin first,
// yielding the CPU between looks, then arms the CQ and sleeps in Go's
// netpoller on the descriptor.
func (cq *CQ) Wait(ctx context.Context, dst []Completion) (int, error) {
	var start time.Time
	for i := 0; ; i++ {
		if n, err := cq.Poll(dst); n > 0 || err != nil {
			return n, err
		}
		if i < hotPolls {
			continue
		}
		if i == hotPolls {
			start = time.Now()
		}
		if cq.spin < 0 || time.Since(start) >= cq.spin {
			break
		}
		if i%32 == 0 {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
		}
		yield()
	}
	for {
		if n, err := cq.Poll(dst); n > 0 || err != nil {
			return n, err
		}
		armed, err := cq.ReqNotify()
		if err != nil {
			return 0, err
		}
		if !armed {
			continue // entries came meanwhile
		}
		err = cq.sleep(ctx)
		cq.AckNotify()
		if err != nil {
			if n, perr := cq.Poll(dst); n > 0 || perr != nil {
				return n, perr
			}
			return 0, err
		}
	}
}

// sleep waits in the netpoller until the descriptor is readable, ctx
// ends or the daemon goes.
func (cq *CQ) sleep(ctx context.Context) error {
	wctx, cancel := cq.c.goneCtx(ctx)
	defer cancel()
	rc, err := cq.file.SyscallConn()
	if err != nil {
		return err
	}
	cq.file.SetReadDeadline(time.Time{}) // an earlier sleep's cancellation may have set one
	stop := context.AfterFunc(wctx, func() { cq.file.SetReadDeadline(time.Unix(1, 0)) })
	defer func() {
		if !stop() {
			cq.file.SetReadDeadline(time.Time{}) // it fired: clear it for the next sleep
		}
	}()
	var peek [1]byte
	err = rc.Read(func(fd uintptr) bool {
		// Readable or not, without taking the ring (AckNotify does).
		_, _, e := unix.Recvfrom(int(fd), peek[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		return e != unix.EAGAIN
	})
	if err != nil {
		if cq.c.goneFlag.Load() {
			return ErrDaemonGone
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}
