package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/telemetry"
)

// watchOnce is the child's side: one watch snapshot, printed as JSON.
func watchOnce(sock string) int {
	c, err := Dial(sock, 5*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	err = c.Watch(WatchParams{Count: 1, Conns: 64}, func(s *telemetry.Snapshot) error {
		return json.NewEncoder(os.Stdout).Encode(s)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestWatchScopedToOwner: with a socket mode that lets any user in, an
// unprivileged user's watch shows every engine's totals but none of
// root's connections (their ids and peers are what a forged RESET
// needs), while root's watch lists them.
func TestWatchScopedToOwner(t *testing.T) {
	s := testnet.NewStar(t, 2, testnet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	open := func(c *config.Config) { c.SocketMode = 0o666 }
	ca := startDaemonQueues(t, ctx, s.Hosts[0], config.BackendUDP, []int{0}, open)
	cb := startDaemonQueues(t, ctx, s.Hosts[1], config.BackendUDP, []int{0}, open)
	a, b := apptest.Dial(t, ca.path), apptest.Dial(t, cb.path)
	connectQPs(t, ctx, a, b, s.Hosts[1].IPv4, 0, 0)

	// The child runs as nobody: it must reach the socket and the binary.
	for d := filepath.Dir(ca.path); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	exe, _ := os.Executable()
	bin := filepath.Join(os.TempDir(), fmt.Sprintf("daemon-test-watch-%d", os.Getpid()))
	if err := copyFile(exe, bin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(bin) })

	watch := func(uid uint32) telemetry.Snapshot {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Env = []string{"METAROCED_TEST_WATCH=" + ca.path}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid}}
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("watch as uid %d: %v: %s", uid, err, stderr)
		}
		var snap telemetry.Snapshot
		if err := json.Unmarshal(out, &snap); err != nil {
			t.Fatalf("watch as uid %d: %v: %s", uid, err, out)
		}
		return snap
	}
	root, nobody := watch(0), watch(65534)
	if len(root.Engines) != 1 || len(root.Engines[0].Top) == 0 {
		t.Fatalf("root's watch lists no connection: %+v", root.Engines)
	}
	if len(nobody.Engines) != 1 || nobody.Engines[0].Conns.Total != root.Engines[0].Conns.Total {
		t.Fatalf("nobody's watch lost the engine's totals: %+v", nobody.Engines)
	}
	if n := len(nobody.Engines[0].Top); n != 0 {
		t.Fatalf("nobody's watch lists %d of root's connections: %+v", n, nobody.Engines[0].Top)
	}
	cancel()
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
