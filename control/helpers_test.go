package control_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/transport"
)

// host is one in-process daemon: an engine over one end of an in-memory
// link, and the control server on a socket in a temporary directory.
type host struct {
	addr   netip.Addr
	sock   string
	srv    *control.Server
	eng    *dataplane.Engine
	cancel context.CancelFunc
	done   chan struct{}
}

// newHosts builds two daemons joined by an in-memory link that loses
// `loss` of the packets.
func newHosts(t testing.TB, loss float64, limits config.Limits) (*host, *host) {
	t.Helper()
	a, b := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	la, lb := dataplane.NewMemPair(a, b, 9000, loss, 7)
	return newHostsOn(t, a, b, la, lb, limits)
}

func newHostsOn(t testing.TB, a, b netip.Addr, la, lb dataplane.Link, limits config.Limits) (*host, *host) {
	t.Helper()
	dir := t.TempDir()
	mk := func(addr netip.Addr, link dataplane.Link, name string) *host {
		ep, err := transport.NewEndpoint(transport.Config{}, addr)
		if err != nil {
			t.Fatal(err)
		}
		d, err := control.NewEngineDriver(nil)
		if err != nil {
			t.Fatal(err)
		}
		e := dataplane.NewEngine(dataplane.EngineConfig{}, link, ep, d)
		ctx, cancel := context.WithCancel(context.Background())
		h := &host{addr: addr, sock: filepath.Join(dir, name+".sock"), eng: e, cancel: cancel, done: make(chan struct{})}
		h.srv = control.NewServer(limits, []*control.Engine{{E: e, D: d, Local: addr}}, nil,
			slog.New(slog.NewTextHandler(io.Discard, nil)))
		ln, err := control.Listen(h.sock, 0o600, -1)
		if err != nil {
			t.Fatal(err)
		}
		engDone := make(chan struct{})
		go func() { e.Run(ctx); close(engDone) }()
		go func() { h.srv.Serve(ctx, ln); <-engDone; close(h.done) }()
		t.Cleanup(h.stop)
		return h
	}
	return mk(a, la, "a"), mk(b, lb, "b")
}

func (h *host) stop() {
	h.cancel()
	<-h.done
}

func dial(t testing.TB, sock string) *client.Client {
	t.Helper()
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// region allocates and registers n bytes.
func region(t testing.TB, c *client.Client, n int, access client.Access) *client.MR {
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

// pair connects a queue pair of ca to one of cb.
func pair(t testing.TB, ca *client.Client, cb *client.Client, b netip.Addr) (*client.QP, *client.QP) {
	t.Helper()
	qa, err := ca.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	qb, err := cb.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	acc := make(chan error, 1)
	go func() { _, err := qb.Accept(ctx); acc <- err }()
	if err := qa.Connect(ctx, b, qb.Num); err != nil {
		t.Fatal(err)
	}
	if err := <-acc; err != nil {
		t.Fatal(err)
	}
	return qa, qb
}

// wait takes one completion, failing the test after 10 s.
func wait(t *testing.T, q *client.QP) client.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var c [1]client.Completion
	if _, err := q.WaitCQ(ctx, c[:]); err != nil {
		t.Fatal(err)
	}
	return c[0]
}

func fill(b []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
}

func same(t *testing.T, what string, got, want []byte) {
	t.Helper()
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%s: %d bytes differ from byte %d", what, len(want), i)
	}
}

// waitCounts waits (10 s at most) until the daemon holds nothing for any
// session beyond `sessions` empty ones.
func waitCounts(t *testing.T, h *host, sessions int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := h.srv.Counts()
		if c.Sessions == sessions && c.Regions == 0 && c.QPs == 0 && c.Bytes == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon still holds %+v, want %d empty sessions", c, sessions)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
