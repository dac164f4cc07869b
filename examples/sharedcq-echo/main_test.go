package main

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/apptest"
)

// The client processes: the test binary run again with these set.
const (
	envSocket  = "SHAREDCQ_ECHO_SOCKET"
	envServer  = "SHAREDCQ_ECHO_SERVER"
	envService = "SHAREDCQ_ECHO_SERVICE"
)

// TestClientProcess is one client process of TestSharedCQEcho: 16
// connections in one session, each its own queue pair; it does nothing
// when run on its own.
func TestClientProcess(t *testing.T) {
	sock := os.Getenv(envSocket)
	if sock == "" {
		t.Skip("a client process of TestSharedCQEcho")
	}
	service, err := strconv.ParseUint(os.Getenv(envService), 10, 32)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out bytes.Buffer
	if err := ping(ctx, opts{socket: sock, connect: os.Getenv(envServer), service: uint(service), conns: 16, n: 20, size: 3000}, &out); err != nil {
		t.Fatal(err)
	}
	fmt.Print(out.String())
}

// TestSharedCQEcho is issue 20's acceptance: one server, one listener,
// one shared CQ waited on through its descriptor (epoll), serving 64
// connections from 4 separate client processes at once, each message
// gathered from four entries and each echo from two, every byte checked
// by the clients; the server saw each connection's entries under its own
// queue pair number and its end as that queue pair's event.
func TestSharedCQEcho(t *testing.T) {
	ha, hb := apptest.Pair(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	type where struct {
		addr    netip.Addr
		service uint32
	}
	ready := make(chan where, 1)
	type result struct {
		st  stats
		err error
	}
	srv := make(chan result, 1)
	const procs, perProc = 4, 16
	go func() {
		st, err := serve(ctx, opts{socket: hb.Sock, size: 3000, clients: procs * perProc}, func(a netip.Addr, s uint32) { ready <- where{a, s} })
		srv <- result{st, err}
	}()
	var w where
	select {
	case w = <-ready:
	case r := <-srv:
		t.Fatal(r.err)
	}
	cmds := make([]*exec.Cmd, procs)
	outs := make([]bytes.Buffer, procs)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestClientProcess$", "-test.v")
		cmd.Env = append(os.Environ(), envSocket+"="+ha.Sock, envServer+"="+w.addr.String(),
			envService+"="+strconv.FormatUint(uint64(w.service), 10))
		cmd.Stdout, cmd.Stderr = &outs[i], &outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	pids := map[int]bool{}
	for i, cmd := range cmds {
		err := cmd.Wait()
		if err != nil || !strings.Contains(outs[i].String(), "16 connections, 20 echoes of 3000 bytes each, all verified") {
			t.Fatalf("client process %d: %v\n%s", i, err, outs[i].String())
		}
		pids[cmd.Process.Pid] = true
	}
	if len(pids) != procs {
		t.Fatalf("%d distinct client processes, want %d", len(pids), procs)
	}
	r := <-srv
	if r.err != nil {
		t.Fatalf("server: %v", r.err)
	}
	if r.st.conns != procs*perProc || r.st.echoes != procs*perProc*20 {
		t.Fatalf("server served %d connections and %d echoes, want %d and %d", r.st.conns, r.st.echoes, procs*perProc, procs*perProc*20)
	}
	distinct := map[uint32]bool{}
	for _, q := range r.st.qpns {
		distinct[q] = true
	}
	if len(distinct) != procs*perProc {
		t.Fatalf("%d distinct queue pairs ended, want %d", len(distinct), procs*perProc)
	}
	if r.st.wakes == 0 {
		t.Fatal("the server never slept on the CQ's descriptor")
	}
	t.Logf("client process 0:\n%s", outs[0].String())
	t.Logf("server: %d connections, %d echoes, %d wake-ups through the CQ's descriptor", r.st.conns, r.st.echoes, r.st.wakes)
}
