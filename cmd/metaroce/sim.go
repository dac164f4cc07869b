package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// The simulator's scenarios: on two hosts (no -topology), and on a Clos
// fabric (-topology clos2|clos3). One flag set holds every flag, so
// `sim -h` lists them all, grouped by where they apply.
var (
	hostScenarios   = []string{"lossy", "failover", "degraded", "incast", "fairness", "mixed"}
	fabricScenarios = []string{"alltoall", "permutation", "allreduce-ring", "allreduce-hd", "incast"}
	// fabricFaults are -fault's values (sim.FabricConfig.Fault).
	fabricFaults = []string{"link-down", "spine-down", "plane-down", "degrade"}
)

// simOpts is the parsed command line; set records the flags given.
type simOpts struct {
	scenario, topology, tmode, cc, op, fault, compare, outDir string

	senders, flows, rounds, shortSize, queueBytes, ecnBytes int
	fail, failPlane, planes, conns, messages, size          int
	outstanding, streams, mtu, paths                        int
	hosts, radix, window, fanin, bgSize                     int

	joinEvery, shortEvery, duration, failAt, reorderDelay, delay time.Duration
	faultAt, minRTO, limit                                       time.Duration

	slowFactor, pathLoss, loss, reorder, dup, corrupt, rate float64
	oversub, background, faultX, faultLoss, fabRate         float64

	seed   uint64
	lazy   bool
	asJSON bool
	set    map[string]bool
}

