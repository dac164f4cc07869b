package main

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/apptest"
)

// TestListenEcho: one server, one listener, one serving goroutine, 16
// clients at once, each verified; then a client of the wrong size fails
// loudly, and once the server is gone a client's wait ends with an error.
func TestListenEcho(t *testing.T) {
	ha, hb := apptest.Pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type where struct {
		addr    netip.Addr
		service uint32
	}
	ready := make(chan where, 1)
	srv := make(chan error, 1)
	const clients = 16
	go func() {
		srv <- serve(ctx, opts{socket: hb.Sock, size: 1000, clients: clients}, func(a netip.Addr, s uint32) { ready <- where{a, s} })
	}()
	var w where
	select {
	case w = <-ready:
	case err := <-srv:
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ping(ctx, opts{socket: ha.Sock, connect: w.addr.String(), service: uint(w.service), n: 50, size: 1000}, &outs[i])
		}()
	}
	wg.Wait()
	for i := range clients {
		if errs[i] != nil || !strings.Contains(outs[i].String(), "50 echoes of 1000 bytes, all verified") {
			t.Fatalf("client %d: %v %q", i, errs[i], outs[i].String())
		}
	}
	if err := <-srv; err != nil {
		t.Fatalf("server: %v", err)
	}

	// A server that goes away: the client fails, it does not hang.
	ctx2, cancel2 := context.WithCancel(ctx)
	go func() {
		srv <- serve(ctx2, opts{socket: hb.Sock, size: 1000}, func(a netip.Addr, s uint32) { ready <- where{a, s} })
	}()
	w = <-ready
	err := ping(ctx, opts{socket: ha.Sock, connect: w.addr.String(), service: uint(w.service), n: 1, size: 10}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "-s 1000") {
		t.Fatalf("client of the wrong size: %v", err)
	}
	cancel2()
	<-srv
	start := time.Now()
	err = ping(ctx, opts{socket: ha.Sock, connect: w.addr.String(), service: uint(w.service), n: 1, size: 1000}, &bytes.Buffer{})
	if !errors.Is(err, client.ErrConnect) {
		t.Fatalf("client of a server gone: %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %v", took)
	}
}
