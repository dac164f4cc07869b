package ring

import "time"

// YieldStall is how long a yield (sched_yield) may keep a poller off the
// CPU before the poller counts it as lost to a thread that does not yield
// back. Cooperative peers hand the CPU back within microseconds (1.3 us
// per hand-off measured on one vCPU); a CPU-bound thread keeps it for its
// time slice (0.75 ms and up). At 50 us, other processes' short bursts on
// a shared test VM counted as stalls and put the pollers to sleep where
// yielding still gave 17 us round trips; at 200 us only lost slices count.
const YieldStall = 200 * time.Microsecond

// YieldGate decides, wait by wait, whether a poller that expects its peer
// soon should poll yielding the CPU between looks, or sleep on its
// doorbell. Yield-polling wins while what shares the CPU yields too (the
// other daemon, the applications): a hand-off costs about a microsecond
// where a sleeper's wake-up costs tens. It loses when a thread that does
// not yield shares the CPU: the scheduler pushes a yielder's deadline back
// a slice each time (EEVDF), so every yield waits out the other thread's
// slice, where a sleeper is woken ahead of it. So the gate keeps a moving
// average of how many waits had a yield stall (YieldStall), and says
// sleep while more than a quarter did; one wait in 16 yields anyway, to
// find out when the contention has gone. Occasional stalls (a burst of
// other work now and then) do not stop the yielding.
//
// The zero value yields. One goroutine uses a gate.
type YieldGate struct {
	avg   uint32 // stalled waits, moving average, in 1/256
	waits uint32
	on    bool // the current wait yields
}

const (
	gateOne       = 256
	gateThreshold = gateOne / 4
	gateProbe     = 16
)

// Start begins a wait and reports whether to poll yielding (true) or
// sleep straight away (false).
func (g *YieldGate) Start() bool {
	g.waits++
	g.on = g.avg < gateThreshold || g.waits%gateProbe == 0
	return g.on
}

// Stalled reports that a yield in the current wait lost the CPU for longer
// than YieldStall: the poller should sleep for the rest of this wait.
func (g *YieldGate) Stalled() {
	if g.on {
		g.avg += (gateOne - g.avg) / 8
		g.on = false
	}
}

// Done ends a wait that yielded without a stall (its work came, or its
// time ran out).
func (g *YieldGate) Done() {
	if g.on {
		g.avg -= g.avg / 8
		g.on = false
	}
}

// Yield reports whether the current wait is yield-polling: Start said so
// and no yield of it has stalled.
func (g *YieldGate) Yield() bool { return g.on }

// Yielding reports whether the gate advises yield-polling now: waits
// mostly stall no more than a quarter of the time.
func (g *YieldGate) Yielding() bool { return g.avg < gateThreshold }
