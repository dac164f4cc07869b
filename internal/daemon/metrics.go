package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/telemetry"
	"github.com/metaroce/metaroce/transport"
)

// telemetryEngines lists the engines for telemetry, with their links'
// concrete types (for link drop counters) and XDP programs.
func (d *Daemon) telemetryEngines() []telemetry.Engine {
	out := make([]telemetry.Engine, len(d.engines))
	for i, en := range d.engines {
		out[i] = telemetry.Engine{Iface: en.iface, Engine: en.e, AFXDP: en.afx, UDP: en.udp, XDP: en.prog}
		if len(en.planes) > 1 {
			for _, p := range en.planes {
				out[i].Planes = append(out[i].Planes, telemetry.PlaneLink{Plane: p.plane, Iface: p.iface, AFXDP: p.afx, UDP: p.udp})
			}
			out[i].Mux, _ = en.link.(*dataplane.PlaneLink)
		}
	}
	return out
}

// metricsServer serves /metrics on the configured address and reopens on
// a reload that changes it.
type metricsServer struct {
	log     *slog.Logger
	handler http.Handler
	addr    string
	srv     *http.Server
}

func newMetricsServer(log *slog.Logger, engines []telemetry.Engine) *metricsServer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(telemetry.NewCollector(engines, telemetry.Options{}),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn), ErrorHandling: promhttp.ContinueOnError,
		// Each scrape visits every engine: a few at once (an HA pair of
		// Prometheus servers, someone's curl) and no more.
		MaxRequestsInFlight: 4,
	}))
	return &metricsServer{log: log, handler: mux}
}

// listen serves on addr ("" closes the listener). The new listener opens
// before the old one closes, so a reload to a bad address keeps the old
// one and reports the error.
func (m *metricsServer) listen(addr string) error {
	if addr == m.addr && (addr == "") == (m.srv == nil) {
		return nil
	}
	var srv *http.Server
	if addr != "" {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("metrics address: %w", err)
		}
		srv = &http.Server{Handler: m.handler, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				m.log.Error("metrics server", "err", err)
			}
		}()
		m.log.Info("metrics", "address", ln.Addr().String())
	}
	m.close()
	m.srv, m.addr = srv, addr
	return nil
}

// close stops the server and waits (2 s at most) for scrapes in flight:
// a scrape reads the AF_XDP sockets and the XDP program's maps, which the
// daemon closes right after (the race detector caught a scrape reading a
// socket's stats while Close wrote them).
func (m *metricsServer) close() {
	if m.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if m.srv.Shutdown(ctx) != nil {
			m.srv.Close()
		}
		m.srv = nil
	}
}

// watchdog calls ping every interval while every engine runs a no-op
// closure within the interval: a stuck engine (a loop that stopped
// iterating) silences the watchdog rather than being papered over by a
// healthy timer goroutine.
func (d *Daemon) watchdog(ctx context.Context, ping func(), every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		ok := true
		for _, en := range d.engines {
			c, cancel := context.WithTimeout(ctx, every)
			err := en.e.Do(c, func(transport.Time) {})
			cancel()
			if err != nil {
				ok = false
				if ctx.Err() == nil {
					d.log.Warn("watchdog: engine did not answer", "iface", en.iface, "err", err)
				}
				break
			}
		}
		if ok {
			ping()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
