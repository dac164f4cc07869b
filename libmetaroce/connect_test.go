package libmetaroce

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// TestCLibrarySimultaneousConnect runs tests/mrconn.c (ASan+UBSan) as two
// peers, each on its own daemon, through a switch dropping 1%: each
// listens at a service of its choosing (mr_listen_service), and once both
// are listening each connects to the other's service first
// (mr_connect_nowait) and only then accepts the other's request; both
// connections come up with MR_EVENT_CONNECTED on all four queue pairs and
// a SEND each way lands byte for byte. Its comment has the rest of the
// script.
func TestCLibrarySimultaneousConnect(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "mrconn")
	star := testnet.NewStar(t, 2, testnet.Config{})
	if err := star.Switch.SetLoss(0.01); err != nil {
		t.Fatal(err)
	}
	a, b := star.Hosts[0], star.Hosts[1]
	socks, _ := daemons(t, dir, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	gate := filepath.Join(dir, "go")
	const sa, sb = 5001, 5003
	pa := start(t, ctx, a, bin, socks[0], fmt.Sprint(sa), b.IPv4.String(), fmt.Sprint(sb), gate)
	pb := start(t, ctx, b, bin, socks[1], fmt.Sprint(sb), a.IPv4.String(), fmt.Sprint(sa), gate)
	pa.ready(t)
	pb.ready(t)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pa.wait(t, "peer a")
	pb.wait(t, "peer b")
	t.Logf("a: %s; b: %s", strings.TrimSpace(pa.out.String()), strings.TrimSpace(pb.out.String()))
}
