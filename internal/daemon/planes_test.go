package daemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/testnet"
)

// startPlaneDaemon runs a daemon in h serving its ports as the planes of one
// endpoint (plane_interfaces, docs/spec.md §7.9).
func startPlaneDaemon(t *testing.T, ctx context.Context, h *testnet.PlaneHost, backend config.Backend, metrics string) *Client {
	t.Helper()
	th := &testnet.Host{Namespace: h.Namespace, Port: h.Ports[0], IPv4: h.IPv4[0]}
	return startDaemonQueues(t, ctx, th, backend, []int{0}, func(c *config.Config) {
		c.MetricsAddress = metrics
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
// lossy plane's losses are repaired. Plane 1 was proven (§7.9) before it
// carried data, and the daemon's /metrics shows each plane's link
// counters under a plane label, agreeing with the kernel's.
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
			const metricsAddr = "127.0.0.1:9474" // a's own loopback
			ca := startPlaneDaemon(t, ctx, a, backend, metricsAddr)
			cb := startPlaneDaemon(t, ctx, b, backend, "")
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
			if tr.PlanesUnproven != 1 || tr.PlanesProven != 1 {
				t.Errorf("%d planes started unproven, %d proven; want plane 1 of the one connection proven", tr.PlanesUnproven, tr.PlanesProven)
			}
			body := scrapeIn(t, a.Namespace, "http://"+metricsAddr+"/metrics")
			if promtool, err := exec.LookPath("promtool"); err == nil {
				cmd := exec.Command(promtool, "check", "metrics")
				cmd.Stdin = strings.NewReader(body)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("promtool check metrics: %v\n%s", err, out)
				}
			}
			for p := range 2 {
				pl := `plane="` + strconv.Itoa(p) + `"`
				tx := metricValue(body, "metaroce_plane_link_tx_packets_total", pl)
				t.Logf("plane %d: link sent %.0f packets (the port %d)", p, tx, sent[p])
				// The port counts every frame (ARP too): with AF_XDP the
				// link's count is at most that, and most of it. A UDP
				// socket's GSO runs leave the port as one packet each (a
				// veth counts skbs), so there the link counts more.
				low, high := 0.9*float64(sent[p]), float64(sent[p])
				if backend == config.BackendUDP {
					low, high = float64(sent[p]), 2*float64(sent[p])
				}
				if tx < low || tx > high {
					t.Errorf("plane %d: metaroce_plane_link_tx_packets_total %.0f, the port sent %d", p, tx, sent[p])
				}
				if metricValue(body, "metaroce_plane_info", pl) != 1 {
					t.Errorf("no metaroce_plane_info for plane %d", p)
				}
			}
			cancel()
		})
	}
}

// scrapeIn GETs url from inside ns (the daemon's metrics listen there).
func scrapeIn(t *testing.T, ns *testnet.Namespace, url string) string {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := ns.Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	r, err := hc.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricValue sums the samples of metric whose labels contain every one
// of want (-1 if none has them).
func metricValue(body, metric string, want ...string) float64 {
	sum, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		match := true
		for _, w := range want {
			match = match && strings.Contains(labels, w)
		}
		if v, err := strconv.ParseFloat(value, 64); match && err == nil {
			sum, found = sum+v, true
		}
	}
	if !found {
		return -1
	}
	return sum
}
