package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

// runFabric is `metaroce sim -topology clos2|clos3 ...` (docs/sim.md),
// with the command line already checked (simOpts.check).
func runFabric(o *simOpts, out io.Writer) error {
	tiers := map[string]int{"clos2": 2, "clos3": 3}[o.topology]
	cfg := sim.FabricConfig{
		Clos: sim.ClosConfig{Tiers: tiers, Hosts: o.hosts, Planes: o.planes, Radix: o.radix, Oversub: o.oversub,
			HostBps: o.rate * 1e9, FabricBps: o.fabRate * 1e9, HostDelay: o.delay, FabricDelay: o.delay,
			QueueBytes: o.queueBytes, ECNBytes: o.ecnBytes, Loss: o.loss, Seed: o.seed},
		Workload: o.scenario, Size: o.size, Fanin: o.fanin, Window: o.window, Lazy: o.lazy, Background: o.background, BgSize: o.bgSize,
		Fault: o.fault, FaultAt: o.faultAt, FaultFactor: o.faultX, FaultLoss: o.faultLoss,
		Transport: sim.FabricTransport, Limit: o.limit,
	}
	cfg.Transport.Mode = transport.Mode(o.tmode)
	cfg.Transport.Paths = o.paths
	cfg.Transport.Congestion = o.cc
	cfg.Transport.MinRTO = o.minRTO
	if cfg.Transport.InitialRTO < cfg.Transport.MinRTO {
		cfg.Transport.InitialRTO = 0 // the default (1 ms) unless below the floor
	}
	compare, asJSON, outDir := &o.compare, &o.asJSON, &o.outDir
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
