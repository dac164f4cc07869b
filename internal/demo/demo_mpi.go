package demo

// The MPI demo: Debian's Open MPI across N hosts (network namespaces
// around a switch namespace that drops a fraction of packets), R ranks a
// host, over the metaroce libfabric provider (pml cm, the OFI MTL) and
// beside it over Open MPI's own TCP BTL (pml ob1, btl tcp,self), at each
// loss rate. Each runs the OSU micro-benchmarks (a standard suite: built
// from OSU_SRC into a cache, never part of this repository) with their
// data validation on, and a data-parallel training loop of ours
// (mpi/ddp.c: a 25 MB float32 allreduce a step, every element checked).

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/wire"
)

//go:embed mpi/ddp.c
var ddpSource []byte

// MPIResult is the JSON of `metaroce demo -topology mpi` (field names
// are documented in docs/demo.md and kept stable).
type MPIResult struct {
	// OK: every metaroce run completed with its data checks passed (OSU
	// -c on every size, the training loop's check on every element).
	// The TCP runs are the baseline: their failures are reported in
	// their entries and in BaselineOK, not held against OK.
	OK             bool               `json:"ok"`
	BaselineOK     bool               `json:"baseline_ok"`
	Hosts          int                `json:"hosts"`
	RanksPerHost   int                `json:"ranks_per_host"`
	Ranks          int                `json:"ranks"`
	Losses         []float64          `json:"losses"`
	Provider       string             `json:"provider_path"`
	Backend        string             `json:"backend"`
	MPI            string             `json:"mpi_version"`
	OSU            MPIOSU             `json:"osu"`
	Settings       MPISettings        `json:"settings"`
	Transports     []MPITransport     `json:"transports"`
	Benchmarks     []MPIBench         `json:"benchmarks"`
	Training       []MPITraining      `json:"training"`
	Ratios         []MPIRatio         `json:"ratios"`
	TrainingRatios []MPITrainingRatio `json:"training_ratios"`
	PNG            string             `json:"png,omitempty"`
	Errors         []string           `json:"errors,omitempty"`
	WallS          float64            `json:"wall_s"`
}

// MPIOSU says which OSU build ran, or why none did.
type MPIOSU struct {
	Available bool   `json:"available"`
	Version   string `json:"version,omitempty"`
	Source    string `json:"source,omitempty"`
	Dir       string `json:"dir,omitempty"`
	Missing   string `json:"missing,omitempty"`
}

// MPISettings are the knobs every run shared.
type MPISettings struct {
	MinBytes       int     `json:"min_bytes"`
	MaxBytes       int     `json:"max_bytes"`
	Iterations     int     `json:"osu_iterations"`
	Warmup         int     `json:"osu_warmup"`
	BWIterations   int     `json:"osu_bw_iterations"`
	Validation     bool    `json:"osu_validation"`
	TrainBytes     int     `json:"train_bytes"`
	TrainSteps     int     `json:"train_steps"`
	TrainWarmup    int     `json:"train_warmup"`
	YieldWhenIdle  bool    `json:"mpi_yield_when_idle"`
	Oversubscribed bool    `json:"oversubscribed"`
	CPUs           int     `json:"cpus"`
	DaemonCPUs     []int   `json:"daemon_cpus"` // each daemon's pinned CPU; empty: not pinned
	Offloads       bool    `json:"veth_offloads"`
	RunLimitS      float64 `json:"run_limit_s"`
}

// MPITransport is one contender: the mpirun arguments that choose it and
// what carries ranks of one host to each other.
type MPITransport struct {
	Name       string   `json:"name"`
	MPIRunArgs []string `json:"mpirun_args"`
	IntraHost  string   `json:"intra_host"`
}

// MPIBench is one OSU benchmark run (one mpirun).
type MPIBench struct {
	Transport string  `json:"transport"`
	Loss      float64 `json:"loss"`
	Benchmark string  `json:"benchmark"`
	Ranks     int     `json:"ranks"`
	// Metric names the rows' figure: latency_us (OSU's average latency
	// per operation) or bandwidth_mb_s (osu_bw's MB/s, 10^6 bytes).
	Metric string `json:"metric"`
	// Pass: mpirun exited 0, every size in the range has a row, and with
	// validation on every row says Pass.
	Pass bool `json:"pass"`
	// Validated: OSU's -c was on and every row it printed said Pass.
	Validated bool     `json:"validated"`
	Error     string   `json:"error,omitempty"`
	WallS     float64  `json:"wall_s"`
	Rows      []OSURow `json:"rows"`
	// Daemons: metaroce only, what the hosts' daemons counted during the
	// run, summed over them.
	Daemons *MPIDaemonCounters `json:"daemon_counters,omitempty"`
}

// MPIDaemonCounters are transport counters of all hosts' daemons over
// one run (the difference of two status reads).
type MPIDaemonCounters struct {
	DataSent          uint64 `json:"data_packets_sent"`
	Retransmitted     uint64 `json:"packets_retransmitted"`
	Timeouts          uint64 `json:"timeouts"`
	RNRNacksReceived  uint64 `json:"rnr_nacks_received"`
	MessagesFailed    uint64 `json:"messages_failed"`
	ConnsFailed       uint64 `json:"connections_failed"`
	KeepaliveFailures uint64 `json:"keepalive_failures"`
	// NacksReceived counts every NACK the senders got, by reason
	// (RNR, OUT_OF_WINDOW, ...), the reasons seen only.
	NacksReceived map[string]uint64 `json:"nacks_received"`
	// UDPRcvbufErrors are datagrams the hosts' kernels dropped for a full
	// socket receive buffer (/proc/net/snmp Udp RcvbufErrors, summed over
	// the hosts' namespaces): with the udp backend, loss on the host
	// rather than at the switch.
	UDPRcvbufErrors uint64 `json:"udp_rcvbuf_errors"`
}

// OSURow is one size of an OSU benchmark.
type OSURow struct {
	Bytes         int     `json:"bytes"`
	LatencyUs     float64 `json:"latency_us,omitempty"`
	BandwidthMBps float64 `json:"bandwidth_mb_s,omitempty"`
	Validation    string  `json:"validation,omitempty"` // OSU's column: Pass or Fail
}

