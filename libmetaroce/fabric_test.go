package libmetaroce

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/internal/testnet"
)

// buildProvider builds libmetaroce-fi.so (the libfabric provider with the
// library inside) into dir, with extra compiler flags after the usual ones.
func buildProvider(t *testing.T, dir string, extra ...string) {
	t.Helper()
	if _, err := os.Stat("/usr/include/rdma/fabric.h"); err != nil {
		t.Skip("no libfabric headers (libfabric-dev)")
	}
	srcs, _ := filepath.Glob("src/*.c")
	prov, _ := filepath.Glob("fabric/*.c")
	args := append(append([]string{"-std=gnu11", "-Wall", "-Wextra", "-Werror", "-O2", "-g", "-fPIC", "-shared", "-Iinclude",
		"-o", filepath.Join(dir, "libmetaroce-fi.so")}, prov...), srcs...)
	args = append(append(args, extra...), "-lfabric", "-lpthread")
	if b, err := exec.Command("cc", args...).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, b)
	}
}

// provTest is what a provider test between two hosts needs: the provider
// and the C program prog, both built under AddressSanitizer and
// UndefinedBehaviorSanitizer, two hosts through a switch dropping 1%, and
// a daemon in each (socks, in the hosts' order).
type provTest struct {
	prov, bin string
	a, b      *testnet.Host
	socks     []string
}

func newProvTest(t *testing.T, prog string) provTest {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	dir := t.TempDir()
	prov := filepath.Join(dir, "prov")
	if err := os.Mkdir(prov, 0o755); err != nil {
		t.Fatal(err)
	}
	buildProvider(t, prov, "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer")
	bin := buildC(t, dir, prog, "-lfabric")
	star := testnet.NewStar(t, 2, testnet.Config{})
	if err := star.Switch.SetLoss(0.01); err != nil {
		t.Fatal(err)
	}
	a, b := star.Hosts[0], star.Hosts[1]
	socks, _ := daemons(t, dir, a, b)
	return provTest{prov: prov, bin: bin, a: a, b: b, socks: socks}
}

// TestFiProviderOps runs tests/fiops.c, built like the other C tests
// under AddressSanitizer and UndefinedBehaviorSanitizer, with the provider
// built so too, against one daemon: no ops table, and no member of one, of
// the fabric, event queue, domain (and its memory registration), memory
// region, completion queue, address vector and endpoint is NULL (libfabric's
// inline calls jump through them unchecked, so a NULL one crashed the
// application: fi_mr_reg did), every call the provider does not implement
// returns -FI_ENOSYS (endpoint options -FI_ENOPROTOOPT), fi_mr_reg, regv and
// regattr succeed with the requested key and refuse what they cannot be, the
// domain refuses to close under an open region, and an endpoint with no
// daemon at the socket fails with -FI_ESHUTDOWN.
func TestFiProviderOps(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	dir := t.TempDir()
	prov := filepath.Join(dir, "prov")
	if err := os.Mkdir(prov, 0o755); err != nil {
		t.Fatal(err)
	}
	buildProvider(t, prov, "-O1", "-fsanitize=address,undefined", "-fno-omit-frame-pointer")
	bin := buildC(t, dir, "fiops", "-lfabric")
	star := testnet.NewStar(t, 1, testnet.Config{})
	h := star.Hosts[0]
	socks, _ := daemons(t, dir, h)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := start(t, ctx, h, bin, prov, socks[0])
	p.wait(t, "fiops")
	if !t.Failed() {
		t.Logf("%s", strings.TrimSpace(p.out.String()))
	}
}

// PingRow is one line of fi_pingpong's report.
type PingRow struct {
	Bytes     int
	MBps      float64
	UsPerXfer float64
}

// parsePingpong reads fi_pingpong's table (bytes #sent #ack total time
// MB/sec usec/xfer Mxfers/sec).
func parsePingpong(out string) []PingRow {
	var rows []PingRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 8 || f[0] == "bytes" {
			continue
		}
		n, err := parseSize(f[0])
		if err != nil {
			continue
		}
		mb, err1 := strconv.ParseFloat(f[5], 64)
		us, err2 := strconv.ParseFloat(f[6], 64)
		if err1 != nil || err2 != nil {
			continue
		}
		rows = append(rows, PingRow{Bytes: n, MBps: mb, UsPerXfer: us})
	}
	return rows
}

func parseSize(s string) (int, error) {
	mul := 1
	switch {
	case strings.HasSuffix(s, "k"):
		mul, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mul, s = 1<<20, strings.TrimSuffix(s, "m")
	}
	v, err := strconv.ParseFloat(s, 64)
	return int(v * float64(mul)), err
}

