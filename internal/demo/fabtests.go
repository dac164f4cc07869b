package demo

// `metaroce fabtests`: libfabric's own test suite, fabtests, run through
// the metaroce provider and, in the same run on the same links, through
// libfabric's tcp;ofi_rxm, between two network namespaces through a switch
// namespace that drops a fraction of packets. The cases and their
// arguments are runfabtests.sh's (fabtests_cases.go); each is run as
// runfabtests.sh runs it (the server, a second's pause, the client; the
// same -p, -s and -E arguments) but in the namespaces rather than over
// ssh, with a per-case timeout after which both sides are killed and the
// case is a hang. docs/libfabric.md, "fabtests".

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
)

// FabtestsResult is the JSON of `metaroce fabtests`.
type FabtestsResult struct {
	// Skipped says why nothing ran: no fabtests build and no source to
	// build one from. The command exits 0 then.
	Skipped      string  `json:"skipped,omitempty"`
	Version      string  `json:"fabtests_version"`
	Bin          string  `json:"bin,omitempty"`
	Source       string  `json:"source,omitempty"`
	ProviderPath string  `json:"provider_path,omitempty"`
	Lists        string  `json:"lists"`
	TimeoutS     float64 `json:"timeout_s"`
	// OOB: out-of-band address exchange (the programs' -E, runfabtests.sh
	// -b); otherwise in-band (-s), runfabtests.sh's default.
	OOB      bool              `json:"oob"`
	Runs     []FabtestsRun     `json:"runs"`
	Verdicts []FabtestsVerdict `json:"verdicts"`
	WallS    float64           `json:"wall_s"`
}

// FabtestsRun is every case through one provider at one loss rate.
type FabtestsRun struct {
	Provider string         `json:"provider"` // as the programs' -p names it
	Loss     float64        `json:"loss"`
	Counts   FabtestsCounts `json:"counts"`
	Cases    []FabtestsCase `json:"cases"`
	// DaemonRestarts: metaroced in a host stopped answering after a case
	// and both were started again before the next.
	DaemonRestarts int     `json:"daemon_restarts,omitempty"`
	WallS          float64 `json:"wall_s"`
}

// FabtestsCounts are a run's results.
type FabtestsCounts struct {
	Pass   int `json:"pass"`
	NotRun int `json:"notrun"`
	Fail   int `json:"fail"`
	Hang   int `json:"hang"`
	Total  int `json:"total"`
}

// FabtestsCase is one case's outcome.
type FabtestsCase struct {
	List string `json:"list"`
	Case string `json:"case"` // the list's command, without -p
	// Endpoint: rdm, msg, dgram, or "" for a unit test opening none.
	Endpoint string `json:"endpoint"`
	// Result: pass; notrun (the program reported the feature missing:
	// -FI_ENODATA or -FI_ENOSYS from both sides, or from a unit test);
	// fail; hang (not finished within the timeout: both sides killed).
	Result  string  `json:"result"`
	Seconds float64 `json:"seconds"`
	// UpstreamExcluded: fabtests' own exclude file for the provider
	// (test_configs/NAME/NAME.exclude) lists the case, so runfabtests.sh
	// would skip it by default. Run here all the same.
	UpstreamExcluded bool          `json:"upstream_excluded,omitempty"`
	Server           *FabtestsSide `json:"server"`
	Client           *FabtestsSide `json:"client,omitempty"`
	Note             string        `json:"note,omitempty"`
}

// FabtestsSide is one process of a case.
type FabtestsSide struct {
	Cmd  string `json:"cmd"`
	Exit int    `json:"exit"` // -1: killed by a signal
	// Killed: "timeout" (the case's), "client failed" (2 s after the
	// client exited non-zero, as runfabtests.sh does), or the signal
	// that ended the process by itself.
	Killed string   `json:"killed,omitempty"`
	Tail   []string `json:"tail"` // the last lines of its output
	// Errors: the last lines of its output that report an error (fabtests'
	// "[error]", "ret=-N", "FAIL"), wherever they were.
	Errors []string `json:"errors,omitempty"`
}

