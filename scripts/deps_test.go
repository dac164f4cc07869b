// Package scripts holds the repository's shell scripts; this test keeps
// deps.sh honest about what a fresh machine lacks.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeBin makes a directory for PATH holding the shell tools deps.sh uses,
// the named commands as stubs, and an apt-get that logs its arguments.
func fakeBin(t *testing.T, have ...string) (dir, log string) {
	t.Helper()
	dir = t.TempDir()
	log = filepath.Join(t.TempDir(), "apt.log")
	for _, tool := range []string{"bash", "id", "sort"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range have {
		if err := os.WriteFile(filepath.Join(dir, c), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	apt := "#!" + must(exec.LookPath("bash")) + "\necho \"$@\" >> " + log + "\n"
	if err := os.WriteFile(filepath.Join(dir, "apt-get"), []byte(apt), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, log
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

func runDeps(t *testing.T, path, root string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(path, "bash"), append([]string{"deps.sh"}, args...)...)
	cmd.Env = []string{"PATH=" + path, "DEPS_ROOT=" + root}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestDepsOnFreshMachine: with none of the tools on PATH and no libbpf
// or libfabric headers, deps.sh installs exactly the packages each purpose needs,
// once each, after an apt-get update, and says which; with everything
// there it installs nothing; without apt-get it refuses naming them.
func TestDepsOnFreshMachine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("deps.sh installs only as root; run as root to check what it would install")
	}
	empty := t.TempDir()
	for purpose, want := range map[string]string{
		"demo":     "ethtool iproute2 nftables procps",
		"install":  "gcc libfabric-dev",
		"fabtests": "autoconf automake ethtool gcc iproute2 libfabric-bin libfabric-dev libtool make nftables procps",
		"test":     "clang ethtool gcc iproute2 libbpf-dev libfabric-bin libfabric-dev libopenmpi-dev llvm make nftables openmpi-bin procps prometheus systemd tcpdump tshark",
	} {
		bin, log := fakeBin(t)
		out, err := runDeps(t, bin, empty, purpose)
		if err != nil {
			t.Fatalf("%s: %v\n%s", purpose, err, out)
		}
		calls, _ := os.ReadFile(log)
		lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "update") ||
			lines[1] != "install -y -q --no-install-recommends "+want {
			t.Errorf("%s: apt-get calls %q, want update then install of %q", purpose, lines, want)
		}
		if !strings.Contains(out, "installing the Debian packages '"+purpose+"' needs and this machine lacks: "+want) {
			t.Errorf("%s: did not say what it installs:\n%s", purpose, out)
		}
	}
	// Everything present: nothing installed.
	bin, log := fakeBin(t, "ip", "nft", "ethtool", "sysctl", "make", "clang", "llvm-strip", "promtool", "prometheus", "systemd-analyze", "tshark", "tcpdump",
		"cc", "fi_info", "fi_pingpong", "mpirun", "mpicc", "autoreconf", "automake", "libtoolize")
	hdr := filepath.Join(empty, "usr/include/bpf")
	os.MkdirAll(hdr, 0o755)
	os.WriteFile(filepath.Join(hdr, "bpf_helpers.h"), nil, 0o644)
	os.MkdirAll(filepath.Join(empty, "usr/include/rdma"), 0o755)
	os.WriteFile(filepath.Join(empty, "usr/include/rdma/fabric.h"), nil, 0o644)
	for _, purpose := range []string{"test", "install", "demo", "fabtests"} {
		if out, err := runDeps(t, bin, empty, purpose); err != nil || out != "" {
			t.Errorf("all present, %s: %v %q", purpose, err, out)
		}
	}
	if _, err := os.Stat(log); !os.IsNotExist(err) {
		t.Error("all present, yet apt-get ran")
	}
	// No apt-get: refuse, naming the packages and the command.
	bin, _ = fakeBin(t, "ip")
	os.Remove(filepath.Join(bin, "apt-get"))
	out, err := runDeps(t, bin, empty, "demo")
	if err == nil || !strings.Contains(out, "missing Debian packages for 'demo': ethtool nftables procps") ||
		!strings.Contains(out, "apt-get install ethtool nftables procps") {
		t.Errorf("without apt-get: %v\n%s", err, out)
	}
}
