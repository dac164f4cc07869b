package control_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control"
	"github.com/metaroce/metaroce/dataplane"
)

// logRecorder is a slog.Handler that keeps every record's message and
// attributes as text.
type logRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (r *logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *logRecorder) WithGroup(string) slog.Handler            { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Message)
	rec.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	r.mu.Lock()
	r.lines = append(r.lines, b.String())
	r.mu.Unlock()
	return nil
}

// find returns the lines that contain s.
func (r *logRecorder) find(s string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, l := range r.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// waitLog waits (10 s at most) for a line containing s.
func (r *logRecorder) waitLog(t *testing.T, s string) []string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if l := r.find(s); len(l) > 0 {
			return l
		}
	}
	t.Fatalf("no log line with %q; have %q", s, r.find(""))
	return nil
}

// TestAcceptSurvivesEMFILE is issue 22's finding 4: the process runs out
// of descriptors (RLIMIT_NOFILE lowered to what it has open, the rest
// held), a client connects, and the daemon's accept fails with EMFILE
// again and again; it logs the episode once, and when the descriptors
// are freed it accepts that client's session and new ones, and says how
// many accepts failed.
func TestAcceptSurvivesEMFILE(t *testing.T) {
	rec := &logRecorder{}
	sock, stop := serveEngines(t, []*control.Engine{memEngine(t, netip.MustParseAddr("10.9.1.1"), dataplane.EngineConfig{})}, slog.New(rec))
	defer stop()

	// Exhaust the descriptor table.
	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	open, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	lim := old
	lim.Cur = uint64(len(open) + 16)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var held []int
	release := func() {
		for _, fd := range held {
			unix.Close(fd)
		}
		held = nil
		unix.Setrlimit(unix.RLIMIT_NOFILE, &old)
	}
	defer release()
	for {
		fd, err := unix.Open("/dev/null", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err == unix.EMFILE {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, fd)
		if len(held) > int(lim.Cur) {
			t.Fatal("RLIMIT_NOFILE did not bind")
		}
	}
	if len(held) == 0 {
		t.Fatal("no descriptor could be opened under the lowered limit")
	}
	// One free descriptor: the client's socket takes it and connects
	// (the kernel queues the connection), and the daemon's accept finds
	// none for its end.
	unix.Close(held[len(held)-1])
	held = held[:len(held)-1]
	type dialed struct {
		c   *client.Client
		err error
	}
	dc := make(chan dialed, 1)
	go func() { c, err := client.Dial(sock); dc <- dialed{c, err} }()
	warn := rec.waitLog(t, "accept failing")
	if !strings.Contains(warn[0], "too many open files") {
		t.Errorf("the log line does not name the error: %q", warn[0])
	}
	time.Sleep(50 * time.Millisecond) // several more failed accepts
	if n := len(rec.find("accept failing")); n != 1 {
		t.Errorf("%d log lines for one episode, want 1", n)
	}

	release()
	var first dialed
	select {
	case first = <-dc:
	case <-time.After(10 * time.Second):
		t.Fatal("the session that connected during the episode was never served")
	}
	if first.err != nil {
		t.Fatal(first.err)
	}
	defer first.c.Close()
	back := rec.waitLog(t, "accepting sessions again")
	if !strings.Contains(back[0], "failed_accepts=") || strings.Contains(back[0], "failed_accepts=0") {
		t.Errorf("the recovery line has no count: %q", back[0])
	}
	c2, err := client.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if _, err := c2.CreateQP(client.QPOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := first.c.CreateQP(client.QPOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s / %s", warn[0], back[0])
}
