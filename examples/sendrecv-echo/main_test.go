package main

import (
	"bytes"
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/apptest"
)

func TestEcho(t *testing.T) {
	ha, hb := apptest.Pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type addr struct {
		a     netip.Addr
		qpn   uint32
		token uint64
	}
	ready := make(chan addr, 1)
	srv := make(chan error, 1)
	go func() {
		srv <- serve(ctx, opts{socket: hb.Sock, n: 200, size: 3000}, func(a netip.Addr, q uint32, tok uint64) { ready <- addr{a, q, tok} })
	}()
	var at addr
	select {
	case at = <-ready:
	case err := <-srv:
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ping(ctx, opts{socket: ha.Sock, connect: at.a.String(), qpn: uint(at.qpn), token: at.token, n: 200, size: 3000}, &out); err != nil {
		t.Fatal(err)
	}
	if err := <-srv; err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "200 echoes of 3000 bytes, all verified") {
		t.Errorf("report: %q", out.String())
	}
}