func simFlags(out io.Writer) (*flag.FlagSet, *simOpts) {
	fs := cli.NewFlagSet("metaroce sim", out)
	o := &simOpts{}
	// Everywhere.
	fs.StringVar(&o.scenario, "scenario", "", "the scenario (default lossy on two hosts, alltoall on a fabric): "+
		strings.Join(hostScenarios, ", ")+"; with -topology: "+strings.Join(fabricScenarios, ", "))
	fs.StringVar(&o.topology, "topology", "", "empty: two hosts (A to B); clos2 (leaf-spine) or clos3 (pods under super-spines): a fabric")
	fs.StringVar(&o.tmode, "transport", "metaroce", "transport mode: metaroce, or rocev2 (one path, go-back-N: the baseline)")
	fs.StringVar(&o.cc, "cc", "", "congestion control: one of the congestion package's names (default metaroce; dcqcn with -transport rocev2); incast, fairness and mixed on two hosts also take a comma-separated list or all")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed (runs are deterministic per seed)")
	cli.IntSizeVar(fs, &o.size, "size", 64<<10, "bytes per message (64KiB); a fabric: per peer (alltoall), per message (permutation, incast) or reduced (allreduce); incast, fairness, mixed: the scenario's own default unless given")
	fs.IntVar(&o.paths, "paths", 0, "logical paths per connection, 1 to 256 (default: the transport's 16; failover and degraded: fabric paths, 8)")
	fs.IntVar(&o.planes, "planes", 1, "fabric planes the paths are split over (one NIC port each)")
	fs.Float64Var(&o.loss, "loss", 0, "per-packet loss probability on each link direction (lossy: default 0.01); a fabric: on every switch-to-switch link")
	fs.Float64Var(&o.rate, "rate-gbps", 0, "link rate, Gb/s (default 100 on two hosts; a fabric: the NIC port rate per plane, 400)")
	cli.DurationVar(fs, &o.delay, "delay", 0, "one-way delay per link (default 2us on two hosts; a fabric: per hop, cable plus switch, 1us)")
	cli.IntSizeVar(fs, &o.queueBytes, "queue-bytes", 0, "switch port buffer, bytes (default: the scenario's)")
	cli.IntSizeVar(fs, &o.ecnBytes, "ecn-bytes", 0, "ECN marking threshold, bytes (default: the scenario's)")
	cli.DurationVar(fs, &o.limit, "limit", 0, "virtual-time limit (default 60s on two hosts, 5s on a fabric)")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	// Two hosts.
	fs.IntVar(&o.mtu, "mtu", 1500, "two hosts: IP MTU, 576 to 9216")
	fs.StringVar(&o.op, "op", "write", "lossy: operation: write, read or send")
	fs.IntVar(&o.messages, "messages", 2000, "lossy, failover, degraded: messages to run")
	fs.IntVar(&o.outstanding, "outstanding", 32, "lossy: messages in flight at once")
	fs.IntVar(&o.streams, "streams", 4, "lossy: streams the messages are spread over")
	fs.Float64Var(&o.reorder, "reorder", 0, "lossy: probability a packet is held back (reordered)")
	cli.DurationVar(fs, &o.reorderDelay, "reorder-delay", 2*time.Microsecond, "lossy: the most a reordered packet is held back")
	fs.Float64Var(&o.dup, "dup", 0, "lossy: probability a packet is duplicated")
	fs.Float64Var(&o.corrupt, "corrupt", 0, "lossy: probability a packet has one bit flipped")
	fs.IntVar(&o.fail, "fail", 2, "failover: paths blackholed at -fail-at")
	cli.DurationVar(fs, &o.failAt, "fail-at", 2*time.Millisecond, "failover, degraded: when the fault happens")
	fs.IntVar(&o.failPlane, "fail-plane", -1, "failover with -planes > 1: blackhole every path of this plane (-1: none)")
	fs.Float64Var(&o.slowFactor, "slow-factor", 4, "degraded: the slowed path's rate is divided and its delay multiplied by this")
	fs.Float64Var(&o.pathLoss, "path-loss", 0, "degraded: loss probability on the degraded path")
	fs.IntVar(&o.conns, "conns", 4, "failover, degraded: connections from A to B")
	fs.IntVar(&o.senders, "senders", 32, "incast: senders writing to one receiver at once")
	fs.IntVar(&o.flows, "flows", 4, "fairness: flows joining one after another; mixed: long flows")
	fs.IntVar(&o.rounds, "rounds", 1, "incast: rounds (each starts when the previous one completed)")
	cli.DurationVar(fs, &o.joinEvery, "join-every", 500*time.Microsecond, "fairness: one flow joins every this long")
	cli.IntSizeVar(fs, &o.shortSize, "short-size", 4096, "mixed: bytes per short message")
	cli.DurationVar(fs, &o.shortEvery, "short-every", 20*time.Microsecond, "mixed: mean gap between short messages (Poisson)")
	cli.DurationVar(fs, &o.duration, "duration", 2*time.Millisecond, "fairness (after the last join), mixed: run length")
	// A fabric.
	fs.IntVar(&o.hosts, "hosts", 64, "fabric: hosts")
	fs.IntVar(&o.radix, "radix", 0, "fabric: switch ports (0: the smallest power of two that fits -hosts)")
	fs.Float64Var(&o.oversub, "oversub", 1, "fabric: leaf host ports per uplink (1: non-blocking)")
	fs.IntVar(&o.window, "window", 0, "fabric alltoall: writes in flight per host, to peers i+1, i+2, ... in turn (0: all at once)")
	fs.BoolVar(&o.lazy, "lazy", false, "fabric alltoall with -window: connect per peer in turn and close after the write, instead of a full mesh")
	fs.IntVar(&o.fanin, "fanin", 0, "fabric incast: senders (0: every other host)")
	fs.Float64Var(&o.background, "background", 0, "fabric: background load per NIC, a fraction of its rate (WRITEs to the host N/2 away)")
	cli.IntSizeVar(fs, &o.bgSize, "bg-size", 64<<10, "fabric: bytes per background message")
	fs.StringVar(&o.fault, "fault", "", "fabric: fault at -fault-at: "+strings.Join(fabricFaults, ", ")+" (plane-down: with -planes 2 or more)")
	cli.DurationVar(fs, &o.faultAt, "fault-at", 50*time.Microsecond, "fabric: when the fault happens, after the workload starts")
	fs.Float64Var(&o.faultX, "fault-factor", 4, "fabric degrade: the cable's rate is divided by this")
	fs.Float64Var(&o.faultLoss, "fault-loss", 0, "fabric degrade: loss on the degraded cable")
	fs.Float64Var(&o.fabRate, "fabric-gbps", 0, "fabric: switch-to-switch link rate, Gb/s (0: the port rate)")
	cli.DurationVar(fs, &o.minRTO, "min-rto", sim.FabricTransport.MinRTO, "fabric: the retransmission timeout's floor (0: the transport default)")
	fs.StringVar(&o.compare, "compare", "", "fabric: rocev2: run the same seed with the rocev2 baseline too and print both with ratios")
	fs.StringVar(&o.outDir, "out", "", "fabric: write CSV files and PNG plots into this directory")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `usage: metaroce sim [-topology clos2|clos3] -scenario NAME [flags]

Two hosts (no -topology): %s.
A fabric (-topology clos2|clos3): %s.
Durations take a unit (20us, 2ms), sizes bytes or a suffix (64KiB).

flags:
`, strings.Join(hostScenarios, ", "), strings.Join(fabricScenarios, ", "))
		fs.PrintDefaults()
	}
	return fs, o
}

