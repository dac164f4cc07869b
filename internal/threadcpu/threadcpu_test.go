package threadcpu

import (
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadSpinAndSyscalls: a thread that spins in user space for 300 ms
// reads at least that much more CPU, nearly all of it user time; one that
// spends 300 ms in system calls (getppid in a loop, whose kernel side is
// small but whose entry and exit are kernel time) reads some system time.
// A thread that sleeps gains almost nothing.
func TestReadSpinAndSyscalls(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := unix.Gettid()
	spin := func(d time.Duration, f func()) Usage {
		t.Helper()
		before, err := Read(tid)
		if err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(d); time.Now().Before(end); {
			f()
		}
		after, err := Read(tid)
		if err != nil {
			t.Fatal(err)
		}
		return after.Sub(before)
	}
	x := 0
	u := spin(300*time.Millisecond, func() { x++ })
	t.Logf("spinning: %+v, kernel share %.2f", u, u.KernelShare())
	// Another process may take the CPU for part of the time, so only a
	// part of the 300 ms is certain.
	if u.Total < 100*time.Millisecond || u.User < 50*time.Millisecond {
		t.Errorf("300 ms of spinning read %+v", u)
	}
	if u.KernelShare() > 0.5 {
		t.Errorf("spinning in user space: kernel share %.2f", u.KernelShare())
	}
	s := spin(300*time.Millisecond, func() { unix.Getppid() })
	t.Logf("system calls: %+v, kernel share %.2f", s, s.KernelShare())
	if s.Total < 100*time.Millisecond || s.System == 0 {
		t.Errorf("300 ms of system calls read %+v", s)
	}
	before, err := Read(tid)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	after, err := Read(tid)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Sub(before).Total; d < 0 || d > 50*time.Millisecond {
		t.Errorf("sleeping 200 ms read %v of CPU", d)
	}
}

func TestReadErrors(t *testing.T) {
	if _, err := Read(-1); err == nil {
		t.Error("thread -1: no error")
	}
	// A thread of another process is not under /proc/self/task.
	if os.Getpid() != 1 {
		if _, err := Read(1); err == nil {
			t.Error("pid 1 as a thread of this process: no error")
		}
	}
}

func TestKernelShare(t *testing.T) {
	if got := (Usage{}).KernelShare(); got != 0 {
		t.Errorf("empty: %v", got)
	}
	if got := (Usage{User: time.Second, System: 3 * time.Second}).KernelShare(); got != 0.75 {
		t.Errorf("1 s user, 3 s system: %v, want 0.75", got)
	}
}
