package libmetaroce

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// TestCLibrarySharedCQ runs tests/mrcq.c (ASan+UBSan) between two daemons
// through a switch dropping 1%: a server serving 8 connections from one
// shared CQ slept on through its descriptor, every entry naming its queue
// pair, each queue pair holding one descriptor of its own, WRITEs from 4-entry and SENDs from 3-entry scatter-gather lists
// checked byte for byte at the server, and the hostile cases (another
// session naming the CQ, destroying it in use, 5 entries, a wrong lkey,
// an entry past its region). Its comment has the script.
func TestCLibrarySharedCQ(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "mrcq")
	star := testnet.NewStar(t, 2, testnet.Config{})
	if err := star.Switch.SetLoss(0.01); err != nil {
		t.Fatal(err)
	}
	a, b := star.Hosts[0], star.Hosts[1]
	socks, _ := daemons(t, dir, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	srv := start(t, ctx, b, bin, "server", socks[1])
	f := srv.ready(t) // service token addr key
	if len(f) != 4 {
		t.Fatalf("server: READY %v", f)
	}
	cli := start(t, ctx, a, bin, append([]string{"client", socks[0], b.IPv4.String()}, f...)...)
	cli.wait(t, "client")
	srv.wait(t, "server")
	for _, p := range []*started{srv, cli} {
		if !strings.Contains(p.out.String(), "PASS") {
			t.Errorf("%s: no PASS\n%s", p.cmd.Args[1], p.out.String())
		}
	}
	t.Logf("server: %s; client: %s", strings.TrimSpace(srv.out.String()), strings.TrimSpace(cli.out.String()))
}