func runSim(args []string, out io.Writer) error {
	fs, o := simFlags(out)
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	o.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.set[f.Name] = true })
	if err := o.check(); err != nil {
		return err
	}
	if o.topology != "" {
		return runFabric(o, out) // sim_fabric.go
	}
	switch o.scenario {
	case "incast", "fairness", "mixed":
		return o.runCC(out)
	case "failover", "degraded":
		return runMultipath(out, o.asJSON, sim.MultipathConfig{Scenario: o.scenario, Paths: orDefault(o.paths, 8),
			Planes: o.planes, Fail: o.fail, FailPlane: o.failPlane, FailAt: o.failAt,
			SlowFactor: o.slowFactor, PathLoss: o.pathLoss, Conns: o.conns, Messages: o.messages, Size: o.size,
			Seed: o.seed, NICBps: o.rate * 1e9, Delay: o.delay, Limit: o.limit,
			Transport: transport.Config{MTU: o.mtu, Mode: transport.Mode(o.tmode), Congestion: o.cc}})
	}
	return o.runLossy(out)
}

// check applies the per-mode defaults and refuses what no scenario can
// run, naming the flag and its range.
func (o *simOpts) check() error {
	fabric := o.topology != ""
	scenarios := hostScenarios
	if fabric {
		scenarios = fabricScenarios
		if o.topology != "clos2" && o.topology != "clos3" {
			return cli.UsageError("-topology %q: want clos2 or clos3 (or none for two hosts)", o.topology)
		}
	}
	if o.scenario == "" {
		o.scenario = scenarios[0]
	}
	known := false
	for _, s := range scenarios {
		known = known || s == o.scenario
	}
	if !known {
		where := "two hosts"
		if fabric {
			where = "a fabric (-topology " + o.topology + ")"
		}
		return cli.UsageError("-scenario %q: on %s, want one of %s (two hosts: %s; with -topology: %s)", o.scenario, where,
			strings.Join(scenarios, ", "), strings.Join(hostScenarios, ", "), strings.Join(fabricScenarios, ", "))
	}
	if o.tmode != string(transport.ModeMetaRoCE) && o.tmode != string(transport.ModeRoCEv2) {
		return cli.UsageError("-transport %q: want metaroce or rocev2", o.tmode)
	}
	if o.tmode == string(transport.ModeRoCEv2) && o.set["paths"] && o.paths != 1 && !(o.scenario == "failover" || o.scenario == "degraded") {
		return cli.UsageError("-paths %d: -transport rocev2 uses one path per connection", o.paths)
	}
	if o.compare != "" && (o.compare != "rocev2" || !fabric) {
		return cli.UsageError("-compare %q: only rocev2, on a fabric (-topology)", o.compare)
	}
	if o.op != "write" && o.op != "read" && o.op != "send" {
		return cli.UsageError("-op %q: want write, read or send", o.op)
	}
	// Defaults that differ between two hosts and a fabric.
	d := sim.ClosDefaults
	if !o.set["rate-gbps"] {
		o.rate = map[bool]float64{false: 100, true: d.HostBps / 1e9}[fabric]
	}
	if !o.set["delay"] {
		o.delay = map[bool]time.Duration{false: 2 * time.Microsecond, true: d.HostDelay}[fabric]
	}
	if !o.set["limit"] {
		o.limit = map[bool]time.Duration{false: 60 * time.Second, true: 5 * time.Second}[fabric]
	}
	if !o.set["loss"] && !fabric && o.scenario == "lossy" {
		o.loss = 0.01 // the lossy scenario loses by default
	}
	if !o.set["queue-bytes"] {
		o.queueBytes = map[bool]int{false: sim.CCDefaults.QueueBytes, true: d.QueueBytes}[fabric]
	}
	if !o.set["ecn-bytes"] {
		o.ecnBytes = map[bool]int{false: sim.CCDefaults.ECNBytes, true: d.ECNBytes}[fabric]
	}
	maxPlane := max(o.planes-1, -1)
	rs := []cli.Range{
		cli.Int("size", o.size, 1, 1<<32), cli.Int("planes", o.planes, 1, 16),
		cli.Int("mtu", o.mtu, 576, 9216), cli.Int("messages", o.messages, 1, 1<<30),
		cli.Int("outstanding", o.outstanding, 1, 1<<16), cli.Int("streams", o.streams, 1, 1024),
		cli.Int("fail-plane", o.failPlane, -1, maxPlane), cli.Int("conns", o.conns, 1, 4096),
		cli.Int("senders", o.senders, 1, 4096), cli.Int("flows", o.flows, 1, 4096), cli.Int("rounds", o.rounds, 1, 1<<20),
		cli.Int("short-size", o.shortSize, 1, 1<<30), cli.Int("queue-bytes", o.queueBytes, 1, 1<<34),
		cli.Int("ecn-bytes", o.ecnBytes, 0, o.queueBytes), cli.Int("hosts", o.hosts, 2, 1<<20),
		cli.Int("radix", o.radix, 0, 1<<16), cli.Int("window", o.window, 0, 1<<20), cli.Int("fanin", o.fanin, 0, o.hosts-1),
		cli.Int("bg-size", o.bgSize, 1, 1<<30),
		cli.Prob("loss", o.loss), cli.Prob("reorder", o.reorder), cli.Prob("dup", o.dup), cli.Prob("corrupt", o.corrupt),
		cli.Prob("path-loss", o.pathLoss), cli.Prob("fault-loss", o.faultLoss), cli.Prob("background", o.background),
		{Flag: "rate-gbps", Value: o.rate, Min: 1e-3, Max: 1e5}, {Flag: "fabric-gbps", Value: o.fabRate, Min: 0, Max: 1e5},
		{Flag: "slow-factor", Value: o.slowFactor, Min: 1, Max: 1e6}, {Flag: "fault-factor", Value: o.faultX, Min: 1, Max: 1e6},
		{Flag: "oversub", Value: o.oversub, Min: 1, Max: 64},
	}
	if o.set["paths"] || o.paths != 0 {
		rs = append(rs, cli.Int("paths", o.paths, 1, 256))
	}
	if o.scenario == "failover" {
		rs = append(rs, cli.Int("fail", o.fail, 0, orDefault(o.paths, 8)))
	}
	if err := cli.Check(rs...); err != nil {
		return err
	}
	for name, d := range map[string]time.Duration{"delay": o.delay, "reorder-delay": o.reorderDelay, "fail-at": o.failAt,
		"join-every": o.joinEvery, "short-every": o.shortEvery, "duration": o.duration, "fault-at": o.faultAt, "min-rto": o.minRTO} {
		if d < 0 {
			return cli.UsageError("-%s %v: want a duration of at least 0", name, d)
		}
	}
	if o.limit <= 0 {
		return cli.UsageError("-limit %v: want a positive duration", o.limit)
	}
	if o.shortEvery == 0 && o.scenario == "mixed" {
		return cli.UsageError("-short-every 0: want a positive mean gap")
	}
	if o.cc != "" {
		if _, err := ccList(o.cc); err != nil {
			return err
		}
		if strings.Contains(o.cc, ",") || o.cc == "all" {
			if fabric || !(o.scenario == "incast" || o.scenario == "fairness" || o.scenario == "mixed") {
				return cli.UsageError("-cc %q: a list or all applies to incast, fairness and mixed on two hosts", o.cc)
			}
		}
	}
	if o.fault != "" {
		known := false
		for _, f := range fabricFaults {
			known = known || f == o.fault
		}
		if !known {
			return cli.UsageError("-fault %q: want one of %s", o.fault, strings.Join(fabricFaults, ", "))
		}
		if o.fault == "plane-down" && o.planes < 2 {
			return cli.UsageError("-fault plane-down: needs -planes 2 or more (have %d)", o.planes)
		}
	}
	return nil
}