// MPITraining is one run of the training loop (mpi/ddp.c).
type MPITraining struct {
	Transport string  `json:"transport"`
	Loss      float64 `json:"loss"`
	Ranks     int     `json:"ranks"`
	Bytes     int     `json:"gradient_bytes"` // per rank, float32
	Steps     int     `json:"steps"`
	Warmup    int     `json:"warmup_steps"`
	// Verified: the program ran to its end and found every element of
	// every step on every rank equal to the exact expected sum.
	Verified        bool  `json:"verified"`
	ElementsChecked int64 `json:"elements_checked"`
	ElementErrors   int64 `json:"element_errors"`
	// Per measured step (warm-up excluded), each the slowest rank's: a
	// step is the backward pass (filling the buffer), the allreduce and
	// the optimizer step; the check is outside. p99 is nearest-rank, the
	// maximum for 20 steps.
	StepMedianMs      float64 `json:"step_median_ms"`
	StepP99Ms         float64 `json:"step_p99_ms"`
	AllreduceMedianMs float64 `json:"allreduce_median_ms"`
	AllreduceP99Ms    float64 `json:"allreduce_p99_ms"`
	// AlgBWMBps: gradient bytes over the median allreduce (MB/s).
	AlgBWMBps   float64            `json:"allreduce_algbw_mb_s"`
	StepMs      []float64          `json:"step_ms"`
	AllreduceMs []float64          `json:"allreduce_ms"`
	Error       string             `json:"error,omitempty"`
	WallS       float64            `json:"wall_s"`
	Daemons     *MPIDaemonCounters `json:"daemon_counters,omitempty"`
}

// MPIRatio is metaroce's time over TCP's for one benchmark, loss and
// size (below 1: metaroce faster).
type MPIRatio struct {
	Loss       float64 `json:"loss"`
	Benchmark  string  `json:"benchmark"`
	Bytes      int     `json:"bytes"`
	MetaroceUs float64 `json:"metaroce_us"`
	TCPUs      float64 `json:"tcp_us"`
	Ratio      float64 `json:"metaroce_over_tcp"`
	// BothPassed: both runs passed as a whole; false when one failed at
	// a larger size after measuring this one.
	BothPassed bool `json:"both_runs_passed"`
}

// MPITrainingRatio compares the training loop's median step.
type MPITrainingRatio struct {
	Loss           float64 `json:"loss"`
	MetaroceStepMs float64 `json:"metaroce_step_median_ms"`
	TCPStepMs      float64 `json:"tcp_step_median_ms"`
	Ratio          float64 `json:"metaroce_over_tcp"`
}

type mpiOpts struct {
	hosts, perHost   int
	losses           []float64
	transports       []string
	benchmarks       []string
	minSize, maxSize int
	iters, warmup    int
	bwIters          int
	validate         bool
	trainBytes       int
	trainSteps       int
	trainWarmup      int
	osuSrc, osuCache string
	osuRebuild       bool
	noOSU            bool
	provDir          string
	backend          string
	limit            time.Duration
	out              string
	outSet           bool
	yield            bool
	offloads         bool
	logs             string
	debug            bool
	daemonYAML       string
	extraArgs        []string
	pinDaemons       bool
	daemonLog        string
}

var (
	mpiTransports = []string{"metaroce", "tcp"}
	mpiBenchmarks = []string{"osu_latency", "osu_bw", "osu_allreduce", "osu_alltoall", "osu_bcast", "osu_allgather"}
)

