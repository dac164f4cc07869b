package ring

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ErrTimeout is returned by the waits when the deadline passes with the ring
// still empty.
var ErrTimeout = errors.New("ring: wait timed out")

// ErrBellGone is wrapped by Ring when the other end of the doorbell is
// closed: the peer process has gone.
var ErrBellGone = errors.New("ring: doorbell peer gone")

// Doorbell is one end of a doorbell: a connected pair of AF_UNIX datagram
// sockets (socketpair), one end per process. Ring sends a one-byte
// datagram to the other end, which wakes a goroutine waiting there; Wait
// waits for the other end's rings. A queue pair shares one pair for both
// directions (the application rings the engine when it posts to a
// sleeping engine's send queue; the engine rings the application when it
// completes into a sleeping application's completion queue): each end has
// its own receive queue.
//
// Neither end can make the other block, whatever it does to its own
// descriptor (see the package doc): the two ends are two file
// descriptions, so clearing O_NONBLOCK on one says nothing about the
// other; Ring sends with MSG_DONTWAIT|MSG_NOSIGNAL, which cannot block
// and cannot raise SIGPIPE whatever the flags, and a full queue (EAGAIN)
// means a ring is already waiting there; the receive side only ever
// reads with MSG_DONTWAIT, and only its own process holds that end.
//
// Only one goroutine waits on an end at a time; any number may ring it.
type Doorbell struct {
	fd int // this process's end of the socket pair
	// intr is a private eventfd that cancels a wait (context.AfterFunc),
	// made by the first wait that needs it (-1 until then): an end that
	// is only rung or polled by its owner, as the daemon's are, never
	// needs one, and a daemon with 10,000 queue pairs would hold 10,000
	// eventfds nothing waits on (issue 22).
	intr int
	buf  [64]byte
}

// NewDoorbellPair makes a doorbell: two connected ends. Keep one, pass the
// other's FD to the peer (SCM_RIGHTS) and then close it here, so that the
// peer's end is held by the peer alone (a Ring of an end whose peer has
// closed returns ErrBellGone).
func NewDoorbellPair() (*Doorbell, *Doorbell, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("new doorbell: socketpair: %w", err)
	}
	a, err := newDoorbell(fds[0])
	if err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("new doorbell: %w", err)
	}
	b, err := newDoorbell(fds[1])
	if err != nil {
		a.Close()
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("new doorbell: %w", err)
	}
	return a, b, nil
}

// OpenDoorbell makes a doorbell on an end received from the peer. It checks
// that fd is an AF_UNIX datagram socket (anything else, a pipe, a file or
// another kind of socket, is refused). On success the Doorbell owns fd; on
// error the caller still does.
func OpenDoorbell(fd int) (*Doorbell, error) {
	dom, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_DOMAIN)
	if err != nil {
		return nil, fmt.Errorf("open doorbell: fd %d is not a socket: %w", fd, err)
	}
	typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return nil, fmt.Errorf("open doorbell: fd %d: SO_TYPE: %w", fd, err)
	}
	if dom != unix.AF_UNIX || typ != unix.SOCK_DGRAM {
		return nil, fmt.Errorf("open doorbell: fd %d is a socket of domain %d type %d, not an AF_UNIX datagram socket", fd, dom, typ)
	}
	d, err := newDoorbell(fd)
	if err != nil {
		return nil, fmt.Errorf("open doorbell: %w", err)
	}
	return d, nil
}

func newDoorbell(fd int) (*Doorbell, error) {
	return &Doorbell{fd: fd, intr: -1}, nil
}

// interruptible makes the private eventfd a context's wait needs.
func (d *Doorbell) interruptible() error {
	if d.intr >= 0 {
		return nil
	}
	intr, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("wait doorbell: eventfd: %w", err)
	}
	d.intr = intr
	return nil
}

// FD is this end's socket: to pass to the peer (then Close this end), or
// to poll beside other descriptors (then Clear after it turns readable).
// The Doorbell keeps owning it.
func (d *Doorbell) FD() int { return d.fd }

// Ring wakes the other end's waiter, or makes its next wait return at once.
// Rings before the waiter drains its queue coalesce into one wakeup. It
// never blocks: a full queue means the other end has rings waiting.
func (d *Doorbell) Ring() error {
	for {
		_, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(d.fd), uintptr(unsafe.Pointer(&bellByte[0])), 1,
			unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0, unix.EAGAIN, unix.ENOBUFS: // queued, or the queue is full: rung either way
			return nil
		case unix.EINTR:
			continue
		case unix.ECONNREFUSED, unix.EPIPE, unix.ENOTCONN, unix.ECONNRESET:
			return fmt.Errorf("ring doorbell fd %d: %w: %v", d.fd, ErrBellGone, e)
		}
		return fmt.Errorf("ring doorbell fd %d: %w", d.fd, e)
	}
}

