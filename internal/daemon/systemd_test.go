package daemon

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets a test run this package's Main in a child process: the
// child is the test binary itself with METAROCED_TEST_MAIN set, so the
// systemd test sees a real process with its own environment and signals.
func TestMain(m *testing.M) {
	if os.Getenv("METAROCED_TEST_MAIN") == "1" {
		os.Exit(Main("metaroced", os.Args[1:], os.Stderr))
	}
	os.Exit(m.Run())
}

// TestUnitVerifies runs systemd-analyze verify on deploy/metaroced.service,
// with ExecStart pointed at an existing executable (verify checks it), and
// fails on any complaint: verify exits 0 on unknown keys and bad values,
// only saying so.
func TestUnitVerifies(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian package systemd)")
	}
	unit, err := os.ReadFile("../../deploy/metaroced.service")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/metaroced", "ExecStart="+exe, 1)
	if text == string(unit) {
		t.Fatal("unit has no ExecStart=/usr/local/bin/metaroced")
	}
	path := filepath.Join(t.TempDir(), "metaroced.service")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// loopbackConfig writes a configuration serving lo over the UDP backend on
// a free port (no privileges needed), and returns its path.
func loopbackConfig(t *testing.T, dir string, extra string) string {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := c.LocalAddr().(*net.UDPAddr).Port
	c.Close()
	m, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	maddr := m.Addr().String()
	m.Close()
	path := filepath.Join(dir, "metaroced.yaml")
	cfg := fmt.Sprintf(`interfaces:
  - name: lo
    backend: udp
    address: 127.0.0.1
port: %d
control_socket: %s
metrics_address: %s
%s`, port, filepath.Join(dir, "control.sock"), maddr, extra)
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSystemdNotify runs the daemon as a child process with NOTIFY_SOCKET
// and WATCHDOG_USEC, as systemd would, and reads what it says: READY=1,
// then WATCHDOG=1 pings; RELOADING=1 and READY=1 around a SIGHUP reload;
// STOPPING=1 and a clean exit on SIGTERM.
func TestSystemdNotify(t *testing.T) {
	dir := t.TempDir()
	cfgPath := loopbackConfig(t, dir, "log_level: info\n")
	sock := filepath.Join(dir, "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-config", cfgPath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "METAROCED_TEST_MAIN=1", "NOTIFY_SOCKET="+sock,
		"WATCHDOG_USEC=200000") // 200 ms: pings every 100 ms
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	waited := false
	defer func() {
		if !waited {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() { // stderr is safe to read: the process has been waited for
			t.Logf("daemon stderr:\n%s", stderr.String())
		}
	}()
	// The deadline only stops a broken daemon from hanging the test; no
	// assertion depends on timing.
	ln.SetReadDeadline(time.Now().Add(15 * time.Second))
	buf := make([]byte, 4096)
	// next returns the next notification that contains want, and what
	// arrived before it.
	next := func(want string) []string {
		t.Helper()
		var before []string
		for {
			n, err := ln.Read(buf)
			if err != nil {
				t.Fatalf("waiting for %q (got %q): %v", want, before, err)
			}
			msg := string(buf[:n])
			if strings.Contains(msg, want) {
				return before
			}
			before = append(before, msg)
		}
	}
	next("READY=1")
	next("WATCHDOG=1")
	next("WATCHDOG=1")
	// A reload that changes a reloadable key.
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(mustRead(t, cfgPath), "log_level: info", "log_level: debug", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	next("RELOADING=1")
	next("READY=1")
	// A reload that changes what needs a restart is refused, and the
	// daemon still says READY=1 (it keeps running).
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(mustRead(t, cfgPath), "mtu: 1500", "", 1)+"mtu: 1400\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(syscall.SIGHUP)
	next("RELOADING=1")
	next("READY=1")
	cmd.Process.Signal(syscall.SIGTERM)
	next("STOPPING=1")
	err = <-exited
	waited = true
	if err != nil {
		t.Fatalf("daemon exit: %v", err)
	}
	// stderr is complete (and no longer written) once Wait has returned.
	if log := stderr.String(); !strings.Contains(log, "reloaded changes=[log_level]") ||
		!strings.Contains(log, "reload refused") {
		t.Errorf("want the log_level reload applied and the mtu change refused")
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