func runMPIDemo(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce demo -topology mpi", out)
	fs.String("topology", "mpi", topologyUsage)
	o := mpiOpts{}
	fs.IntVar(&o.hosts, "hosts", 4, "hosts (network namespaces around the switch), one metaroced each")
	fs.IntVar(&o.perHost, "ranks-per-host", 2, "MPI ranks on each host")
	losses := fs.String("loss", "0,0.01", "switch loss fractions, comma-separated")
	trans := fs.String("transports", strings.Join(mpiTransports, ","), "contenders: metaroce (pml cm, mtl ofi, the metaroce provider) and tcp (pml ob1, btl tcp,self)")
	benches := fs.String("benchmarks", strings.Join(mpiBenchmarks, ","), "OSU benchmarks, comma-separated (none: only the training loop)")
	sizes := fs.String("sizes", "8:4194304", "OSU -m MIN:MAX: message sizes in bytes (powers of two between)")
	fs.IntVar(&o.iters, "iterations", 5, "OSU -i: timed iterations per size (osu_latency and the collectives)")
	fs.IntVar(&o.warmup, "warmup", 1, "OSU -x: untimed iterations per size before them")
	fs.IntVar(&o.bwIters, "bw-iterations", 2, "OSU -i for osu_bw, whose iteration is a window of 64 messages")
	fs.BoolVar(&o.validate, "validate", true, "OSU -c: check every received buffer (-u 0: no extra validation warm-up)")
	cli.IntSizeVar(fs, &o.trainBytes, "train-bytes", 25_000_000, "the training loop's gradient buffer per rank (float32), allreduced each step")
	fs.IntVar(&o.trainSteps, "train-steps", 10, "measured training steps")
	fs.IntVar(&o.trainWarmup, "train-warmup", 2, "training steps before them, not measured")
	fs.StringVar(&o.osuSrc, "osu-src", os.Getenv("OSU_SRC"), "OSU micro-benchmarks source: a tree or a git directory (DIR@REF), built once into -osu-cache (default $OSU_SRC)")
	fs.StringVar(&o.osuCache, "osu-cache", osuDefaultCache, "where the OSU build is kept")
	fs.BoolVar(&o.osuRebuild, "osu-rebuild", false, "build OSU again from -osu-src even if -osu-cache has a build")
	fs.StringVar(&o.provDir, "provider-dir", "", "directory holding libmetaroce-fi.so (default: $FI_PROVIDER_PATH, libmetaroce/build, /usr/local/lib/libfabric)")
	fs.StringVar(&o.backend, "backend", "udp", "metaroced backend: udp or afxdp")
	cli.DurationVar(fs, &o.limit, "run-limit", 120*time.Second, "one mpirun (a benchmark or the training loop) not finished by then fails")
	fs.StringVar(&o.out, "out", ".", "directory for mpi-collectives.png and mpi-demo.json (the JSON's figures)")
	fs.BoolVar(&o.yield, "yield", true, "mpirun --mca mpi_yield_when_idle 1: ranks waiting for a message yield the CPU (this machine has fewer cores than ranks)")
	fs.BoolVar(&o.offloads, "offloads", false, "leave veth offloads on (TCP then sends 64 KB GSO super-packets that the switch drops whole)")
	fs.StringVar(&o.logs, "logs", "", "keep every mpirun's output in DIR")
	fs.BoolVar(&o.debug, "debug", false, "METAROCE_DEBUG=1 for the ranks (the provider's trace on their stderr; with -logs)")
	fs.BoolVar(&o.pinDaemons, "pin-daemons", true, "pin daemon i's engine to CPU i mod NumCPU (metaroced -cpu); false leaves them to the scheduler")
	fs.StringVar(&o.daemonLog, "daemon-log-level", "warn", "the daemons' log_level (debug, info, warn, error), on the demo's stderr")
	fs.StringVar(&o.daemonYAML, "daemon-yaml", "", "extra lines for every metaroced's configuration (e.g. a transport: section)")
	extra := fs.String("mpirun-args", "", "more mpirun arguments for every run, space-separated (e.g. --mca mtl_base_verbose 100)")
	asJSON := fs.Bool("json", false, "print one JSON object (the PNG only with an explicit -out)")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "out" {
			o.outSet = true
		}
	})
	if err := cli.Check(cli.Int("hosts", o.hosts, 2, 64), cli.Int("ranks-per-host", o.perHost, 1, 64),
		cli.Int("iterations", o.iters, 1, 1<<20), cli.Int("warmup", o.warmup, 0, 1<<20), cli.Int("bw-iterations", o.bwIters, 1, 1<<20),
		cli.Int("train-bytes", o.trainBytes, 0, 1<<30), cli.Int("train-steps", o.trainSteps, 1, 1<<20),
		cli.Int("train-warmup", o.trainWarmup, 0, 1<<20)); err != nil {
		return err
	}
	o.extraArgs = strings.Fields(*extra)
	if o.trainBytes%4 != 0 {
		return cli.UsageError("-train-bytes %d: want a multiple of 4 (float32)", o.trainBytes)
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
	for _, t := range strings.Split(*trans, ",") {
		if !slices.Contains(mpiTransports, t) {
			return cli.UsageError("-transports %q: want some of %s", t, strings.Join(mpiTransports, ", "))
		}
		o.transports = append(o.transports, t)
	}
	if *benches != "none" && *benches != "" {
		for _, b := range strings.Split(*benches, ",") {
			if !slices.Contains(mpiBenchmarks, b) {
				return cli.UsageError("-benchmarks %q: want some of %s, or none", b, strings.Join(mpiBenchmarks, ", "))
			}
			o.benchmarks = append(o.benchmarks, b)
		}
	}
	lo, hi, ok := strings.Cut(*sizes, ":")
	var e1, e2 error
	o.minSize, e1 = strconv.Atoi(lo)
	o.maxSize, e2 = strconv.Atoi(hi)
	if !ok || e1 != nil || e2 != nil || o.minSize < 1 || o.maxSize < o.minSize || o.maxSize > 1<<30 {
		return cli.UsageError("-sizes %q: want MIN:MAX in bytes, 1 <= MIN <= MAX <= 2^30", *sizes)
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
	for _, c := range []string{"mpirun", "mpicc", "ompi_info"} {
		if _, err := exec.LookPath(c); err != nil {
			return fmt.Errorf("demo: no %s: install Open MPI (Debian openmpi-bin, libopenmpi-dev: make deps-test)", c)
		}
	}
	var provDir string
	if slices.Contains(o.transports, "metaroce") {
		info, err := exec.Command("ompi_info").CombinedOutput()
		if err != nil || !strings.Contains(string(info), "MCA mtl: ofi") {
			return fmt.Errorf("demo: this Open MPI has no OFI MTL (ompi_info: %v): metaroce cannot be run under it", err)
		}
		if provDir, err = providerDir(o.provDir); err != nil {
			return err
		}
	}
	start := time.Now()
	res, err := mpiDemo(o, provDir, out)
	if res == nil {
		return err
	}
	if !*asJSON || o.outSet {
		png, perr := plotMPI(res, o.out)
		if perr != nil {
			res.Errors = append(res.Errors, "plot: "+perr.Error())
		}
		res.PNG = png
	}
	res.WallS = time.Since(start).Seconds()
	if !*asJSON || o.outSet {
		// The figures beside the PNG, so a readable run keeps its JSON.
		os.MkdirAll(o.out, 0o755)
		if b, jerr := json.MarshalIndent(res, "", "  "); jerr == nil {
			if werr := os.WriteFile(filepath.Join(o.out, "mpi-demo.json"), append(b, '\n'), 0o644); werr != nil {
				fmt.Fprintf(os.Stderr, "demo: %v\n", werr)
			}
		}
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if e := enc.Encode(res); e != nil && err == nil {
			err = e
		}
	} else {
		printMPI(out, res)
	}
	if err != nil {
		return err
	}
	if !res.OK {
		return errors.New("demo: a metaroce MPI run failed or its data did not check (see the errors above)")
	}
	return nil
}

// mpiDemo builds the hosts once, finds (or builds) OSU, compiles the
// training loop, and runs every transport at every loss rate.
func mpiDemo(o mpiOpts, provDir string, log io.Writer) (*MPIResult, error) {
	testnet.Sweep()
	res := &MPIResult{OK: true, BaselineOK: true, Hosts: o.hosts, RanksPerHost: o.perHost, Ranks: o.hosts * o.perHost,
		Losses: o.losses, Provider: provDir, Backend: o.backend,
		Benchmarks: []MPIBench{}, Training: []MPITraining{}, Ratios: []MPIRatio{}, TrainingRatios: []MPITrainingRatio{}}
	if v, err := exec.Command("mpirun", "--version").Output(); err == nil {
		res.MPI = strings.SplitN(strings.TrimSpace(string(v)), "\n", 2)[0]
	}
	res.Settings = MPISettings{MinBytes: o.minSize, MaxBytes: o.maxSize, Iterations: o.iters, Warmup: o.warmup, BWIterations: o.bwIters,
		Validation: o.validate, TrainBytes: o.trainBytes, TrainSteps: o.trainSteps, TrainWarmup: o.trainWarmup,
		YieldWhenIdle: o.yield, Oversubscribed: o.hosts*o.perHost+o.hosts > runtime.NumCPU(), CPUs: runtime.NumCPU(),
		Offloads: o.offloads, RunLimitS: o.limit.Seconds(), DaemonCPUs: []int{}}
	for i := 0; o.pinDaemons && i < o.hosts; i++ {
		res.Settings.DaemonCPUs = append(res.Settings.DaemonCPUs, i%runtime.NumCPU())
	}
	var osu *osuBuild
	if len(o.benchmarks) > 0 {
		b, err := osuFindOrBuild(o.osuSrc, o.osuCache, o.osuRebuild, log)
		if err != nil {
			if !errors.Is(err, errOSUMissing) {
				// A build that was tried and failed is an error of the
				// demo's, not a missing suite.
				return nil, err
			}
			res.OSU.Missing = err.Error()
			fmt.Fprintf(log, "demo: %v\ndemo: running the training loop only\n", err)
		} else {
			osu = b
			res.OSU = MPIOSU{Available: true, Version: b.Version, Source: b.Source, Dir: b.Dir}
		}
	} else {
		res.OSU.Missing = "not asked for (-benchmarks none)"
	}
	dir, err := os.MkdirTemp("", "metaroce-mpi-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// Every namespace runs the same binaries: they must be readable from
	// all of them (a temporary directory is).
	os.Chmod(dir, 0o755)
	ddp := ""
	if o.trainBytes > 0 {
		src := filepath.Join(dir, "ddp.c")
		ddp = filepath.Join(dir, "ddp")
		if err := os.WriteFile(src, ddpSource, 0o644); err != nil {
			return nil, err
		}
		if b, err := exec.Command("mpicc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", ddp, src).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("demo: mpicc ddp.c: %v\n%s", err, b)
		}
	}
	if o.logs != "" {
		if err := os.MkdirAll(o.logs, 0o755); err != nil {
			return nil, err
		}
	}
	star, err := testnet.OpenStar(o.hosts, testnet.Config{Link: testnet.LinkConfig{NoOffloads: !o.offloads}})
	if err != nil {
		return nil, err
	}
	defer star.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env := &mpiEnv{o: o, dir: dir, star: star, self: self, provDir: provDir, osu: osu, ddp: ddp, log: log}
	if err := env.scripts(); err != nil {
		return nil, err
	}
	for _, t := range o.transports {
		res.Transports = append(res.Transports, MPITransport{Name: t, MPIRunArgs: env.transportArgs(t), IntraHost: mpiIntraHost[t]})
	}
	for _, loss := range o.losses {
		if err := star.Switch.SetLoss(loss); err != nil {
			return nil, err
		}
		for _, t := range o.transports {
			if err := env.runTransport(res, t, loss); err != nil {
				return res, err
			}
		}
	}
	res.Ratios, res.TrainingRatios = mpiRatios(res)
	for _, b := range res.Benchmarks {
		if !b.Pass {
			res.Errors = append(res.Errors, fmt.Sprintf("%s %s at %g loss: %s", b.Transport, b.Benchmark, b.Loss, b.Error))
			if b.Transport == "metaroce" {
				res.OK = false
			} else {
				res.BaselineOK = false
			}
		}
	}
	for _, tr := range res.Training {
		if !tr.Verified {
			res.Errors = append(res.Errors, fmt.Sprintf("%s training loop at %g loss: %s", tr.Transport, tr.Loss, tr.Error))
			if tr.Transport == "metaroce" {
				res.OK = false
			} else {
				res.BaselineOK = false
			}
		}
	}
	return res, nil
}

// mpiIntraHost says what carries two ranks of one host to each other.
// pml cm hands every message to its MTL, so over metaroce they go
// through the host's daemon; the TCP run is given the same treatment
// (btl tcp,self, no shared memory: vader left out), so neither transport
// has shared memory and both carry intra-host traffic in their own stack,
// off the lossy switch.
var mpiIntraHost = map[string]string{
	"metaroce": "the metaroce provider through the host's daemon (pml cm: the MTL carries everything; no shared memory)",
	"tcp":      "TCP over the host's own address (btl tcp,self: vader left out, so no shared memory for either contender)",
}

type mpiEnv struct {
	o       mpiOpts
	dir     string
	star    *testnet.Star
	self    string
	provDir string
	osu     *osuBuild
	ddp     string
	log     io.Writer
	agent   string
	rank    string
	socks   []string // the running daemons' sockets, one per host
	daemons *daemonSet
	runs    int
}

// scripts writes the rsh agent (mpirun starts each host's orted through
// it: it enters the namespace a host address belongs to) and the rank
// wrapper (it points a rank at its own host's daemon socket).
func (e *mpiEnv) scripts() error {
	var agent, rank strings.Builder
	agent.WriteString("#!/bin/sh\n# Called as an ssh would be: options, the host, then the command.\n" +
		"while [ \"${1#-}\" != \"$1\" ]; do shift; done\nhost=$1; shift\ncase \"$host\" in\n")
	rank.WriteString("#!/bin/sh\ncase \"$(ip netns identify $$)\" in\n")
	for _, h := range e.star.Hosts {
		fmt.Fprintf(&agent, "%s) ns=%s ;;\n", h.IPv4, h.Name)
		fmt.Fprintf(&rank, "%s) export METAROCE_SOCKET=%s ;;\n", h.Name, filepath.Join(e.dir, h.Label+"-mpi.sock"))
	}
	agent.WriteString("*) echo \"agent.sh: unknown host $host\" >&2; exit 3 ;;\nesac\nexec ip netns exec \"$ns\" /bin/sh -c \"$*\"\n")
	// Line-buffered standard output (stdbuf, coreutils), so that a run
	// killed at -run-limit still shows the sizes it had measured.
	exe := "exec \"$@\"\n"
	if _, err := exec.LookPath("stdbuf"); err == nil {
		exe = "exec stdbuf -oL \"$@\"\n"
	}
	rank.WriteString("*) echo \"rank.sh: not in a demo namespace\" >&2; exit 3 ;;\nesac\n" + exe)
	e.agent, e.rank = filepath.Join(e.dir, "agent.sh"), filepath.Join(e.dir, "rank.sh")
	if err := os.WriteFile(e.agent, []byte(agent.String()), 0o755); err != nil {
		return err
	}
	return os.WriteFile(e.rank, []byte(rank.String()), 0o755)
}

// hostNet is the /16 every host address is in, and nothing outside the
// demo's namespaces: Open MPI's out-of-band and TCP BTL are held to it.
func (e *mpiEnv) hostNet() string {
	f := strings.Split(e.star.Hosts[0].IPv4.String(), ".")
	return f[0] + "." + f[1] + ".0.0/16"
}

// transportArgs are the mpirun arguments that choose a transport.
func (e *mpiEnv) transportArgs(t string) []string {
	switch t {
	case "metaroce":
		return []string{"--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "mtl_ofi_provider_include", "metaroce",
			"--mca", "btl", "self", "-x", "FI_PROVIDER_PATH=" + e.provDir}
	default:
		return []string{"--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", e.hostNet()}
	}
}

// mpirunArgs is a whole mpirun command line for np ranks, perHost on
// each of the first hosts.
func (e *mpiEnv) mpirunArgs(t string, np, perHost int, prog ...string) []string {
	var hosts []string
	for i := 0; i < (np+perHost-1)/perHost; i++ {
		hosts = append(hosts, fmt.Sprintf("%s:%d", e.star.Hosts[i].IPv4, perHost))
	}
	args := []string{"--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", fmt.Sprint(np),
		"--host", strings.Join(hosts, ","),
		"--mca", "plm_rsh_agent", e.agent, "--mca", "plm_rsh_no_tree_spawn", "1",
		"--mca", "oob_tcp_if_include", e.hostNet()}
	if e.o.yield {
		args = append(args, "--mca", "mpi_yield_when_idle", "1")
	}
	args = append(args, e.transportArgs(t)...)
	if e.o.debug {
		args = append(args, "-x", "METAROCE_DEBUG=1")
	}
	args = append(args, e.o.extraArgs...)
	args = append(args, "-x", "PATH", e.rank)
	return append(args, prog...)
}

// runTransport runs every benchmark and the training loop over t at the
// switch's current loss.
func (e *mpiEnv) runTransport(res *MPIResult, t string, loss float64) error {
	np := e.o.hosts * e.o.perHost
	if e.osu != nil {
		for _, b := range e.o.benchmarks {
			ranks, per := np, e.o.perHost
			if b == "osu_latency" || b == "osu_bw" {
				ranks, per = 2, 1 // two ranks on two hosts
			}
			iters := e.o.iters
			if b == "osu_bw" {
				iters = e.o.bwIters
			}
			prog := []string{e.osu.program(b), "-m", fmt.Sprintf("%d:%d", e.o.minSize, e.o.maxSize),
				"-i", fmt.Sprint(iters), "-x", fmt.Sprint(e.o.warmup)}
			if e.o.validate {
				prog = append(prog, "-c", "-u", "0")
			}
			fmt.Fprintf(os.Stderr, "demo: %s %s, %d ranks, %g loss\n", t, b, ranks, loss)
			start := time.Now()
			outText, counters, err := e.run(t, loss, b, ranks, per, prog)
			if counters == nil && t == "metaroce" {
				return err // no daemons: nothing else can run
			}
			r := MPIBench{Transport: t, Loss: loss, Benchmark: b, Ranks: ranks, Metric: "latency_us", WallS: time.Since(start).Seconds(),
				Daemons: counters}
			if b == "osu_bw" {
				r.Metric = "bandwidth_mb_s"
			}
			r.Rows = parseOSU(outText.stdout, b == "osu_bw")
			want := osuSizes(e.o.minSize, e.o.maxSize)
			r.Validated = e.o.validate && len(r.Rows) > 0
			for _, row := range r.Rows {
				if row.Validation != "Pass" {
					r.Validated = false
				}
			}
			switch {
			case err != nil:
				r.Error = err.Error() + ": " + lastLines(outText.all, 12)
			case len(r.Rows) != len(want):
				r.Error = fmt.Sprintf("%d of %d sizes reported: %s", len(r.Rows), len(want), lastLines(outText.all, 8))
			case e.o.validate && !r.Validated:
				r.Error = "OSU validation failed: " + lastLines(outText.all, 8)
			default:
				r.Pass = true
			}
			res.Benchmarks = append(res.Benchmarks, r)
		}
	}
	if e.ddp != "" {
		n := e.o.trainBytes / 4
		fmt.Fprintf(os.Stderr, "demo: %s training loop, %d ranks x %d bytes, %g loss\n", t, np, e.o.trainBytes, loss)
		start := time.Now()
		outText, counters, err := e.run(t, loss, "ddp", np, e.o.perHost,
			[]string{e.ddp, "-n", fmt.Sprint(n), "-s", fmt.Sprint(e.o.trainSteps), "-w", fmt.Sprint(e.o.trainWarmup)})
		if counters == nil && t == "metaroce" {
			return err
		}
		tr := parseDDP(outText.stdout, e.o.trainSteps, e.o.trainWarmup)
		tr.Transport, tr.Loss, tr.Ranks, tr.Bytes, tr.Steps, tr.Warmup = t, loss, np, e.o.trainBytes, e.o.trainSteps, e.o.trainWarmup
		tr.WallS = time.Since(start).Seconds()
		tr.Daemons = counters
		if tr.AllreduceMedianMs > 0 {
			tr.AlgBWMBps = float64(e.o.trainBytes) / (tr.AllreduceMedianMs * 1e3)
		}
		if err != nil {
			tr.Verified = false
			tr.Error = err.Error() + ": " + lastLines(outText.all, 12)
		} else if !tr.Verified && tr.Error == "" {
			tr.Error = "no verdict: " + lastLines(outText.all, 8)
		}
		res.Training = append(res.Training, tr)
	}
	return nil
}

// run is one mpirun over t. For metaroce it starts a daemon on every host
// first and stops them after, so each run starts from fresh daemons (one
// run's failure, or its ranks killed at -run-limit, cannot leave state
// behind for the next) and the TCP runs have the CPUs to themselves; it
// returns the daemons' counters over the run (nil, and the error, when
// the daemons did not start).
func (e *mpiEnv) run(t string, loss float64, what string, np, perHost int, prog []string) (mpiOutput, *MPIDaemonCounters, error) {
	if t != "metaroce" {
		out, err := e.mpirun(t, loss, what, np, perHost, prog)
		return out, nil, err
	}
	hosts := append([]*testnet.Host(nil), e.star.Hosts...)
	ds, err := mpiStartDaemons(e.self, e.dir, e.o.backend, hosts, e.o.daemonYAML, e.o.daemonLog, e.o.pinDaemons)
	if err != nil {
		return mpiOutput{}, nil, fmt.Errorf("demo: daemons: %w", err)
	}
	e.daemons = ds
	defer func() { ds.stop(); e.daemons = nil }()
	before := e.counters()
	out, err := e.mpirun(t, loss, what, np, perHost, prog)
	c := e.countersSince(before)
	if c == nil {
		c = &MPIDaemonCounters{NacksReceived: map[string]uint64{}}
	}
	return out, c, err
}

// mpiStartDaemons starts a metaroced in each host's namespace, as
// startDaemons does, its engine pinned to CPU i mod NumCPU with pin and
// left to the scheduler without.
func mpiStartDaemons(self, dir, backend string, hosts []*testnet.Host, extra, logLevel string, pin bool) (ds *daemonSet, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	ds = &daemonSet{cancel: cancel}
	defer func() {
		if err != nil {
			ds.stop()
		}
	}()
	for i, h := range hosts {
		sock := filepath.Join(dir, h.Label+"-mpi.sock")
		cfg := filepath.Join(dir, h.Label+"-mpi.yaml")
		yaml := fmt.Sprintf("interfaces:\n  - name: %s\n    backend: %s\ncontrol_socket: %s\nmetrics_address: \"\"\nlog_level: %s\n",
			h.Port.Name, backend, sock, logLevel) + extra
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return ds, err
		}
		args := []string{"daemon", "-config", cfg}
		if pin {
			args = append(args, "-cpu", fmt.Sprint(i%runtime.NumCPU()))
		}
		c := h.Command(ctx, self, args...)
		c.Stderr = os.Stderr
		if err := c.Start(); err != nil {
			return ds, err
		}
		ds.cmds = append(ds.cmds, c)
		ds.socks = append(ds.socks, sock)
	}
	for _, sock := range ds.socks {
		cl, err := daemon.Dial(sock, 10*time.Second)
		if err != nil {
			return ds, fmt.Errorf("daemon %s: %w", sock, err)
		}
		ds.clients = append(ds.clients, cl)
	}
	return ds, nil
}

