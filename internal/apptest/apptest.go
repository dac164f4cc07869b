// Package apptest runs metaroced's application side in-process for tests
// of programs built on client/: daemons that are each an engine and a
// control server, joined by UDP over loopback (127.0.0.1 and 127.0.0.2:
// no privileges, real sockets and wakeups) or by any pair of links.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/transport"
)

// Host is one in-process daemon.
type Host struct {
	Addr netip.Addr // the engine's address: where peers connect
	Port uint16     // its MetaRoCE UDP port
	Sock string     // its control socket
	Srv  *control.Server
	Eng  *dataplane.Engine

	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// Stop stops the daemon (its clients see ErrDaemonGone); t.Cleanup does
// it too.
func (h *Host) Stop() {
	h.once.Do(func() {
		h.cancel()
		<-h.done
		<-h.done
	})
}

// Pair starts two daemons over UDP on loopback, stopped by t.Cleanup.
func Pair(t testing.TB) (*Host, *Host) {
	t.Helper()
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	port := uint16(20000 + rand.IntN(20000)) // both bind it, each on its own address
	var links [2]dataplane.Link
	for i, addr := range []netip.Addr{a, b} {
		l, err := udplink.Open(udplink.Config{Local: addr, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		links[i] = l
	}
	dir := t.TempDir()
	cfg := transport.Config{Port: port}
	return Start(t, a, links[0], cfg, config.Limits{}, filepath.Join(dir, "a.sock")),
		Start(t, b, links[1], cfg, config.Limits{}, filepath.Join(dir, "b.sock"))
}

// Start runs one daemon on link, serving its control socket at sock.
func Start(t testing.TB, addr netip.Addr, link dataplane.Link, cfg transport.Config, limits config.Limits, sock string) *Host {
	t.Helper()
	if cfg.Congestion == "" {
		// As metaroced: its controller, with a software host's target
		// queue and pacing burst (docs/spec.md §8.9.4).
		d := config.Defaults()
		cfg.Congestion = d.Congestion
		if cfg.TargetQueue == 0 {
			cfg.TargetQueue = d.Transport.TargetQueue
		}
		if cfg.PacingBurst == 0 {
			cfg.PacingBurst = d.Transport.PacingBurst
		}
	}
	ep, err := transport.NewEndpoint(cfg, addr)
	if err != nil {
		t.Fatal(err)
	}
	d, err := control.NewEngineDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := dataplane.NewEngine(dataplane.EngineConfig{}, link, ep, d)
	h := &Host{Addr: addr, Port: ep.Config().Port, Sock: sock, Eng: e, done: make(chan struct{}, 2)}
	h.Srv = control.NewServer(limits, []*control.Engine{{E: e, D: d, Local: addr}}, nil,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	ln, err := control.Listen(sock, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { e.Run(ctx); h.done <- struct{}{} }()
	go func() { h.Srv.Serve(ctx, ln); h.done <- struct{}{} }()
	t.Cleanup(h.Stop)
	return h
}

// Dial opens a client session on the control socket at sock, closed by
// t.Cleanup.
func Dial(t testing.TB, sock string) *client.Client {
	t.Helper()
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Region allocates n bytes and registers them with c for access; t.Cleanup
// unmaps them.
func Region(t testing.TB, c *client.Client, n int, access client.Access) *client.MR {
	t.Helper()
	m, err := client.Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	mr, err := c.RegisterMemory(m, 0, n, access)
	if err != nil {
		t.Fatal(err)
	}
	return mr
}
