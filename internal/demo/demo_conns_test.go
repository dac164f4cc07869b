package demo

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestConnsDemo runs the connections demo with a few hundred connections
// (the full 10,000 take about half a minute of both cores: `metaroce demo
// -topology conns`, docs/demo.md) and checks that every connection came
// up and carried its WRITE, verified by the receiving process, that each
// queue pair costs its daemon one descriptor and two mappings (issue 22:
// four descriptors, and create_qp failing at 4,943), and that the
// ping-pong ran both alone and beside the idle connections. The latency
// ratio is the demo's figure, not asserted here.
func TestConnsDemo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the demo needs root (network namespaces, XDP, AF_XDP)")
	}
	const n = 600
	var out bytes.Buffer
	if err := Run(strings.Fields("-topology conns -json -conns 600 -per-session 200 -pings 200"), &out); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	var r ConnsResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if !r.OK || r.Connected != n || r.Verified != n || r.Sessions != 3 {
		t.Fatalf("ok %v, %d connected, %d verified over %d sessions; want %d, %d, 3", r.OK, r.Connected, r.Verified, r.Sessions, n, n)
	}
	if r.PingAloneP50Us <= 0 || r.PingIdleP50Us <= 0 || r.ConnectP99Ms <= 0 {
		t.Fatalf("figures missing: %+v", r)
	}
	for i := range r.DaemonFDs {
		// n queue pairs (or n+1 with the ping-pong's), a few hundred for
		// the daemon itself (sockets, BPF, the UMEM, the runtime).
		if r.DaemonFDs[i] < n || r.DaemonFDs[i] > n+300 {
			t.Errorf("daemon %d holds %d descriptors for %d queue pairs, want about one each", i, r.DaemonFDs[i], n)
		}
		if r.DaemonMaps[i] < 2*n || r.DaemonMaps[i] > 2*n+600 {
			t.Errorf("daemon %d holds %d mappings for %d queue pairs, want about two each", i, r.DaemonMaps[i], n)
		}
	}
	t.Logf("connect p50 %.2f p99 %.2f ms; ping p50 %.1f us alone, %.1f us beside %d idle (x%.2f); daemons: %v descriptors, %v mappings",
		r.ConnectP50Ms, r.ConnectP99Ms, r.PingAloneP50Us, r.PingIdleP50Us, n, r.PingRatio, r.DaemonFDs, r.DaemonMaps)
}
