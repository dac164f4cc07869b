package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// isFabric reports whether a sim command line asks for a Clos fabric
// (-topology), which has flags of its own.
func isFabric(args []string) bool {
	for _, a := range args {
		if strings.HasPrefix(a, "-topology") || strings.HasPrefix(a, "--topology") {
			return true
		}
	}
	return false
}

// runFabric is `metaroce sim -topology clos2|clos3 ...` (docs/sim.md).
func runFabric(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	d := sim.ClosDefaults
	var (
		scenario   = fs.String("scenario", "alltoall", "workload: alltoall, permutation, allreduce-ring, allreduce-hd or incast")
		topology   = fs.String("topology", "clos2", "clos2 (leaf-spine) or clos3 (pods under super-spines)")
		hosts      = fs.Int("hosts", 64, "hosts")
		planes     = fs.Int("planes", 1, "independent fabric planes (one NIC port each)")
		radix      = fs.Int("radix", 0, "switch ports (0: the smallest power of two that fits -hosts)")
		oversub    = fs.Float64("oversub", 1, "leaf host ports per uplink (1: non-blocking)")
		size       = fs.Int("size", 64<<10, "bytes per peer (alltoall), per message (permutation, incast) or reduced (allreduce)")
		window     = fs.Int("window", 0, "alltoall: writes in flight per host, to peers i+1, i+2, ... in turn (0: all at once)")
		lazy       = fs.Bool("lazy", false, "alltoall with -window: connect per peer in turn and close after the write, instead of a full mesh")
		fanin      = fs.Int("fanin", 0, "incast: senders (0: every other host)")
		loss       = fs.Float64("loss", 0, "random loss on every switch-to-switch link direction")
		background = fs.Float64("background", 0, "background load per NIC, a fraction of its rate (WRITEs to the host N/2 away)")
		bgSize     = fs.Int("bg-size", 64<<10, "bytes per background message")
		fault      = fs.String("fault", "", "fault at -fault-at-us: link-down, spine-down, plane-down or degrade")
		faultAt    = fs.Float64("fault-at-us", 50, "when the fault happens, microseconds after the workload starts")
		faultX     = fs.Float64("fault-factor", 4, "degrade: the cable's rate is divided by this")
		faultLoss  = fs.Float64("fault-loss", 0, "degrade: loss on the degraded cable")
		rate       = fs.Float64("rate-gbps", d.HostBps/1e9, "NIC port rate per plane, Gb/s")
		fabRate    = fs.Float64("fabric-gbps", 0, "switch-to-switch link rate, Gb/s (0: the port rate)")
		delayUs    = fs.Float64("delay-us", float64(d.HostDelay)/1e3, "one-way delay per hop (cable plus switch), microseconds")
		queueBytes = fs.Int("queue-bytes", d.QueueBytes, "switch port buffer, bytes")
		ecnBytes   = fs.Int("ecn-bytes", d.ECNBytes, "ECN marking threshold, bytes")
		paths      = fs.Int("paths", 0, "logical paths per connection (0: the transport default)")
		tmode      = fs.String("transport", "metaroce", "transport mode: metaroce or rocev2")
		ccName     = fs.String("cc", "", "congestion control (default metaroce; dcqcn for rocev2)")
		compare    = fs.String("compare", "", "rocev2: run the same seed with the rocev2 baseline too and print both with ratios")
		minRTOUs   = fs.Float64("min-rto-us", float64(sim.FabricTransport.MinRTO)/1e3, "the retransmission timeout's floor, microseconds (0: the transport default)")
		seed       = fs.Uint64("seed", 1, "random seed (runs are deterministic per seed)")
		limit      = fs.Duration("limit", 5*time.Second, "virtual-time limit")
		asJSON     = fs.Bool("json", false, "print JSON")
		outDir     = fs.String("out", "", "write CSV files and PNG plots into this directory")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	tiers := map[string]int{"clos2": 2, "clos3": 3}[*topology]
	if tiers == 0 {
		return fmt.Errorf("sim: -topology %q: want clos2 or clos3", *topology)
	}
	if *compare != "" && *compare != "rocev2" {
		return fmt.Errorf("sim: -compare %q: only rocev2", *compare)
	}
	hop := time.Duration(*delayUs * 1e3)
	cfg := sim.FabricConfig{
		Clos: sim.ClosConfig{Tiers: tiers, Hosts: *hosts, Planes: *planes, Radix: *radix, Oversub: *oversub,
			HostBps: *rate * 1e9, FabricBps: *fabRate * 1e9, HostDelay: hop, FabricDelay: hop,
			QueueBytes: *queueBytes, ECNBytes: *ecnBytes, Loss: *loss, Seed: *seed},
		Workload: *scenario, Size: *size, Fanin: *fanin, Window: *window, Lazy: *lazy, Background: *background, BgSize: *bgSize,
		Fault: *fault, FaultAt: time.Duration(*faultAt * 1e3), FaultFactor: *faultX, FaultLoss: *faultLoss,
		Transport: sim.FabricTransport, Limit: *limit,
	}
	cfg.Transport.Mode = transport.Mode(*tmode)
	cfg.Transport.Paths = *paths
	cfg.Transport.Congestion = *ccName
	cfg.Transport.MinRTO = time.Duration(*minRTOUs * 1e3)
	if cfg.Transport.InitialRTO < cfg.Transport.MinRTO {
		cfg.Transport.InitialRTO = 0 // the default (1 ms) unless below the floor
	}
	runs := []*sim.FabricResult{}
	modes := []transport.Mode{cfg.Transport.Mode}
	if *compare != "" {
		modes = []transport.Mode{transport.ModeMetaRoCE, transport.ModeRoCEv2}
	}
	for _, m := range modes {
		c := cfg
		c.Transport.Mode = m
		if m == transport.ModeRoCEv2 {
			c.Transport.Paths = 0
			if *compare != "" {
				c.Transport.Congestion = "" // its own default, dcqcn
			}
		}
		r, err := sim.RunFabric(c)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	if *asJSON {
		var v any = runs[0]
		if len(runs) == 2 {
			v = struct {
				MetaRoCE *sim.FabricResult `json:"metaroce"`
				RoCEv2   *sim.FabricResult `json:"rocev2"`
				// Ratios are rocev2 over metaroce: above 1, metaroce
				// is faster.
				Ratios map[string]float64 `json:"rocev2_over_metaroce"`
			}{runs[0], runs[1], ratios(runs[0], runs[1])}
		}
		if err := json.NewEncoder(out).Encode(v); err != nil {
			return err
		}
	} else {
		printFabric(out, runs)
	}
	if *outDir != "" {
		if err := os.MkdirAll(*outDir, 0o755); err != nil {
			return err
		}
		if err := writeFabricFiles(*outDir, runs); err != nil {
			return fmt.Errorf("sim: -out %s: %w", *outDir, err)
		}
	}
	// The run under test fails the command; a baseline that fails (rocev2
	// stalling on a dead spine) is a result, in its JSON and report.
	if r := runs[0]; r.Error != "" {
		return fmt.Errorf("%s: %s", r.Transport, r.Error)
	}
	return nil
}

func ratios(m, r *sim.FabricResult) map[string]float64 {
	q := func(a, b float64) float64 {
		if a == 0 {
			return 0
		}
		return b / a
	}
	return map[string]float64{
		"collective_us": q(m.CollectiveUs, r.CollectiveUs),
		"fct_p50_us":    q(m.FCTP50us, r.FCTP50us),
		"fct_p99_us":    q(m.FCTP99us, r.FCTP99us),
		"fct_p999_us":   q(m.FCTP999us, r.FCTP999us),
		"fct_max_us":    q(m.FCTMaxUs, r.FCTMaxUs),
	}
}

// printFabric prints one column per run, and the ratio with two.
func printFabric(out io.Writer, runs []*sim.FabricResult) {
	r0 := runs[0]
	fmt.Fprintf(out, "%s on %s: %d hosts, %d plane(s), radix %d, %d switches, %d bytes, loss %g, seed %d\n",
		r0.Scenario, r0.Topology, r0.Hosts, r0.Planes, r0.Radix, r0.Switches, r0.Size, r0.Loss, r0.Seed)
	if r0.Fault != "" {
		fmt.Fprintf(out, "fault %s at %.0f us\n", r0.Fault, r0.FaultAtUs)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "\t"
	for _, r := range runs {
		head += r.Transport + " (" + r.CC + ")\t"
	}
	if len(runs) == 2 {
		head += "rocev2 / metaroce\t"
	}
	fmt.Fprintln(tw, head)
	row := func(name, format string, get func(r *sim.FabricResult) float64) {
		line := name + "\t"
		for _, r := range runs {
			line += fmt.Sprintf(format, get(r)) + "\t"
		}
		if len(runs) == 2 && get(runs[0]) != 0 {
			line += fmt.Sprintf("%.2f", get(runs[1])/get(runs[0])) + "\t"
		}
		fmt.Fprintln(tw, line)
	}
	row("messages complete", "%.0f", func(r *sim.FabricResult) float64 { return float64(r.MessagesCompleted) })
	row("messages lost or failed", "%.0f", func(r *sim.FabricResult) float64 { return float64(r.MessagesLost + r.MessagesFailed) })
	row("collective (us)", "%.1f", func(r *sim.FabricResult) float64 { return r.CollectiveUs })
	row("ideal (us)", "%.1f", func(r *sim.FabricResult) float64 { return r.IdealUs })
	row("collective / ideal", "%.2f", func(r *sim.FabricResult) float64 { return r.OverIdeal })
	row("message p50 (us)", "%.1f", func(r *sim.FabricResult) float64 { return r.FCTP50us })
	row("message p99 (us)", "%.1f", func(r *sim.FabricResult) float64 { return r.FCTP99us })
	row("message p99.9 (us)", "%.1f", func(r *sim.FabricResult) float64 { return r.FCTP999us })
	row("message max (us)", "%.1f", func(r *sim.FabricResult) float64 { return r.FCTMaxUs })
	row("link util p50", "%.3f", func(r *sim.FabricResult) float64 { return r.LinkUtilP50 })
	row("link util p99", "%.3f", func(r *sim.FabricResult) float64 { return r.LinkUtilP99 })
	row("retransmitted", "%.0f", func(r *sim.FabricResult) float64 { return float64(r.PacketsRetransmit) })
	row("timeouts", "%.0f", func(r *sim.FabricResult) float64 { return float64(r.Timeouts) })
	row("paths retired", "%.0f", func(r *sim.FabricResult) float64 { return float64(r.PathsRetired) })
	row("events", "%.0f", func(r *sim.FabricResult) float64 { return float64(r.Events) })
	row("events/s", "%.0f", func(r *sim.FabricResult) float64 { return r.EventsPerSec })
	row("wall (s)", "%.1f", func(r *sim.FabricResult) float64 { return r.WallS })
	row("heap per host (KiB)", "%.0f", func(r *sim.FabricResult) float64 { return r.HeapPerHost / 1024 })
	tw.Flush()
	for _, r := range runs {
		if r.Error != "" {
			fmt.Fprintf(out, "%s: error: %s\n", r.Transport, r.Error)
		}
		if r.Incomplete {
			fmt.Fprintf(out, "%s: incomplete: its collective and message percentiles are lower bounds (each unfinished write counted until the run stopped), and so are ratios against it\n", r.Transport)
		}
	}
}
