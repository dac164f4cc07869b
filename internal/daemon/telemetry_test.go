package daemon

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/telemetry"
)

// loopbackDaemon runs a daemon in this process serving lo at addr over the
// UDP backend (no privileges needed), with its metrics on a free loopback
// port; it returns a client and the metrics address.
func loopbackDaemon(t *testing.T, ctx context.Context, addr netip.Addr, port int) (*Client, string) {
	t.Helper()
	cfg := config.Defaults()
	ic := config.DefaultInterface("lo")
	ic.Backend, ic.Address = config.BackendUDP, addr
	cfg.Interfaces = []config.Interface{ic}
	cfg.Port = port
	cfg.ControlSocket = filepath.Join(t.TempDir(), "control.sock")
	m, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MetricsAddress = m.Addr().String()
	m.Close()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, &cfg, log, Options{CPU: -1}) }()
	t.Cleanup(func() {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon %s: %v", addr, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("daemon %s did not stop", addr)
		}
	})
	c, err := Dial(cfg.ControlSocket, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, cfg.MetricsAddress
}

func freeUDPPort(t *testing.T) int {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestLoopbackTelemetry: two daemons on 127.0.0.1 and 127.0.0.2 and an
// application moving verified WRITEs between them; the metrics endpoint
// then passes promtool and shows the traffic, and the watch stream
// delivers the requested number of snapshots with the connection and its
// paths.
func TestLoopbackTelemetry(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the cleanups that wait for the daemons
	port := freeUDPPort(t)
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	ca, ma := loopbackDaemon(t, ctx, a, port)
	cb, mb := loopbackDaemon(t, ctx, b, port)
	// The watch runs on a second connection to the daemon.
	wc, err := Dial(ca.path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	const messages, size = 256, 65536
	writeVerified(t, ctx, ca.path, cb.path, b, 0, messages, size)
	var snaps []*telemetry.Snapshot
	if err := wc.Watch(WatchParams{IntervalMS: 10, Count: 2, Paths: true}, func(s *telemetry.Snapshot) error {
		snaps = append(snaps, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 || len(snaps[1].Engines) != 1 || !snaps[1].Engines[0].Responsive {
		t.Fatalf("watch: %d snapshots %+v", len(snaps), snaps)
	}
	// The writer's engine completed every WRITE, and the queue pairs,
	// still connected, show as a connection with its paths.
	if e := snaps[1].Engines[0]; e.Transport.DataSent < messages || e.Transport.MessagesCompleted != messages ||
		len(e.Top) != 1 || len(e.Top[0].Paths) == 0 || e.Top[0].Peer != b.String() {
		t.Errorf("watch: engine %+v", e)
	}
	// The stream's connection is still usable after a counted watch.
	if _, err := wc.Do(Request{Op: "status"}); err != nil {
		t.Fatal(err)
	}
	// Invalid interval: an error, not a stream.
	if err := wc.Watch(WatchParams{IntervalMS: 1, Count: 1}, func(*telemetry.Snapshot) error { return nil }); err == nil {
		t.Error("1 ms interval accepted")
	}

	for _, m := range []struct{ addr, host string }{{ma, "a"}, {mb, "b"}} {
		body := scrape(t, m.addr)
		checkPromtool(t, body)
		want := "metaroce_link_rx_packets_total{iface=\"lo\",queue=\"0\"}"
		if !strings.Contains(body, want) {
			t.Errorf("%s: no %s", m.host, want)
		}
		if !strings.Contains(body, "metaroce_build_info{") {
			t.Errorf("%s: no build info", m.host)
		}
	}
	if body := scrape(t, mb); !strings.Contains(body, fmt.Sprintf("metaroce_placed_bytes_total{iface=\"lo\",queue=\"0\"} %v", float64(messages*size))) {
		t.Errorf("b: placed bytes not %d:\n%s", messages*size, grep(body, "placed_bytes"))
	}
	cancel()
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("scrape %s: %v %s", addr, err, resp.Status)
	}
	return string(b)
}

func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// checkPromtool lints an exposition with promtool check metrics.
func checkPromtool(t *testing.T, body string) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Geteuid() != 0 {
			t.Log("promtool not installed (Debian package prometheus; make deps installs it): not linted")
			return
		}
		t.Fatal("promtool not installed: install the Debian package prometheus (make deps)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader([]byte(body))
	if out, err := cmd.CombinedOutput(); err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
