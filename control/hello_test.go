package control_test

import (
	"context"
	"log/slog"
	"net/netip"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
)

// memEngine is an engine on addr over an in-memory link (its peer, the
// next address, has no engine), with a driver closed when t ends.
func memEngine(t *testing.T, addr netip.Addr, ec dataplane.EngineConfig) *control.Engine {
	t.Helper()
	link, _ := dataplane.NewMemPair(addr, addr.Next(), 2048, 0, 1)
	ep, err := transport.NewEndpoint(transport.Config{}, addr)
	if err != nil {
		t.Fatal(err)
	}
	d, err := control.NewEngineDriver(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return &control.Engine{E: dataplane.NewEngine(ec, link, ep, d), D: d, Local: addr}
}

// serveEngines runs engines and a control server over them on a socket
// of its own; stop ends them all and waits.
func serveEngines(t *testing.T, engines []*control.Engine, log *slog.Logger) (sock string, stop func()) {
	t.Helper()
	srv := control.NewServer(config.Limits{}, engines, nil, log)
	sock = filepath.Join(t.TempDir(), "c.sock")
	ln, err := control.Listen(sock, 0o600, -1)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, en := range engines {
		wg.Add(1)
		go func() { defer wg.Done(); en.E.Run(ctx) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); srv.Serve(ctx, ln) }()
	return sock, func() { cancel(); wg.Wait() }
}

// TestHelloNamesEngineCPUs: the hello names each CPU an engine is pinned
// to, once, and none for an unpinned engine; a client has them as
// EngineCPUs (what AvoidEngineCPUs moves off).
func TestHelloNamesEngineCPUs(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skip("pins engines to CPUs 0 and 1")
	}
	for _, c := range []struct {
		pins []int // -1: not pinned
		want []int
	}{{[]int{1, 1, -1, 0}, []int{1, 0}}, {[]int{-1}, nil}} {
		var engines []*control.Engine
		for i, cpu := range c.pins {
			ec := dataplane.EngineConfig{}
			if cpu >= 0 {
				ec.CPU, ec.PinSet = cpu, true
			}
			engines = append(engines, memEngine(t, netip.AddrFrom4([4]byte{10, 9, 2, byte(1 + 2*i)}), ec))
		}
		sock, stop := serveEngines(t, engines, slog.New(slog.DiscardHandler))
		cl, err := client.Dial(sock)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		got := cl.EngineCPUs
		cl.Close()
		stop()
		if !slices.Equal(got, c.want) {
			t.Errorf("engines pinned to %v: hello names %v, want %v", c.pins, got, c.want)
		}
	}
}