// FabtestsVerdict compares metaroce with another provider at one loss
// rate: the cases that one passes and metaroce does not.
type FabtestsVerdict struct {
	Loss     float64 `json:"loss"`
	Provider string  `json:"provider"`
	Baseline string  `json:"baseline"`
	// BaselinePass: the cases the baseline passes; Pass: those of them
	// the provider passes too.
	BaselinePass int `json:"baseline_pass"`
	Pass         int `json:"pass"`
	// PassesEveryBaselineCase: Missing is empty.
	PassesEveryBaselineCase bool     `json:"passes_every_baseline_case"`
	Missing                 []string `json:"missing"`
	// Extra: cases the provider passes that the baseline does not.
	Extra []string `json:"extra"`
}

type fabtestsOpts struct {
	src, cache, bin, provDir, backend, logs string
	rebuild, buildOnly, oob, allEP, check   bool
	progress, asJSON                        bool
	out                                     string
	providers                               []string
	losses                                  []float64
	lists                                   []string
	match                                   *regexp.Regexp
	timeout, serverWait                     time.Duration
	env                                     []string
}

type envList []string

func (e *envList) String() string { return strings.Join(*e, " ") }
func (e *envList) Set(v string) error {
	if !strings.Contains(v, "=") || strings.HasPrefix(v, "=") {
		return fmt.Errorf("want NAME=VALUE, not %q", v)
	}
	*e = append(*e, v)
	return nil
}