// counters reads the daemons' counters summed (nil without daemons).
func (e *mpiEnv) counters() *MPIDaemonCounters {
	if e.daemons == nil {
		return nil
	}
	c := &MPIDaemonCounters{NacksReceived: map[string]uint64{}}
	for _, cl := range e.daemons.clients {
		st, err := cl.Do(daemon.Request{Op: "status"})
		if err != nil {
			return nil
		}
		for _, en := range st.Engines {
			t := en.Transport
			c.DataSent += t.DataSent
			c.Retransmitted += t.DataRetransmitted
			c.Timeouts += t.Timeouts
			c.RNRNacksReceived += t.NacksReceived[wire.NackRNR]
			c.MessagesFailed += t.MessagesFailed
			c.ConnsFailed += t.ConnsFailed
			c.KeepaliveFailures += t.KeepaliveFailures
			for r, n := range t.NacksReceived {
				if n > 0 {
					c.NacksReceived[wire.NackReason(r).String()] += n
				}
			}
		}
	}
	for _, h := range e.star.Hosts {
		c.UDPRcvbufErrors += udpRcvbufErrors(h)
	}
	return c
}

// countersSince is what the daemons counted since before.
func (e *mpiEnv) countersSince(before *MPIDaemonCounters) *MPIDaemonCounters {
	now := e.counters()
	if now == nil || before == nil {
		return nil
	}
	d := &MPIDaemonCounters{DataSent: now.DataSent - before.DataSent, Retransmitted: now.Retransmitted - before.Retransmitted,
		Timeouts: now.Timeouts - before.Timeouts, RNRNacksReceived: now.RNRNacksReceived - before.RNRNacksReceived,
		MessagesFailed: now.MessagesFailed - before.MessagesFailed, ConnsFailed: now.ConnsFailed - before.ConnsFailed,
		KeepaliveFailures: now.KeepaliveFailures - before.KeepaliveFailures, NacksReceived: map[string]uint64{},
		UDPRcvbufErrors: now.UDPRcvbufErrors - before.UDPRcvbufErrors}
	for r, n := range now.NacksReceived {
		if n > before.NacksReceived[r] {
			d.NacksReceived[r] = n - before.NacksReceived[r]
		}
	}
	return d
}

