// Package threadcpu reads how much CPU one thread of this process has
// used, and how that splits between user space and the kernel, from
// /proc/self/task/TID.
//
// It is for the threads that poll: an engine's or a raw baseline's. Their
// CPU per packet, and its kernel share, say where a sender's time goes
// without a profiler. On a copy-mode veth the whole receive path of the
// other host (the switch's forwarding, its XDP program, the copy into its
// ring) runs inside the sender's transmit system call, so a sender's
// kernel time is most of what it costs (docs/platform.md).
//
// The total comes from schedstat (nanoseconds on a CPU, exact); the split
// from stat's utime and stime, which the kernel keeps in clock ticks and
// scales to the exact total, so over a run of many ticks the shares are
// close and over a few ticks they are not. getrusage(RUSAGE_THREAD)
// would give the same figures but only to the thread itself; reading
// /proc lets the daemon's control goroutine and a benchmark's coordinator
// read a polling thread without adding a system call to its loop.
package threadcpu

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// Usage is a thread's CPU time so far.
type Usage struct {
	// Total is the time the thread has run on a CPU (schedstat).
	Total time.Duration
	// User and System are its user and kernel time (stat's utime and
	// stime), in clock ticks of 1/ticksPerSecond.
	User, System time.Duration
}

// Sub returns u minus an earlier reading.
func (u Usage) Sub(earlier Usage) Usage {
	return Usage{Total: u.Total - earlier.Total, User: u.User - earlier.User, System: u.System - earlier.System}
}

// KernelShare is System's share of User + System, 0 when both are 0.
func (u Usage) KernelShare() float64 {
	if s := u.User + u.System; s > 0 {
		return float64(u.System) / float64(s)
	}
	return 0
}

// ticksPerSecond is USER_HZ, the unit of utime and stime in /proc: 100 on
// every Linux architecture Go runs on (the kernel converts to it for user
// space whatever its own HZ).
const ticksPerSecond = 100

// Read returns the usage of thread tid of this process.
func Read(tid int) (Usage, error) {
	dir := "/proc/self/task/" + strconv.Itoa(tid)
	var u Usage
	sched, err := os.ReadFile(dir + "/schedstat")
	if err != nil {
		return u, fmt.Errorf("threadcpu: %w", err)
	}
	f := bytes.Fields(sched)
	if len(f) < 1 {
		return u, fmt.Errorf("threadcpu: %s/schedstat: %q", dir, sched)
	}
	ns, err := strconv.ParseUint(string(f[0]), 10, 64)
	if err != nil {
		return u, fmt.Errorf("threadcpu: %s/schedstat: %w", dir, err)
	}
	u.Total = time.Duration(ns)
	stat, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return u, fmt.Errorf("threadcpu: %w", err)
	}
	// The command name, field 2, is in parentheses and may hold spaces
	// or parentheses itself: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return u, fmt.Errorf("threadcpu: %s/stat: no command name", dir)
	}
	rest := bytes.Fields(stat[i+1:])
	// rest[0] is field 3 (state): utime and stime are fields 14 and 15.
	if len(rest) < 13 {
		return u, fmt.Errorf("threadcpu: %s/stat: %d fields after the name", dir, len(rest))
	}
	ut, err1 := strconv.ParseUint(string(rest[11]), 10, 64)
	st, err2 := strconv.ParseUint(string(rest[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return u, fmt.Errorf("threadcpu: %s/stat: utime %q stime %q", dir, rest[11], rest[12])
	}
	tick := time.Second / ticksPerSecond
	u.User, u.System = time.Duration(ut)*tick, time.Duration(st)*tick
	return u, nil
}
