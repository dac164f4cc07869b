package daemon

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
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
		t.Skip("systemd-analyze not installed (Debian package systemd; make deps installs it)")
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
	// The hardening keeps its score: exposure 2.4 of 10 when written
	// (root, AF_XDP, BPF and netlink are what it must keep); fail above 3.
	out, err = exec.Command(sa, "security", "--offline=yes", "--threshold=30", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 3.0: %v\n%s", err, out)
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
	// A reload that changes reloadable keys: the level, and the format
	// (what follows is JSON).
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(mustRead(t, cfgPath), "log_level: info", "log_level: debug\nlog_format: json", 1)), 0o644); err != nil {
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
	if log := stderr.String(); !strings.Contains(log, `"msg":"reloaded","changes":["log_level","log_format"]`) ||
		!strings.Contains(log, `"msg":"reload refused"`) {
		t.Errorf("want the log_level and log_format reload applied (JSON from then on) and the mtu change refused")
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

// unitValue returns the value of key in the unit file's text.
func unitValue(t *testing.T, unit, key string) string {
	t.Helper()
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("unit has no %s", key)
	return ""
}

// TestUnitCapabilities runs the daemon on AF_XDP inside a namespace the
// way the unit does (bounding set cut to CapabilityBoundingSet, no new
// privileges, LimitMEMLOCK) and sees it reach READY=1; then drops each of
// those capabilities in turn and sees it fail: the set is the smallest
// that works.
func TestUnitCapabilities(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces, XDP and AF_XDP")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("setpriv not installed (Debian package util-linux)")
	}
	unit := mustRead(t, "../../deploy/metaroced.service")
	caps := strings.Fields(unitValue(t, unit, "CapabilityBoundingSet"))
	if got := unitValue(t, unit, "AmbientCapabilities"); got != strings.Join(caps, " ") {
		t.Fatalf("AmbientCapabilities %q differ from CapabilityBoundingSet %q", got, caps)
	}
	memlock := unitValue(t, unit, "LimitMEMLOCK")
	if memlock == "infinity" {
		memlock = "unlimited"
	}
	// Raising the hard memlock limit needs CAP_SYS_RESOURCE, which a
	// sandboxed root may lack; then the daemon runs with the limit it
	// inherits (one queue's UMEM fits the usual 8 MiB).
	limit := []string{"prlimit", "--memlock=" + memlock, "--"}
	if out, err := exec.Command("prlimit", "--memlock="+memlock, "--", "true").CombinedOutput(); err != nil {
		t.Logf("cannot apply LimitMEMLOCK=%s here (%s): inherited limit", memlock, strings.TrimSpace(string(out)))
		limit = nil
	}
	p := testnet.NewPair(t, testnet.Config{})
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// start runs the daemon with the bounding set cut to keep, and
	// returns whether it said READY=1 (true) or exited (false, with its
	// log).
	start := func(keep []string) (bool, string) {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "metaroced.yaml")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf("interfaces:\n  - name: %s\n    backend: afxdp\ncontrol_socket: %s\nmetrics_address: \"\"\n",
			p.A.Port.Name, filepath.Join(dir, "control.sock"))), 0o644); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(dir, "notify.sock")
		ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		bset := "-all"
		for _, c := range keep {
			bset += ",+" + strings.ToLower(strings.TrimPrefix(c, "CAP_"))
		}
		args := append(append([]string{}, limit...), setpriv, "--no-new-privs", "--bounding-set", bset, "--", exe, "-config", cfg)
		cmd := p.A.Command(context.Background(), args[0], args[1:]...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Env = append(os.Environ(), "METAROCED_TEST_MAIN=1", "NOTIFY_SOCKET="+sock)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		ready := make(chan bool, 1)
		go func() {
			buf := make([]byte, 512)
			for {
				n, err := ln.Read(buf)
				if err != nil {
					return // closed: the daemon exited
				}
				if strings.Contains(string(buf[:n]), "READY=1") {
					ready <- true
					return
				}
			}
		}()
		select {
		case <-ready:
			cmd.Process.Signal(syscall.SIGTERM)
			if err := <-exited; err != nil {
				t.Errorf("daemon with %v: exit after SIGTERM: %v", keep, err)
			}
			return true, stderr.String()
		case <-exited:
			return false, stderr.String()
		}
	}
	if ok, log := start(caps); !ok {
		t.Fatalf("daemon with %v did not start:\n%s", caps, log)
	}
	for i, c := range caps {
		fewer := append(append([]string{}, caps[:i]...), caps[i+1:]...)
		ok, log := start(fewer)
		if ok {
			t.Errorf("daemon started without %s: the unit grants more than it needs", c)
			continue
		}
		t.Logf("without %s: %s", c, lastLine(log))
	}
}

func lastLine(s string) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return l[len(l)-1]
}