// udpRcvbufErrors reads Udp RcvbufErrors of h's namespace.
func udpRcvbufErrors(h *testnet.Host) uint64 {
	out, err := h.Run("cat", "/proc/net/snmp")
	if err != nil {
		return 0
	}
	var names []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i < len(f) {
				v, _ := strconv.ParseUint(f[i], 10, 64)
				return v
			}
		}
	}
	return 0
}

// mpirun runs one mpirun in the first host's namespace and returns its
// output. A run past -run-limit is killed with every process it left in
// the hosts' namespaces (the daemons excepted).
func (e *mpiEnv) mpirun(t string, loss float64, what string, np, perHost int, prog []string) (mpiOutput, error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.o.limit)
	defer cancel()
	args := e.mpirunArgs(t, np, perHost, prog...)
	cmd := e.star.Hosts[0].Command(ctx, "mpirun", args...)
	// The ranks' standard output is parsed apart from their standard
	// error (the provider's trace, Open MPI's complaints), which would
	// otherwise break its lines; the log and errors have both.
	var out, stdout syncBuffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, &stdout), &out
	cmd.Env = append(os.Environ(), "FI_PROVIDER_PATH="+e.provDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second // an orted in another namespace may hold the output open
	err := cmd.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("not finished within -run-limit %v (killed)", e.o.limit)
	} else if err != nil {
		err = fmt.Errorf("mpirun: %w", err)
	}
	if err != nil {
		e.killLeftovers()
	}
	e.runs++
	if e.o.logs != "" {
		name := fmt.Sprintf("%02d-%s-loss%g-%s.log", e.runs, t, loss, what)
		text := "$ mpirun " + strings.Join(args, " ") + "\n" + out.String()
		if err != nil {
			text += "\n# " + err.Error() + "\n"
		}
		os.WriteFile(filepath.Join(e.o.logs, name), []byte(text), 0o644)
	}
	return mpiOutput{stdout: stdout.String(), all: out.String()}, err
}

