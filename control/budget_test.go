package control_test

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/apptest"
)

// TestDaemonBudget: past the daemon's own budget of mappings (what
// vm.max_map_count allows less a reserve; here shrunk to a few), a
// registration or a queue pair is refused with a limit error naming the
// resource, whatever the per-session limits; what a closed session held
// is given back, and the next session registers again. Without the
// budget the kernel's limit is reached instead, and the daemon dies.
func TestDaemonBudget(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	t.Cleanup(control.ShrinkMapBudget(6))
	m, err := client.Alloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for round := range 2 {
		c, err := client.Dial(ha.Sock)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateQP(client.QPOptions{}); err != nil { // 2 mappings
			t.Fatalf("round %d: queue pair: %v", round, err)
		}
		n := 0
		for ; n < 16; n++ {
			if _, err = c.RegisterMemory(m, n*4096, 4096, client.RemoteWrite); err != nil {
				break
			}
		}
		if n != 4 || !errors.Is(err, client.ErrLimit) || !strings.Contains(err.Error(), "memory mappings") {
			t.Fatalf("round %d: %d regions, then %v; want 4 and a limit naming memory mappings", round, n, err)
		}
		if _, err := c.CreateQP(client.QPOptions{}); !errors.Is(err, client.ErrLimit) {
			t.Fatalf("round %d: a queue pair past the budget: %v", round, err)
		}
		c.Close()
		deadline := time.Now().Add(5 * time.Second)
		for ha.Srv.Counts().Sessions != 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		// The engines' reapers unmap a little after the session ends.
		for control.FreeMaps() != 6 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if f := control.FreeMaps(); f != 6 {
			t.Fatalf("round %d: %d mappings free after the session closed, want all 6 back", round, f)
		}
	}
}

// openFDs counts this process's descriptors (the daemon's and the
// client's: both run here).
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// settle waits until the daemon has let go of what it handed c: it closes
// its copies of a queue pair's handed-over descriptors (the application's
// doorbell end, the rings' memfds) just after the reply carrying them has
// gone, so the client can hold its queue pair a moment before that. A
// session's requests are served in order, so once a later request is
// answered, every earlier hand-over has run.
func settle(t *testing.T, c *client.Client) {
	t.Helper()
	if _, err := c.Session(); err != nil {
		t.Fatal(err)
	}
}

