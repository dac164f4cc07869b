package control_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/transport"
)

// newHosts builds two daemons joined by an in-memory link that loses
// `loss` of the packets.
func newHosts(t testing.TB, loss float64, limits config.Limits) (*apptest.Host, *apptest.Host) {
	t.Helper()
	a, b := netip.MustParseAddr("10.9.0.1"), netip.MustParseAddr("10.9.0.2")
	la, lb := dataplane.NewMemPair(a, b, 9000, loss, 7)
	dir := t.TempDir()
	return apptest.Start(t, a, la, transport.Config{}, limits, filepath.Join(dir, "a.sock")),
		apptest.Start(t, b, lb, transport.Config{}, limits, filepath.Join(dir, "b.sock"))
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
	if err := qa.Connect(ctx, b, qb.Num, qb.Token); err != nil {
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
func waitCounts(t *testing.T, h *apptest.Host, sessions int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c := h.Srv.Counts()
		if c.Sessions == sessions && c.Regions == 0 && c.QPs == 0 && c.Bytes == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("daemon still holds %+v, want %d empty sessions", c, sessions)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
