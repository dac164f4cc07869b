package libmetaroce

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// haveMPI looks for Open MPI's mpirun and mpicc, installing them through
// scripts/deps.sh (Debian packages openmpi-bin and libopenmpi-dev) when
// they are missing, as make test does.
func haveMPI(t *testing.T) {
	t.Helper()
	look := func() error {
		for _, c := range []string{"mpirun", "mpicc", "ompi_info"} {
			if _, err := exec.LookPath(c); err != nil {
				return err
			}
		}
		return nil
	}
	if look() == nil {
		return
	}
	out, derr := exec.Command("bash", filepath.Join("..", "scripts", "deps.sh"), "test").CombinedOutput()
	if err := look(); err != nil {
		t.Skipf("Open MPI cannot be installed here (Debian packages openmpi-bin, libopenmpi-dev): %v; deps.sh: %v\n%s", err, derr, out)
	}
}

// TestMPIOverProvider runs tests/mpiring.c, an MPI program of ours, under
// Debian's Open MPI with two ranks in two network namespaces, each beside
// its own metaroced, forced onto the metaroce provider: pml cm with the
// OFI MTL, and the MTL restricted to metaroce (FI_PROVIDER_PATH finds it).
// mpirun runs in the first namespace and starts the second rank's orted
// through a launcher (plm_rsh_agent) that enters the other namespace with
// ip netns exec, so its control traffic, like the ranks', stays between
// the test's namespaces. The program checks every byte of a ping-pong of
// several sizes, messages received out of tag order (unexpected ones),
// and allreduces with known sums; both ranks must print PASS. The MTL
// cannot fall back to another provider: its include list names metaroce
// only, and pml cm runs on nothing but the MTL. MPI_TEST_VERBOSE=1 adds
// the launcher's and the MTL's traces and the provider's (METAROCE_DEBUG).
func TestMPIOverProvider(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	haveMPI(t)
	if b, err := exec.Command("ompi_info").CombinedOutput(); err != nil || !strings.Contains(string(b), "MCA mtl: ofi") {
		t.Skipf("this Open MPI has no OFI MTL (ompi_info: %v)", err)
	}
	dir := t.TempDir()
	prov := filepath.Join(dir, "prov")
	if err := os.Mkdir(prov, 0o755); err != nil {
		t.Fatal(err)
	}
	buildProvider(t, prov)
	bin := filepath.Join(dir, "mpiring")
	if b, err := exec.Command("mpicc", "-O1", "-g", "-Wall", "-Wextra", "-Werror", "-o", bin, "tests/mpiring.c").CombinedOutput(); err != nil {
		t.Fatalf("mpicc: %v\n%s", err, b)
	}
	star := testnet.NewStar(t, 2, testnet.Config{})
	a, b := star.Hosts[0], star.Hosts[1]
	socks, _ := daemons(t, dir, a, b)

	// The rank's launcher picks its namespace's daemon; the rsh agent
	// enters the namespace a host address belongs to.
	rank := filepath.Join(dir, "rank.sh")
	script := fmt.Sprintf(`#!/bin/sh
case "$(ip netns identify $$)" in
%s) export METAROCE_SOCKET=%s ;;
%s) export METAROCE_SOCKET=%s ;;
*) echo "rank.sh: not in a test namespace" >&2; exit 3 ;;
esac
exec %s "$@"
`, a.Name, socks[0], b.Name, socks[1], bin)
	if err := os.WriteFile(rank, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := filepath.Join(dir, "agent.sh")
	script = fmt.Sprintf(`#!/bin/sh
# Called as an ssh would be: options, the host, then the command.
while [ "${1#-}" != "$1" ]; do shift; done
host=$1; shift
case "$host" in
%s) ns=%s ;;
%s) ns=%s ;;
*) echo "agent.sh: unknown host $host" >&2; exit 3 ;;
esac
exec ip netns exec "$ns" /bin/sh -c "$*"
`, a.IPv4, a.Name, b.IPv4, b.Name)
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	args := []string{"--allow-run-as-root", "--oversubscribe", "-np", "2",
		"--host", fmt.Sprintf("%s:1,%s:1", a.IPv4, b.IPv4),
		"--mca", "plm_rsh_agent", agent, "--mca", "plm_rsh_no_tree_spawn", "1",
		"--mca", "oob_tcp_if_include", netOf(a.IPv4.String()),
		"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "metaroce",
		"--mca", "btl", "self",
		"-x", "FI_PROVIDER_PATH=" + prov, "-x", "PATH",
		rank}
	if v := os.Getenv("MPI_TEST_VERBOSE"); v != "" {
		// Debugging a launch: what orted and the MTL do.
		args = append([]string{"--mca", "plm_base_verbose", "5", "--mca", "mtl_base_verbose", "100",
			"--mca", "mtl_ofi_verbose", "100", "--debug-daemons", "-x", "METAROCE_DEBUG=1"}, args...)
	}
	cmd := a.Command(ctx, "mpirun", args...)
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Env = append(os.Environ(), "FI_PROVIDER_PATH="+prov)
	err := cmd.Run()
	t.Logf("mpirun %s\n%s", strings.Join(args, " "), out.String())
	if err != nil {
		t.Fatalf("mpirun: %v", err)
	}
	for r := 0; r < 2; r++ {
		if !strings.Contains(out.String(), fmt.Sprintf("PASS rank %d", r)) {
			t.Errorf("rank %d did not pass", r)
		}
	}
}

// netOf is the /16 a test host's address is in: every host of a testnet
// star, and nothing outside the test's namespaces.
func netOf(ip string) string {
	f := strings.Split(ip, ".")
	return f[0] + "." + f[1] + ".0.0/16"
}
