package client

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAvoidCPUsMovesEveryThread: off CPU 0, every thread of the process
// (the runtime's, ones locked by goroutines, one started afterwards) has
// an affinity without it; and a process whose every CPU has an engine is
// left as it is. It runs in a child process, since it changes the
// affinity of the process it runs in.
func TestAvoidCPUsMovesEveryThread(t *testing.T) {
	if os.Getenv("METAROCE_AFFINITY_CHILD") == "1" {
		affinityChild(t)
		return
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	if !set.IsSet(0) || set.Count() < 2 {
		t.Skipf("needs CPU 0 and another CPU allowed (%d allowed)", set.Count())
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAvoidCPUsMovesEveryThread$", "-test.v")
	cmd.Env = append(os.Environ(), "METAROCE_AFFINITY_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS") {
		t.Fatalf("child: %v\n%s", err, out)
	}
}

func affinityChild(t *testing.T) {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Fatal(err)
	}
	var every []int
	for cpu := 0; cpu < 1024; cpu++ {
		if all.IsSet(cpu) {
			every = append(every, cpu)
		}
	}
	if changed, err := avoidCPUs(every); changed || err != nil {
		t.Fatalf("every allowed CPU an engine's: changed %v, err %v; want nothing done", changed, err)
	}
	// Threads of their own, held until the end.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
			<-stop
		}()
	}
	changed, err := avoidCPUs([]int{0})
	if err != nil || !changed {
		t.Fatalf("avoid CPU 0: changed %v, err %v", changed, err)
	}
	wg.Add(1)
	go func() { // a thread started afterwards inherits the new affinity
		defer wg.Done()
		runtime.LockOSThread()
		<-stop
	}()
	runtime.Gosched()
	tids, err := threads()
	if err != nil {
		t.Fatal(err)
	}
	if len(tids) < 5 {
		t.Fatalf("%d threads, want the 5 locked ones at least", len(tids))
	}
	for _, tid := range tids {
		var s unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &s); err != nil {
			t.Fatal(err)
		}
		if s.IsSet(0) || s.Count() != all.Count()-1 {
			t.Errorf("thread %d: CPU 0 allowed %v, %d CPUs; want every one but CPU 0", tid, s.IsSet(0), s.Count())
		}
	}
	close(stop)
	wg.Wait()
}
