package control_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/internal/apptest"
)

// TestRNRRetryForever: a queue pair made with rnr_retry_forever streams 8
// SENDs of 16 KiB to a peer that posts no receive for 2 s, twenty times
// the daemon's RNR limit (1000 NACKs 20 us apart), and when the peer
// posts, every one lands, in order, byte for byte; for each way a queue
// pair meets its connection: connect, accept on its own number, and
// accept_request of a listener's request. A queue pair made without it
// fails on the limit: its SENDs complete with ErrRNR and its event says
// failed, RNR. The stalls run side by side, over the daemon's engines.
func TestRNRRetryForever(t *testing.T) {
	const (
		n     = 8
		size  = 16 << 10
		stall = 2 * time.Second
	)
	ha, hb := newHosts(t, 0, config.Limits{})
	ca, cb := apptest.Dial(t, ha.Sock), apptest.Dial(t, hb.Sock)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	create := func(c *client.Client, forever bool) *client.QP {
		t.Helper()
		q, err := c.CreateQP(client.QPOptions{RNRRetryForever: forever})
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	type link struct {
		name          string
		forever       bool
		send, recv    *client.QP
		sendC, recvC  *client.Client
		src, dst      *client.MR
		sendFromA     bool
		connected     chan error
		accepted      chan error
		acceptRequest bool
	}
	links := []*link{
		{name: "connect", forever: true, sendFromA: true},
		{name: "accept", forever: true},
		{name: "accept_request", forever: true, acceptRequest: true},
		{name: "without", forever: false, sendFromA: true},
	}
	for _, k := range links {
		k.sendC, k.recvC = cb, ca
		if k.sendFromA {
			k.sendC, k.recvC = ca, cb
		}
		k.send, k.recv = create(k.sendC, k.forever), create(k.recvC, false)
		k.src = apptest.Region(t, k.sendC, n*size, client.LocalWrite)
		k.dst = apptest.Region(t, k.recvC, n*size, client.LocalWrite)
		fill(k.src.Bytes(), uint64(len(k.name)))
	}
	// Connect each pair as its name says: the sender connects, the
	// sender accepts the receiver's connect on its number, or the
	// sender takes the receiver's connect to a listener of its session.
	l, err := cb.Listen(client.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range links {
		errs := make(chan error, 2)
		switch {
		case k.sendFromA:
			go func() { _, err := k.recv.Accept(ctx); errs <- err }()
			errs <- k.send.Connect(ctx, hb.Addr, k.recv.Num, k.recv.Token)
		case !k.acceptRequest:
			go func() { _, err := k.send.Accept(ctx); errs <- err }()
			errs <- k.recv.Connect(ctx, hb.Addr, k.send.Num, k.send.Token)
		default:
			go func() {
				_, err := k.recv.ConnectWith(ctx, hb.Addr, l.Service, client.ConnectOptions{Token: l.Token})
				errs <- err
			}()
			r, err := l.GetRequest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			errs <- r.Accept(k.send, nil)
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("%s: %v", k.name, err)
			}
		}
		for _, q := range []*client.QP{k.send, k.recv} {
			if e := waitEvent(t, q); e.Type != client.EventConnected {
				t.Fatalf("%s: event %+v, want connected", k.name, e)
			}
		}
	}
	for _, k := range links {
		for i := range n {
			if err := k.send.PostSend(uint64(i), k.src, i*size, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(stall)
	for _, k := range links {
		if !k.forever {
			continue // checked below
		}
		var c [n]client.Completion
		got, err := k.send.PollCQ(c[:])
		if got != 0 || err != nil {
			t.Fatalf("%s: after a %v stall: %d completions %+v, %v", k.name, stall, got, c[:got], err)
		}
		if e, ok := k.send.PollEvent(); ok {
			t.Fatalf("%s: event %+v during the stall", k.name, e)
		}
	}
	for _, k := range links {
		for i := range n {
			if err := k.recv.PostRecv(uint64(100+i), k.dst, i*size, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, k := range links {
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		var sends []client.Completion
		for len(sends) < n {
			var c [n]client.Completion
			got, err := k.send.WaitCQ(wctx, c[:])
			sends = append(sends, c[:got]...)
			if err != nil {
				break
			}
		}
		wcancel()
		if !k.forever {
			if len(sends) != n || !errors.Is(sends[0].Err(), client.ErrRNR) {
				t.Fatalf("%s: the SENDs completed %+v, want %d with ErrRNR", k.name, sends, n)
			}
			e, ok := k.send.PollEvent()
			if !ok || e.Type != client.EventFailed || e.Status != client.Status(proto.StatusRNRExceeded) {
				t.Fatalf("%s: event %+v (%v), want failed with the RNR status", k.name, e, ok)
			}
			continue
		}
		if len(sends) != n {
			t.Fatalf("%s: %d of %d SENDs completed: %+v", k.name, len(sends), n, sends)
		}
		for i, c := range sends {
			if c.Err() != nil || c.WRID != uint64(i) || c.Op != client.CompSend {
				t.Fatalf("%s: SEND completion %d: %+v (%v)", k.name, i, c, c.Err())
			}
		}
		for i := range n {
			c := wait(t, k.recv)
			if c.Err() != nil || c.Op != client.CompRecv || c.WRID != uint64(100+i) || c.Bytes != size {
				t.Fatalf("%s: receive completion %d: %+v (%v)", k.name, i, c, c.Err())
			}
		}
		same(t, k.name, k.dst.Bytes(), k.src.Bytes())
	}
}
