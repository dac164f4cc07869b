package daemon

import (
	"context"
	"os"
	"testing"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/testnet"
)

// TestExposeOp: the expose op registers the compliance service once and
// describes it (the compliance suite's tests use it end to end).
func TestExposeOp(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the daemon runs in a network namespace")
	}
	pair := testnet.NewPair(t, testnet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := startDaemon(t, ctx, pair.B, config.BackendUDP)
	r1, err := c.Do(Request{Op: "expose"})
	if err != nil {
		t.Fatal(err)
	}
	x := r1.Expose
	if x == nil || x.Service != ComplianceService || len(x.Regions) != 4 || x.Recv.Count != exposeRecvCount {
		t.Fatalf("expose answer %+v", x)
	}
	rights := map[string]int{}
	for _, r := range x.Regions {
		if r.RKey == 0 || r.Len == 0 {
			t.Errorf("region %+v", r)
		}
		rights[r.Name] = len(r.Access)
	}
	if rights["rw"] != 2 || rights["ro"] != 1 || rights["wo"] != 1 || rights["other-domain"] != 2 || x.Regions[3].Service != ComplianceOtherService {
		t.Errorf("rights %v", rights)
	}
	if x.Recv.Addr < x.Regions[0].Addr || x.Recv.Addr+uint64(x.Recv.Count*x.Recv.Size) > x.Regions[0].Addr+uint64(x.Regions[0].Len) {
		t.Errorf("receive buffers %+v outside region rw %+v", x.Recv, x.Regions[0])
	}
	r2, err := c.Do(Request{Op: "expose"})
	if err != nil {
		t.Fatal(err)
	}
	if r2.Expose.Regions[0].RKey != x.Regions[0].RKey {
		t.Errorf("a second expose registered again: rkey %#x then %#x", x.Regions[0].RKey, r2.Expose.Regions[0].RKey)
	}
}
