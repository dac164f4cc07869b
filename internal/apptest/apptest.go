// Package apptest runs metaroced's application side in-process for tests
// of programs built on client/: two daemons, each an engine and a
// control server, joined by UDP over loopback (127.0.0.1 and 127.0.0.2),
// so no privileges are needed and the sockets and wakeups are real.
package apptest

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"

	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/transport"
)

// Host is one in-process daemon.
type Host struct {
	Addr netip.Addr // the engine's address: where peers connect
	Sock string     // its control socket
	Srv  *control.Server
}

// Pair starts two daemons for t, stopped by t.Cleanup.
func Pair(t testing.TB) (*Host, *Host) {
	t.Helper()
	a, b := netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2")
	port := uint16(20000 + rand.IntN(20000)) // both bind it, each on its own address
	dir := t.TempDir()
	mk := func(addr netip.Addr, name string) *Host {
		l, err := udplink.Open(udplink.Config{Local: addr, Port: port})
		if err != nil {
			t.Fatal(err)
		}
		ep, err := transport.NewEndpoint(transport.Config{Port: port}, addr)
		if err != nil {
			t.Fatal(err)
		}
		d, err := control.NewEngineDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		e := dataplane.NewEngine(dataplane.EngineConfig{}, l, ep, d)
		h := &Host{Addr: addr, Sock: filepath.Join(dir, name+".sock")}
		h.Srv = control.NewServer(config.Limits{}, []*control.Engine{{E: e, D: d, Local: addr}}, nil,
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		ln, err := control.Listen(h.Sock, 0o600, -1)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{}, 2)
		go func() { e.Run(ctx); done <- struct{}{} }()
		go func() { h.Srv.Serve(ctx, ln); done <- struct{}{} }()
		t.Cleanup(func() {
			cancel()
			<-done
			<-done
			l.Close()
		})
		return h
	}
	return mk(a, "a"), mk(b, "b")
}