// Clear takes every ring waiting at this end without blocking (MSG_DONTWAIT,
// whatever the descriptor's flags): for an owner that polls FD itself,
// beside other descriptors, and must not find it readable again. It
// reads at most a bounded number of datagrams: a peer ringing without
// pause only keeps the end readable.
func (d *Doorbell) Clear() {
	for range 64 {
		_, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(d.fd), uintptr(unsafe.Pointer(&d.buf[0])), uintptr(len(d.buf)),
			unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 { // EAGAIN: empty
			return
		}
	}
}

// Wait blocks until the other end rings or timeout passes (a negative
// timeout waits forever) and reports whether it rang. A ring that came
// before Wait counts. Wakeups are hints: check the ring after.
func (d *Doorbell) Wait(timeout time.Duration) (bool, error) {
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	return d.wait(nil, deadline)
}

// WaitContext blocks until the doorbell rings or ctx is done, and reports
// whether it rang; when ctx ends first it returns ctx.Err().
func (d *Doorbell) WaitContext(ctx context.Context) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	deadline, _ := ctx.Deadline()
	if ctx.Done() != nil {
		if err := d.interruptible(); err != nil {
			return false, err
		}
		defer d.interruptOn(ctx)()
	}
	rang, err := d.wait(ctx, deadline)
	if err == nil && !rang {
		err = ctx.Err() // the deadline passed in poll
		if err == nil {
			err = context.DeadlineExceeded
		}
	}
	return rang, err
}

// interruptOn arranges for ctx's end to interrupt a wait, and returns what
// undoes that once the wait is over. A stop that comes too late does not
// wait for the interrupt it could not prevent, so the undo waits for it:
// none then runs after the wait has returned, when the caller may close
// the doorbell and its descriptor number may name another file (the race
// detector caught Close writing d.intr beside interrupt reading it).
func (d *Doorbell) interruptOn(ctx context.Context) func() {
	ran := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(ran)
		d.interrupt()
	})
	return func() {
		if !stop() {
			<-ran
		}
	}
}

// interrupt wakes the waiter through the private eventfd.
func (d *Doorbell) interrupt() { unix.Write(d.intr, one) }

// one is the 8-byte eventfd increment, read-only after init.
var one = binary.NativeEndian.AppendUint64(nil, 1)

// bellByte is what Ring sends (the kernel only reads it).
var bellByte [1]byte

// wait polls this end and the private eventfd until this end is readable (true), the
// deadline passes (false; a zero deadline never passes) or ctx is done. A
// stale interrupt, from an AfterFunc that fired after an earlier wait
// ended, is drained and ignored.
func (d *Doorbell) wait(ctx context.Context, deadline time.Time) (bool, error) {
	// A negative descriptor is skipped by poll: a wait without a
	// context, or before one made the eventfd, polls the end alone.
	fds := [2]unix.PollFd{
		{Fd: int32(d.fd), Events: unix.POLLIN},
		{Fd: int32(d.intr), Events: unix.POLLIN},
	}
	for polled := false; ; polled = true {
		var ts *unix.Timespec
		if !deadline.IsZero() {
			rem := time.Until(deadline)
			if rem <= 0 {
				if polled {
					return false, nil
				}
				rem = 0 // a wait whose deadline has passed still looks once
			}
			t := unix.NsecToTimespec(int64(rem))
			ts = &t
		}
		fds[0].Revents, fds[1].Revents = 0, 0
		n, err := unix.Ppoll(fds[:], ts, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false, fmt.Errorf("wait doorbell: ppoll: %w", err)
		}
		if n == 0 {
			continue // timed out: the deadline check above returns
		}
		if fds[0].Revents&unix.POLLIN != 0 {
			d.Clear()
			return true, nil
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return false, fmt.Errorf("wait doorbell: poll events %#x on fd %d", fds[0].Revents, d.fd)
		}
		if fds[1].Revents&unix.POLLIN != 0 {
			d.drainIntr()
			if ctx != nil && ctx.Err() != nil {
				return false, ctx.Err()
			}
		}
	}
}

// drainIntr resets the private eventfd (non-blocking, ours alone).
func (d *Doorbell) drainIntr() {
	for {
		if _, err := unix.Read(d.intr, d.buf[:8]); err != unix.EINTR {
			return
		}
	}
}

