package dataplane

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/internal/threadcpu"
	"github.com/metaroce/metaroce/ring"
	"github.com/metaroce/metaroce/transport"
)

// Driver is application logic that runs on the engine goroutine: it may
// post work on the engine's connections in Step and receives completions.
// Running it there, rather than across a channel, keeps the endpoint
// single-owner.
type Driver interface {
	// Step runs once per loop iteration; it reports whether it did work.
	Step(e *Engine, now transport.Time) bool
	// Completion receives each completion.
	Completion(e *Engine, now transport.Time, c transport.Completion)
}

// EngineConfig tunes an engine.
type EngineConfig struct {
	Batch int // packets per RX/TX batch (default 64)
	// SpinIterations and SpinTime bound the hot spin: idle iterations
	// that poll without giving up the CPU (default 8, and 10 us).
	SpinIterations int
	SpinTime       time.Duration
	// YieldTime is how long after its last work the engine keeps
	// polling, yielding the CPU (sched_yield) between iterations, before
	// it sleeps (default 1 ms; negative: sleep straight after the hot
	// spin). Work is expected then: a peer's answer, an application's
	// next request. A yielding poller hands the CPU to whoever needs it
	// in about a microsecond and is back as soon as they stop, where a
	// sleeping one costs a wake-up (tens of microseconds on a VM whose
	// idle vCPU halts) on every hop. Idle, the engine sleeps after it.
	YieldTime time.Duration
	MaxSleep  time.Duration // longest block when idle (default 1ms: commands wait at most this)
	// CPU pins the engine's thread to one CPU (-1 or unset: no pinning).
	// Two busy-polling threads that the scheduler puts on one core run
	// at a quarter of their rate (measured on veth), so a host with
	// engines and their peers on separate cores should pin them.
	CPU int
	// PinSet says CPU was set (the zero value of CPU is CPU 0).
	PinSet bool
}

// EngineStats are counters the engine goroutine writes and anyone may read
// (atomics: one writer, so Add never contends).
type EngineStats struct {
	Iterations, Sleeps   atomic.Uint64
	Yields               atomic.Uint64 // idle iterations that yielded the CPU
	YieldStalls          atomic.Uint64 // yields that lost the CPU for long: yielding paused
	Handoffs             atomic.Uint64 // yields that handed the P to the process's goroutines
	RxPackets, TxPackets atomic.Uint64
	RxBatches, TxBatches atomic.Uint64
	TxShort              atomic.Uint64 // transport had more to send than the link had room
	RxStamped            atomic.Uint64 // received packets with the link's arrival time (RxPacket.Arrival)
	// RxWaitNanos sums, over RxStamped packets, the time between their
	// arrival and the engine taking them from the link: host receive
	// delay, which AckDelay and RTT samples leave out.
	RxWaitNanos          atomic.Uint64
	Forwarded, FromPeers atomic.Uint64 // packets handed to / taken from other engines
	BusyNanos, IdleNanos atomic.Uint64
}

// Engine drives one Endpoint over one Link.
type Engine struct {
	cfg    EngineConfig
	link   Link
	ep     *transport.Endpoint
	driver Driver
	epoch  time.Time
	// monoEpoch is CLOCK_MONOTONIC at epoch, to put links' arrival
	// stamps (RxPacket.Arrival) on the engine's clock: Go's monotonic
	// clock is CLOCK_MONOTONIC, so the two differ by the nanoseconds
	// between the two reads.
	monoEpoch int64

	rx      []RxPacket
	tx      []TxPacket
	cqes    []transport.Completion
	cmds    chan func(now transport.Time)
	stopped chan struct{} // closed when Run returns

	// Multi-queue hand-off (mailbox.go); nil for a lone engine.
	index  int
	idMask uint32
	out    []*Mailbox // by owner engine
	in     []*Mailbox
	inbox  func(s *mailSlot)
	now    transport.Time
	lastTx int // packets the last TX batch carried (sizes the next reservation)
	// fakeClock: a test steps the engine with its own clock (Iterate),
	// so the loop must not read the real one mid-iteration.
	fakeClock bool

	// tid is the engine's thread (Run locks it), 0 before Run: ThreadID.
	tid atomic.Int64

	// runnable samples the runtime's count of goroutines waiting for a P;
	// runnableLooks counts the looks in a row that found some (goRunnable).
	runnable      [1]metrics.Sample
	runnableLooks int

	// Sleeping on the link and a Sleeper driver's wake-up descriptor (sleep).
	pfds [2]unix.PollFd
	pts  unix.Timespec

	Stats EngineStats
}