// TestQPDescriptors: a queue pair costs the daemon one descriptor (its
// doorbell end) and the application one (its own end), where issue 22
// counted four in the daemon (the rings' memfds, the doorbell end and an
// eventfd nothing waited on); the budget counts what is held, and gives
// it all back.
func TestQPDescriptors(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	c := apptest.Dial(t, ha.Sock)
	if _, err := c.CreateQP(client.QPOptions{}); err != nil { // whatever the first one sets up once
		t.Fatal(err)
	}
	settle(t, c)
	fds0, ring0, _ := control.BudgetHeld()
	before := openFDs(t)
	const n = 50
	qps := make([]*client.QP, n)
	for i := range qps {
		q, err := c.CreateQP(client.QPOptions{SQSlots: 64, CQSlots: 128})
		if err != nil {
			t.Fatal(err)
		}
		qps[i] = q
	}
	settle(t, c)
	if got := openFDs(t) - before; got != 2*n {
		t.Fatalf("%d queue pairs opened %d descriptors in the daemon and its client, want %d (one each side)", n, got, 2*n)
	}
	fds, ring, _ := control.BudgetHeld()
	if fds-fds0 != n {
		t.Errorf("the budget counts %d descriptors for %d queue pairs, want %d", fds-fds0, n, n)
	}
	// Each queue pair's rings (64 x 64 and 128 x 32 bytes, 256-byte
	// headers) and the daemon's per-CQ-slot state.
	if per := (ring - ring0) / n; per < 64*64+128*32+512 || per > 1<<20 {
		t.Errorf("the budget counts %d ring bytes per queue pair", per)
	}
	for _, q := range qps {
		if err := q.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if got := openFDs(t) - before; got != 0 {
		t.Errorf("%d descriptors left after the queue pairs were destroyed", got)
	}
	if fds, ring, _ := control.BudgetHeld(); fds != fds0 || ring != ring0 {
		t.Errorf("budget after destroy: %d descriptors, %d ring bytes; want %d, %d", fds, ring, fds0, ring0)
	}
}

// TestRingBudget: ring memory is bounded in bytes, not slots: a queue
// pair whose rings would pass one session's share, or the daemon's total,
// is refused with a limit error naming ring memory, and one that fits is
// made; closing the session gives its share back.
func TestRingBudget(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	t.Cleanup(control.ShrinkRingBudget(32<<20, 8<<20))
	c := apptest.Dial(t, ha.Sock)
	// 65,536-slot rings: 4 MiB + 2 MiB of ring and the daemon's per-slot
	// state, past one session's 8 MiB.
	_, err := c.CreateQP(client.QPOptions{SQSlots: 1 << 16, CQSlots: 1 << 16})
	if !errors.Is(err, client.ErrLimit) || !strings.Contains(err.Error(), "ring memory") || !strings.Contains(err.Error(), "session") {
		t.Fatalf("a queue pair past the session's ring share: %v; want a limit naming ring memory and the session", err)
	}
	if _, err := c.CreateQP(client.QPOptions{SQSlots: 1 << 12, CQSlots: 1 << 12}); err != nil {
		t.Fatalf("a queue pair within the share: %v", err)
	}
	// Several sessions together reach the daemon's total.
	var last error
	made := 0
	for range 16 {
		s := apptest.Dial(t, ha.Sock)
		if _, last = s.CreateQP(client.QPOptions{SQSlots: 1 << 15, CQSlots: 1 << 14}); last != nil {
			break
		}
		made++
	}
	if !errors.Is(last, client.ErrLimit) || !strings.Contains(last.Error(), "ring memory") || !strings.Contains(last.Error(), "daemon's budget") {
		t.Fatalf("after %d sessions' queue pairs: %v; want a limit naming ring memory and the daemon's budget", made, last)
	}
	if made < 2 {
		t.Fatalf("only %d sessions' queue pairs fit in 32 MiB", made)
	}
}

// TestRegisteredBudget: registered memory is bounded in total, across
// sessions, whatever each session's own limit: past it a registration is
// refused with a limit naming registered memory, and a deregistered
// region's bytes come back when its session ends.
func TestRegisteredBudget(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	t.Cleanup(control.ShrinkRegBudget(1 << 20))
	m, err := client.Alloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, _, regd0 := control.BudgetHeld()
	a := apptest.Dial(t, ha.Sock)
	if _, err := a.RegisterMemory(m, 0, 768<<10, client.RemoteWrite); err != nil {
		t.Fatal(err)
	}
	b, err := client.Dial(ha.Sock)
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.RegisterMemory(m, 0, 512<<10, client.RemoteWrite)
	if !errors.Is(err, client.ErrLimit) || !strings.Contains(err.Error(), "registered memory") {
		t.Fatalf("a registration past the daemon's total: %v; want a limit naming registered memory", err)
	}
	if _, err := b.RegisterMemory(m, 0, 256<<10, client.RemoteWrite); err != nil {
		t.Fatalf("a registration that fits: %v", err)
	}
	b.Close()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if _, _, regd := control.BudgetHeld(); regd == regd0+768<<10 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _, regd := control.BudgetHeld()
	t.Fatalf("registered bytes held %d after the second session closed, want %d", regd-regd0, 768<<10)
}

// TestSharedCQDescriptors: a shared CQ and the queue pairs on it hold
// what the budget says: one descriptor each in the daemon once their
// replies have gone (a queue pair on a shared CQ has no CQ ring of its
// own: fewer ring bytes than one with its own), and everything comes
// back when they are destroyed; a CQ in use is not destroyed.
func TestSharedCQDescriptors(t *testing.T) {
	ha, _ := newHosts(t, 0, config.Limits{})
	c := apptest.Dial(t, ha.Sock)
	if _, err := c.CreateQP(client.QPOptions{}); err != nil { // whatever the first one sets up once
		t.Fatal(err)
	}
	settle(t, c)
	fds0, ring0, _ := control.BudgetHeld()
	before := openFDs(t)
	cq, err := c.CreateCQ(client.CQOptions{Slots: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	qps := make([]*client.QP, n)
	for i := range qps {
		if qps[i], err = c.CreateQP(client.QPOptions{SQSlots: 64, CQ: cq}); err != nil {
			t.Fatal(err)
		}
	}
	settle(t, c)
	// The daemon: one per queue pair and one for the CQ; the client: one
	// per queue pair, two for the CQ (its doorbell end, and the netpoller's
	// duplicate of it).
	if got, want := openFDs(t)-before, 2*n+3; got != want {
		t.Fatalf("a shared CQ and %d queue pairs on it opened %d descriptors in the daemon and its client, want %d", n, got, want)
	}
	fds, ring, _ := control.BudgetHeld()
	if fds-fds0 != n+1 {
		t.Errorf("the budget counts %d descriptors for a CQ and %d queue pairs, want %d", fds-fds0, n, n+1)
	}
	if ring-ring0 < 1024*32+n*64*64 {
		t.Errorf("the budget counts %d ring bytes for a 1024-slot CQ and %d queue pairs of 64 slots", ring-ring0, n)
	}
	if err := cq.Destroy(); !errors.Is(err, client.ErrBusy) || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("destroying a CQ in use: %v", err)
	}
	for _, q := range qps {
		if err := q.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cq.Destroy(); err != nil {
		t.Fatal(err)
	}
	if got := openFDs(t) - before; got != 0 {
		t.Errorf("%d descriptors left after the CQ and its queue pairs were destroyed", got)
	}
	if fds, ring, _ := control.BudgetHeld(); fds != fds0 || ring != ring0 {
		t.Errorf("budget after destroy: %d descriptors, %d ring bytes; want %d, %d", fds, ring, fds0, ring0)
	}
}
