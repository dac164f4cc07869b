package libmetaroce

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
)

// TestMain lets this test binary stand in for metaroced: the tests start
// daemons from os.Executable().
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "daemon" {
		os.Exit(daemon.Main("metaroce daemon", os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// asanEnv makes AddressSanitizer's reports fail the program and leaks count.
var asanEnv = "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=86"

// buildC compiles the library with a test program under AddressSanitizer,
// -Wall -Wextra -Werror, into dir, and returns the binary.
func buildC(t *testing.T, dir, prog string, extra ...string) string {
	t.Helper()
	cc, err := exec.LookPath("cc")
	if err != nil {
		t.Skip("no C compiler (cc: Debian package gcc)")
	}
	out := filepath.Join(dir, prog)
	srcs, _ := filepath.Glob("src/*.c")
	args := append([]string{"-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g", "-O1", "-fsanitize=address,undefined",
		"-fno-omit-frame-pointer", "-Iinclude", "-o", out, filepath.Join("tests", prog+".c")}, srcs...)
	args = append(append(args, extra...), "-lpthread")
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
	return out
}

// daemons runs metaroced in both hosts' namespaces and returns their
// control sockets and processes (stopped at cleanup).
func daemons(t *testing.T, dir string, hosts ...*testnet.Host) ([]string, []*exec.Cmd) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var socks []string
	var cmds []*exec.Cmd
	for i, h := range hosts {
		sock := filepath.Join(dir, h.Label+".sock")
		cfg := filepath.Join(dir, h.Label+".yaml")
		yaml := fmt.Sprintf("interfaces:\n  - name: %s\n    backend: udp\ncontrol_socket: %s\nmetrics_address: \"\"\nlog_level: warn\n",
			h.Port.Name, sock)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		c := h.Command(context.Background(), self, "daemon", "-config", cfg, "-cpu", fmt.Sprint(i%2))
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Process.Signal(syscall.SIGTERM)
			done := make(chan struct{})
			go func() { c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				c.Process.Kill()
				<-done
			}
		})
		cl, err := daemon.Dial(sock, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cl.Close()
		socks, cmds = append(socks, sock), append(cmds, c)
	}
	return socks, cmds
}

// started is a C program running with its output captured.
type started struct {
	cmd  *exec.Cmd
	out  lockedBuffer
	done chan struct{} // closed when the program has exited
}

// lockedBuffer is a bytes.Buffer the program writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func start(t *testing.T, ctx context.Context, h *testnet.Host, bin string, args ...string) *started {
	t.Helper()
	s := &started{cmd: h.Command(ctx, bin, args...), done: make(chan struct{})}
	s.cmd.Env = append(os.Environ(), asanEnv)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.out
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	return s
}

// ready waits for the program's READY line and returns its fields.
func (s *started) ready(t *testing.T) []string {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		for _, line := range strings.Split(s.out.String(), "\n") {
			if f := strings.Fields(line); len(f) > 0 && f[0] == "READY" && strings.HasSuffix(s.out.String(), "\n") {
				return f[1:]
			}
		}
		select {
		case <-s.done:
			t.Fatalf("%s: exited before READY\n%s", s.cmd.Args, s.out.String())
		case <-deadline:
			t.Fatalf("%s: no READY line\n%s", s.cmd.Args, s.out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func (s *started) wait(t *testing.T, what string) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		t.Fatalf("%s: still running\n%s", what, s.out.String())
	}
	if !s.cmd.ProcessState.Success() {
		t.Errorf("%s: %v\n%s", what, s.cmd.ProcessState, s.out.String())
	} else if !strings.Contains(s.out.String(), "PASS") && what != "server" {
		t.Errorf("%s: no PASS\n%s", what, s.out.String())
	}
}

// TestCLibraryAgainstDaemons runs the C test program between two daemons
// through a switch dropping 1%: WRITE, WRITE with immediate, READ,
// SEND/RECV with immediate, each checked byte for byte; a bad lkey, a
// range past the region and a bad rkey, each with its status; a control
// error mapped to its code. Then the daemon of one side is killed under a
// waiting program, which must see MR_ERR_DAEMON_GONE.
func TestCLibraryAgainstDaemons(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	dir := t.TempDir()
	bin := buildC(t, dir, "mrtest")
	star := testnet.NewStar(t, 2, testnet.Config{})
	if err := star.Switch.SetLoss(0.01); err != nil {
		t.Fatal(err)
	}
	a, b := star.Hosts[0], star.Hosts[1]
	socks, cmds := daemons(t, dir, a, b)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	srv := start(t, ctx, b, bin, "server", socks[1])
	f := srv.ready(t) // qpn token addr key: the client needs the token to connect
	if len(f) != 4 {
		t.Fatalf("server: READY %v", f)
	}
	cli := start(t, ctx, a, bin, append([]string{"client", socks[0], b.IPv4.String()}, f...)...)
	cli.wait(t, "client")
	srv.wait(t, "server")
	t.Logf("client: %s", strings.TrimSpace(cli.out.String()))

	g := start(t, ctx, a, bin, "gone", socks[0])
	g.ready(t)
	time.Sleep(200 * time.Millisecond) // asleep in mr_wait_cq
	if err := cmds[0].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	g.wait(t, "gone")
}
