package control_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/transport"
)

// TestConnectHonoursContext: a CONNECT nobody answers is tried again
// until the caller's context ends (not the transport's 0.6 s), the error
// says no answer came, and a peer that appears meanwhile is reached; a
// refusal is final at once and says so.
func TestConnectHonoursContext(t *testing.T) {
	var cut atomic.Bool
	ha, hb := newCutHosts(t, transport.Config{}, &cut)
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	qb, err := cb.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("absent", func(t *testing.T) {
		cut.Store(true)
		defer cut.Store(false)
		qa, err := ca.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer qa.Destroy()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		err = qa.Connect(ctx, hb.Addr, qb.Num)
		took := time.Since(start)
		if !errors.Is(err, client.ErrConnect) || !strings.Contains(err.Error(), "no answer") {
			t.Fatalf("connect to an absent peer: %v", err)
		}
		if took < 1800*time.Millisecond || took > 4*time.Second {
			t.Fatalf("gave up after %v with a 2 s context", took)
		}
		if e := waitEvent(t, qa); e.Type != client.EventRetryExceeded {
			t.Fatalf("event %+v, want retry exceeded", e)
		}
	})

	t.Run("late-peer", func(t *testing.T) {
		cut.Store(true)
		qa, err := ca.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { time.Sleep(1500 * time.Millisecond); cut.Store(false) }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		acc := make(chan error, 1)
		go func() { _, err := qb.Accept(ctx); acc <- err }()
		if err := qa.Connect(ctx, hb.Addr, qb.Num); err != nil {
			t.Fatalf("connect to a peer that answers after 1.5 s: %v", err)
		}
		if err := <-acc; err != nil {
			t.Fatal(err)
		}
		if e := waitEvent(t, qa); e.Type != client.EventConnected {
			t.Fatalf("event %+v, want connected (no event for the unanswered attempts)", e)
		}
	})

	t.Run("refused", func(t *testing.T) {
		qa, err := ca.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		err = qa.Connect(ctx, hb.Addr, qb.Num^0x5a5a) // no such queue pair
		if !errors.Is(err, client.ErrConnect) || !strings.Contains(err.Error(), "rejected") {
			t.Fatalf("connect to no queue pair: %v", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a refusal took %v", took)
		}
		if e := waitEvent(t, qa); e.Type != client.EventFailed || !errors.Is(e.Err(), client.ErrRejected) {
			t.Fatalf("event %+v, want failed (rejected)", e)
		}
	})
}
