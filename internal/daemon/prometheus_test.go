package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/testnet"
)

// TestPrometheusScrapesDaemons: two AF_XDP daemons in namespaces, a real
// Prometheus server (Debian's prometheus) inside the first host's
// namespace scraping both (the first on its loopback, the second across
// the switch), an application's WRITEs between them, then PromQL over Prometheus' HTTP API:
// the per-queue series show the packets moved and no drops on the clean
// link, and the engine's path counts show the connection's paths.
func TestPrometheusScrapesDaemons(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, XDP and AF_XDP")
	}
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus not installed: install the Debian package prometheus (make deps)")
	}
	s := testnet.NewStar(t, 2, testnet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the cleanups that wait for the daemons
	const metricsPort = 9473
	addrA := net.JoinHostPort("127.0.0.1", strconv.Itoa(metricsPort))
	addrB := net.JoinHostPort(s.Hosts[1].IPv4.String(), strconv.Itoa(metricsPort))
	metrics := func(a string) func(*config.Config) { return func(c *config.Config) { c.MetricsAddress = a } }
	ca := startDaemonQueues(t, ctx, s.Hosts[0], config.BackendAFXDP, []int{0}, metrics(addrA))
	cb := startDaemonQueues(t, ctx, s.Hosts[1], config.BackendAFXDP, []int{0}, metrics(addrB))

	dir := t.TempDir()
	promCfg := fmt.Sprintf(`global:
  scrape_interval: 100ms
  scrape_timeout: 100ms
scrape_configs:
  - job_name: metaroced
    static_configs:
      - targets: [%q, %q]
`, addrA, addrB)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(promCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const promAddr = "127.0.0.1:9090" // h0's own loopback
	pctx, pcancel := context.WithCancel(context.Background())
	prom := s.Hosts[0].Command(pctx, promBin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	var promLog strings.Builder
	prom.Stdout, prom.Stderr = &promLog, &promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pcancel()
		prom.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", promLog.String())
		}
	})
	// Prometheus' HTTP API, dialled from inside h0's namespace.
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := s.Hosts[0].Do(func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
	query := func(q string) []promSample {
		t.Helper()
		r, err := hc.Get("http://" + promAddr + "/api/v1/query?query=" + url.QueryEscape(q))
		if err != nil {
			t.Fatalf("query %s: %v", q, err)
		}
		defer r.Body.Close()
		var res promResult
		if err := json.NewDecoder(r.Body).Decode(&res); err != nil || res.Status != "success" {
			t.Fatalf("query %s: %v %+v", q, err, res)
		}
		return res.Data.Result
	}
	// Bounded waits: each ends when the condition holds, and fails the
	// test only if it never does.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for i := 0; i < 300; i++ {
			if cond() {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("Prometheus never showed %s", what)
	}
	waitFor("both targets up", func() bool {
		r, err := hc.Get("http://" + promAddr + "/-/ready")
		if err != nil {
			return false
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			return false
		}
		up := query(`up{job="metaroced"} == 1`)
		return len(up) == 2
	})

	const messages, size = 256, 65536
	writeVerified(t, ctx, ca.path, cb.path, s.Hosts[1].IPv4, 0, messages, size)
	// The queue pairs stay connected, so scrapes go on seeing the
	// connection. Wait for a scrape of each daemon after the transfer:
	// the receiver's placed bytes, the writer's completions and paths.
	placedQ := fmt.Sprintf(`metaroce_placed_bytes_total{instance=%q}`, addrB)
	waitFor(fmt.Sprintf("%d bytes placed", messages*size), func() bool {
		v := query(placedQ)
		return len(v) == 1 && v[0].value(t) >= messages*size
	})
	doneQ := fmt.Sprintf(`metaroce_messages_completed_total{instance=%q}`, addrA)
	waitFor(fmt.Sprintf("%d WRITEs completed", messages), func() bool {
		v := query(doneQ)
		return len(v) == 1 && v[0].value(t) == messages
	})
	pathsQ := fmt.Sprintf(`max_over_time(metaroce_paths{instance=%q,state="active"}[5m])`, addrA)
	waitFor("the connection's paths", func() bool {
		v := query(pathsQ)
		return len(v) == 1 && v[0].value(t) > 0
	})
	// The checks below read each series' latest scraped value: a scrape
	// that timed out (a loaded CI machine, the race detector) marks the
	// series stale, and a plain instant query would then find nothing,
	// while a range selection skips the staleness marker.
	last := func(series string) string { return "last_over_time(" + series + "[1m])" }
	for _, inst := range []string{addrA, addrB} {
		sel := fmt.Sprintf(`{instance=%q,iface=%q,queue="0"}`, inst, s.Hosts[0].Port.Name)
		if inst == addrB {
			sel = fmt.Sprintf(`{instance=%q,iface=%q,queue="0"}`, inst, s.Hosts[1].Port.Name)
		}
		for _, c := range []struct {
			q   string
			min float64
		}{
			{last("metaroce_link_rx_packets_total" + sel), messages},
			{last("metaroce_link_tx_packets_total" + sel), messages / 8},
			{last("metaroce_engine_busy_seconds_total" + sel), 1e-9},
			// A polling engine runs from the start: clock ticks land in it.
			{last(strings.Replace("metaroce_engine_cpu_seconds_total"+sel, "}", `,mode="user"}`, 1)), 0.01},
			{last(`metaroce_engine_info` + sel), 1},
		} {
			v := query(c.q)
			if len(v) != 1 || v[0].value(t) < c.min {
				t.Errorf("%s = %v, want one series >= %v", c.q, v, c.min)
			}
		}
		// A packet sent before the first ARP reply is dropped as no_neighbor
		// (and resent by the transport): the only drop a clean link has.
		nb := query(last(strings.Replace("metaroce_link_tx_dropped_total"+sel, "}", `,reason="no_neighbor"}`, 1)))
		t.Logf("%s: sent before the neighbour was resolved: %v", inst, nb)
		// Packets that arrive after the run closed its connection (late
		// acks, the peer's DISCONNECT retries) are refused as
		// unknown_connection or unexpected_state: the protocol working,
		// not the link dropping.
		late := query("sum by (reason) (" + last("metaroce_rx_dropped_total"+strings.Replace(sel, "}", `,reason=~"unknown_connection|unexpected_state"}`, 1)) + ")")
		t.Logf("%s: refused after close: %v", inst, late)
		for _, q := range []string{"sum(" + last("metaroce_rx_dropped_total"+strings.Replace(sel, "}", `,reason!~"unknown_connection|unexpected_state"}`, 1)) + ")",
			"sum(" + last("metaroce_link_rx_dropped_total"+sel) + ")",
			"sum(" + last("metaroce_link_tx_dropped_total"+strings.Replace(sel, "}", `,reason!="no_neighbor"}`, 1)) + ")",
			"sum(" + last(fmt.Sprintf(`metaroce_xdp_dropped_total{instance=%q}`, inst)) + ")"} {
			if v := query(q); len(v) != 1 || v[0].value(t) != 0 {
				t.Errorf("clean link: %s = %v", q, v)
			}
		}
		if v := query(last(fmt.Sprintf(`metaroce_xdp_redirected_total{instance=%q}`, inst))); len(v) != 1 || v[0].value(t) < messages {
			t.Errorf("xdp redirected: %v", v)
		}
		xsk := query("sum(" + last(fmt.Sprintf(`metaroce_xsk_rx_dropped_total{instance=%q}`, inst)) + ")")
		t.Logf("%s: XSK kernel drops %v (ring full under a burst; the transport recovers them)", inst, xsk)
	}
	if v := query(last(fmt.Sprintf(`metaroce_rtt_seconds_count{instance=%q}`, addrA))); len(v) != 1 || v[0].value(t) == 0 {
		t.Errorf("writer: no RTT samples: %v", v)
	}
	// One connection of 16 paths.
	if v := query(pathsQ); len(v) != 1 || v[0].value(t) != 16 {
		t.Errorf("%s = %v, want the connection's 16 paths", pathsQ, v)
	}
	// The connection's RTT, in the engine's summary (no series names a
	// connection: telemetry's package doc).
	if v := query(last(fmt.Sprintf(`metaroce_connection_srtt_max_seconds{instance=%q}`, addrA))); len(v) != 1 || v[0].value(t) <= 0 {
		t.Errorf("writer: largest connection RTT %v, want one series above 0", v)
	}
	if v := query(fmt.Sprintf(`count({__name__=~"metaroce_.*",instance=%q,conn!=""})`, addrA)); len(v) != 0 {
		t.Errorf("series naming a connection: %v", v)
	}
	cancel()
}

type promResult struct {
	Status string `json:"status"`
	Data   struct {
		Result []promSample `json:"result"`
	} `json:"data"`
}

type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) value(t *testing.T) float64 {
	t.Helper()
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("sample %v: %v", s, err)
	}
	return v
}
