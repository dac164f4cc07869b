package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

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
	o := opts{socket: ha.Sock, connect: w.addr.String(), qpn: uint(w.qpn), rkey: uint(w.rkey), raddr: w.raddr, n: 100, size: 20000}
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
