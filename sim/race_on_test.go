//go:build race

package sim

// raceOn: the race detector slows the simulator about tenfold; the
// largest comparisons skip under it (the simulator runs on one
// goroutine, so the detector has nothing to find there that the smaller
// runs do not exercise).
const raceOn = true
