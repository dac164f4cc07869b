package control_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/apptest"
)

// refused fails the test unless err is kind with a message containing
// what.
func refused(t *testing.T, what string, err, kind error, says string) {
	t.Helper()
	if !errors.Is(err, kind) || !strings.Contains(err.Error(), says) {
		t.Fatalf("%s: %v, want %v saying %q", what, err, kind, says)
	}
}

// TestListenService: a public listener at a chosen service is reached by
// a peer that knows only the address and the number (token 0); while it
// listens, the number is refused to every session (busy), as is a
// queue pair's number; a chosen number with a secret token, or out of
// the daemon's range, is refused as a bad request; unlisten frees the
// number for the next listen.
func TestListenService(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	srv, other, cl := apptest.Dial(t, ha.Sock), apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	const port = 5001
	l, err := srv.Listen(client.ListenOptions{Public: true, Service: port})
	if err != nil {
		t.Fatal(err)
	}
	if l.Service != port || l.Token != 0 || l.Local != ha.Addr {
		t.Fatalf("listener %+v, want service %d, token 0", l, port)
	}
	_, err = srv.Listen(client.ListenOptions{Public: true, Service: port})
	refused(t, "the same service again", err, client.ErrBusy, "service 5001 is in use")
	_, err = other.Listen(client.ListenOptions{Public: true, Service: port})
	refused(t, "the same service from another session", err, client.ErrBusy, "in use")
	q, err := other.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q.Num < 1<<16 {
		t.Fatalf("queue pair number %d: drawn numbers leave the port numbers alone", q.Num)
	}
	_, err = other.Listen(client.ListenOptions{Public: true, Service: q.Num})
	refused(t, "a queue pair's number", err, client.ErrBusy, "in use")
	_, err = other.Listen(client.ListenOptions{Service: 5002})
	refused(t, "a chosen service with a secret token", err, client.ErrBadRequest, "public")
	_, err = other.Listen(client.ListenOptions{Public: true, Service: 1 << 24})
	refused(t, "a service above the daemon's range", err, client.ErrBadRequest, "want 1..16777215")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qc, err := cl.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- qc.Connect(ctx, ha.Addr, port, 0) }()
	r, err := l.GetRequest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Peer != hb.Addr {
		t.Fatalf("request from %v", r.Peer)
	}
	qs, err := srv.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Accept(qs, nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("connect to service %d with token 0: %v", port, err)
	}

	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := other.Listen(client.ListenOptions{Public: true, Service: port})
	if err != nil {
		t.Fatalf("listen at %d after its listener closed: %v", port, err)
	}
	if l2.Service != port {
		t.Fatalf("listener at %d", l2.Service)
	}
	// The session's end frees it too.
	other.Close()
	for ha.Srv.Counts().Sessions != 1 {
		if ctx.Err() != nil {
			t.Fatal("the closed session is still there")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := srv.Listen(client.ListenOptions{Public: true, Service: port}); err != nil {
		t.Fatalf("listen at %d after its session ended: %v", port, err)
	}
}

// TestListenServiceEngineTag: with engines sharing an interface (a
// connection-id tag each), a chosen service must carry its engine's tag,
// since a CONNECT for it goes to the engine whose tag it carries; the
// refusal names that engine and the rule.
func TestListenServiceEngineTag(t *testing.T) {
	var engines []*control.Engine
	for i := range 2 {
		e := memEngine(t, netip.AddrFrom4([4]byte{10, 9, 3, byte(1 + 2*i)}), dataplane.EngineConfig{})
		e.Mask, e.Tag = dataplane.IDMask(2), uint32(i)
		engines = append(engines, e)
	}
	sock, stop := serveEngines(t, engines, slog.New(slog.DiscardHandler))
	defer stop()
	c, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Listen(client.ListenOptions{Public: true, Service: 5001})
	refused(t, "an odd service on engine 0", err, client.ErrBadRequest,
		"service 5001 does not carry engine 0's tag: a CONNECT for it goes to engine 1 (want service & 0x1 == 0x0)")
	for _, s := range []struct {
		engine  int
		service uint32
	}{{0, 5000}, {1, 5001}} {
		l, err := c.Listen(client.ListenOptions{Public: true, Service: s.service, Engine: s.engine})
		if err != nil {
			t.Fatalf("service %d on engine %d: %v", s.service, s.engine, err)
		}
		if l.Service != s.service {
			t.Fatalf("listener at %d, want %d", l.Service, s.service)
		}
	}
	_, err = c.Listen(client.ListenOptions{Public: true, Service: 5002, Engine: 1})
	refused(t, "an even service on engine 1", err, client.ErrBadRequest, "goes to engine 0")
}
