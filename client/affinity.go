package client

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// AvoidEngineCPUs moves every thread of the process off the CPUs the
// daemon pinned its engines to (EngineCPUs), when the process may run on
// some other CPU; it reports whether it changed anything.
//
// Why: an engine busy-polls its NIC queue, and an application that polls
// its completion queue (WaitCQ) on the engine's CPU takes turns with it,
// each turn a process switch (about 7 us on a VM, docs/platform.md) and,
// under load, whole scheduler time slices. On the two-vCPU star demo
// (three interleaved pairs), a WRITE round trip took 86-100 us p50 left
// to the scheduler and 41-74 us moved off the engine's CPU, and the
// bandwidth test's 1 ms windows with nothing completed fell from 226-335
// to 165-192 of about 650.
//
// It changes the CPU affinity of the whole process (every thread, so the
// Go runtime's threads and those it starts later, which inherit it), so
// it is for an application that owns its process's placement: call it
// once after Dial, before starting work. A process already confined to
// engine CPUs only (a one-CPU container, say) is left as it is.
func (c *Client) AvoidEngineCPUs() (bool, error) {
	return avoidCPUs(c.EngineCPUs)
}

// avoidCPUs removes cpus from every thread's affinity, if that leaves any.
func avoidCPUs(cpus []int) (bool, error) {
	if len(cpus) == 0 {
		return false, nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return false, fmt.Errorf("metaroce: cpu affinity: %w", err)
	}
	changed := false
	for _, cpu := range cpus {
		if set.IsSet(cpu) {
			set.Clear(cpu)
			changed = true
		}
	}
	if !changed || set.Count() == 0 {
		return false, nil
	}
	// A thread started while the tasks are listed inherits the old
	// affinity from its creator: list again until a pass sets nothing new.
	done := map[int]bool{}
	for pass := 0; pass < 10; pass++ {
		tids, err := threads()
		if err != nil {
			return false, err
		}
		fresh := 0
		for _, tid := range tids {
			if done[tid] {
				continue
			}
			if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH {
				return false, fmt.Errorf("metaroce: cpu affinity of thread %d: %w", tid, err)
			}
			done[tid] = true
			fresh++
		}
		if fresh == 0 {
			return true, nil
		}
	}
	return true, nil
}

// threads lists the process's thread ids.
func threads() ([]int, error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil, fmt.Errorf("metaroce: threads: %w", err)
	}
	tids := make([]int, 0, len(ents))
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids, nil
}
