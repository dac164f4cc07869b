package demo

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metaroce/metaroce/client"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/perf"
	"github.com/metaroce/metaroce/internal/testnet"
)

func startPerf(t *testing.T, ctx context.Context, self, dir string, a, b *testnet.Host, port int, args string) *perfRun {
	return startPerfTest(t, ctx, self, dir, a, b, port, "write-bw", args)
}

func startPerfTest(t *testing.T, ctx context.Context, self, dir string, a, b *testnet.Host, port int, test, args string) *perfRun {
	t.Helper()
	r, err := startPerfPair(ctx, self, dir, "afxdp", a, b, b.IPv4, port, test, args)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// perfFabric builds two hosts behind a switch dropping 0.5% for the perf
// tests, which run this test binary as metaroced and as metaroce perf.
func perfFabric(t *testing.T) (self, dir string, a, b *testnet.Host) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: network namespaces and AF_XDP")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	star := testnet.NewStar(t, 2, testnet.Config{})
	if err := star.Switch.SetLoss(0.005); err != nil {
		t.Fatal(err)
	}
	return self, t.TempDir(), star.Hosts[0], star.Hosts[1]
}

// TestPerfProcessesAndKill is issue 7's multi-process acceptance: two
// applications on each of two hosts run WRITE bandwidth tests at once,
// each pair with its own data; a third client is SIGKILLed mid-transfer.
// The survivors finish with every byte verified by their servers, and
// both daemons end up holding nothing for any session.
func TestPerfProcessesAndKill(t *testing.T) {
	self, dir, a, b := perfFabric(t)
	err := withDaemons(self, dir, "afxdp", false, a, b, func(ca, cb *daemon.Client) error {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		// Sessions before the applications start: the demo's own
		// control connections and these two.
		var watch []*client.Client
		var base []int
		for _, h := range []*testnet.Host{a, b} {
			c, err := client.Dial(filepath.Join(dir, h.Label+"-afxdp.sock"))
			if err != nil {
				return err
			}
			defer c.Close()
			n, err := c.Daemon()
			if err != nil {
				return err
			}
			watch, base = append(watch, c), append(base, n.Sessions)
		}
		good := []*perfRun{
			startPerf(t, ctx, self, dir, a, b, 18601, "-s 65536 -n 600 -seed 11"),
			startPerf(t, ctx, self, dir, a, b, 18602, "-s 16384 -n 2000 -q 2 -seed 12"),
		}
		doomed := startPerf(t, ctx, self, dir, a, b, 18603, "-s 65536 -n 10000000 -seed 13")
		time.Sleep(700 * time.Millisecond) // mid-transfer: the run would take minutes
		if err := doomed.cli.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		doomed.cli.Wait()
		doomed.srv.Wait() // its server sees the out-of-band socket close
		for i, r := range good {
			for _, c := range []*exec.Cmd{r.cli, r.srv} {
				if err := c.Wait(); err != nil {
					t.Errorf("pair %d: %v\nclient: %s\nserver: %s", i, err, r.cliOut.String(), r.srvOut.String())
				}
			}
			var res perf.Result
			if err := json.Unmarshal(r.cliOut.Bytes(), &res); err != nil {
				t.Errorf("pair %d: client output: %v: %s", i, err, r.cliOut.String())
				continue
			}
			if !res.Verified || len(res.Rows) != 1 || res.Rows[0].BWAvgGbps <= 0 {
				t.Errorf("pair %d: %+v", i, res)
			}
		}
		for i, c := range watch {
			deadline := time.Now().Add(20 * time.Second)
			for {
				n, err := c.Daemon()
				if err != nil {
					return err
				}
				if n.Sessions == base[i] && n.Regions == 0 && n.QPs == 0 && n.Bytes == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Errorf("daemon %d still holds %+v, want %d empty sessions", i, n, base[i])
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestPerfTests runs each perftest-style test once between two daemons
// through a switch dropping 0.5%, and checks each completes with its
// data verified and figures in its report.
func TestPerfTests(t *testing.T) {
	self, dir, a, b := perfFabric(t)
	err := withDaemons(self, dir, "afxdp", false, a, b, func(ca, cb *daemon.Client) error {
		for i, tc := range []struct{ test, args string }{
			{"write-bw", "-s 65536 -n 1000 -q 2"},
			{"read-bw", "-s 65536 -n 1000"},
			{"write-lat", "-s 64 -n 1000"},
			{"send-lat", "-s 64 -n 1000"},
			{"write-lat", "-s 64 -n 1000 -poll"},
			{"write-bw", "-a -n 20"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			r := startPerfTest(t, ctx, self, dir, a, b, 18700+i, tc.test, tc.args)
			for _, c := range []*exec.Cmd{r.cli, r.srv} {
				if err := c.Wait(); err != nil {
					t.Errorf("%s %s: %v\nclient: %s\nserver: %s", tc.test, tc.args, err, r.cliOut.String(), r.srvOut.String())
				}
			}
			cancel()
			var res perf.Result
			if err := json.Unmarshal(r.cliOut.Bytes(), &res); err != nil {
				t.Errorf("%s: client output: %v: %s", tc.test, err, r.cliOut.String())
				continue
			}
			if !res.Verified || len(res.Rows) == 0 {
				t.Errorf("%s %s: %+v", tc.test, tc.args, res)
			}
			for _, row := range res.Rows {
				bw := row.BWAvgGbps > 0 && row.MsgRateMpps > 0
				lat := row.TMinUs > 0 && row.TTypicalUs >= row.TMinUs && row.P99Us >= row.TTypicalUs
				if !bw && !lat {
					t.Errorf("%s: row without figures %+v", tc.test, row)
				}
			}
			t.Logf("%s %s: %s", tc.test, tc.args, strings.TrimSpace(r.cliOut.String()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