// Fabtests is `metaroce fabtests`.
func Fabtests(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce fabtests", out)
	o := fabtestsOpts{}
	defCache := os.Getenv("FABTESTS_CACHE")
	if defCache == "" {
		defCache = fabtestsDefaultCache
	}
	fs.StringVar(&o.src, "src", os.Getenv("FABTESTS_SRC"), "fabtests source when no build is cached: a libfabric tree, a fabtests tree, or a git directory with @TAG (the default is $FABTESTS_SRC)")
	fs.StringVar(&o.cache, "cache", defCache, "directory holding the fabtests build (the default is $FABTESTS_CACHE if set)")
	fs.BoolVar(&o.rebuild, "rebuild", false, "build again from -src even if the cache holds a build")
	fs.BoolVar(&o.buildOnly, "build-only", false, "build (or find) fabtests, print where, run nothing")
	fs.StringVar(&o.bin, "bin", "", "run the programs and runfabtests.sh of this directory instead of the cache's build")
	provs := fs.String("providers", "metaroce,tcp;ofi_rxm", "the programs' -p values, comma-separated")
	losses := fs.String("loss", "0,0.01", "switch loss fractions, comma-separated")
	lists := fs.String("lists", "unit,functional,short,standard", "runfabtests.sh test lists (its -t), comma-separated")
	match := fs.String("match", "", "only the cases whose command matches this regular expression")
	fs.BoolVar(&o.allEP, "all-endpoints", false, "run the lists' msg and dgram cases too (default: the RDM cases and the unit tests that open no endpoint)")
	cli.DurationVar(fs, &o.timeout, "timeout", 90*time.Second, "a case not finished by then has both sides killed and is a hang")
	cli.DurationVar(fs, &o.serverWait, "server-wait", time.Second, "pause between starting a case's server and its client (runfabtests.sh: 1s)")
	fs.BoolVar(&o.oob, "oob", false, "out-of-band address exchange: the programs' -E (runfabtests.sh -b); default in-band, -s ADDR")
	fs.StringVar(&o.provDir, "provider-dir", "", "directory holding libmetaroce-fi.so (default: $FI_PROVIDER_PATH, libmetaroce/build, /usr/local/lib/libfabric)")
	fs.StringVar(&o.backend, "backend", "udp", "metaroced backend: afxdp or udp")
	var env envList
	fs.Var(&env, "env", "NAME=VALUE for both sides of every case (FI_LOG_LEVEL=warn, METAROCE_DEBUG=1); repeatable")
	fs.StringVar(&o.logs, "logs", "", "write each side's whole output to DIR/LOSS/PROVIDER/")
	fs.BoolVar(&o.check, "check", false, "exit 1 unless metaroce passes every case each other provider passes")
	fs.BoolVar(&o.progress, "progress", true, "a line per case on standard error as it finishes")
	fs.BoolVar(&o.asJSON, "json", false, "print one JSON object instead of the tables")
	fs.StringVar(&o.out, "out", "", "also write the JSON to this file")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.env = env
	for _, p := range strings.Split(*provs, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.providers = append(o.providers, p)
		}
	}
	if len(o.providers) == 0 {
		return cli.UsageError("-providers %q: name at least one", *provs)
	}
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
	for _, l := range strings.Split(*lists, ",") {
		l = strings.TrimSpace(l)
		if _, ok := fabtestsListArrays[l]; !ok {
			return cli.UsageError("-lists %q: want some of %s", l, strings.Join(fabtestsListNames(), ", "))
		}
		o.lists = append(o.lists, l)
	}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			return cli.UsageError("-match %q: %v", *match, err)
		}
		o.match = re
	}
	if o.timeout <= 0 || o.serverWait < 0 {
		return cli.UsageError("-timeout %v, -server-wait %v: want a positive timeout and a wait of 0 or more", o.timeout, o.serverWait)
	}
	if o.backend != "afxdp" && o.backend != "udp" {
		return cli.UsageError("-backend %q: want afxdp or udp", o.backend)
	}

	start := time.Now()
	res := &FabtestsResult{Version: fabtestsVersion, Lists: strings.Join(o.lists, ","), TimeoutS: o.timeout.Seconds(), OOB: o.oob,
		Runs: []FabtestsRun{}, Verdicts: []FabtestsVerdict{}}
	var build *fabtestsBuild
	var err error
	if o.bin != "" {
		build, err = fabtestsFromBin(o.bin)
	} else {
		build, err = fabtestsFindOrBuild(o.src, o.cache, o.rebuild, os.Stderr)
	}
	if errors.Is(err, errFabtestsNoSource) {
		res.Skipped = err.Error()
		return fabtestsOutput(o, res, out)
	}
	if err != nil {
		return err
	}
	res.Bin, res.Source = build.Bin, build.Source
	if o.buildOnly {
		_, err := fmt.Fprintf(out, "fabtests %s: %s (%s)\n", fabtestsVersion, build.Bin, build.Source)
		return err
	}
	cases, err := fabtestsCases(filepath.Join(build.Bin, "runfabtests.sh"), o.lists)
	if err != nil {
		return err
	}
	var sel []fabtestsCase
	for _, c := range cases {
		if (o.allEP || c.Endpoint == "rdm" || c.Endpoint == "") && (o.match == nil || o.match.MatchString(c.Cmd)) {
			sel = append(sel, c)
		}
	}
	if len(sel) == 0 {
		return cli.UsageError("no case of %s matches (-match %q)", res.Lists, *match)
	}
	if os.Geteuid() != 0 {
		return errors.New("fabtests: needs root (network namespaces): run with sudo")
	}
	for _, p := range o.providers {
		if p == "metaroce" {
			if res.ProviderPath, err = providerDir(o.provDir); err != nil {
				return err
			}
		}
	}
	testnet.Sweep() // namespaces an earlier, killed run left behind
	for _, loss := range o.losses {
		runs, err := fabtestsAtLoss(o, build, res.ProviderPath, sel, loss)
		res.Runs = append(res.Runs, runs...)
		if err != nil {
			res.WallS = time.Since(start).Seconds()
			fabtestsOutput(o, res, out)
			return err
		}
	}
	res.Verdicts = fabtestsVerdicts(res.Runs)
	res.WallS = time.Since(start).Seconds()
	if err := fabtestsOutput(o, res, out); err != nil {
		return err
	}
	if o.check {
		for _, v := range res.Verdicts {
			if !v.PassesEveryBaselineCase {
				return fmt.Errorf("fabtests: at %s loss %s does not pass %d cases %s passes", lossPct(v.Loss), v.Provider, len(v.Missing), v.Baseline)
			}
		}
	}
	return nil
}

func lossPct(loss float64) string { return strconv.FormatFloat(loss*100, 'f', -1, 64) + "%" }

