package control_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
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
