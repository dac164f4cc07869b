package ring

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// ErrTimeout is returned by the waits when the deadline passes with the ring
// still empty.
var ErrTimeout = errors.New("ring: wait timed out")

// one is the 8-byte eventfd increment, read-only after init.
var one = binary.NativeEndian.AppendUint64(nil, 1)

// Doorbell is an eventfd that a producer rings to wake a sleeping consumer.
// It travels beside the ring's memfd. Only the consumer waits on it, one
// goroutine at a time; any number of goroutines or processes may ring it.
//
// The eventfd is only read after poll has reported it readable, and the
// single waiter is the only reader, so the Doorbell works whether or not the
// shared file description is in non-blocking mode (exec.Cmd clears
// O_NONBLOCK on files it passes to a child).
type Doorbell struct {
	fd   int // the shared eventfd
	intr int // a private eventfd that cancels a wait (context.AfterFunc)
	buf  [8]byte
}

// NewDoorbell makes a doorbell on a new eventfd.
func NewDoorbell() (*Doorbell, error) {
	fd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("new doorbell: eventfd: %w", err)
	}
	d, err := newDoorbell(fd)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("new doorbell: %w", err)
	}
	return d, nil
}

// OpenDoorbell makes a doorbell on an eventfd received from the peer. It
// checks that fd is an eventfd (a peer handing us a pipe or a socket could
// otherwise make Ring block). On success the Doorbell owns fd; on error the
// caller still does.
func OpenDoorbell(fd int) (*Doorbell, error) {
	link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return nil, fmt.Errorf("open doorbell: %w", err)
	}
	if link != "anon_inode:[eventfd]" {
		return nil, fmt.Errorf("open doorbell: fd %d is %q, not an eventfd", fd, link)
	}
	d, err := newDoorbell(fd)
	if err != nil {
		return nil, fmt.Errorf("open doorbell: %w", err)
	}
	return d, nil
}

func newDoorbell(fd int) (*Doorbell, error) {
	intr, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &Doorbell{fd: fd, intr: intr}, nil
}

// FD is the eventfd to pass to the peer. The Doorbell keeps owning it.
func (d *Doorbell) FD() int { return d.fd }

// Ring wakes the waiter, or makes its next wait return at once. Rings before
// the waiter drains the eventfd coalesce into one wakeup.
func (d *Doorbell) Ring() error {
	for {
		_, err := unix.Write(d.fd, one)
		switch err {
		case nil, unix.EAGAIN: // EAGAIN: the counter is saturated, the bell is rung
			return nil
		case unix.EINTR:
			continue
		}
		return fmt.Errorf("ring doorbell: %w", err)
	}
}

// Wait blocks until the doorbell rings or timeout passes (a negative
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
		stop := context.AfterFunc(ctx, d.interrupt)
		defer stop()
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

// interrupt wakes the waiter through the private eventfd.
func (d *Doorbell) interrupt() { unix.Write(d.intr, one) }

// wait polls both eventfds until the shared one is readable (true), the
// deadline passes (false; a zero deadline never passes) or ctx is done. A
// stale interrupt, from an AfterFunc that fired after an earlier wait
// ended, is drained and ignored.
func (d *Doorbell) wait(ctx context.Context, deadline time.Time) (bool, error) {
	fds := [2]unix.PollFd{
		{Fd: int32(d.fd), Events: unix.POLLIN},
		{Fd: int32(d.intr), Events: unix.POLLIN},
	}
	for {
		var ts *unix.Timespec
		if !deadline.IsZero() {
			rem := time.Until(deadline)
			if rem <= 0 {
				return false, nil
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
			d.drain(d.fd)
			return true, nil
		}
		if fds[0].Revents&(unix.POLLERR|unix.POLLHUP|unix.POLLNVAL) != 0 {
			return false, fmt.Errorf("wait doorbell: poll events %#x on fd %d", fds[0].Revents, d.fd)
		}
		if fds[1].Revents&unix.POLLIN != 0 {
			d.drain(d.intr)
			if ctx != nil && ctx.Err() != nil {
				return false, ctx.Err()
			}
		}
	}
}

// drain reads an eventfd that poll reported readable, resetting its count.
func (d *Doorbell) drain(fd int) {
	for {
		if _, err := unix.Read(fd, d.buf[:]); err != unix.EINTR {
			return
		}
	}
}

// Close closes both eventfds. No wait may be in progress.
func (d *Doorbell) Close() error {
	err := unix.Close(d.fd)
	unix.Close(d.intr)
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
		stop := context.AfterFunc(ctx, bell.interrupt)
		defer stop()
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

// Clear resets the count of a doorbell made by NewDoorbell (whose eventfd
// is non-blocking) without waiting: for an owner that polls the eventfd
// itself, beside other descriptors, and must not find it readable again.
func (d *Doorbell) Clear() {
	for {
		if _, err := unix.Read(d.fd, d.buf[:]); err != unix.EINTR {
			return
		}
	}
}