// fabtestsEnv is the environment of a case's processes: the runner's less
// what would choose or find providers, then the provider's own and -env.
func fabtestsEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if k == "FI_PROVIDER_PATH" || k == "FI_PROVIDER" || k == "METAROCE_SOCKET" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// fabtestsAtLoss builds the two-host star, sets its loss, and runs every
// case through each provider in turn: the metaroce runs beside a
// metaroced in each host, started for that provider's run and stopped
// after it (the daemons' engines take CPU the other providers' runs should
// have on a small machine).
func fabtestsAtLoss(o fabtestsOpts, build *fabtestsBuild, provDir string, cases []fabtestsCase, loss float64) ([]FabtestsRun, error) {
	star, err := testnet.OpenStar(2, testnet.Config{})
	if err != nil {
		return nil, err
	}
	defer star.Close()
	if err := star.Switch.SetLoss(loss); err != nil {
		return nil, err
	}
	var runs []FabtestsRun
	for _, prov := range o.providers {
		run, err := fabtestsProvider(o, build, provDir, star, cases, prov, loss)
		runs = append(runs, run)
		if err != nil {
			return runs, err
		}
	}
	return runs, nil
}

func fabtestsProvider(o fabtestsOpts, build *fabtestsBuild, provDir string, star *testnet.Star, cases []fabtestsCase, prov string, loss float64) (FabtestsRun, error) {
	start := time.Now()
	run := FabtestsRun{Provider: prov, Loss: loss, Cases: []FabtestsCase{}}
	client, server := star.Hosts[0], star.Hosts[1]
	envs := [2][]string{fabtestsEnv(o.env...), fabtestsEnv(o.env...)}
	var ds *daemonSet
	var startDS func() error
	if prov == "metaroce" {
		self, err := os.Executable()
		if err != nil {
			return run, err
		}
		stateDir, err := os.MkdirTemp("", "metaroce-fabtests-")
		if err != nil {
			return run, err
		}
		defer os.RemoveAll(stateDir)
		startDS = func() error {
			var err error
			if ds, err = startDaemons(self, stateDir, o.backend, "ft", []*testnet.Host{client, server}, ""); err != nil {
				ds = nil
				return fmt.Errorf("fabtests: metaroced: %w", err)
			}
			for i := range envs {
				envs[i] = fabtestsEnv(append([]string{"FI_PROVIDER_PATH=" + provDir, "METAROCE_SOCKET=" + ds.socks[i]}, o.env...)...)
			}
			return nil
		}
		if err := startDS(); err != nil {
			return run, err
		}
		defer func() {
			if ds != nil {
				ds.stop()
			}
		}()
	}
	excl, _ := fabtestsExcludes(build.Roots, prov)
	for i, c := range cases {
		fc := fabtestsRunCase(o, build, c, prov, server, client, envs, loss, i)
		fc.UpstreamExcluded = fabtestsExcluded(excl, c.Cmd)
		if ds != nil {
			if err := fabtestsDaemonsAlive(ds); err != nil {
				// A case that took a daemon down would fail every case
				// after it: start both again.
				fc.Note = strings.TrimSpace(fc.Note + " metaroced restarted after this case: " + err.Error())
				run.DaemonRestarts++
				ds.stop()
				ds = nil
				if err := startDS(); err != nil {
					run.Cases = append(run.Cases, fc)
					return fabtestsFinish(run, start), err
				}
			}
		}
		run.Cases = append(run.Cases, fc)
		fabtestsProgress(o, run, fc, len(cases))
	}
	return fabtestsFinish(run, start), nil
}

func fabtestsFinish(run FabtestsRun, start time.Time) FabtestsRun {
	run.Counts = FabtestsCounts{}
	for _, c := range run.Cases {
		switch c.Result {
		case ftPass:
			run.Counts.Pass++
		case ftNotRun:
			run.Counts.NotRun++
		case ftFail:
			run.Counts.Fail++
		case ftHang:
			run.Counts.Hang++
		}
		run.Counts.Total++
	}
	run.WallS = time.Since(start).Seconds()
	return run
}

func fabtestsProgress(o fabtestsOpts, run FabtestsRun, c FabtestsCase, n int) {
	if o.progress {
		fmt.Fprintf(os.Stderr, "fabtests: %s at %s loss [%d/%d] %s %s: %s %.1f s\n", run.Provider, lossPct(run.Loss), len(run.Cases), n,
			c.List, c.Case, resultWord(c.Result), c.Seconds)
	}
}

// fabtestsDaemonsAlive asks each daemon for its status.
func fabtestsDaemonsAlive(ds *daemonSet) error {
	for i, c := range ds.clients {
		if _, err := c.Do(daemon.Request{Op: "status"}); err != nil {
			return fmt.Errorf("%s: %w", ds.socks[i], err)
		}
	}
	return nil
}