// mailboxMaxSleep bounds an engine's sleep when other engines may hand it
// packets: 100 us of added latency at worst, ~10k wakeups/s when idle.
const mailboxMaxSleep = 100 * time.Microsecond

// NewEngine returns an engine for ep over link. The engine owns both from
// Run on.
func NewEngine(cfg EngineConfig, link Link, ep *transport.Endpoint, d Driver) *Engine {
	if cfg.Batch <= 0 {
		cfg.Batch = 64
	}
	if cfg.SpinIterations <= 0 {
		cfg.SpinIterations = 8
	}
	if cfg.SpinTime <= 0 {
		cfg.SpinTime = 10 * time.Microsecond
	}
	if cfg.YieldTime == 0 {
		cfg.YieldTime = time.Millisecond
	}
	if cfg.MaxSleep <= 0 {
		cfg.MaxSleep = time.Millisecond
	}
	e := &Engine{
		cfg: cfg, link: link, ep: ep, driver: d, epoch: time.Now(),
		rx: make([]RxPacket, cfg.Batch), tx: make([]TxPacket, cfg.Batch),
		cqes: make([]transport.Completion, cfg.Batch), cmds: make(chan func(transport.Time), 16),
		stopped: make(chan struct{}),
	}
	e.runnable[0].Name = "/sched/goroutines/runnable:goroutines"
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) == nil {
		e.monoEpoch = ts.Nano() - int64(time.Since(e.epoch))
	}
	return e
}

// Endpoint returns the transport endpoint. Use it only from Driver calls
// or functions passed to Do.
func (e *Engine) Endpoint() *transport.Endpoint { return e.ep }

// Link returns the link.
func (e *Engine) Link() Link { return e.link }

// EngineCPU is an engine thread's CPU time so far (internal/threadcpu):
// its polling, its transport work, and the kernel's work inside its
// system calls, which on copy-mode AF_XDP over veth includes the whole
// path to the receiving socket (docs/platform.md).
type EngineCPU struct {
	Nanos     uint64 `json:"ns"`        // on a CPU, exact (schedstat)
	UserNanos uint64 `json:"user_ns"`   // in user space, from clock ticks scaled to the total
	SysNanos  uint64 `json:"system_ns"` // in the kernel, likewise
}

// CPU reads the engine thread's CPU time, nil when Run is not running (or
// /proc cannot be read). It reads two small /proc files: for status and
// scrapes, not for the loop.
func (e *Engine) CPU() *EngineCPU {
	tid := e.ThreadID()
	if tid == 0 {
		return nil
	}
	u, err := threadcpu.Read(tid)
	if err != nil {
		return nil
	}
	return &EngineCPU{Nanos: uint64(u.Total), UserNanos: uint64(u.User), SysNanos: uint64(u.System)}
}

// ThreadID is the operating-system thread Run polls on (Run locks it for
// its whole life), 0 when Run is not running: for reading the engine's
// CPU time from outside it (internal/threadcpu) without a system call in
// its loop.
func (e *Engine) ThreadID() int { return int(e.tid.Load()) }

// PinnedCPU is the CPU the engine's thread is pinned to (EngineConfig.CPU),
// and false when it is not pinned.
func (e *Engine) PinnedCPU() (int, bool) { return e.cfg.CPU, e.cfg.PinSet && e.cfg.CPU >= 0 }

// Now returns the engine clock (call only on the engine goroutine).
func (e *Engine) Now() transport.Time { return transport.Time(time.Since(e.epoch)) }

