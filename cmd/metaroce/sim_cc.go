package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/metaroce/metaroce/congestion"
	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/sim"
)

// ccList expands -cc: one name, a comma-separated list, or "all" (every
// controller, the default first), so one command prints the comparison;
// empty is the scenario's default.
func ccList(v string) ([]string, error) {
	if v == "all" {
		return congestion.Names(), nil
	}
	var out []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !congestion.Known(n) {
			return nil, cli.UsageError("-cc %q: want one of %s, a comma-separated list of them, or all", n, strings.Join(congestion.Names(), ", "))
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return []string{""}, nil // the scenario's default (sim.DefaultCC)
	}
	return out, nil
}

// runCC runs a congestion scenario once per controller: one JSON object
// each with -json (one per line), else a report, or a table for several.
func runCC(out io.Writer, asJSON bool, ccs []string, cfg sim.CCConfig) error {
	var results []*sim.CCResult
	for _, cc := range ccs {
		c := cfg
		c.CC = cc
		r, err := sim.RunCC(c)
		if err != nil {
			return err
		}
		results = append(results, r)
		if asJSON {
			if err := json.NewEncoder(out).Encode(r); err != nil {
				return err
			}
		}
	}
	if !asJSON {
		if len(results) == 1 {
			printCCReport(out, results[0])
		} else {
			printCCTable(out, results)
		}
	}
	for _, r := range results {
		if r.Error != "" {
			return fmt.Errorf("%s with %s: %s", r.Scenario, r.CC, r.Error)
		}
	}
	return nil
}

func printCCReport(w io.Writer, r *sim.CCResult) {
	fmt.Fprintf(w, "scenario %s, cc %s, %d senders, seed %d, base RTT %.1f us\n", r.Scenario, r.CC, r.Senders, r.Seed, r.BaseRTTus)
	fmt.Fprintf(w, "messages   %d complete, %d lost, %d failed; %d timeouts; %d of %d packets retransmitted\n",
		r.MessagesCompleted, r.MessagesLost, r.MessagesFailed, r.Timeouts, r.PacketsRetransmit, r.PacketsSent)
	fmt.Fprintf(w, "queue      max %d B, p99 %d B, p50 %d B; %d tail drops, %d marked\n",
		r.QueueMaxBytes, r.QueueP99Bytes, r.QueueP50Bytes, r.QueueDrops, r.Marked)
	fmt.Fprintf(w, "link       %.1f%% busy, goodput %.1f Gb/s\n", 100*r.Utilisation, r.GoodputGbps)
	switch r.Scenario {
	case "incast":
		fmt.Fprintf(w, "fct        p50 %.1f us, p99 %.1f us; ideal %.1f us (p99 %.2fx ideal)\n", r.FCTP50us, r.FCTP99us, r.IdealFCTus, r.P99OverIdeal)
	case "fairness":
		fmt.Fprintf(w, "fairness   Jain %.4f (mean), %.4f (worst window), settled %g RTTs after each join; windows of %g RTTs\n",
			r.JainFairness, r.JainMin, r.SettleRTTs, r.WindowRTTs)
		fmt.Fprintf(w, "converge   RTTs to Jain >= 0.95 after each join: %v\n", r.ConvergeRTTs)
		fmt.Fprintf(w, "flows      Gb/s with all joined: %v\n", r.FlowGbps)
	case "mixed":
		for _, c := range r.Classes {
			fmt.Fprintf(w, "%-10s %d messages of %d B: p50 %.1f us, p99 %.1f us; ideal %.1f us (p99 %.2fx ideal)\n",
				c.Class, c.Messages, c.Size, c.FCTP50us, c.FCTP99us, c.IdealFCTus, c.P99OverIdeal)
		}
	}
	fmt.Fprintf(w, "simulated  %.0f us in %.2f s wall, %d events\n", r.SimTimeus, r.WallS, r.Events)
	if r.Error != "" {
		fmt.Fprintf(w, "error      %s\n", r.Error)
	}
}

func printCCTable(w io.Writer, rs []*sim.CCResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	r0 := rs[0]
	fmt.Fprintf(w, "scenario %s, %d senders, seed %d, base RTT %.1f us\n", r0.Scenario, r0.Senders, r0.Seed, r0.BaseRTTus)
	switch r0.Scenario {
	case "incast":
		fmt.Fprintln(tw, "cc\ttimeouts\tdrops\tqueue max B\tqueue p99 B\tbusy %\tfct p99 us\tideal us\tp99/ideal\t")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t\n", r.CC, r.Timeouts, r.QueueDrops,
				r.QueueMaxBytes, r.QueueP99Bytes, 100*r.Utilisation, r.FCTP99us, r.IdealFCTus, r.P99OverIdeal)
		}
	case "fairness":
		fmt.Fprintln(tw, "cc\tJain mean\tJain worst\tconverge RTTs\tqueue p99 B\tbusy %\tflows Gb/s\t")
		for _, r := range rs {
			fmt.Fprintf(tw, "%s\t%.4f\t%.4f\t%v\t%d\t%.1f\t%v\t\n", r.CC, r.JainFairness, r.JainMin, r.ConvergeRTTs,
				r.QueueP99Bytes, 100*r.Utilisation, r.FlowGbps)
		}
	case "mixed":
		fmt.Fprintln(tw, "cc\tshort p50 us\tshort p99 us\tshort p99/ideal\tlong p99/ideal\tqueue p99 B\tbusy %\ttimeouts\t")
		for _, r := range rs {
			var short, long sim.ClassFCT
			for _, c := range r.Classes {
				if c.Class == "short" {
					short = c
				} else {
					long = c
				}
			}
			fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.2f\t%.2f\t%d\t%.1f\t%d\t\n", r.CC, short.FCTP50us, short.FCTP99us,
				short.P99OverIdeal, long.P99OverIdeal, r.QueueP99Bytes, 100*r.Utilisation, r.Timeouts)
		}
	}
	tw.Flush()
}
