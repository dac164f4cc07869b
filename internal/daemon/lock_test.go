package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/metaroce/metaroce/control/config"
	"github.com/metaroce/metaroce/internal/testnet"
)

// TestSecondDaemonTouchesNothing: a second daemon pointed at a running
// daemon's control socket, or at its interface with another socket, exits
// naming the first one's pid and what it serves, and the first daemon
// still answers on its socket afterwards (its socket file was not
// removed, its interface not taken).
func TestSecondDaemonTouchesNothing(t *testing.T) {
	s := testnet.NewStar(t, 1, testnet.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := s.Hosts[0]
	first := startDaemon(t, ctx, h, config.BackendUDP)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, sock := range map[string]string{
		"same socket":                first.path,
		"same interface and address": filepath.Join(t.TempDir(), "other.sock"),
	} {
		cfg := config.Defaults()
		ic := config.DefaultInterface(h.Port.Name)
		ic.Backend = config.BackendUDP
		cfg.Interfaces = []config.Interface{ic}
		cfg.ControlSocket = sock
		cfg.MetricsAddress = ""
		done := make(chan error, 1)
		if err := h.Go(func() { done <- Run(ctx, &cfg, log, Options{CPU: -1}) }); err != nil {
			t.Fatal(err)
		}
		err := <-done
		if !errors.Is(err, ErrAlreadyServed) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
			t.Fatalf("%s: second daemon: %v; want already served by pid %d", name, err, os.Getpid())
		}
		if st, err := first.Do(Request{Op: "status"}); err != nil || len(st.Engines) != 1 {
			t.Fatalf("%s: the first daemon after the second's attempt: %v", name, err)
		}
		if _, err := os.Stat(first.path); err != nil {
			t.Fatalf("%s: the first daemon's socket: %v", name, err)
		}
	}
	cancel()
}

// TestUnknownInterfaceNamed: a configured interface that does not exist is
// refused naming the key, the name and the interfaces there are.
func TestUnknownInterfaceNamed(t *testing.T) {
	cfg := config.Defaults()
	cfg.Interfaces = []config.Interface{config.DefaultInterface("nosuch0")}
	cfg.ControlSocket = filepath.Join(t.TempDir(), "control.sock")
	cfg.MetricsAddress = ""
	err := Run(context.Background(), &cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), Options{CPU: -1})
	if err == nil || !strings.Contains(err.Error(), `interfaces[0].name "nosuch0": no such interface`) || !strings.Contains(err.Error(), "lo") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Stat(cfg.ControlSocket); !os.IsNotExist(err) {
		t.Fatalf("a daemon that failed left its socket: %v", err)
	}
}