// Do runs f on the engine goroutine, within MaxSleep, and waits for it.
func (e *Engine) Do(ctx context.Context, f func(now transport.Time)) error {
	done := make(chan struct{})
	select {
	case e.cmds <- func(now transport.Time) { f(now); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-e.stopped:
		return ErrStopped
	}
	select {
	case <-done:
		return nil
	case <-e.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

// clock is the engine's clock inside an iteration that began at now:
// never earlier than now, and, for a test stepping the engine with a
// clock of its own (fakeClock), that clock.
func (e *Engine) clock(now transport.Time) transport.Time {
	if e.fakeClock {
		return now
	}
	return max(now, e.Now())
}

// ErrStopped is Do's answer once Run has returned.
var ErrStopped = errors.New("engine stopped")

// Run loops until ctx is done. It locks the goroutine to its OS thread.
// An engine runs once: when Run returns, Do fails with ErrStopped.
func (e *Engine) Run(ctx context.Context) error {
	defer close(e.stopped)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	e.tid.Store(int64(unix.Gettid()))
	defer e.tid.Store(0)
	if e.cfg.PinSet && e.cfg.CPU >= 0 {
		var set unix.CPUSet
		set.Set(e.cfg.CPU)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			return fmt.Errorf("engine: pin to cpu %d: %w", e.cfg.CPU, err)
		}
	}
	idle := 0
	last := time.Now()
	lastWork := last
	busy := false    // what the previous iteration was, for the time accounting
	yielded := false // the previous iteration ended in a yield
	inGap := false   // idle past the hot spin since the last work
	var lastHandoff time.Time
	var gate ring.YieldGate
	for {
		if idle == 0 || idle%64 == 0 {
			if ctx.Err() != nil {
				return nil
			}
		}
		// The loop's one clock read: it times this iteration's work and
		// charges the time since the previous read to what that one was.
		t := time.Now()
		el := t.Sub(last)
		if busy {
			e.Stats.BusyNanos.Add(uint64(el))
		} else {
			e.Stats.IdleNanos.Add(uint64(el))
		}
		last = t
		now := transport.Time(t.Sub(e.epoch))
		work := e.iterate(now)
		busy = work
		e.Stats.Iterations.Add(1)
		if yielded && el > ring.YieldStall {
			// The last yield gave the CPU away for long: a thread that
			// does not yield back holds it (see ring.YieldGate). Sleep for
			// the rest of this gap, and between bursts while that is so.
			gate.Stalled()
			e.Stats.YieldStalls.Add(1)
		}
		yielded = false
		if work {
			idle = 0
			lastWork = t
			if inGap {
				gate.Done()
				inGap = false
			}
			continue
		}
		idle++
		quiet := t.Sub(lastWork)
		if idle < e.cfg.SpinIterations && quiet < e.cfg.SpinTime {
			continue // hot spin: the next packet or request is nanoseconds away
		}
		if quiet < e.cfg.YieldTime {
			if !inGap {
				inGap = true
				gate.Start()
			}
			if gate.Yield() {
				// Work is expected (there was some a moment ago): keep
				// polling, but let whatever else wants this CPU (the
				// application, the other daemon, the peer engine) run
				// first. A hand-off this way costs about a microsecond; a
				// sleep's wake-up costs tens.
				e.Stats.Yields.Add(1)
				if t.Sub(lastHandoff) > handoffEvery && e.goRunnable(&lastHandoff, t) {
					e.Stats.Handoffs.Add(1)
					runtime.Gosched()
				} else {
					yield()
				}
				yielded = true
				continue
			}
		}
		sleep := e.cfg.MaxSleep
		if next := e.ep.NextTimeout(); next != transport.Never {
			sleep = min(sleep, max(0, time.Duration(next-now)))
		}
		if sleep > 0 {
			if err := e.sleep(sleep); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// handoffEvery is how often a yielding engine looks whether the process's
// other goroutines wait for a P, and hands its own over if so
// (runtime.Gosched): a yielding engine keeps its P (sched_yield finds no
// other thread to run, since goroutines waiting for a P are not threads
// yet), and an engine whose work comes every few microseconds (a
// retransmission timer, say) yields between them for ever, so they would
// wait for the runtime's preemption (10 ms) at every step (the control
// server answering, the application's next post). A locked thread's
// Gosched costs two thread wake-ups: only when some goroutine waits.
const handoffEvery = 200 * time.Microsecond

// goRunnable notes t in *last and reports whether goroutines of this
// process have waited for a P at handoffLooks looks in a row (the count
// is also above zero for a moment whenever a goroutine calls Gosched or
// is woken while an idle P starts up; a goroutine held off by yielding
// engines stays). It reads runtime/metrics into a sample allocated once
// (~50 ns).
func (e *Engine) goRunnable(last *time.Time, t time.Time) bool {
	*last = t
	metrics.Read(e.runnable[:])
	if v := e.runnable[0].Value; v.Kind() != metrics.KindUint64 || v.Uint64() == 0 {
		e.runnableLooks = 0
		return false
	}
	e.runnableLooks++
	if e.runnableLooks < handoffLooks {
		return false
	}
	e.runnableLooks = 0
	return true
}

const handoffLooks = 3

// yield gives the CPU to any other runnable thread (sched_yield), and
// comes back at once if there is none. The engine's thread is locked to
// its goroutine, so runtime.Gosched would park the thread and hand its P
// around, a futex wake-up away from coming back; the syscall keeps the
// thread, and, being an ordinary (not raw) one, lets the runtime give the
// P to the daemon's other goroutines if the yield lasts (other threads
// ran meanwhile).
func yield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

var errInterrupted = errors.New("interrupted")

// Sleeper is a Driver with a wake-up source of its own: applications'
// send queues, say, whose producers ring a doorbell when the engine asked
// to be woken (ring's need-wakeup protocol). Before the engine sleeps it
// calls PrepareSleep, which arms the driver's queues and reports false if
// work arrived meanwhile (the engine then goes round again); it sleeps on
// the link and on WakeFD together; afterwards it calls Woke, which clears
// what rang and disarms the queues. The engine only polls WakeFD, never
// reads or writes it; a driver whose wake-ups come from applications
// must make it a descriptor no application holds (control's driver uses
// an epoll set of the daemon's ends of its queue pairs' doorbells), and
// Woke must not block whatever the applications do.
type Sleeper interface {
	Driver
	PrepareSleep() bool
	WakeFD() int
	Woke()
}

// PollFDer is a Link whose readiness one descriptor shows, so the engine
// can sleep on it and a driver's wake-up descriptor in one ppoll. ready reports
// packets the link already holds (Poll would return at once): the engine
// then does not sleep.
type PollFDer interface {
	PollFD() (fd int, ready bool)
}

// wakeFallback bounds a sleep on a link that cannot be polled beside a
// driver's wake-up descriptor (the in-memory link): the driver's work then waits
// for the timeout instead of a wakeup.
const wakeFallback = 50 * time.Microsecond

// sleep blocks for at most d, on the link and, for a Sleeper driver, on
// its wake-up descriptor.
func (e *Engine) sleep(d time.Duration) error {
	s, ok := e.driver.(Sleeper)
	if !ok {
		e.Stats.Sleeps.Add(1)
		if err := e.link.Poll(d); err != nil && !errors.Is(err, errInterrupted) {
			return err
		}
		return nil
	}
	if !s.PrepareSleep() {
		s.Woke()
		return nil
	}
	e.Stats.Sleeps.Add(1)
	defer s.Woke()
	lp, ok := e.link.(PollFDer)
	if !ok {
		if err := e.link.Poll(min(d, wakeFallback)); err != nil && !errors.Is(err, errInterrupted) {
			return err
		}
		return nil
	}
	fd, ready := lp.PollFD()
	if ready {
		return nil
	}
	e.pfds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	e.pfds[1] = unix.PollFd{Fd: int32(s.WakeFD()), Events: unix.POLLIN}
	e.pts = unix.NsecToTimespec(int64(d))
	if _, err := unix.Ppoll(e.pfds[:], &e.pts, nil); err != nil && err != unix.EINTR {
		return fmt.Errorf("engine: poll: %w", err)
	}
	return nil
}

// iterate is one loop iteration; it reports whether anything happened.
func (e *Engine) iterate(now transport.Time) bool {
	work := false
	select {
	case f := <-e.cmds:
		f(now)
		work = true
	default:
	}
	if n := e.link.Receive(e.rx); n > 0 {
		work = true
		// The batch's arrival time (§5.1's "arrival" for a software
		// endpoint, docs/spec.md §4.2): read after Receive returned, so
		// no packet of the batch arrived after it, and the AckDelay
		// measured from it never exceeds the time the endpoint held the
		// packet.
		now = e.clock(now)
		e.Stats.RxPackets.Add(uint64(n))
		e.Stats.RxBatches.Add(1)
		fwd := 0
		stamped, wait := uint64(0), uint64(0)
		for i := range e.rx[:n] {
			p := &e.rx[i]
			if e.out != nil {
				if o := owner(p.Payload, e.idMask); o >= 0 && o != e.index && o < len(e.out) {
					e.out[o].put(p)
					fwd++
					continue
				}
			}
			at := transport.Time(0) // 0: now
			if p.Arrival != 0 && e.monoEpoch != 0 {
				at = transport.Time(p.Arrival - e.monoEpoch)
				stamped++
				if at < now {
					wait += uint64(now - at)
				}
			}
			e.ep.ReceiveOn(now, at, p.Plane, p.From, p.SrcPort, p.CE, p.Payload)
		}
		e.link.Release(e.rx[:n])
		if stamped > 0 {
			e.Stats.RxStamped.Add(stamped)
			e.Stats.RxWaitNanos.Add(wait)
		}
		if fwd > 0 {
			for _, m := range e.out {
				if m != nil {
					m.publish()
				}
			}
			e.Stats.Forwarded.Add(uint64(fwd))
		}
	}
	if len(e.in) > 0 {
		e.now = now
		if e.inbox == nil {
			e.inbox = func(s *mailSlot) {
				at := transport.Time(0)
				if s.arrival != 0 && e.monoEpoch != 0 {
					at = transport.Time(s.arrival - e.monoEpoch)
				}
				e.ep.ReceiveOn(e.now, at, s.plane, s.from, s.port, s.ce, s.buf[:s.n])
			}
		}
		for _, m := range e.in {
			if k := m.drain(e.inbox); k > 0 {
				work = true
				e.Stats.FromPeers.Add(uint64(k))
			}
		}
	}
	if e.ep.NextTimeout() <= now {
		e.ep.Timeout(now)
		work = true
	}
	if e.driver != nil && e.driver.Step(e, now) {
		work = true
	}
	for {
		k := e.ep.PollCompletions(e.cqes)
		if k == 0 {
			break
		}
		work = true
		if e.driver != nil {
			for _, c := range e.cqes[:k] {
				e.driver.Completion(e, now, c)
			}
		}
	}
	if e.flush(now) {
		work = true
	}
	return work
}

// stampEvery is how many packets the engine writes between clock reads
// in a TX batch, and maxTxChunk the most it writes before it hands them to
// the link: writing a 1500-byte packet (copy and CRC32C) takes a few
// hundred nanoseconds, so every packet is stamped within a few
// microseconds of the moment its batch is handed to the link, for a
// clock read (vDSO, no syscall) per 4 packets and a SubmitTx (at most one
// kick) per 16. Batches of 64 stamped alike had their first packets
// handed over 58 us (p50) after their Timestamp (TestTimestampsAtHandoff).
//
// maxFlush bounds the packets one iteration hands to the link before it
// receives again. The flush once wrote everything the transport owed:
// 10,000 connections' retransmission timeouts firing together owed 10,000
// packets, the engine wrote them for milliseconds without reading its RX
// ring, and the acks that would have stopped the next round overflowed it
// (115,090 RxRingFull drops in one run of `demo -topology conns
// -write-window 1000`, every retransmission spurious, WRITEs failing on
// their retry limit). Four chunks take about 20 us to write, a small
// part of what an RX ring holds at line rate.
const (
	stampEvery = 4
	maxTxChunk = 16
	maxFlush   = 4 * maxTxChunk
)

// flush moves what the transport owes into TX batches, at most maxFlush
// packets; what is left goes in the next iteration, after a receive.
func (e *Engine) flush(now transport.Time) bool {
	sent := false
	for budget := maxFlush; budget > 0 && e.ep.HasOutput(); {
		// Reserve about what the last flush used (twice, so a growing
		// burst is not cut short), not the whole batch: a receiver owes
		// a few acks per iteration, and taking and returning a full batch
		// of frames each time cost it 14% of its CPU (profile).
		//
		// And no more than maxTxChunk: a packet is stamped when it is
		// written, so the first of a batch waits for the rest to be
		// written before it is handed to the link.
		chunk := min(len(e.tx), max(16, 2*e.lastTx), maxTxChunk, budget)
		k := e.link.ReserveTx(e.tx[:chunk])
		if k == 0 {
			// The link's TX budget is spent (afxdp.Config.TxBudget):
			// keep polling, as for work, so the packets leave as soon
			// as completions refill it rather than after a sleep.
			e.Stats.TxShort.Add(1)
			return true
		}
		n := 0
		for n < k {
			if n%stampEvery == 0 {
				// A packet is stamped (its Timestamp, an ack's AckDelay)
				// when it is handed to the link (§4.2): at most
				// stampEvery packets' writing (a few microseconds)
				// before SubmitTx, never the iteration's clock, which
				// an earlier batch of this flush may have aged.
				now = e.clock(now)
			}
			p := &e.tx[n]
			d, ok := e.ep.Transmit(now, p.Buf)
			if !ok {
				break
			}
			p.Len, p.Dst, p.SrcPort, p.Control, p.Plane = d.Len, d.Dst, d.SrcPort, d.Control, d.Plane
			n++
		}
		for i := n; i < k; i++ {
			e.tx[i].Len = 0
		}
		if err := e.link.SubmitTx(e.tx[:k]); err != nil {
			e.Stats.TxShort.Add(1)
		}
		if n > 0 {
			sent = true
			e.Stats.TxPackets.Add(uint64(n))
			e.Stats.TxBatches.Add(1)
		}
		e.lastTx = n
		budget -= n
		if n < k {
			return sent
		}
	}
	return sent
}
