package control_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
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
		err = qa.Connect(ctx, hb.Addr, qb.Num, qb.Token)
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
		if err := qa.Connect(ctx, hb.Addr, qb.Num, qb.Token); err != nil {
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
		err = qa.Connect(ctx, hb.Addr, qb.Num^0x5a5a, qb.Token) // no such queue pair
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

// TestWaitingQPNotClaimable (issue 22 finding 7): a queue pair waiting
// for its peer cannot be claimed by another session that knows its
// number but not its token: its connects fail exactly as one to a number
// nothing listens on (REJECT NO_SERVICE), and the waiting Accept still
// gets the honest peer, which connects with the token.
func TestWaitingQPNotClaimable(t *testing.T) {
	ha, hb := newHosts(t, 0, config.Limits{})
	victim, attacker, honest := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock), apptest.Dial(t, hb.Sock)
	qv, err := victim.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if qv.Token == 0 {
		t.Fatal("create_qp returned no token")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := make(chan netip.Addr, 1)
	go func() { a, _ := qv.Accept(ctx); got <- a }()
	msgs := map[string]int{}
	for _, try := range []struct {
		qpn   uint32
		token uint64
	}{{qv.Num, 0}, {qv.Num, qv.Token ^ 1}, {qv.Num, qv.Token + 1<<40}, {qv.Num ^ 0x10, qv.Token}, {qv.Num ^ 0x20, 0}} {
		q, err := attacker.CreateQP(client.QPOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var rej *client.RejectedError
		err = q.Connect(ctx, ha.Addr, try.qpn, try.token)
		if !errors.As(err, &rej) || rej.Reason != "no_service" {
			t.Fatalf("attacker's connect to %d with token %#x: %v", try.qpn, try.token, err)
		}
		// The message names the peer and the reason only: nothing tells
		// a wrong token from a missing queue pair.
		msgs[err.Error()]++
	}
	if len(msgs) != 1 {
		t.Fatalf("the refusals differ: %v", msgs)
	}
	select {
	case a := <-got:
		t.Fatalf("the waiting queue pair was claimed by %v", a)
	default:
	}
	qh, err := honest.CreateQP(client.QPOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := qh.Connect(ctx, ha.Addr, qv.Num, qv.Token); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a != hb.Addr {
		t.Fatalf("accept returned %v", a)
	}
}