// runPingpong runs fi_pingpong's server on b and client on a with the
// given provider and returns the client's table.
func runPingpong(ctx context.Context, a, b *testnet.Host, prov string, port int, env []string, args ...string) ([]PingRow, string, error) {
	common := append([]string{"-p", prov, "-e", "rdm", "-c", "-B", fmt.Sprint(port)}, args...)
	srv := b.Command(ctx, "fi_pingpong", common...)
	var srvOut, cliOut lockedBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	srv.Env = append(append(os.Environ(), env...), "METAROCE_SOCKET="+envSock(env, "B"))
	if err := srv.Start(); err != nil {
		return nil, "", err
	}
	defer srv.Process.Kill()
	var err error
	for try := 0; try < 50; try++ {
		time.Sleep(100 * time.Millisecond)
		cli := a.Command(ctx, "fi_pingpong", append(common[:len(common)-2:len(common)-2],
			append(append([]string{"-P", fmt.Sprint(port)}, args...), b.IPv4.String())...)...)
		cliOut = lockedBuffer{}
		cli.Stdout, cli.Stderr = &cliOut, &cliOut
		cli.Env = append(append(os.Environ(), env...), "METAROCE_SOCKET="+envSock(env, "A"))
		err = cli.Run()
		if err == nil || !strings.Contains(cliOut.String(), "failed to connect") {
			break
		}
	}
	srvErr := srv.Wait()
	out := "client:\n" + cliOut.String() + "\nserver:\n" + srvOut.String()
	if err != nil || srvErr != nil {
		return nil, out, fmt.Errorf("fi_pingpong -p %s: client %v, server %v", prov, err, srvErr)
	}
	return parsePingpong(cliOut.String()), out, nil
}

func envSock(env []string, side string) string {
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "MRSOCK_"+side+"="); ok {
			return v
		}
	}
	return ""
}

// TestFiPingpong runs Debian's fi_pingpong (-e rdm, data checked with -c)
// through the metaroce provider between two daemons, and libfabric's own
// tcp and udp providers on the same links, at 0 and 1% loss.
func TestFiPingpong(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces")
	}
	if _, err := exec.LookPath("fi_pingpong"); err != nil {
		t.Skip("no fi_pingpong (libfabric-bin)")
	}
	dir := t.TempDir()
	buildProvider(t, dir)
	for li, loss := range []float64{0, 0.01} {
		star := testnet.NewStar(t, 2, testnet.Config{})
		if err := star.Switch.SetLoss(loss); err != nil {
			t.Fatal(err)
		}
		a, b := star.Hosts[0], star.Hosts[1]
		sub := filepath.Join(dir, fmt.Sprint(li))
		if err := os.Mkdir(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		socks, _ := daemons(t, sub, a, b)
		env := []string{"FI_PROVIDER_PATH=" + dir, "MRSOCK_A=" + socks[0], "MRSOCK_B=" + socks[1]}
		for pi, prov := range []string{"metaroce", "tcp", "udp"} {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			rows, out, err := runPingpong(ctx, a, b, prov, 47000+li*10+pi, env, "-I", "200")
			cancel()
			if err != nil && prov != "metaroce" {
				// libfabric's own providers are the baseline: their
				// failures are reported, not this test's.
				t.Logf("loss %.0f%% %s: FAILED: %v", loss*100, prov, err)
				continue
			}
			if err != nil {
				t.Errorf("loss %.0f%%: %v\n%s", loss*100, err, out)
				continue
			}
			if len(rows) == 0 {
				t.Errorf("loss %.0f%% %s: no results\n%s", loss*100, prov, out)
			}
			for _, r := range rows {
				t.Logf("loss %.0f%% %-8s %7d B  %9.2f MB/s  %8.2f us/xfer", loss*100, prov, r.Bytes, r.MBps, r.UsPerXfer)
			}
		}
	}
}

// TestFiFeatures runs tests/fitest.c, built with the provider under
// AddressSanitizer and UndefinedBehaviorSanitizer, between two daemons
// through a switch dropping 1%: one server endpoint and four client
// endpoints (one domain, one process) that all talk to it. It proves many
// peers per endpoint, FI_TAGGED with FI_DIRECTED_RECV (receives posted
// per source in reverse order each take their own source's message),
// tag ignore bits, unexpected messages, FI_PEEK and FI_CLAIM, FI_SOURCE
// resolved for messages that came before their sender was inserted,
// remote CQ data on messages and on fi_writedata, fi_write,
// fi_inject_write and fi_read against heap memory the server registered
// (each byte checked), FI_EACCES for a bad key, local iov lists (fi_writev
// of 4 iovs from 4 registrations landing byte for byte and taking no
// transmit slot, fi_readv into 3, fi_writemsg and fi_readmsg with
// unregistered iovs, tagged and FI_MSG sends of 3 and 4 iovs), the iov
// limits fi_info states, a send to itself, and the server's FI_WAIT_FD
// completion queue (fi_cq_sread; FI_GETWAIT, fi_trywait and poll) whose
// wait set stays three descriptors with four peers (the endpoint's one
// shared CQ), each peer costing exactly three descriptors.
func TestFiFeatures(t *testing.T) {
	pt := newProvTest(t, "fitest")
	prov, bin, a, b, socks := pt.prov, pt.bin, pt.a, pt.b, pt.socks
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	srv := start(t, ctx, b, bin, "server", socks[1], prov, "4")
	f := srv.ready(t)
	if len(f) != 3 {
		t.Fatalf("server: READY %v", f)
	}
	cli := start(t, ctx, a, bin, append([]string{"client", socks[0], prov, "4"}, f...)...)
	cli.wait(t, "client")
	srv.wait(t, "server")
	t.Logf("client: %s\nserver: %s", strings.TrimSpace(cli.out.String()), strings.TrimSpace(srv.out.String()))
	if !strings.Contains(srv.out.String(), "PASS server, 4 peers") {
		t.Errorf("server did not pass:\n%s", srv.out.String())
	}
}
