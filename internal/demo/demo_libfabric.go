package demo

// The libfabric demo: Debian's fi_pingpong (an unmodified libfabric
// application) through the metaroce provider (libmetaroce/fabric, loaded
// from FI_PROVIDER_PATH) between two metaroced, beside libfabric's own tcp
// and udp providers on the same links, at each loss rate.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/testnet"
)

// LibfabricResult is the JSON of `metaroce demo -topology libfabric`.
type LibfabricResult struct {
	// OK: every metaroce run passed with its data checked (fi_pingpong
	// -c). libfabric's own providers are the baseline: their failures are
	// reported in Runs, not held against the verdict.
	OK       bool           `json:"ok"`
	Provider string         `json:"provider_path"`
	Runs     []LibfabricRun `json:"runs"`
	WallS    float64        `json:"wall_s"`
}

// LibfabricRun is one fi_pingpong (-e rdm -c) between the two hosts.
type LibfabricRun struct {
	Provider string  `json:"provider"` // as fi_pingpong -p names it
	Loss     float64 `json:"loss"`
	Pass     bool    `json:"pass"`
	Error    string  `json:"error,omitempty"`
	// Rows are fi_pingpong's report: per message size, half a round
	// trip (usec/xfer) and the bandwidth it printed (MB/s, 10^6 bytes).
	Rows []PingpongRow `json:"rows"`
}

// PingpongRow is one line of fi_pingpong's table.
type PingpongRow struct {
	Bytes     int     `json:"bytes"`
	MBps      float64 `json:"mb_per_s"`
	UsPerXfer float64 `json:"us_per_xfer"`
}

type libfabricOpts struct {
	providers  []string
	losses     []float64
	iterations int
	dir        string
	backend    string
	limit      time.Duration
}

func runLibfabricDemo(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce demo -topology libfabric", out)
	fs.String("topology", "libfabric", topologyUsage)
	o := libfabricOpts{}
	provs := fs.String("providers", "metaroce,tcp,udp", "fi_pingpong -p values, comma-separated")
	losses := fs.String("loss", "0,0.01", "switch loss fractions, comma-separated")
	fs.IntVar(&o.iterations, "iterations", 200, "fi_pingpong -I: round trips per message size")
	fs.StringVar(&o.dir, "provider-dir", "", "directory holding libmetaroce-fi.so (default: $FI_PROVIDER_PATH, libmetaroce/build, /usr/local/lib/libfabric)")
	fs.StringVar(&o.backend, "backend", "udp", "metaroced backend: afxdp or udp")
	cli.DurationVar(fs, &o.limit, "run-limit", 90*time.Second, "one fi_pingpong run not finished by then fails")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("iterations", o.iterations, 1, 1<<24)); err != nil {
		return err
	}
	o.providers = strings.Split(*provs, ",")
	for _, f := range strings.Split(*losses, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return cli.UsageError("-loss %q: %v", f, err)
		}
		if err := cli.Check(cli.Prob("loss", v)); err != nil {
			return err
		}
		o.losses = append(o.losses, v)
	}
	if o.backend != "afxdp" && o.backend != "udp" {
		return cli.UsageError("-backend %q: want afxdp or udp", o.backend)
	}
	if o.limit <= 0 {
		return cli.UsageError("-run-limit %v: want a positive duration", o.limit)
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: needs root (network namespaces): run with sudo")
	}
	if _, err := exec.LookPath("fi_pingpong"); err != nil {
		return errors.New("demo: no fi_pingpong: install libfabric-bin (make deps-test)")
	}
	dir, err := providerDir(o.dir)
	if err != nil {
		return err
	}
	start := time.Now()
	res, err := libfabricRun(o, dir)
	if err != nil {
		return err
	}
	res.WallS = time.Since(start).Seconds()
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printLibfabric(out, res)
	}
	if !res.OK {
		return errors.New("demo: a metaroce fi_pingpong run failed")
	}
	return nil
}

// providerDir finds libmetaroce-fi.so.
func providerDir(dir string) (string, error) {
	cands := []string{dir}
	if dir == "" {
		cands = append(strings.Split(os.Getenv("FI_PROVIDER_PATH"), ":"), "libmetaroce/build", "/usr/local/lib/libfabric", "/usr/lib/libfabric")
	}
	for _, c := range cands {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(c, "libmetaroce-fi.so")); err == nil {
			if c == "libmetaroce/build" {
				// The checkout's own build: one older than its sources
				// speaks an older control protocol or wire format, and
				// fails in ways that do not say so.
				if src := newerSource("libmetaroce", fi.ModTime()); src != "" {
					return "", fmt.Errorf("demo: libmetaroce/build/libmetaroce-fi.so is older than %s: rebuild it with make clib", src)
				}
			}
			return filepath.Abs(c)
		}
	}
	return "", fmt.Errorf("demo: no libmetaroce-fi.so in %v: build it with make clib", cands)
}

// newerSource returns a C source or header under dir modified after t,
// or "" if there is none.
func newerSource(dir string, t time.Time) string {
	found := ""
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || found != "" {
			return filepath.SkipDir
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "tests") {
			return filepath.SkipDir
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".c" || ext == ".h") {
			if fi, err := d.Info(); err == nil && fi.ModTime().After(t) {
				found = path
			}
		}
		return nil
	})
	return found
}

// libfabricRun builds a two-host star per loss rate, starts a daemon in
// each host and runs every provider's fi_pingpong across it.
func libfabricRun(o libfabricOpts, provDir string) (*LibfabricResult, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	res := &LibfabricResult{OK: true, Provider: provDir}
	for li, loss := range o.losses {
		runs, err := libfabricAtLoss(o, self, provDir, li, loss)
		if err != nil {
			return nil, err
		}
		for _, r := range runs {
			if r.Provider == "metaroce" && !r.Pass {
				res.OK = false
			}
		}
		res.Runs = append(res.Runs, runs...)
	}
	return res, nil
}

