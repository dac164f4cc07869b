package ring

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// The cross-process tests re-execute the test binary: TestChildProcess runs
// only in the child, selected by -test.run and the role in childEnv. The
// parent passes memfds and eventfds through exec.Cmd.ExtraFiles, so the
// child finds them at fds 3, 4, ...
const childEnv = "METAROCE_RING_CHILD"

// startChild runs TestChildProcess in a child process with the given role,
// record count and stall period, handing it the files (rings and bells, by
// fd) in order.
func startChild(t testing.TB, role string, n, stall uint64, fds ...int) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.v")
	cmd.Env = append(os.Environ(),
		childEnv+"="+role,
		"METAROCE_RING_N="+strconv.FormatUint(n, 10),
		"METAROCE_RING_STALL="+strconv.FormatUint(stall, 10))
	for _, fd := range fds {
		// A dup, so that exec's handling of the *os.File never touches
		// the descriptors the Ring and Doorbell own.
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(dup(t, fd)), "ring"))
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for _, f := range cmd.ExtraFiles {
		f.Close() // the child has its copies
	}
	return cmd, &out
}

// TestChildProcess is the child's side; in a normal run it skips.
func TestChildProcess(t *testing.T) {
	role := os.Getenv(childEnv)
	if role == "" {
		t.Skip("helper process for the cross-process tests")
	}
	n, _ := strconv.ParseUint(os.Getenv("METAROCE_RING_N"), 10, 64)
	stall, _ := strconv.ParseUint(os.Getenv("METAROCE_RING_STALL"), 10, 64)
	switch role {
	case "produce":
		r, err := Attach(3)
		if err != nil {
			t.Fatal(err)
		}
		bell, err := OpenDoorbell(4)
		if err != nil {
			t.Fatal(err)
		}
		p := r.Producer()
		for seq := uint64(0); seq < n; {
			first, got, err := p.Reserve(uint32(min(n-seq, 64)))
			if err != nil {
				t.Fatal(err)
			}
			for i := range got {
				putRecord(p.Slot(first+i), seq+uint64(i))
			}
			p.Commit(got)
			if _, err := p.Notify(bell); err != nil {
				t.Fatal(err)
			}
			if stall > 0 && seq/stall != (seq+uint64(got))/stall {
				time.Sleep(time.Millisecond) // the parent runs dry and sleeps
			}
			seq += uint64(got)
		}
		fmt.Printf("child: rings=%d\n", p.Rings())
	case "echo":
		// Requests on fd 3, replies on fd 4, and the doorbell's child end
		// on fd 5, both ways. Every request comes back as one reply.
		req, err := Attach(3)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Attach(4)
		if err != nil {
			t.Fatal(err)
		}
		bell, err := OpenDoorbell(5)
		if err != nil {
			t.Fatal(err)
		}
		if err := echo(req.Consumer(), rep.Producer(), bell, bell, n); err != nil {
			t.Fatal(err)
		}
	case "yield":
		yieldChild() // switch_bench_test.go; runs until killed
	default:
		t.Fatalf("unknown role %q", role)
	}
}

// echo answers n requests, spinning a while before it sleeps.
func echo(c *Consumer, p *Producer, inBell, outBell *Doorbell, n uint64) error {
	for done := uint64(0); done < n; {
		first, got, err := c.Peek(32)
		if err != nil {
			return err
		}
		if got == 0 {
			if err := spinWait(c, inBell); err != nil {
				return err
			}
			continue
		}
		pf, pgot, err := p.Reserve(got)
		if err != nil {
			return err
		}
		for i := range pgot {
			copy(p.Slot(pf+i), c.Slot(first+i))
		}
		p.Commit(pgot)
		c.Release(pgot)
		if _, err := p.Notify(outBell); err != nil {
			return err
		}
		done += uint64(pgot)
	}
	return nil
}

// spinWait polls an empty ring for a while (20000 polls, some tens of
// microseconds: longer than a busy peer's round trip, and the busy path costs
// no syscall), then sleeps on the bell.
func spinWait(c *Consumer, bell *Doorbell) error {
	for range 20000 {
		if a, err := c.Available(); err != nil || a > 0 {
			return err
		}
	}
	return c.Wait(bell, 10*time.Second)
}

// TestCrossProcess: a child process attaches the ring and produces sequenced
// records in bursts; the parent consumes and checks every one, sleeping on
// the doorbell whenever the ring runs dry, so the child's Notify must wake
// it across the process boundary (a lost wakeup fails with ErrTimeout).
func TestCrossProcess(t *testing.T) {
	n := uint64(1 << 20)
	if raceOn {
		n = 1 << 18
	}
	r := newMemfdRing(t, 512, 64)
	setIndices(r, 1<<32-300) // the child reads these as a correct producer would
	bell, child := newBells(t)
	cmd, out := startChild(t, "produce", n, n/32, r.FD(), child.FD())

	c := r.Consumer()
	for seq := uint64(0); seq < n; {
		first, got, err := c.Peek(128)
		if err != nil {
			t.Fatal(err)
		}
		if got == 0 {
			if err := c.Wait(bell, 10*time.Second); err != nil {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("at record %d: %v; child: %s", seq, err, out)
			}
			continue
		}
		for i := range got {
			if err := checkRecord(c.Slot(first+i), seq+uint64(i)); err != nil {
				t.Fatal(err)
			}
		}
		c.Release(got)
		seq += uint64(got)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var rings uint64
	for _, line := range bytes.Split(out.Bytes(), []byte("\n")) {
		fmt.Sscanf(string(line), "child: rings=%d", &rings)
	}
	t.Logf("%d records, parent slept %d times, child rang %d times", n, c.Sleeps(), rings)
	if c.Sleeps() == 0 || rings == 0 {
		t.Errorf("the doorbell path went unused: %d sleeps, %d rings", c.Sleeps(), rings)
	}
	if a, err := c.Available(); a != 0 || err != nil {
		t.Errorf("after the last record: %d available, %v", a, err)
	}
}

// TestCrossProcessEcho bounces sequenced requests off an echoing child
// through two rings and two bells.
func TestCrossProcessEcho(t *testing.T) {
	const n = 20000
	req, rep := newMemfdRing(t, 64, 16), newMemfdRing(t, 64, 16)
	bell, child := newBells(t)
	reqBell, repBell := bell, bell
	cmd, out := startChild(t, "echo", n, 0, req.FD(), rep.FD(), child.FD())
	p, c := req.Producer(), rep.Consumer()
	for seq := uint64(0); seq < n; seq++ {
		first, got, err := p.Reserve(1)
		if err != nil || got != 1 {
			t.Fatalf("Reserve = %d, %v", got, err)
		}
		putRecord(p.Slot(first), seq)
		p.Commit(1)
		p.Notify(reqBell)
		for {
			cf, cgot, err := c.Peek(1)
			if err != nil {
				t.Fatal(err)
			}
			if cgot == 1 {
				if err := checkRecord(c.Slot(cf), seq); err != nil {
					t.Fatal(err)
				}
				c.Release(1)
				break
			}
			if err := spinWait(c, repBell); err != nil {
				t.Fatalf("reply %d: %v; child: %s", seq, err, out)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
}
