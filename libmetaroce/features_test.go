package libmetaroce

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// waitLine waits until the program has printed a line that is exactly
// word (or has exited, which fails the test).
func (s *started) waitLine(t *testing.T, word string) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		for _, line := range strings.Split(s.out.String(), "\n") {
			if strings.TrimSpace(line) == word {
				return
			}
		}
		select {
		case <-s.done:
			t.Fatalf("%s: exited before %s\n%s", s.cmd.Args, word, s.out.String())
		case <-deadline:
			t.Fatalf("%s: no %s line\n%s", s.cmd.Args, word, s.out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestCLibraryFeatures runs tests/mrfeat.c (ASan+UBSan) between two
// daemons through a switch dropping 1%: private data both ways through a
// listener, an application's rejection with its reason and data, a wrong
// token's no_service; connection events in the completion queue (connected,
// failed/rejected, peer closed after the flushed receives, retry exceeded
// when the peer's daemon is killed, the library's daemon gone on the
// killed daemon's side) with mr_qp_state and mr_query_qp agreeing;
// unsignaled requests completing only where signaled or failed; inline
// WRITE and SEND checked byte for byte at the target after the source was
// overwritten. Its comment has the script.
func TestCLibraryFeatures(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "mrfeat")
	star := testnet.NewStar(t, 2, testnet.Config{})
	if err := star.Switch.SetLoss(0.01); err != nil {
		t.Fatal(err)
	}
	a, b := star.Hosts[0], star.Hosts[1]
	socks, cmds := daemons(t, dir, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	srv := start(t, ctx, b, bin, "server", socks[1])
	f := srv.ready(t) // service token addr key
	if len(f) != 4 {
		t.Fatalf("server: READY %v", f)
	}
	cli := start(t, ctx, a, bin, append([]string{"client", socks[0], b.IPv4.String()}, f...)...)
	srv.waitLine(t, "ACCEPTED3")
	cli.waitLine(t, "CONNECTED3")
	if err := cmds[1].Process.Kill(); err != nil { // the server's daemon
		t.Fatal(err)
	}
	srv.wait(t, "server")
	cli.wait(t, "client")
	if !strings.Contains(srv.out.String(), "PASS") {
		t.Errorf("server: no PASS\n%s", srv.out.String())
	}
	t.Logf("server: %s; client: %s", strings.TrimSpace(srv.out.String()), strings.TrimSpace(cli.out.String()))
}
