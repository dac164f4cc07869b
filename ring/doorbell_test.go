package ring

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// newBells makes a doorbell's two ends, closed by t.Cleanup.
func newBells(t testing.TB) (*Doorbell, *Doorbell) {
	t.Helper()
	a, b, err := NewDoorbellPair()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

func TestDoorbell(t *testing.T) {
	r, d := newBells(t)
	if rang, err := d.Wait(0); rang || err != nil {
		t.Fatalf("Wait(0) on a silent bell = %v, %v", rang, err)
	}
	start := time.Now()
	if rang, err := d.Wait(20 * time.Millisecond); rang || err != nil {
		t.Fatalf("Wait(20ms) = %v, %v", rang, err)
	}
	if el := time.Since(start); el < 20*time.Millisecond {
		t.Fatalf("Wait(20ms) returned after %v", el)
	}
	// Rings before the wait count, and coalesce.
	r.Ring()
	r.Ring()
	if rang, err := d.Wait(time.Second); !rang || err != nil {
		t.Fatalf("Wait after Ring = %v, %v", rang, err)
	}
	if rang, _ := d.Wait(0); rang {
		t.Fatal("two rings woke two waits")
	}
	// A ring from another goroutine wakes a sleeper.
	rung := make(chan struct{})
	go func() { time.Sleep(5 * time.Millisecond); r.Ring(); close(rung) }()
	if rang, err := d.Wait(5 * time.Second); !rang || err != nil {
		t.Fatalf("Wait for a later Ring = %v, %v", rang, err)
	}
	<-rung // the wakeup went through the kernel, which the race detector does not see
}

func TestDoorbellContext(t *testing.T) {
	_, d := newBells(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(5 * time.Millisecond); cancel() }()
	start := time.Now()
	if rang, err := d.WaitContext(ctx); rang || !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitContext cancelled = %v, %v", rang, err)
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("cancellation took %v", el)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := d.WaitContext(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext past its deadline: %v", err)
	}
	// A stale interrupt from an earlier context does not end a later wait.
	d.interrupt()
	if rang, err := d.Wait(10 * time.Millisecond); rang || err != nil {
		t.Fatalf("Wait after a stale interrupt = %v, %v", rang, err)
	}
}

func TestOpenDoorbell(t *testing.T) {
	d, peer := newBells(t)
	fd := dup(t, peer.FD())
	o, err := OpenDoorbell(fd)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	o.Ring()
	if rang, _ := d.Wait(time.Second); !rang {
		t.Fatal("a ring through the opened doorbell did not arrive")
	}
	d.Ring()
	if rang, _ := o.Wait(time.Second); !rang {
		t.Fatal("a ring to the opened doorbell did not arrive")
	}
	r := newMemfdRing(t, 8, 8)
	mfd := dup(t, r.FD())
	defer unix.Close(mfd)
	if _, err := OpenDoorbell(mfd); err == nil {
		t.Fatal("OpenDoorbell accepted a memfd")
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(efd)
	if _, err := OpenDoorbell(efd); err == nil {
		t.Fatal("OpenDoorbell accepted an eventfd")
	}
	sp, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(sp[0])
	defer unix.Close(sp[1])
	if _, err := OpenDoorbell(sp[0]); err == nil {
		t.Fatal("OpenDoorbell accepted a stream socket")
	}
}

// TestDoorbellHostilePeer: whatever the other end does to its own
// descriptor (blocking mode, a tiny receive buffer it never drains, its
// queue full of rings, its end closed), Ring on this end returns at once,
// and Clear on this end never blocks, even when the peer has emptied
// nothing and changed every flag it can.
func TestDoorbellHostilePeer(t *testing.T) {
	d, peer := newBells(t)
	if _, err := unix.FcntlInt(uintptr(peer.FD()), unix.F_SETFL, 0); err != nil { // clear O_NONBLOCK
		t.Fatal(err)
	}
	if err := unix.SetsockoptInt(peer.FD(), unix.SOL_SOCKET, unix.SO_RCVBUF, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for range 100000 { // far more than any queue holds
			if err := d.Ring(); err != nil {
				done <- err
				return
			}
		}
		d.Clear() // nothing rang this end: must not block
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Ring or Clear blocked on a peer with a full queue in blocking mode")
	}
	queued, err := unix.IoctlGetInt(peer.FD(), unix.SIOCINQ)
	if err != nil || queued == 0 {
		t.Fatalf("the peer's queue holds %d bytes (%v): the rings never arrived", queued, err)
	}
	// The peer may also flood this end: Clear reads a bounded number and
	// returns, and a wait still sees the rings.
	if _, err := unix.FcntlInt(uintptr(d.FD()), unix.F_SETFL, 0); err != nil { // even our own flags
		t.Fatal(err)
	}
	for range 1000 {
		peer.Ring()
	}
	d.Clear()
	d.Clear()
	if rang, err := d.Wait(time.Second); !rang || err != nil {
		t.Fatalf("Wait after a flood and two Clears = %v, %v", rang, err)
	}
	peer.Close()
	if err := d.Ring(); !errors.Is(err, ErrBellGone) {
		t.Fatalf("Ring with the peer's end closed: %v, want ErrBellGone", err)
	}
}

// TestNotifyOnlyWhenAsleep: a consumer that keeps up costs the producer no
// syscall; one asleep on the bell is woken by the first Notify only.
func TestNotifyOnlyWhenAsleep(t *testing.T) {
	r := newHeapRing(t, 64, 16)
	ringer, bell := newBells(t)
	p, c := r.Producer(), r.Consumer()
	for i := range 1000 {
		first, got, _ := p.Reserve(1)
		putRecord(p.Slot(first), uint64(i))
		p.Commit(got)
		if rang, err := p.Notify(ringer); rang || err != nil {
			t.Fatalf("Notify to a busy consumer = %v, %v", rang, err)
		}
		if err := c.Wait(bell, time.Second); err != nil {
			t.Fatal(err) // the ring is not empty: returns at once
		}
		cf, cgot, _ := c.Peek(1)
		if err := checkRecord(c.Slot(cf), uint64(i)); err != nil {
			t.Fatal(err)
		}
		c.Release(cgot)
	}
	if p.Rings() != 0 || c.Sleeps() != 0 {
		t.Fatalf("busy run: %d rings, %d sleeps", p.Rings(), c.Sleeps())
	}

	done := make(chan error)
	go func() { done <- c.Wait(bell, 5*time.Second) }()
	for atomic.LoadUint32(r.flagWord) == 0 {
		time.Sleep(time.Millisecond) // until the consumer is about to sleep
	}
	for range 3 {
		first, _, _ := p.Reserve(1)
		putRecord(p.Slot(first), 0)
		p.Commit(1)
		p.Notify(ringer)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p.Rings() != 1 {
		t.Fatalf("three commits to a sleeper rang %d times, want 1", p.Rings())
	}
	if err := c.Wait(bell, 0); err != nil {
		t.Fatal(err)
	}
	c.Peek(3)
	c.Release(3)
	if err := c.Wait(bell, 10*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Wait on an empty ring: %v, want ErrTimeout", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := c.WaitContext(ctx, bell); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext on an empty ring: %v", err)
	}
}

// TestPairWithDoorbell runs the pair with the consumer sleeping on the bell
// whenever the ring is empty and the producer stalling now and then, so it
// goes through many sleep/wake cycles; a lost wakeup fails with ErrTimeout.
func TestPairWithDoorbell(t *testing.T) {
	items := uint64(1 << 19)
	if raceOn {
		items = 1 << 17
	}
	for _, b := range backings {
		t.Run(b.name, func(t *testing.T) {
			r := b.make(t, 256, 32)
			setIndices(r, 1<<32-1000)
			runPair(t, r, pairConfig{items: items, maxBatch: 32, partial: 0.05, bell: true, stall: items / 64})
			t.Logf("%d sleeps, %d rings", r.Consumer().Sleeps(), r.Producer().Rings())
			if r.Consumer().Sleeps() == 0 {
				t.Error("the consumer never slept: the doorbell path went untested")
			}
		})
	}
}

// openFDs counts this process's descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// TestDoorbellDescriptors: a doorbell end costs one descriptor, its
// socket, until a wait with a context needs the private eventfd (the
// daemon's ends never wait: issue 22 counted one eventfd per queue pair
// that nothing waited on).
func TestDoorbellDescriptors(t *testing.T) {
	before := openFDs(t)
	a, b := newBells(t)
	if n := openFDs(t) - before; n != 2 {
		t.Fatalf("a doorbell pair holds %d descriptors, want 2 (its two sockets)", n)
	}
	a.Ring()
	if rang, err := b.Wait(time.Second); !rang || err != nil {
		t.Fatalf("Wait = %v, %v", rang, err)
	}
	if n := openFDs(t) - before; n != 2 {
		t.Fatalf("after a wait without a context: %d descriptors, want 2", n)
	}
	// A context's cancel still interrupts the wait, through the eventfd
	// made for it.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	if _, err := b.WaitContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitContext after cancel = %v, want context.Canceled", err)
	}
	if n := openFDs(t) - before; n != 3 {
		t.Fatalf("after a context's wait: %d descriptors, want 3 (the eventfd)", n)
	}
}

// TestRingCloseFD: a ring whose memfd is closed keeps its mapping and its
// contents, shared with a peer that attached before.
func TestRingCloseFD(t *testing.T) {
	r := newMemfdRing(t, 8, 64)
	fd, err := unix.FcntlInt(uintptr(r.FD()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := Attach(fd)
	if err != nil {
		unix.Close(fd)
		t.Fatal(err)
	}
	defer peer.Close()
	before := openFDs(t)
	if err := r.CloseFD(); err != nil {
		t.Fatal(err)
	}
	if err := peer.CloseFD(); err != nil {
		t.Fatal(err)
	}
	if n := before - openFDs(t); n != 2 || r.FD() != -1 {
		t.Fatalf("CloseFD freed %d descriptors (FD %d), want 2 and -1", n, r.FD())
	}
	p, c := r.Producer(), peer.Consumer()
	first, got, err := p.Reserve(1)
	if err != nil || got != 1 {
		t.Fatalf("Reserve = %d, %v", got, err)
	}
	putRecord(p.Slot(first), 42)
	p.Commit(1)
	first, got, err = c.Peek(1)
	if err != nil || got != 1 {
		t.Fatalf("Peek = %d, %v", got, err)
	}
	if err := checkRecord(c.Slot(first), 42); err != nil {
		t.Fatal(err)
	}
	if r.Bytes() != headerSize+8*64 {
		t.Fatalf("Bytes = %d, want %d", r.Bytes(), headerSize+8*64)
	}
}

// TestConsumerWaitCancel: a consumer waiting with a context that has no
// deadline returns when the context is cancelled (the cancel reaches the
// wait through the bell's interrupt eventfd, made for the wait).
func TestConsumerWaitCancel(t *testing.T) {
	r := newMemfdRing(t, 8, 64)
	_, bell := newBells(t)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(20*time.Millisecond, cancel)
	done := make(chan error, 1)
	go func() { done <- r.Consumer().WaitContext(ctx, bell) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("WaitContext = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled wait never returned")
	}
}

// TestWaitContextEndsItsInterrupt: when WaitContext returns, the interrupt
// its context's end triggered has finished, so the caller may close the
// doorbell at once. An interrupt still running wrote to the private
// eventfd's descriptor number after Close, a number the process may have
// given to another file by then (the race detector's report in CI).
func TestWaitContextEndsItsInterrupt(t *testing.T) {
	for i := range 300 {
		a, b, err := NewDoorbellPair()
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%4)*50*time.Microsecond)
		if i%2 == 0 {
			if _, err := b.WaitContext(ctx); err == nil {
				t.Fatal("WaitContext on a silent bell returned no error")
			}
		} else {
			// The consumer's wait on an empty ring, through the same bell.
			r := newHeapRing(t, 64, 16)
			if err := r.Consumer().WaitContext(ctx, b); err == nil {
				t.Fatal("Consumer.WaitContext on an empty ring returned no error")
			}
		}
		b.Close() // under the race detector, an interrupt still running is a race
		a.Close()
		cancel()
	}
}
