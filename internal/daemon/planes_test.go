package daemon

import (
	"context"
	"testing"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/testnet"
)

// startPlaneDaemon runs a daemon in h serving its ports as the planes of one
// endpoint (plane_interfaces, docs/spec.md §7.9).
func startPlaneDaemon(t *testing.T, ctx context.Context, h *testnet.PlaneHost, backend config.Backend) *Client {
	t.Helper()
	th := &testnet.Host{Namespace: h.Namespace, Port: h.Ports[0], IPv4: h.IPv4[0]}
	return startDaemonQueues(t, ctx, th, backend, []int{0}, func(c *config.Config) {
		c.Interfaces = nil
		for _, p := range h.Ports {
			ic := config.DefaultInterface(p.Name)
			ic.Backend = backend
			c.Interfaces = append(c.Interfaces, ic)
		}
		c.PlaneInterfaces = true
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestPlaneDaemons: two hosts of two planes, each plane its own switch,
// plane 1 dropping 1% of what it forwards; a daemon per host serves both
// ports as one endpoint. The application names only the peer's plane-0
// address; 256 MiB of WRITEs arrive byte-exact, both planes carry about
// half of them (the kernel's counters of each host port), and the
// lossy plane's losses are repaired.
func TestPlaneDaemons(t *testing.T) {
	for _, backend := range []config.Backend{config.BackendAFXDP, config.BackendUDP} {
		t.Run(string(backend), func(t *testing.T) {
			f := testnet.NewPlanes(t, 2, 2, testnet.Config{})
			if err := f.Switches[1].SetLoss(0.01); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			a, b := f.Hosts[0], f.Hosts[1]
			ca := startPlaneDaemon(t, ctx, a, backend)
			cb := startPlaneDaemon(t, ctx, b, backend)
			st, err := ca.Do(Request{Op: "status"})
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Engines[0].Link.Backend; len(st.Engines) != 1 || got != string(backend) {
				t.Fatalf("%d engines, backend %q; want one %s engine over both planes", len(st.Engines), got, backend)
			}
			var before [2]testnet.IfaceCount
			for p := range 2 {
				if before[p], err = a.Ports[p].Counters(); err != nil {
					t.Fatal(err)
				}
			}
			const messages, size = 4096, 65536 // 256 MiB
			fl := writeVerified(t, ctx, ca.path, cb.path, b.IPv4[0], 0, messages, size)
			var sent [2]uint64
			for p := range 2 {
				c, err := a.Ports[p].Counters()
				if err != nil {
					t.Fatal(err)
				}
				sent[p] = c.TxPackets - before[p].TxPackets
			}
			st, _ = ca.Do(Request{Op: "status"})
			tr := st.Engines[0].Transport
			t.Logf("%s: 256 MiB at %.2f Gb/s; packets out of plane 0 %d, plane 1 %d; retransmitted %d of %d",
				backend, fl.gbps(messages*size), sent[0], sent[1], tr.DataRetransmitted, tr.DataSent)
			if share := float64(sent[0]) / float64(sent[0]+sent[1]); share < 0.3 || share > 0.7 {
				t.Errorf("plane 0 carried %.0f%% of the packets", 100*share)
			}
			if tr.DataRetransmitted == 0 {
				t.Error("1% loss on plane 1 but nothing retransmitted")
			}
			cancel()
		})
	}
}
