package xsk

import (
	"time"

	"golang.org/x/sys/unix"
)

// The batch operations of the engine loop. Each touches each ring's shared
// indices at most twice (one load, one store) and makes at most one syscall,
// whatever the batch size; none allocates.

// Refill moves up to max frames from the pool into the fill ring and returns
// how many. If the kernel asked for a wakeup on the fill ring, it makes one
// recvfrom call after publishing.
func (s *Socket) Refill(max int) (int, error) {
	n := min(max, s.pool.Free())
	idx, got := s.Fill.Reserve(uint32(n))
	if int(got) < n {
		s.counters.fillRingFull.Add(1)
	}
	free := s.pool.free
	top := len(free)
	for i := uint32(0); i < got; i++ {
		s.Fill.addrs[(idx+i)&s.Fill.mask] = free[top-1-int(i)]
	}
	s.pool.free = free[:top-int(got)]
	s.Fill.Submit()
	if got > 0 && s.info.NeedWakeup && s.Fill.NeedWakeup() {
		return int(got), s.wakeRX()
	}
	return int(got), nil
}

// WakeRX tells the kernel the fill ring has frames again, if (and only if)
// the socket was bound with need_wakeup and the fill ring's flag is set.
// Refill does this by itself.
func (s *Socket) WakeRX() error {
	if !s.info.NeedWakeup || !s.Fill.NeedWakeup() {
		return nil
	}
	return s.wakeRX()
}

func (s *Socket) wakeRX() error {
	s.counters.rxWakeups.Add(1)
	switch e := recvfromWake(s.fd); e {
	case 0, unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		return nil
	default:
		return e
	}
}

// Receive copies up to len(descs) received descriptors into descs, releases
// their RX ring slots and returns how many. The frames are the caller's until
// it puts them back in the pool (or straight into the fill ring). With
// Config.SG a packet may span several descriptors: all but its last carry
// PktContd, and a batch may end in the middle of a packet (the rest comes
// with the next call); an Assembler gathers such a chain.
func (s *Socket) Receive(descs []Desc) int {
	return s.RX.Dequeue(descs)
}

// Transmit queues as many of descs as fit in the TX ring, publishes them,
// and kicks the kernel with one sendto when it needs one (always in copy mode
// with need_wakeup, since veth keeps the flag set; always without
// need_wakeup). It returns how many were queued; the frames of the rest stay
// the caller's. A multi-buffer packet (descriptors chained with PktContd) is
// queued whole or not at all, so the count always ends on a packet's last
// descriptor when descs does. The queued frames come back through Complete.
func (s *Socket) Transmit(descs []Desc) (int, error) {
	if len(descs) == 0 {
		return 0, nil
	}
	n := s.TX.enqueueWhole(descs)
	if n < len(descs) {
		// Kick anyway: the ring is full of descriptors the kernel has not
		// sent yet.
		s.counters.txRingFull.Add(1)
	}
	if s.spans.end > s.spans.base {
		for _, d := range descs[:n] {
			if s.spans.has(d.Addr) {
				s.spans.sent(d.Addr)
			}
		}
	}
	return n, s.kick()
}

// KickTX makes the kernel process the TX ring if it holds unsent descriptors
// and the kernel wants a wakeup: for when Transmit stopped at the TX budget
// and the engine has nothing new to send.
func (s *Socket) KickTX() error {
	if s.TX.size == 0 || s.TX.Pending() == 0 {
		return nil
	}
	return s.kick()
}

func (s *Socket) kick() error {
	if s.info.NeedWakeup && !s.TX.NeedWakeup() {
		return nil
	}
	s.counters.txKicks.Add(1)
	switch e := sendtoKick(s.fd); e {
	case 0:
		return nil
	case unix.EAGAIN, unix.EBUSY, unix.ENOBUFS, unix.EINTR:
		// The kernel could not take everything now (no skb, device busy):
		// the descriptors stay in the ring for the next kick.
		s.counters.txKickBusy.Add(1)
		return nil
	default:
		// ENETDOWN, ENXIO: the device went away or down.
		return e
	}
}

// Complete returns the frames of sent packets from the completion ring to
// the pool, and TX spans whose descriptors have all completed to the span
// list, and returns how many descriptors completed.
func (s *Socket) Complete() int {
	total := 0
	hasSpans := s.spans.end > s.spans.base
	for {
		n := s.Completion.Dequeue(s.addrs[:])
		if !hasSpans {
			s.pool.PutN(s.addrs[:n])
		} else {
			for _, a := range s.addrs[:n] {
				if s.spans.has(a) {
					s.spans.completed(a)
				} else {
					s.pool.Put(a)
				}
			}
		}
		total += n
		if n < len(s.addrs) {
			return total
		}
	}
}

// Wait blocks until the RX ring has descriptors (or the socket is writable,
// if out is set: the TX ring has room or completions arrived) or timeout
// passes; a negative timeout waits forever. It reports whether an event
// arrived. For an idle engine; a busy one should not call it.
func (s *Socket) Wait(timeout time.Duration, out bool) (bool, error) {
	s.pollfd.Events = unix.POLLIN
	if out {
		s.pollfd.Events |= unix.POLLOUT
	}
	s.counters.waits.Add(1)
	var deadline time.Time
	if timeout > 0 {
		deadline = time.Now().Add(timeout)
	}
	var n int
	for {
		s.pollfd.Revents = 0
		var ts *unix.Timespec
		if timeout >= 0 {
			s.timeout = unix.NsecToTimespec(int64(max(timeout, 0)))
			ts = &s.timeout
		}
		var e unix.Errno
		n, e = ppoll(&s.pollfd, ts)
		if e == 0 {
			break
		}
		if e != unix.EINTR {
			return false, e
		}
		// A signal (the Go runtime's preemption signal, for one)
		// interrupted the wait: wait out the rest.
		if timeout > 0 {
			if timeout = time.Until(deadline); timeout <= 0 {
				return false, nil
			}
		}
	}
	if s.pollfd.Revents&(unix.POLLERR|unix.POLLNVAL) != 0 {
		return false, unix.EBADF
	}
	return n > 0, nil
}