func (o *simOpts) runCC(out io.Writer) error {
	ccs, err := ccList(o.cc)
	if err != nil {
		return err
	}
	cfg := sim.CCConfig{Scenario: o.scenario, Senders: o.senders, Rounds: o.rounds,
		JoinEvery: o.joinEvery, ShortSize: o.shortSize, ShortEvery: o.shortEvery,
		Duration: o.duration, RateBps: o.rate * 1e9, HopDelay: o.delay,
		QueueBytes: o.queueBytes, ECNBytes: o.ecnBytes, Loss: o.loss, Seed: o.seed, Limit: o.limit,
		Transport: transport.Config{MTU: o.mtu, Paths: o.paths, Mode: transport.Mode(o.tmode)}}
	if o.scenario != "incast" {
		cfg.Senders = o.flows
	}
	if o.set["size"] {
		cfg.Size = o.size // else the scenario's own default
	}
	return runCC(out, o.asJSON, ccs, cfg)
}

func (o *simOpts) runLossy(out io.Writer) error {
	link := sim.LinkConfig{
		RateBps: o.rate * 1e9, Delay: o.delay,
		Loss: o.loss, Reorder: o.reorder, ReorderDelay: o.reorderDelay,
		Dup: o.dup, Corrupt: o.corrupt,
	}
	res, err := sim.RunLossy(sim.LossyConfig{
		Op: o.op, Messages: o.messages, Size: o.size, Outstanding: o.outstanding, Streams: o.streams,
		Seed: o.seed, Link: link, Limit: o.limit,
		Transport: transport.Config{MTU: o.mtu, Paths: o.paths, Mode: transport.Mode(o.tmode), Congestion: o.cc},
	})
	if err != nil {
		return err
	}
	if o.asJSON {
		if err := json.NewEncoder(out).Encode(res); err != nil {
			return err
		}
	} else {
		printReport(out, res)
	}
	if res.Error != "" {
		return errors.New(res.Error)
	}
	return nil
}