// ftProc is one side of a case: a fabtests program in a host's namespace,
// in a process group of its own so that a kill takes its children too.
type ftProc struct {
	cmd    *exec.Cmd
	out    *tailBuffer
	done   chan struct{}
	code   int
	signal string
	killed string
	logf   *os.File
}

func startFabtest(h *testnet.Host, bin string, args, env []string, logPath string) (*ftProc, error) {
	c := exec.Command("ip", append([]string{"netns", "exec", h.Name, bin}, args...)...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c.Env = env
	p := &ftProc{cmd: c, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	var w io.Writer = p.out
	if logPath != "" {
		if f, err := os.Create(logPath); err == nil {
			fmt.Fprintf(f, "$ %s %s\n", filepath.Base(bin), strings.Join(args, " "))
			p.logf = f
			w = io.MultiWriter(p.out, f)
		}
	}
	c.Stdout, c.Stderr = w, w
	if err := c.Start(); err != nil {
		if p.logf != nil {
			p.logf.Close()
		}
		return nil, err
	}
	go func() {
		c.Wait()
		p.code = c.ProcessState.ExitCode()
		if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.signal = ws.Signal().String()
		}
		if p.logf != nil {
			p.logf.Close()
		}
		close(p.done)
	}()
	return p, nil
}

// kill ends the process group and waits for the process, 30 s at most:
// the next case must not start beside it (a server still holding its port
// would take the next case's client). On a loaded machine a killed
// fabtests program has been seen to take over 5 s to go.
func (p *ftProc) kill(why string) {
	select {
	case <-p.done:
		return
	default:
	}
	p.killed = why
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
}

func (p *ftProc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

func (p *ftProc) side(cmd string) *FabtestsSide {
	s := &FabtestsSide{Cmd: cmd, Exit: p.code, Killed: p.killed, Tail: p.out.lines(8)}
	for _, l := range p.out.lines(1 << 20) {
		if ftErrorLine.MatchString(l) {
			s.Errors = append(s.Errors, l)
		}
	}
	if len(s.Errors) > 3 {
		s.Errors = s.Errors[len(s.Errors)-3:]
	}
	if s.Tail == nil {
		s.Tail = []string{}
	}
	if p.running() {
		s.Exit, s.Killed = ftKilled, p.killed+" (still running 30 s after SIGKILL)"
	} else if s.Killed == "" && p.signal != "" {
		s.Killed = p.signal
	}
	return s
}

// fabtestsRunCase runs one case as runfabtests.sh would: a unit test on
// the server host alone (unit_test), else the server, the pause, the
// client (cs_test); a client that fails leaves the server 2 s before it
// is killed. At the timeout whatever still runs is killed: a hang.
func fabtestsRunCase(o fabtestsOpts, build *fabtestsBuild, c fabtestsCase, prov string, server, client *testnet.Host,
	envs [2][]string, loss float64, idx int) FabtestsCase {
	fc := FabtestsCase{List: c.List, Case: c.Cmd, Endpoint: c.Endpoint}
	sAddr, cAddr := server.IPv4.String(), client.IPv4.String()
	f := strings.Fields(c.Cmd)
	prog := filepath.Join(build.Bin, f[0])
	var sArgs, cArgs []string
	if c.Unit {
		// unit_test: SERVER_ADDR and GOOD_ADDR are the server's address
		// (runfabtests.sh's default -g, and its -b's SERVER_ADDR).
		for _, a := range f[1:] {
			a = strings.ReplaceAll(strings.ReplaceAll(a, "GOOD_ADDR", sAddr), "SERVER_ADDR", sAddr)
			sArgs = append(sArgs, a)
		}
		sArgs = append(sArgs, "-p", prov)
	} else {
		base := append(append([]string{}, f[1:]...), "-p", prov)
		if o.oob {
			sArgs = append(append(sArgs, base...), "-E")
			cArgs = append(append(cArgs, base...), "-E", sAddr)
		} else {
			sArgs = append(append(sArgs, base...), "-s", sAddr)
			cArgs = append(append(cArgs, base...), "-s", cAddr, sAddr)
		}
	}
	logPath := func(side string) string {
		if o.logs == "" {
			return ""
		}
		dir := filepath.Join(o.logs, lossPct(loss), strings.ReplaceAll(prov, ";", "_"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return ""
		}
		name := regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(c.List+"-"+c.Cmd, "_")
		return filepath.Join(dir, fmt.Sprintf("%03d-%s.%s.log", idx+1, name, side))
	}
	cmdline := func(args []string) string { return f[0] + " " + strings.Join(args, " ") }

	start := time.Now()
	deadline := time.NewTimer(o.timeout)
	defer deadline.Stop()
	finish := func(res string) FabtestsCase {
		fc.Result, fc.Seconds = res, time.Since(start).Seconds()
		return fc
	}
	srv, err := startFabtest(server, prog, sArgs, envs[1], logPath("server"))
	if err != nil {
		fc.Server = &FabtestsSide{Cmd: cmdline(sArgs), Exit: 127, Tail: []string{err.Error()}}
		fc.Note = "not started: " + err.Error()
		return finish(ftFail)
	}
	timedOut := false
	if c.Unit {
		select {
		case <-srv.done:
		case <-deadline.C:
			timedOut = true
			srv.kill("timeout")
		}
		fc.Server = srv.side(cmdline(sArgs))
		return finish(classifyFabtests(c, fc.Server.Exit, 0, timedOut))
	}
	select {
	case <-srv.done:
	case <-time.After(o.serverWait):
	}
	cli, err := startFabtest(client, prog, cArgs, envs[0], logPath("client"))
	if err != nil {
		srv.kill("client not started")
		fc.Server = srv.side(cmdline(sArgs))
		fc.Client = &FabtestsSide{Cmd: cmdline(cArgs), Exit: 127, Tail: []string{err.Error()}}
		return finish(ftFail)
	}
	select {
	case <-cli.done:
		if cli.code != 0 && srv.running() {
			// runfabtests.sh: sleep 2, kill -9 the server.
			select {
			case <-srv.done:
			case <-time.After(2 * time.Second):
				srv.kill("client failed")
			case <-deadline.C:
				timedOut = true
				srv.kill("timeout")
			}
		}
		if !timedOut {
			select {
			case <-srv.done:
			case <-deadline.C:
				timedOut = true
				srv.kill("timeout")
			}
		}
	case <-deadline.C:
		timedOut = true
		cli.kill("timeout")
		srv.kill("timeout")
	}
	fc.Server, fc.Client = srv.side(cmdline(sArgs)), cli.side(cmdline(cArgs))
	return finish(classifyFabtests(c, fc.Server.Exit, fc.Client.Exit, timedOut))
}

// fabtestsVerdicts compares metaroce's runs with each other provider's at
// the same loss.
func fabtestsVerdicts(runs []FabtestsRun) []FabtestsVerdict {
	vs := []FabtestsVerdict{}
	key := func(c FabtestsCase) string { return c.List + ": " + c.Case }
	for _, m := range runs {
		if m.Provider != "metaroce" {
			continue
		}
		mine := map[string]bool{}
		for _, c := range m.Cases {
			if c.Result == ftPass {
				mine[key(c)] = true
			}
		}
		for _, b := range runs {
			if b.Provider == m.Provider || b.Loss != m.Loss {
				continue
			}
			v := FabtestsVerdict{Loss: m.Loss, Provider: m.Provider, Baseline: b.Provider, Missing: []string{}, Extra: []string{}}
			theirs := map[string]bool{}
			for _, c := range b.Cases {
				if c.Result != ftPass {
					continue
				}
				theirs[key(c)] = true
				v.BaselinePass++
				if mine[key(c)] {
					v.Pass++
				} else {
					v.Missing = append(v.Missing, key(c))
				}
			}
			for _, c := range m.Cases {
				if c.Result == ftPass && !theirs[key(c)] {
					v.Extra = append(v.Extra, key(c))
				}
			}
			v.PassesEveryBaselineCase = len(v.Missing) == 0
			vs = append(vs, v)
		}
	}
	return vs
}

func resultWord(r string) string {
	if r == ftNotRun {
		return "not run"
	}
	return r
}

func fabtestsOutput(o fabtestsOpts, res *FabtestsResult, out io.Writer) error {
	if o.out != "" {
		b, err := json.MarshalIndent(res, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	printFabtests(out, res)
	return nil
}

// printFabtests writes a Markdown table per provider and loss (list,
// case, result, seconds, exit codes, the failing side's last line), a
// summary line per run and a verdict line per comparison.
func printFabtests(w io.Writer, r *FabtestsResult) {
	if r.Skipped != "" {
		fmt.Fprintln(w, r.Skipped)
		return
	}
	addr := "in-band addresses (-s)"
	if r.OOB {
		addr = "out-of-band addresses (-E)"
	}
	fmt.Fprintf(w, "fabtests %s (%s): lists %s; %s; timeout %.0f s a case; 2 hosts through a switch namespace\n",
		r.Version, r.Bin, r.Lists, addr, r.TimeoutS)
	for _, run := range r.Runs {
		fmt.Fprintf(w, "\n### %s, %s loss\n\n", run.Provider, lossPct(run.Loss))
		fmt.Fprintln(w, "| list | case | result | s | exit (server client) | note |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, c := range run.Cases {
			fmt.Fprintf(w, "| %s | %s | %s | %.1f | %s | %s |\n", c.List, c.Case, resultWord(c.Result), c.Seconds, exitsCell(c),
				strings.ReplaceAll(noteCell(c), "|", "/"))
		}
		fmt.Fprintf(w, "\n%s\n", summaryLine(run))
	}
	if len(r.Runs) > 1 {
		// Every run's summary together, for quoting.
		fmt.Fprintln(w)
		for _, run := range r.Runs {
			fmt.Fprintln(w, summaryLine(run))
		}
	}
	for _, v := range r.Verdicts {
		if v.PassesEveryBaselineCase {
			fmt.Fprintf(w, "verdict at %s loss: %s passes every case %s passes (%d)", lossPct(v.Loss), v.Provider, v.Baseline, v.BaselinePass)
		} else {
			fmt.Fprintf(w, "verdict at %s loss: %s passes %d of the %d cases %s passes; not: %s", lossPct(v.Loss), v.Provider, v.Pass,
				v.BaselinePass, v.Baseline, strings.Join(v.Missing, "; "))
		}
		if len(v.Extra) > 0 {
			fmt.Fprintf(w, "; and %d %s does not: %s", len(v.Extra), v.Baseline, strings.Join(v.Extra, "; "))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "wall %.0f s\n", r.WallS)
}

func summaryLine(run FabtestsRun) string {
	s := fmt.Sprintf("summary: %s at %s loss: %d pass, %d not run, %d fail, %d hang of %d cases (%.0f s)", run.Provider, lossPct(run.Loss),
		run.Counts.Pass, run.Counts.NotRun, run.Counts.Fail, run.Counts.Hang, run.Counts.Total, run.WallS)
	if run.DaemonRestarts > 0 {
		s += fmt.Sprintf(", metaroced restarted %d times", run.DaemonRestarts)
	}
	return s
}

var ftErrorLine = regexp.MustCompile(`(?i)\berror\b|ret=-\d+|\bfail`)

var ftSourcePath = regexp.MustCompile(`/\S*/((?:common|functional|benchmarks|unit|include)/\S+\.[ch]:)`)

func exitsCell(c FabtestsCase) string {
	one := func(s *FabtestsSide) string {
		if s == nil {
			return "-"
		}
		if s.Killed != "" {
			return "killed"
		}
		return strconv.Itoa(s.Exit)
	}
	if c.Client == nil {
		return one(c.Server)
	}
	return one(c.Server) + " " + one(c.Client)
}

// noteCell: the upstream exclusion, then for a case that did not pass the
// last line of the side that failed first (the client's, else the
// server's).
func noteCell(c FabtestsCase) string {
	var parts []string
	if c.UpstreamExcluded {
		parts = append(parts, "[excluded upstream]")
	}
	if c.Note != "" {
		parts = append(parts, c.Note)
	}
	if c.Result != ftPass {
		for _, s := range []*FabtestsSide{c.Client, c.Server} {
			if s != nil && (s.Exit != 0 || s.Killed != "") && len(s.Tail) > 0 {
				l := s.Tail[len(s.Tail)-1]
				if len(s.Errors) > 0 {
					l = s.Errors[len(s.Errors)-1]
				}
				// fabtests names its sources by their path in the build.
				l = ftSourcePath.ReplaceAllString(l, "$1")
				if len(l) > 100 {
					l = l[:100] + "…"
				}
				parts = append(parts, l)
				break
			}
		}
	}
	return strings.Join(parts, " ")
}