// mpiOutput is one mpirun's output: the ranks' standard output, and
// everything, interleaved as it came.
type mpiOutput struct{ stdout, all string }

// killLeftovers kills what a failed mpirun left in the hosts' namespaces
// (orted and ranks that did not notice): processes of the demo's own
// namespaces, never its daemons.
func (e *mpiEnv) killLeftovers() {
	keep := map[int]bool{os.Getpid(): true}
	if e.daemons != nil {
		for _, c := range e.daemons.cmds {
			keep[c.Process.Pid] = true
		}
	}
	for _, h := range e.star.Hosts {
		b, err := exec.Command("ip", "netns", "pids", h.Name).Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !keep[pid] {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
}

// osuSizes are the sizes OSU runs for -m min:max: powers of two from min
// (OSU starts at min and doubles) up to max.
func osuSizes(min, max int) []int {
	var s []int
	for n := min; n <= max; n *= 2 {
		s = append(s, n)
	}
	return s
}

// parseOSU reads an OSU benchmark's table: lines of a size, its figure
// and, with -c, Pass or Fail.
func parseOSU(out string, bw bool) []OSURow {
	rows := []OSURow{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		n, err := strconv.Atoi(f[0])
		v, err2 := strconv.ParseFloat(f[1], 64)
		if err != nil || err2 != nil || n <= 0 {
			continue
		}
		r := OSURow{Bytes: n}
		if bw {
			r.BandwidthMBps = v
		} else {
			r.LatencyUs = v
		}
		if len(f) >= 3 && (f[2] == "Pass" || f[2] == "Fail") {
			r.Validation = f[2]
		}
		rows = append(rows, r)
	}
	return rows
}

// parseDDP reads mpi/ddp.c's report: a line per step and the result line.
func parseDDP(out string, steps, warmup int) MPITraining {
	tr := MPITraining{StepMs: []float64{}, AllreduceMs: []float64{}}
	result := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "ddp" || len(f) < 2 {
			continue
		}
		switch f[1] {
		case "step":
			// ddp step K warmup W step_us T allreduce_us A
			if len(f) != 9 {
				continue
			}
			st, e1 := strconv.ParseFloat(f[6], 64)
			ar, e2 := strconv.ParseFloat(f[8], 64)
			if e1 != nil || e2 != nil || f[4] == "1" {
				continue
			}
			tr.StepMs = append(tr.StepMs, st/1e3)
			tr.AllreduceMs = append(tr.AllreduceMs, ar/1e3)
		case "result":
			// ddp result errors E checked C
			if len(f) != 6 {
				continue
			}
			e, e1 := strconv.ParseInt(f[3], 10, 64)
			c, e2 := strconv.ParseInt(f[5], 10, 64)
			if e1 == nil && e2 == nil {
				tr.ElementErrors, tr.ElementsChecked, result = e, c, true
			}
		}
	}
	if len(tr.StepMs) > 0 {
		tr.StepMedianMs, tr.StepP99Ms = quantile(tr.StepMs, 0.5), quantile(tr.StepMs, 0.99)
		tr.AllreduceMedianMs, tr.AllreduceP99Ms = quantile(tr.AllreduceMs, 0.5), quantile(tr.AllreduceMs, 0.99)
	}
	switch {
	case !result:
		tr.Error = "the program printed no result line"
	case len(tr.StepMs) != steps:
		tr.Error = fmt.Sprintf("%d of %d steps reported", len(tr.StepMs), steps)
	case tr.ElementErrors != 0:
		tr.Error = fmt.Sprintf("%d of %d elements were not the exact sum", tr.ElementErrors, tr.ElementsChecked)
	case tr.ElementsChecked == 0:
		tr.Error = "no element checked"
	default:
		tr.Verified = true
	}
	return tr
}

// quantile is the nearest-rank q-quantile of xs.
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// mpiRatiosBenchmarks and the range of sizes the ratios cover.
var mpiRatioBenchmarks = []string{"osu_allreduce", "osu_alltoall"}

const mpiRatioMin, mpiRatioMax = 64 << 10, 4 << 20

// mpiRatios are metaroce's times over TCP's where both measured a size
// (validated): Allreduce and Alltoall at 64 KiB to 4 MiB; and the
// training step where both runs were verified.
func mpiRatios(res *MPIResult) ([]MPIRatio, []MPITrainingRatio) {
	rs, ts := []MPIRatio{}, []MPITrainingRatio{}
	find := func(t, b string, loss float64) *MPIBench {
		for i := range res.Benchmarks {
			x := &res.Benchmarks[i]
			if x.Transport == t && x.Benchmark == b && x.Loss == loss {
				return x
			}
		}
		return nil
	}
	// A row counts if OSU printed it and, with validation on, it said
	// Pass: sizes measured before a run failed are measured all the same.
	ok := func(row OSURow) bool {
		return row.LatencyUs > 0 && (row.Validation == "Pass" || !res.Settings.Validation)
	}
	for _, loss := range res.Losses {
		for _, b := range mpiRatioBenchmarks {
			m, t := find("metaroce", b, loss), find("tcp", b, loss)
			if m == nil || t == nil {
				continue
			}
			for _, mr := range m.Rows {
				if mr.Bytes < mpiRatioMin || mr.Bytes > mpiRatioMax || !ok(mr) {
					continue
				}
				for _, tr := range t.Rows {
					if tr.Bytes == mr.Bytes && ok(tr) {
						rs = append(rs, MPIRatio{Loss: loss, Benchmark: b, Bytes: mr.Bytes, MetaroceUs: mr.LatencyUs, TCPUs: tr.LatencyUs,
							Ratio: mr.LatencyUs / tr.LatencyUs, BothPassed: m.Pass && t.Pass})
					}
				}
			}
		}
		var m, t *MPITraining
		for i := range res.Training {
			x := &res.Training[i]
			if x.Loss == loss && x.Verified {
				if x.Transport == "metaroce" {
					m = x
				} else if x.Transport == "tcp" {
					t = x
				}
			}
		}
		if m != nil && t != nil && t.StepMedianMs > 0 {
			ts = append(ts, MPITrainingRatio{Loss: loss, MetaroceStepMs: m.StepMedianMs, TCPStepMs: t.StepMedianMs,
				Ratio: m.StepMedianMs / t.StepMedianMs})
		}
	}
	return rs, ts
}

func printMPI(w io.Writer, r *MPIResult) {
	fmt.Fprintf(w, "metaroce demo -topology mpi: %d hosts x %d ranks through a lossy switch, %s; verdict ok %v (TCP baseline ok %v)\n",
		r.Hosts, r.RanksPerHost, r.MPI, r.OK, r.BaselineOK)
	for _, t := range r.Transports {
		fmt.Fprintf(w, "  %-8s mpirun %s\n           ranks of one host: %s\n", t.Name, strings.Join(t.MPIRunArgs, " "), t.IntraHost)
	}
	if !r.OSU.Available {
		fmt.Fprintf(w, "OSU micro-benchmarks not run: %s\n", r.OSU.Missing)
	} else {
		fmt.Fprintf(w, "OSU micro-benchmarks %s (%s), -i %d (osu_bw %d) -x %d, validation %v\n", r.OSU.Version, r.OSU.Source,
			r.Settings.Iterations, r.Settings.BWIterations, r.Settings.Warmup, r.Settings.Validation)
	}
	for _, b := range r.Benchmarks {
		unit := "latency us"
		if b.Metric == "bandwidth_mb_s" {
			unit = "MB/s"
		}
		fmt.Fprintf(w, "\n%s over %s, %.1f%% loss, %d ranks: pass %v, validated %v (%.0f s)\n", b.Benchmark, b.Transport, b.Loss*100, b.Ranks,
			b.Pass, b.Validated, b.WallS)
		if b.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", b.Error)
		}
		if len(b.Rows) > 0 {
			fmt.Fprintf(w, "  %10s %14s %s\n", "bytes", unit, "check")
		}
		for _, row := range b.Rows {
			v := row.LatencyUs
			if b.Metric == "bandwidth_mb_s" {
				v = row.BandwidthMBps
			}
			fmt.Fprintf(w, "  %10d %14.2f %s\n", row.Bytes, v, row.Validation)
		}
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(w, "\nmetaroce / TCP time (below 1: metaroce faster; * a size measured in a run that failed later)\n  %-6s %-14s %10s %12s %12s %8s\n",
			"loss", "benchmark", "bytes", "metaroce us", "tcp us", "ratio")
		for _, x := range r.Ratios {
			mark := ""
			if !x.BothPassed {
				mark = " *"
			}
			fmt.Fprintf(w, "  %-6s %-14s %10d %12.1f %12.1f %8.2f%s\n", fmt.Sprintf("%.1f%%", x.Loss*100), x.Benchmark, x.Bytes, x.MetaroceUs, x.TCPUs, x.Ratio, mark)
		}
	}
	if len(r.Training) > 0 {
		fmt.Fprintf(w, "\ntraining loop: %d ranks, %d-byte float32 gradients, %d steps after %d warm-up\n", r.Ranks, r.Settings.TrainBytes,
			r.Settings.TrainSteps, r.Settings.TrainWarmup)
		fmt.Fprintf(w, "  %-6s %-9s %-8s %12s %12s %14s %14s %10s\n", "loss", "transport", "verified", "step p50 ms", "step p99 ms",
			"allreduce p50", "allreduce p99", "algbw MB/s")
		for _, t := range r.Training {
			fmt.Fprintf(w, "  %-6s %-9s %-8v %12.1f %12.1f %14.1f %14.1f %10.1f\n", fmt.Sprintf("%.1f%%", t.Loss*100), t.Transport, t.Verified,
				t.StepMedianMs, t.StepP99Ms, t.AllreduceMedianMs, t.AllreduceP99Ms, t.AlgBWMBps)
			if t.Error != "" {
				fmt.Fprintf(w, "         error: %s\n", t.Error)
			}
		}
		for _, x := range r.TrainingRatios {
			fmt.Fprintf(w, "  %.1f%% loss: metaroce / TCP median step %.2f\n", x.Loss*100, x.Ratio)
		}
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error: %s\n", e)
	}
	if r.PNG != "" {
		fmt.Fprintf(w, "plot: %s\n", r.PNG)
	}
	fmt.Fprintf(w, "wall time %.0f s\n", r.WallS)
}