func printReport(w io.Writer, r *sim.Result) {
	fmt.Fprintf(w, "scenario %s, transport %s, op %s, seed %d\n", r.Scenario, r.Transport, r.Op, r.Seed)
	fmt.Fprintf(w, "messages   %d of %d complete, %d lost, %d failed, %d duplicated, %d corrupt\n",
		r.MessagesCompleted, r.Messages, r.MessagesLost, r.MessagesFailed, r.DuplicatesDelivered, r.CorruptDelivered)
	fmt.Fprintf(w, "verified   %d bytes\n", r.BytesVerified)
	fmt.Fprintf(w, "packets    %d sent, %d retransmitted (ratio %.4f), %d spurious, %d timeouts\n",
		r.PacketsSent, r.PacketsRetransmit, r.RetransmitRatio, r.SpuriousRetransmit, r.Timeouts)
	fmt.Fprintf(w, "wire       %d dropped, %d corrupted (%d caught by CRC32C)\n", r.WireDropped, r.WireCorrupted, r.CRCDrops)
	fmt.Fprintf(w, "goodput    %.2f Gb/s; FCT p50 %.1f us, p99 %.1f us\n", r.GoodputGbps, r.FCTP50us, r.FCTP99us)
	fmt.Fprintf(w, "simulated  %.0f us in %.2f s wall, %d events\n", r.SimTimeus, r.WallS, r.Events)
	if r.Error != "" {
		fmt.Fprintf(w, "error      %s\n", r.Error)
	}
}

func orDefault(v, d int) int {
	if v == 0 {
		return d
	}
	return v
}

func runMultipath(out io.Writer, asJSON bool, cfg sim.MultipathConfig) error {
	res, err := sim.RunMultipath(cfg)
	if err != nil {
		return err
	}
	if asJSON {
		if err := json.NewEncoder(out).Encode(res); err != nil {
			return err
		}
	} else {
		printReport(out, &res.Result)
		fmt.Fprintf(out, "paths      %d fabric paths, %d failed; %d retired (repaths %d), %d path timeouts, %d probes\n",
			res.Paths, res.PathsFailed, res.PathsRetired, res.Repaths, res.PathTimeouts, res.ProbesSent)
		fmt.Fprintf(out, "fault      goodput %.1f Gb/s before, %.1f after; %s\n",
			res.GoodputBeforeGbps, res.GoodputAfterGbps, recoveryLine(res))
		fmt.Fprintf(out, "spray      coefficient of variation %.3f over healthy paths\n", res.SprayCV)
		for _, p := range res.PerPath {
			mark := ""
			if p.Failed {
				mark = " (failed)"
			} else if p.Slow {
				mark = " (degraded)"
			}
			fmt.Fprintf(out, "  path %2d plane %d: %8d packets%s\n", p.Path, p.Plane, p.Packets, mark)
		}
	}
	if res.Error != "" {
		return errors.New(res.Error)
	}
	return nil
}

// recoveryLine says what the recovery fields mean only where they are
// defined: a run in which messages failed or a connection never completed
// anything again did not recover, whatever the goodput bins say.
func recoveryLine(r *sim.MultipathResult) string {
	if !r.Recovered {
		return fmt.Sprintf("did not recover (%d messages failed, %d incomplete, %d connections never completed anything again)",
			r.MessagesFailed, r.MessagesLost, r.ConnsNeverResumed)
	}
	return fmt.Sprintf("recovered in %.0f us; longest connection stall %.0f us", r.RecoveryUs, r.ConnStallUs)
}