// Close closes this end and the private eventfd. No wait may be in progress.
func (d *Doorbell) Close() error {
	err := unix.Close(d.fd)
	if d.intr >= 0 {
		unix.Close(d.intr)
	}
	d.fd, d.intr = -1, -1
	if err != nil {
		return fmt.Errorf("close doorbell: %w", err)
	}
	return nil
}

// Notify rings bell if the consumer said it is going to sleep, and reports
// whether it rang. Call it after Commit: the store of the producer index
// must come before the load of the flag (see the package doc). A consumer
// that is busy never sets the flag, so Notify then costs one load and no
// syscall. The flag is taken with a swap, so of several commits made while
// the consumer sleeps only the first rings.
func (p *Producer) Notify(bell *Doorbell) (bool, error) {
	if p.err != nil {
		return false, p.err
	}
	if atomic.LoadUint32(p.flagWord) == 0 {
		return false, nil
	}
	if atomic.SwapUint32(p.flagWord, 0) == 0 {
		return false, nil // the consumer woke and cleared it meanwhile
	}
	p.rings++
	return true, bell.Ring()
}

// Wait returns nil as soon as the ring holds a published slot, sleeping on
// bell while it is empty, or ErrTimeout once timeout has passed (negative:
// no limit). It checks the ring before sleeping, so call it straight after a
// Peek that came back empty, or after spinning as long as you like.
func (c *Consumer) Wait(bell *Doorbell, timeout time.Duration) error {
	var deadline time.Time
	if timeout >= 0 {
		deadline = time.Now().Add(timeout)
	}
	return c.wait(nil, bell, deadline)
}

// WaitContext is Wait bounded by ctx instead of a timeout; it returns
// ctx.Err() when ctx ends with the ring empty.
func (c *Consumer) WaitContext(ctx context.Context, bell *Doorbell) error {
	if a, err := c.Available(); err != nil || a > 0 {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	if ctx.Done() != nil {
		if err := bell.interruptible(); err != nil {
			return err
		}
		defer bell.interruptOn(ctx)()
	}
	err := c.wait(ctx, bell, deadline)
	if err == ErrTimeout {
		err = ctx.Err()
		if err == nil {
			err = context.DeadlineExceeded
		}
	}
	return err
}

// wait is the sleeping half of the need-wakeup protocol:
//
//	consumer                         producer
//	store flag = 1  (1)              store producer index  (3)  (Commit)
//	load producer index  (2)         load flag  (4)             (Notify)
//	empty: sleep on the eventfd      flag set: swap it to 0, ring
//
// All four are sequentially consistent atomics, so (1) and (3) are both
// ordered before (2) and (4) in one total order: either (2) sees the new
// index and the consumer does not sleep, or (4) sees the flag and the
// producer rings. A wakeup cannot be lost. The flag is cleared after every
// sleep, so a busy consumer keeps Notify syscall-free.
func (c *Consumer) wait(ctx context.Context, bell *Doorbell, deadline time.Time) error {
	for {
		if a, err := c.Available(); err != nil || a > 0 {
			return err
		}
		atomic.StoreUint32(c.flagWord, 1)
		if a, err := c.load(); err != nil || a > 0 {
			atomic.StoreUint32(c.flagWord, 0)
			return err
		}
		c.sleeps++
		rang, err := bell.wait(ctx, deadline)
		atomic.StoreUint32(c.flagWord, 0)
		if err != nil {
			return err
		}
		if !rang {
			if a, err := c.load(); err != nil || a > 0 {
				return err
			}
			return ErrTimeout
		}
		// Rang: loop to check the ring; a stale ring (one that came
		// after we found data last time) only costs a turn.
	}
}

// Arm is the first half of wait for a consumer that sleeps on something
// other than one ring (an engine serving many queue pairs sleeps on one
// eventfd that all their producers ring): it sets the need-wakeup flag
// and then looks at the ring. If it reports ready, the ring has slots and
// the caller must not sleep (Disarm it); otherwise every later Commit's
// Notify rings the bell. Call Disarm after the sleep either way.
func (c *Consumer) Arm() (ready bool, err error) {
	if a, err := c.Available(); err != nil || a > 0 {
		return true, err
	}
	atomic.StoreUint32(c.flagWord, 1)
	a, err := c.load()
	return err != nil || a > 0, err
}

// Disarm clears the need-wakeup flag, so a busy consumer's producer makes
// no syscalls.
func (c *Consumer) Disarm() { atomic.StoreUint32(c.flagWord, 0) }