func libfabricAtLoss(o libfabricOpts, self, provDir string, li int, loss float64) ([]LibfabricRun, error) {
	star, err := testnet.OpenStar(2, testnet.Config{})
	if err != nil {
		return nil, err
	}
	defer star.Close()
	if err := star.Switch.SetLoss(loss); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metaroce-libfabric-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	a, b := star.Hosts[0], star.Hosts[1]
	ds, err := startDaemons(self, dir, o.backend, "lf", []*testnet.Host{a, b}, "")
	if err != nil {
		return nil, err
	}
	defer ds.stop()
	var runs []LibfabricRun
	for pi, prov := range o.providers {
		ctx, cancel := context.WithTimeout(context.Background(), o.limit)
		env := []string{"FI_PROVIDER_PATH=" + provDir}
		rows, out, err := pingpong(ctx, a, b, prov, 47100+li*16+pi, env, ds.socks[0], ds.socks[1], o.iterations)
		cancel()
		if rows == nil {
			rows = []PingpongRow{} // JSON [] rather than null
		}
		r := LibfabricRun{Provider: prov, Loss: loss, Rows: rows, Pass: err == nil && len(rows) > 0}
		if err != nil {
			r.Error = err.Error() + ": " + lastLines(out, 6)
		} else if len(rows) == 0 {
			r.Error = "no results: " + lastLines(out, 6)
		}
		runs = append(runs, r)
	}
	return runs, nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, " | ")
}

// syncBuffer is written by a process while the demo may read it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pingpong runs fi_pingpong -e rdm -c: the server in b's namespace, the
// client in a's (retrying until the server's out-of-band TCP port
// listens). Each talks to its own host's daemon (METAROCE_SOCKET).
func pingpong(ctx context.Context, a, b *testnet.Host, prov string, port int, env []string, sockA, sockB string, iters int) ([]PingpongRow, string, error) {
	common := []string{"-p", prov, "-e", "rdm", "-c", "-I", fmt.Sprint(iters)}
	srv := b.Command(ctx, "fi_pingpong", append(common, "-B", fmt.Sprint(port))...)
	var srvOut, cliOut syncBuffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	srv.Env = append(append(os.Environ(), env...), "METAROCE_SOCKET="+sockB)
	if err := srv.Start(); err != nil {
		return nil, "", err
	}
	defer srv.Process.Kill()
	var err error
	for try := 0; try < 50; try++ {
		time.Sleep(100 * time.Millisecond)
		cliOut = syncBuffer{}
		cli := a.Command(ctx, "fi_pingpong", append(common, "-P", fmt.Sprint(port), b.IPv4.String())...)
		cli.Stdout, cli.Stderr = &cliOut, &cliOut
		cli.Env = append(append(os.Environ(), env...), "METAROCE_SOCKET="+sockA)
		err = cli.Run()
		if err == nil || !strings.Contains(cliOut.String(), "failed to connect") || ctx.Err() != nil {
			break
		}
	}
	srvErr := srv.Wait()
	out := "client: " + cliOut.String() + "\nserver: " + srvOut.String()
	if err == nil && srvErr != nil {
		err = fmt.Errorf("server: %w", srvErr)
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("not finished in time: %w", err)
		}
		return nil, out, fmt.Errorf("fi_pingpong -p %s: %w", prov, err)
	}
	return parsePingpong(cliOut.String()), out, nil
}

// parsePingpong reads fi_pingpong's table: bytes #sent #ack total time
// MB/sec usec/xfer Mxfers/sec.
func parsePingpong(out string) []PingpongRow {
	var rows []PingpongRow
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) != 8 || f[0] == "bytes" {
			continue
		}
		n, err := parsePingSize(f[0])
		mb, err1 := strconv.ParseFloat(f[5], 64)
		us, err2 := strconv.ParseFloat(f[6], 64)
		if err != nil || err1 != nil || err2 != nil {
			continue
		}
		rows = append(rows, PingpongRow{Bytes: n, MBps: mb, UsPerXfer: us})
	}
	return rows
}

// parsePingSize reads fi_pingpong's sizes: 64, 1k, 1.5k, 64k, 1m.
func parsePingSize(s string) (int, error) {
	mul := 1.0
	switch {
	case strings.HasSuffix(s, "k"):
		mul, s = 1<<10, strings.TrimSuffix(s, "k")
	case strings.HasSuffix(s, "m"):
		mul, s = 1<<20, strings.TrimSuffix(s, "m")
	}
	v, err := strconv.ParseFloat(s, 64)
	return int(v * mul), err
}

func printLibfabric(w io.Writer, r *LibfabricResult) {
	fmt.Fprintf(w, "metaroce demo -topology libfabric: fi_pingpong -e rdm -c, 2 hosts through a lossy switch; verdict ok %v\n", r.OK)
	fmt.Fprintf(w, "%-6s %-9s %-5s %8s %12s %10s\n", "loss", "provider", "pass", "bytes", "us/xfer", "MB/s")
	for _, run := range r.Runs {
		if len(run.Rows) == 0 {
			fmt.Fprintf(w, "%-6s %-9s %-5v %s\n", fmt.Sprintf("%.1f%%", run.Loss*100), run.Provider, run.Pass, run.Error)
		}
		for _, row := range run.Rows {
			fmt.Fprintf(w, "%-6s %-9s %-5v %8d %12.2f %10.2f\n", fmt.Sprintf("%.1f%%", run.Loss*100), run.Provider, run.Pass,
				row.Bytes, row.UsPerXfer, row.MBps)
		}
	}
}
