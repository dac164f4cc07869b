package telemetry

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/gentest"
	"github.com/metaroce/metaroce/transport"
)

// pair is two engines over the in-memory twin: a writes to a target on b
// and also holds an idle connection to b that stays open, so snapshots
// have a connection to report after the writer's has closed.
type pair struct {
	a, b   *dataplane.Engine
	epA    *transport.Endpoint
	res    gentest.Result
	cancel context.CancelFunc
	errs   chan error
}

func newPair(t *testing.T, messages int) *pair {
	return newPairCC(t, messages, transport.CongestionNone) // the send window alone: these tests are about the counters
}

// newPairCC is newPair with both endpoints running congestion controller
// cc.
func newPairCC(t *testing.T, messages int, cc string) *pair {
	t.Helper()
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, lb := dataplane.NewMemPair(a, b, 9000, 0, 1)
	cfg := transport.Config{Congestion: cc}
	epA, err := transport.NewEndpoint(cfg, a)
	if err != nil {
		t.Fatal(err)
	}
	epB, _ := transport.NewEndpoint(cfg, b)
	gc := gentest.Config{Size: 16384, Slots: 8, Seed: 3, Peer: b, Messages: messages, Streams: 2}
	w, err := gentest.NewWriter(gc)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{errs: make(chan error, 2)}
	tgt := gentest.NewTarget(gc, epB)
	p.a = dataplane.NewEngine(dataplane.EngineConfig{}, la, epA, w)
	p.epA = epA
	p.b = dataplane.NewEngine(dataplane.EngineConfig{}, lb, epB, tgt)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.errs <- p.a.Run(ctx) }()
	go func() { p.errs <- p.b.Run(ctx) }()
	t.Cleanup(p.stop)
	select {
	case p.res = <-w.Done():
	case <-time.After(60 * time.Second):
		t.Fatal("writer did not finish in 60s")
	}
	if p.res.Err != "" || p.res.Completed != messages {
		t.Fatalf("writer: %+v", p.res)
	}
	// An idle connection that stays up, for the per-connection series.
	up := make(chan struct{})
	if err := p.a.Do(context.Background(), func(now transport.Time) {
		epA.Connect(now, b, gentest.Service, transport.NewMemoryTable())
	}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		var n int
		p.a.Do(context.Background(), func(transport.Time) {
			for _, c := range epA.AppendConns(nil) {
				if c.State() == transport.StateEstablished {
					n++
				}
			}
		})
		if n > 0 {
			close(up)
			break
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-up:
	default:
		t.Fatal("idle connection did not come up")
	}
	return p
}

