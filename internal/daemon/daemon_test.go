package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/control/proto"
	"github.com/metaroce/metaroce/dataplane"
	"github.com/metaroce/metaroce/internal/apptest"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/telemetry"
)

// startDaemon runs a daemon inside h's namespace and returns a client.
func startDaemon(t *testing.T, ctx context.Context, h *testnet.Host, backend config.Backend) *Client {
	return startDaemonQueues(t, ctx, h, backend, []int{0})
}

func startDaemonQueues(t *testing.T, ctx context.Context, h *testnet.Host, backend config.Backend, queues []int, mods ...func(*config.Config)) *Client {
	t.Helper()
	cfg := config.Defaults()
	ic := config.DefaultInterface(h.Port.Name)
	ic.Backend = backend
	ic.Queues = queues
	cfg.Interfaces = []config.Interface{ic}
	cfg.ControlSocket = filepath.Join(t.TempDir(), "control.sock")
	cfg.MetricsAddress = ""
	for _, m := range mods {
		m(&cfg)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	done := make(chan error, 1)
	if err := h.Go(func() { done <- Run(ctx, &cfg, log, Options{CPU: -1}) }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("daemon in %s: %v", h.Name, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("daemon in %s did not stop", h.Name)
		}
	})
	c, err := Dial(cfg.ControlSocket, 10*time.Second)
	if err != nil {
		select {
		case err := <-done:
			t.Fatalf("daemon exited: %v", err)
		default:
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestDaemonsThroughLossySwitch: two daemons, a switch dropping 1%, an
// application on each (client sessions, queue pairs) moving WRITEs from
// one to the other; every byte verified, for both backends.
func TestDaemonsThroughLossySwitch(t *testing.T) {
	for _, backend := range []config.Backend{config.BackendAFXDP, config.BackendUDP} {
		t.Run(string(backend), func(t *testing.T) {
			s := testnet.NewStar(t, 2, testnet.Config{})
			if err := s.Switch.SetLoss(0.01); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			ca := startDaemon(t, ctx, s.Hosts[0], backend)
			cb := startDaemon(t, ctx, s.Hosts[1], backend)
			st, err := cb.Do(Request{Op: "status"})
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Engines[0].Link.Backend; got != string(backend) {
				t.Fatalf("backend %q, want %q", got, backend)
			}
			const messages, size = 1024, 65536
			f := writeVerified(t, ctx, ca.path, cb.path, s.Hosts[1].IPv4, 0, messages, size)
			st, _ = ca.Do(Request{Op: "status"})
			t.Logf("%s: %.2f Gb/s, retransmitted %d of %d", backend, f.gbps(messages*size),
				st.Engines[0].Transport.DataRetransmitted, st.Engines[0].Transport.DataSent)
			if st.Engines[0].Transport.DataRetransmitted == 0 {
				t.Error("1% loss but nothing retransmitted")
			}
			cancel()
		})
	}
}

// TestMultiQueueDaemons: daemons serving two queues of a two-queue veth
// run an engine per queue and complete a verified transfer between queue
// pairs on their second engines.
func TestMultiQueueDaemons(t *testing.T) {
	s := testnet.NewStar(t, 2, testnet.Config{Link: testnet.LinkConfig{Queues: 2}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the cleanups that wait for the daemons
	start := func(h *testnet.Host) *Client {
		return startDaemonQueues(t, ctx, h, config.BackendAFXDP, []int{0, 1})
	}
	ca, cb := start(s.Hosts[0]), start(s.Hosts[1])
	st, err := ca.Do(Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Engines) != 2 || st.Engines[1].Link.Queue != 1 {
		t.Fatalf("engines %+v", st.Engines)
	}
	writeVerified(t, ctx, ca.path, cb.path, s.Hosts[1].IPv4, 1, 512, 65536)
	// Status says how the engine that carried it spent its time.
	st, err = ca.Do(Request{Op: "status"})
	if err != nil {
		t.Fatal(err)
	}
	if e := st.Engines[1]; e.TxPackets == 0 || e.Iterations == 0 || e.BusyNanos == 0 || e.IdleNanos == 0 {
		t.Fatalf("second engine after the transfer: %d packets sent, %d iterations, busy %d ns, idle %d ns",
			e.TxPackets, e.Iterations, e.BusyNanos, e.IdleNanos)
	}
	// And what its thread cost: a polling engine has run since the start.
	for i, e := range st.Engines {
		if c := e.CPU; c == nil || c.Nanos == 0 || c.UserNanos+c.SysNanos == 0 {
			t.Fatalf("engine %d: CPU %+v after the transfer", i, c)
		}
	}
	// Telemetry sees both engines, each answering its own snapshot.
	if err := ca.Watch(WatchParams{Count: 1}, func(s *telemetry.Snapshot) error {
		if len(s.Engines) != 2 || !s.Engines[0].Responsive || !s.Engines[1].Responsive || s.Engines[1].Queue != 1 {
			t.Errorf("snapshot engines: %+v", s.Engines)
		}
		for i := range s.Engines {
			if c := s.Engines[i].Engine.CPU; c == nil || c.Nanos == 0 {
				t.Errorf("snapshot engine %d: CPU %+v", i, c)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestUDPLinkKeepsPollFD: the UDP backend's wrapper must not hide the
// socket from the engine, which sleeps on it and the applications'
// doorbell in one ppoll (dataplane.PollFDer); without it the engine polls
// the link every 50 us instead of being woken.
func TestUDPLinkKeepsPollFD(t *testing.T) {
	var l dataplane.Link = &whyLink{}
	if _, ok := l.(dataplane.PollFDer); !ok {
		t.Fatal("whyLink hides PollFD")
	}
}

// TestMultiQueueQueuePairs: with two queues per interface, queue pairs on
// either engine connect to queue pairs on either engine of the peer, and
// WRITE and READ move every byte, whichever queue RSS delivers the
// handshake and the data to.
func TestMultiQueueQueuePairs(t *testing.T) {
	s := testnet.NewStar(t, 2, testnet.Config{Link: testnet.LinkConfig{Queues: 2}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	socks := make([]string, 2)
	for i, h := range s.Hosts {
		c := startDaemonQueues(t, ctx, h, config.BackendAFXDP, []int{0, 1})
		socks[i] = c.path
	}
	ca, cb := apptest.Dial(t, socks[0]), apptest.Dial(t, socks[1])
	const n = 1 << 20
	src, dst := apptest.Region(t, ca, n, client.LocalWrite), apptest.Region(t, cb, n, client.LocalWrite|client.RemoteWrite)
	for round, engines := range [][2]int{{1, 0}, {0, 1}, {1, 1}} {
		qa, qb := connectQPs(t, ctx, ca, cb, s.Hosts[1].IPv4, engines[0], engines[1])
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		for i := range src.Bytes() {
			src.Bytes()[i] = byte(i*7 + round)
		}
		if err := qa.PostWrite(1, src, 0, n, dst.Addr, dst.Key); err != nil {
			t.Fatal(err)
		}
		var c [1]client.Completion
		if _, err := qa.WaitCQ(cctx, c[:]); err != nil || c[0].Err() != nil {
			t.Fatalf("engines %v: write: %v %v", engines, err, c[0].Err())
		}
		if string(dst.Bytes()) != string(src.Bytes()) {
			t.Fatalf("engines %v: written bytes differ", engines)
		}
		ccancel()
		qa.Destroy()
		qb.Destroy()
	}
}

// TestExposeNeedsPrivilege: an application that may use the socket may
// not open the compliance memory to remote peers.
func TestExposeNeedsPrivilege(t *testing.T) {
	d := &Daemon{}
	other := proto.Cred{UID: uint32(os.Getuid()) + 4242, GID: 4242}
	_, err := d.fallback(t.Context(), other, proto.Header{V: 1, Op: "expose", Seq: 1}, []byte(`{"v":1,"seq":1,"op":"expose"}`), nil)
	var pe *proto.Error
	if !errors.As(err, &pe) || pe.Code != proto.CodeDenied {
		t.Errorf("expose from uid %d: %v, want %s", other.UID, err, proto.CodeDenied)
	}
	if !privileged(proto.Cred{UID: 0}) || !privileged(proto.Cred{UID: uint32(os.Getuid())}) {
		t.Error("root or the daemon's own user refused")
	}
}

// TestNoGenerator: the built-in traffic generator's operations are gone
// (traffic comes from applications), even for root.
func TestNoGenerator(t *testing.T) {
	d := &Daemon{}
	for _, op := range []string{"arm", "write", "target"} {
		_, err := d.fallback(t.Context(), proto.Cred{UID: 0}, proto.Header{V: 1, Op: op, Seq: 1}, []byte(`{"v":1,"seq":1,"op":"`+op+`"}`), nil)
		var pe *proto.Error
		if !errors.As(err, &pe) || pe.Code != proto.CodeUnknownOp {
			t.Errorf("%s: %v, want %s", op, err, proto.CodeUnknownOp)
		}
	}
}

// TestDialedIsASession: a Client that Dial returned is a session the
// daemon counts, whatever order the daemon serves connections in, so a
// count taken through another connection right after sees every one
// (TestPerfProcessesAndKill's baseline once missed one: a connection
// accepted but not yet served).
func TestDialedIsASession(t *testing.T) {
	s := testnet.NewStar(t, 2, testnet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // before the cleanups that wait for the daemon
	first := startDaemonQueues(t, ctx, s.Hosts[0], config.BackendUDP, []int{0})
	for i := range 20 {
		c, err := Dial(first.path, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		app := apptest.Dial(t, first.path)
		n, err := app.Daemon()
		if err != nil {
			t.Fatal(err)
		}
		// The first client, i+1 dialed here, and this application's
		// own, with every earlier application's still open.
		if want := 1 + (i + 1) + (i + 1); n.Sessions != want {
			t.Fatalf("after %d dials: %d sessions, want %d", i+1, n.Sessions, want)
		}
	}
}
