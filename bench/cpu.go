package bench

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// cpuPair picks the two CPUs the sender and the receiver are pinned to: the
// first two this process may run on. ok is false when there are fewer than
// two, or pinning was turned off; the threads are then left to the
// scheduler, which on this kind of machine sometimes stacks both spinning
// threads on one core and quarters the rate (measured in dataplane/xsk).
func cpuPair(noPin bool) (cpus [2]int, ok bool) {
	if noPin {
		return cpus, false
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return cpus, false
	}
	n := 0
	for c := 0; c < len(set)*64 && n < 2; c++ {
		if set.IsSet(c) {
			cpus[n] = c
			n++
		}
	}
	return cpus, n == 2
}

// lockAndPin locks the calling goroutine to its OS thread and, if cpu >= 0,
// pins that thread to cpu. The returned function undoes both: it restores
// the thread's CPU mask and unlocks it, or, if the mask cannot be restored,
// leaves the goroutine locked so that the runtime ends the thread when the
// goroutine returns rather than hand a pinned thread to other goroutines.
// pinned reports whether the pinning took. Call it first thing in a
// goroutine, and defer done.
func lockAndPin(cpu int) (done func(), pinned bool) {
	runtime.LockOSThread()
	if cpu < 0 {
		return runtime.UnlockOSThread, false
	}
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return runtime.UnlockOSThread, false
	}
	var set unix.CPUSet
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return runtime.UnlockOSThread, false
	}
	return func() {
		if unix.SchedSetaffinity(0, &old) == nil {
			runtime.UnlockOSThread()
		}
	}, true
}