// srttMax is the largest smoothed RTT of a's established connections, as
// the transport holds it.
func (p *pair) srttMax(t *testing.T) time.Duration {
	t.Helper()
	var m time.Duration
	if err := p.a.Do(context.Background(), func(transport.Time) {
		for _, c := range p.epA.AppendConns(nil) {
			if c.State() == transport.StateEstablished {
				m = max(m, c.Stats().SRTT)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return m
}

// ccSummary is what a's established connections hold of their
// controllers: how many have one, the smallest window and the largest
// fabric RTT.
func (p *pair) ccSummary(t *testing.T) (n, windowMin int, fabricMax time.Duration) {
	t.Helper()
	if err := p.a.Do(context.Background(), func(transport.Time) {
		for _, c := range p.epA.AppendConns(nil) {
			if c.State() != transport.StateEstablished {
				continue
			}
			fabricMax = max(fabricMax, c.Stats().FabricRTT)
			if st, ok := c.Congestion(); ok {
				if n == 0 || st.Window < windowMin {
					windowMin = st.Window
				}
				n++
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	return n, windowMin, fabricMax
}

func (p *pair) stop() {
	if p.cancel != nil {
		p.cancel()
		<-p.errs
		<-p.errs
		p.cancel = nil
	}
}

func (p *pair) engines() []Engine {
	return []Engine{
		{Iface: "a0", Engine: p.a},
		{Iface: "b0", Engine: p.b},
	}
}

// TestCollectorLint: the exposition passes client_golang's linter and
// promtool, and says what happened: packets moved, nothing dropped on a
// clean link, every message completed, the idle connection listed.
func TestCollectorLint(t *testing.T) {
	const messages = 200
	p := newPair(t, messages)
	before := p.srttMax(t) // a keepalive's ack may move it while this runs
	c := NewCollector(p.engines(), Options{})
	problems, err := testutil.CollectAndLint(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range problems {
		t.Errorf("lint: %s: %s", pr.Metric, pr.Text)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	text := buf.String()
	val := func(name string, labels ...string) float64 {
		t.Helper()
		v, ok := value(mfs, name, labels...)
		if !ok {
			t.Fatalf("no %s%v in\n%s", name, labels, text)
		}
		return v
	}
	if v := val("metaroce_link_rx_packets_total", "iface", "b0"); v < messages {
		t.Errorf("b received %v packets for %d messages", v, messages)
	}
	if v := val("metaroce_placed_bytes_total", "iface", "b0"); v != messages*16384 {
		t.Errorf("b placed %v bytes, want %d", v, messages*16384)
	}
	for _, r := range []string{"crc", "unknown_connection", "wrong_peer"} {
		if v := val("metaroce_rx_dropped_total", "iface", "b0", "reason", r); v != 0 {
			t.Errorf("clean link: %v drops for %s", v, r)
		}
	}
	if v := val("metaroce_messages_completed_total", "iface", "a0"); v != messages {
		t.Errorf("a completed %v messages, want %d", v, messages)
	}
	if v := val("metaroce_rtt_seconds_count", "iface", "a0"); v == 0 {
		t.Error("no RTT samples")
	}
	if v := val("metaroce_connections", "iface", "a0", "state", "established"); v != 1 {
		t.Errorf("a: %v established connections, want the idle one", v)
	}
	if v := val("metaroce_paths", "iface", "a0", "state", "active"); v == 0 {
		t.Error("idle connection has no active path")
	}
	if v := val("metaroce_connections_degraded", "iface", "a0"); v != 0 {
		t.Errorf("%v connections with a path not active on a clean link", v)
	}
	// The idle connection's RTT is its handshake's, unless the handshake
	// resent its CONNECT (a loaded machine, the race detector), whose
	// echo then times no single round trip and gives no sample (§8.4):
	// the gauge must say what the transport holds either way.
	if v, want := val("metaroce_connection_srtt_max_seconds", "iface", "a0"), p.srttMax(t); v != want.Seconds() && v != before.Seconds() || v > 1 {
		t.Errorf("largest connection RTT %vs, want the idle connection's %v (%v before), under 1s", v, want, before)
	}
	val("metaroce_build_info")
	if v := val("metaroce_engine_responsive", "iface", "a0"); v != 1 {
		t.Error("engine a unresponsive")
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skip("promtool not installed (Debian package prometheus; make deps installs it)")
		}
		t.Fatal("promtool not installed: install the Debian package prometheus (make deps)")
	}
	f := filepath.Join(t.TempDir(), "metrics.txt")
	if err := os.WriteFile(f, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(buf.Bytes())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	} else if s := strings.TrimSpace(string(out)); s != "" {
		t.Errorf("promtool check metrics:\n%s", s)
	}
}

// TestWalkInChunks: a walk that reads one connection per visit reports
// the same as one that reads them all at once.
func TestWalkInChunks(t *testing.T) {
	p := newPair(t, 8)
	// Two more idle connections, so three chunks.
	p.a.Do(context.Background(), func(now transport.Time) {
		for range 2 {
			p.a.Endpoint().Connect(now, netip.MustParseAddr("10.0.0.2"), gentest.Service, transport.NewMemoryTable())
		}
	})
	for i := 0; i < 1000; i++ {
		s := Take(context.Background(), p.engines()[:1], Options{})
		if s.Engines[0].Conns.ByState[transport.StateEstablished] == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	whole := Take(context.Background(), p.engines()[:1], Options{TopConns: 2}).Engines[0]
	defer func(c int) { walkChunk = c }(walkChunk)
	walkChunk = 1
	chunked := Take(context.Background(), p.engines()[:1], Options{TopConns: 2}).Engines[0]
	if whole.Conns != chunked.Conns || whole.Conns.ByState[transport.StateEstablished] != 3 {
		t.Fatalf("whole %+v, chunked %+v", whole.Conns, chunked.Conns)
	}
	if len(chunked.Top) != 2 || len(whole.Top) != 2 {
		t.Fatalf("top: whole %d, chunked %d, want 2", len(whole.Top), len(chunked.Top))
	}
}

// TestSeriesDoNotGrowWithConnections: the exposition has as many series
// with 41 connections as with one, and none names a connection or a
// peer, so a host's series are bounded by its engines however many
// connections come and go (the package doc's "Bounded label
// cardinality"). The summaries still count every connection.
func TestSeriesDoNotGrowWithConnections(t *testing.T) {
	p := newPair(t, 8)
	c := NewCollector(p.engines(), Options{})
	series := func() (int, []*dto.MetricFamily) {
		t.Helper()
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				n++
				for _, lp := range m.GetLabel() {
					if lp.GetName() == "conn" || lp.GetName() == "peer" {
						t.Errorf("%s has a %s label", mf.GetName(), lp.GetName())
					}
				}
			}
		}
		return n, mfs
	}
	before, _ := series()
	const more = 40
	b := netip.MustParseAddr("10.0.0.2")
	established := func() int {
		return Take(context.Background(), p.engines()[:1], Options{TopConns: -1}).Engines[0].Conns.ByState[transport.StateEstablished]
	}
	// In bursts of 10: more CONNECTs at once than the peer's reply rate
	// limit would lose some.
	for i, up := 0, established(); i < 2000 && up < 1+more; i, up = i+1, established() {
		if i%50 == 0 {
			p.a.Do(context.Background(), func(now transport.Time) {
				for range min(10, 1+more-up) {
					p.a.Endpoint().Connect(now, b, gentest.Service, transport.NewMemoryTable())
				}
			})
		}
		time.Sleep(time.Millisecond)
	}
	after, mfs := series()
	if v, _ := value(mfs, "metaroce_connections", "iface", "a0", "state", "established"); v != 1+more {
		t.Fatalf("a: %v established connections, want %d", v, 1+more)
	}
	if after != before {
		t.Errorf("%d series with one connection, %d with %d", before, after, 1+more)
	}
	t.Logf("%d series for 2 engines, with 1 and with %d connections", after, 1+more)
}

// TestUnresponsiveEngine: a snapshot does not wait past its context for an
// engine that does not run, reports it unresponsive and leaves out what
// only the engine could give.
func TestUnresponsiveEngine(t *testing.T) {
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	la, _ := dataplane.NewMemPair(a, b, 2048, 0, 1)
	ep, _ := transport.NewEndpoint(transport.Config{}, a)
	e := dataplane.NewEngine(dataplane.EngineConfig{}, la, ep, nil) // never Run
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	s := Take(ctx, []Engine{{Iface: "x", Engine: e}}, Options{})
	if s.Engines[0].Responsive {
		t.Fatal("an engine that never ran answered")
	}
	c := NewCollector([]Engine{{Iface: "x", Engine: e}}, Options{})
	c.Timeout = 10 * time.Millisecond
	if n := testutil.CollectAndCount(c, "metaroce_engine_responsive"); n != 1 {
		t.Fatalf("%d engine_responsive series", n)
	}
	if n := testutil.CollectAndCount(c, "metaroce_rx_packets_total"); n != 0 {
		t.Fatalf("engine-owned counters of an unresponsive engine exported (%d)", n)
	}
}

// value finds the sample of metric name (a histogram's _count or _sum
// too) whose labels include the given name, value pairs.
func value(mfs []*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	suffix := ""
	for _, s := range []string{"_count", "_sum"} {
		if base, ok := strings.CutSuffix(name, s); ok && !strings.HasSuffix(name, "_total") {
			for _, mf := range mfs {
				if mf.GetName() == base && mf.GetType() == dto.MetricType_HISTOGRAM {
					name, suffix = base, s
				}
			}
		}
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
						found = true
					}
				}
				if !found {
					continue metrics
				}
			}
			switch {
			case suffix == "_count":
				return float64(m.GetHistogram().GetSampleCount()), true
			case suffix == "_sum":
				return m.GetHistogram().GetSampleSum(), true
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// BenchmarkSnapshot measures a scrape's snapshot of an engine holding
// many connections: b.N snapshots, and the longest engine stall each
// caused (stall-ns/op); then the whole walk's CPU time with the engines
// stopped (walk-quiet-ns).
func BenchmarkSnapshot(b *testing.B) {
	for _, n := range []int{1, 1000, 10000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			a, bb := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
			la, lb := dataplane.NewMemPair(a, bb, 2048, 0, 1)
			epA, _ := transport.NewEndpoint(transport.Config{MaxConns: 2 * n}, a)
			epB, _ := transport.NewEndpoint(transport.Config{MaxConns: 2 * n}, bb)
			epB.Listen(1, transport.NewMemoryTable())
			ea := dataplane.NewEngine(dataplane.EngineConfig{}, la, epA, nil)
			eb := dataplane.NewEngine(dataplane.EngineConfig{}, lb, epB, nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go ea.Run(ctx)
			go eb.Run(ctx)
			// Connect in chunks: a burst of CONNECTs beyond the peer's
			// reply rate limit would fail some.
			up := 0
			for up < n {
				ea.Do(ctx, func(now transport.Time) {
					for range min(32, n-up) {
						epA.Connect(now, bb, 1, transport.NewMemoryTable())
					}
				})
				for pending := true; pending; {
					time.Sleep(time.Millisecond)
					ea.Do(ctx, func(transport.Time) {
						up, pending = 0, false
						for _, c := range epA.AppendConns(nil) {
							switch c.State() {
							case transport.StateEstablished:
								up++
							case transport.StateConnecting:
								pending = true
							}
						}
					})
				}
			}
			engines := []Engine{{Iface: "a", Engine: ea}}
			var stall time.Duration
			b.ResetTimer()
			for range b.N {
				s := Take(ctx, engines, Options{})
				stall += s.Engines[0].Stall
			}
			b.ReportMetric(float64(stall.Nanoseconds())/float64(b.N), "stall-ns/op")
			b.StopTimer()
			cancel()
			time.Sleep(10 * time.Millisecond)
			t0 := time.Now()
			for range 20 {
				w := &walker{en: &engines[0], opts: Options{TopConns: DefaultTopConns}, minAt: -1}
				w.begin()
				for w.next < len(w.conns) {
					w.step()
				}
				w.finish()
			}
			b.ReportMetric(float64(time.Since(t0).Nanoseconds())/20, "walk-quiet-ns")
		})
	}
}

// TestCollectorControllerSummary: the controller gauges say what the
// transport holds. With the metaroce controller the idle connection is
// counted, and the smallest window and the largest fabric RTT are its
// own; with none, no connection has a controller and the window gauge is
// left out rather than reported as 0.
func TestCollectorControllerSummary(t *testing.T) {
	for _, cc := range []string{"metaroce", transport.CongestionNone} {
		p := newPairCC(t, 20, cc)
		n0, w0, f0 := p.ccSummary(t) // an ack may move them while this runs
		mfs, err := prometheus.Gatherers{registry(NewCollector(p.engines(), Options{}))}.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n1, w1, f1 := p.ccSummary(t)
		p.stop()
		get := func(name string) (float64, bool) { return value(mfs, name, "iface", "a0") }
		if v, ok := get("metaroce_cc_connections"); !ok || (v != float64(n0) && v != float64(n1)) {
			t.Errorf("%s: cc_connections %v (present %v), the transport holds %d then %d", cc, v, ok, n0, n1)
		}
		v, ok := get("metaroce_cc_window_min_bytes")
		switch {
		case cc == transport.CongestionNone && ok:
			t.Errorf("none: cc_window_min_bytes reported (%v) with no controller", v)
		case cc != transport.CongestionNone && (!ok || v != float64(w0) && v != float64(w1) || v <= 0):
			t.Errorf("%s: cc_window_min_bytes %v (present %v), the transport holds %d then %d", cc, v, ok, w0, w1)
		}
		if v, ok := get("metaroce_connection_fabric_rtt_max_seconds"); !ok || v != f0.Seconds() && v != f1.Seconds() {
			t.Errorf("%s: connection_fabric_rtt_max_seconds %v (present %v), the transport holds %v then %v", cc, v, ok, f0, f1)
		}
		if cc != transport.CongestionNone && n0 == 0 {
			t.Errorf("%s: no established connection has a controller", cc)
		}
	}
}

func registry(c prometheus.Collector) *prometheus.Registry {
	r := prometheus.NewPedanticRegistry()
	r.MustRegister(c)
	return r
}
