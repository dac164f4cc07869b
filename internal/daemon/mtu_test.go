package daemon

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/dataplane/udplink"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/transport"
)

// TestMTUAboveInterface: a daemon configured for MTU 9000 on interfaces
// at 1500 refuses to start (it used to panic on the first WRITE), naming
// the interface, both MTUs and the config key; for both backends.
func TestMTUAboveInterface(t *testing.T) {
	p := testnet.NewPair(t, testnet.Config{})
	for _, backend := range []config.Backend{config.BackendAFXDP, config.BackendUDP, config.BackendAuto} {
		t.Run(string(backend), func(t *testing.T) {
			cfg := config.Defaults()
			ic := config.DefaultInterface(p.A.Port.Name)
			ic.Backend = backend
			cfg.Interfaces = []config.Interface{ic}
			cfg.ControlSocket = filepath.Join(t.TempDir(), "control.sock")
			cfg.MetricsAddress = ""
			cfg.MTU = 9000
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			if err := p.A.Go(func() { done <- Run(ctx, &cfg, log, Options{CPU: -1}) }); err != nil {
				t.Fatal(err)
			}
			var err error
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatal("daemon started at mtu 9000 on a 1500-byte interface")
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, want := range []string{p.A.Port.Name, "1500", "9000", "mtu"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			t.Log(err)
		})
	}
}

// TestDaemonsJumbo: two daemons at MTU 9000 through a switch at 9000 that
// drops 1% (the demo's topology), an application on each, 16 MiB of
// WRITEs verified byte for byte, on both backends; the AF_XDP links must
// run multi-buffer frames, and lost jumbo packets be retransmitted.
func TestDaemonsJumbo(t *testing.T) {
	for _, backend := range []config.Backend{config.BackendAFXDP, config.BackendUDP} {
		t.Run(string(backend), func(t *testing.T) {
			s := testnet.NewStar(t, 2, testnet.Config{Link: testnet.LinkConfig{MTU: 9000}})
			if err := s.Switch.SetLoss(0.01); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			jumbo := func(c *config.Config) { c.MTU = 9000 }
			ca := startDaemonQueues(t, ctx, s.Hosts[0], backend, []int{0}, jumbo)
			cb := startDaemonQueues(t, ctx, s.Hosts[1], backend, []int{0}, jumbo)
			const messages, size = 256, 65536
			f := writeVerified(t, ctx, ca.path, cb.path, s.Hosts[1].IPv4, 0, messages, size)
			sa, err := ca.Do(Request{Op: "status"})
			if err != nil {
				t.Fatal(err)
			}
			sb, _ := cb.Do(Request{Op: "status"})
			ta := sa.Engines[0].Transport
			if got := sb.Engines[0].Link.Backend; got != string(backend) {
				t.Fatalf("backend %q, want %q", got, backend)
			}
			// At MTU 9000 a 64 KiB WRITE is 8 packets (7 of 8884 bytes); at
			// 1500, 48.
			if perMsg := float64(ta.DataSent-ta.DataRetransmitted) / messages; perMsg > 12 {
				t.Errorf("%.1f data packets per 64 KiB WRITE: not jumbo", perMsg)
			}
			if why := sb.Engines[0].Link.Why; backend == config.BackendAFXDP && !strings.Contains(why, "multi-buffer") {
				t.Errorf("AF_XDP link at MTU 9000 does not say it runs multi-buffer frames: %q", why)
			}
			if dropped, _ := s.Switch.Dropped(); dropped == 0 || ta.DataRetransmitted == 0 {
				t.Errorf("switch dropped %d, retransmitted %d: the loss did not happen", dropped, ta.DataRetransmitted)
			}
			t.Logf("%s: %.2f Gb/s, %d data packets for %d WRITEs, %d retransmitted", backend, f.gbps(messages*size),
				ta.DataSent, messages, ta.DataRetransmitted)
			cancel()
		})
	}
}

// TestLinkMTUInvariant: a link whose buffers are shorter than the
// transport's datagrams at its MTU is refused before an engine runs (the
// panic at transport/send.go that MTU 9000 on 1986-byte frames caused).
func TestLinkMTUInvariant(t *testing.T) {
	p := testnet.NewPair(t, testnet.Config{})
	err := p.A.Do(func() error {
		ul, err := udplink.Open(udplink.Config{Local: p.A.IPv4, MaxPayload: 1452})
		if err != nil {
			return err
		}
		defer ul.Close()
		l := &whyLink{Link: ul}
		ok := transport.Config{MTU: 1500}
		if err := checkLinkMTU("x", l, &ok); err != nil {
			t.Errorf("mtu 1500 on 1452-byte buffers: %v", err)
		}
		big := transport.Config{MTU: 9000}
		err = checkLinkMTU(p.A.Port.Name, l, &big)
		if err == nil || !strings.Contains(err.Error(), "8952") || !strings.Contains(err.Error(), "1452") {
			t.Errorf("mtu 9000 on 1452-byte buffers: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
