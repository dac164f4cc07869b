package control

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/ring"
)

// TestWakePathAllocs: the engine side of a queue pair's wake-ups (a
// completion into a sleeping application's queue and its ring; arming
// the send queues; clearing the doorbell ends that rang) works and
// allocates nothing.
func TestWakePathAllocs(t *testing.T) {
	d, err := NewEngineDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	q, err := newQP(1, &session{}, 64, 64, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.close()
	if err := d.add(q); err != nil {
		t.Fatal(err)
	}
	q.state = qpConnected
	app, err := ring.Attach(dupFD(t, q.cq.ring.FD()))
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	cqc := app.Consumer()
	appBell := q.appBell // the application's end, as it would hold it
	var got int
	var pfd [1]unix.PollFd
	round := func() {
		cqc.Arm() // the application is about to sleep
		q.complete(proto.CQE{WRID: 7, Op: proto.CQWrite})
		q.flushCQ() // commits and rings the application
		if rang, _ := appBell.Wait(0); rang {
			got++
		}
		first, n, _ := cqc.Peek(4)
		if n != 1 {
			t.Fatalf("%d completions in the queue, want 1", n)
		}
		if c, ok := proto.ParseCQE(cqc.Slot(first)); !ok || c.WRID != 7 {
			t.Fatalf("completion %+v %v", c, ok)
		}
		cqc.Release(n)
		cqc.Disarm()
		appBell.Ring() // the application posts to a sleeping engine
		if !d.PrepareSleep() {
			t.Fatal("PrepareSleep found work in an empty send queue")
		}
		d.Woke()
		pfd[0] = unix.PollFd{Fd: int32(q.bell.FD()), Events: unix.POLLIN}
		if n, _ := unix.Poll(pfd[:], 0); n != 0 {
			t.Fatal("the engine's end is still readable after Woke")
		}
	}
	round()
	if allocs := testing.AllocsPerRun(200, round); allocs != 0 {
		t.Errorf("%v allocations per wake-up round, want 0", allocs)
	}
	if got != 202 {
		t.Fatalf("the application was rung %d times in 202 rounds", got)
	}
}

func dupFD(t *testing.T, fd int) int {
	t.Helper()
	n, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
