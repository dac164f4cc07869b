package ring

import (
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkYieldSwitch is what a yielding poller pays on a shared CPU, the
// figure behind the engines' and applications' yield loops (yield.go,
// docs/platform.md): everything runs pinned to CPU 0, and ns/op is one
// sched_yield of this goroutine's thread. alone: nothing else wants the
// CPU, so a yield is a system call that returns. thread: another thread of
// this process yields on the same CPU, so each op is a switch there and
// back within one address space. process: the other yielder is a child
// process (an engine and an application are different processes), so each
// switch also changes address space.
func BenchmarkYieldSwitch(b *testing.B) {
	if runtime.NumCPU() < 2 {
		b.Skip("needs a second CPU for the rest of the process")
	}
	pin := func(b *testing.B) {
		runtime.LockOSThread()
		var set unix.CPUSet
		set.Set(0)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			b.Skip("cannot pin to CPU 0:", err)
		}
	}
	b.Run("alone", func(b *testing.B) {
		pin(b)
		defer runtime.UnlockOSThread()
		for b.Loop() {
			schedYield()
		}
	})
	b.Run("thread", func(b *testing.B) {
		pin(b)
		defer runtime.UnlockOSThread()
		stop := make(chan struct{})
		done := make(chan struct{})
		ready := make(chan struct{})
		go func() {
			defer close(done)
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var set unix.CPUSet
			set.Set(0)
			unix.SchedSetaffinity(0, &set)
			close(ready)
			for {
				select {
				case <-stop:
					return
				default:
					schedYield()
				}
			}
		}()
		<-ready
		for b.Loop() {
			schedYield()
		}
		close(stop)
		<-done
	})
	b.Run("process", func(b *testing.B) {
		pin(b)
		defer runtime.UnlockOSThread()
		cmd, _ := startChild(b, "yield", 0, 0)
		// The child pins itself and yields until it is killed; its
		// start-up (milliseconds) is left out of the timing.
		time.Sleep(100 * time.Millisecond)
		for b.Loop() {
			schedYield()
		}
		b.StopTimer()
		cmd.Process.Kill()
		cmd.Wait()
	})
}

func schedYield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }

// yieldChild is the "yield" role of TestChildProcess: pinned to CPU 0, it
// yields until killed.
func yieldChild() {
	runtime.LockOSThread()
	var set unix.CPUSet
	set.Set(0)
	unix.SchedSetaffinity(0, &set)
	for {
		schedYield()
	}
}
