package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/apptest"
)

func TestPingPong(t *testing.T) {
	ha, hb := apptest.Pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan where, 1)
	srv := make(chan error, 1)
	go func() { srv <- serve(ctx, opts{socket: hb.Sock, n: 100, size: 20000}, func(w where) { ready <- w }) }()
	var w where
	select {
	case w = <-ready:
	case err := <-srv:
		t.Fatal(err)
	}
	var out bytes.Buffer
	o := opts{socket: ha.Sock, connect: w.addr.String(), qpn: uint(w.qpn), token: w.token, rkey: uint(w.rkey), raddr: w.raddr, n: 100, size: 20000}
	if err := ping(ctx, o, &out); err != nil {
		t.Fatal(err)
	}
	if err := <-srv; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "100 round trips of 20000 bytes, all verified") {
		t.Errorf("report: %q", out.String())
	}
}

// TestPingPongSizeMismatch: a client and server started with different
// -s both fail at once and say why, instead of the client waiting for its
// context.
func TestPingPongSizeMismatch(t *testing.T) {
	ha, hb := apptest.Pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ready := make(chan where, 1)
	srv := make(chan error, 1)
	go func() { srv <- serve(ctx, opts{socket: hb.Sock, n: 10, size: 20000}, func(w where) { ready <- w }) }()
	w := <-ready
	start := time.Now()
	o := opts{socket: ha.Sock, connect: w.addr.String(), qpn: uint(w.qpn), token: w.token, rkey: uint(w.rkey), raddr: w.raddr, n: 10, size: 10000}
	err := ping(ctx, o, &bytes.Buffer{})
	if !errors.Is(err, client.ErrPeerClosed) || !strings.Contains(err.Error(), "-s 10000") {
		t.Fatalf("client: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the client took %v to notice", took)
	}
	if err := <-srv; err == nil || !strings.Contains(err.Error(), "-s 20000") {
		t.Fatalf("server: %v", err)
	}
}
