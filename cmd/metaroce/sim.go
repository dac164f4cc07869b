package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/metaroce/metaroce/sim"
	"github.com/metaroce/metaroce/transport"
)

func runSim(args []string, out io.Writer) error {
	if isFabric(args) {
		return runFabric(args, out) // sim_fabric.go: its own flags
	}
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	var (
		scenario    = fs.String("scenario", "lossy", "scenario: lossy, failover, degraded, incast, fairness or mixed")
		ccName      = fs.String("cc", "", "incast/fairness/mixed: congestion control, a comma-separated list, or all (default metaroce; dcqcn with -transport rocev2)")
		senders     = fs.Int("senders", 32, "incast: senders writing to one receiver at once")
		flows       = fs.Int("flows", 4, "fairness: flows joining one after another; mixed: long flows")
		rounds      = fs.Int("rounds", 1, "incast: rounds (each starts when the previous one completed)")
		joinUs      = fs.Float64("join-every-us", 500, "fairness: one flow joins every this many microseconds")
		shortSize   = fs.Int("short-size", 4096, "mixed: bytes per short message")
		shortUs     = fs.Float64("short-every-us", 20, "mixed: mean gap between short messages (Poisson), microseconds")
		durationUs  = fs.Float64("duration-us", 2000, "fairness (after the last join), mixed: run length, microseconds")
		queueBytes  = fs.Int("queue-bytes", sim.CCDefaults.QueueBytes, "incast/fairness/mixed: switch port buffer, bytes")
		ecnBytes    = fs.Int("ecn-bytes", sim.CCDefaults.ECNBytes, "incast/fairness/mixed: ECN marking threshold, bytes")
		tmode       = fs.String("transport", "metaroce", "transport mode: metaroce or rocev2 (the one-path, go-back-N baseline)")
		fail        = fs.Int("fail", 2, "failover: paths blackholed at -fail-at-us")
		failAt      = fs.Float64("fail-at-us", 2000, "failover/degraded: when the fault happens, microseconds")
		failPlane   = fs.Int("fail-plane", -1, "failover with -planes > 1: blackhole every path of this plane")
		planes      = fs.Int("planes", 1, "fabric planes the paths are split over")
		slowFactor  = fs.Float64("slow-factor", 4, "degraded: the slowed path's rate is divided and its delay multiplied by this")
		pathLoss    = fs.Float64("path-loss", 0, "degraded: loss probability on the degraded path")
		conns       = fs.Int("conns", 4, "failover/degraded: connections from A to B")
		op          = fs.String("op", "write", "operation: write, read or send")
		messages    = fs.Int("messages", 2000, "messages to run")
		size        = fs.Int("size", 65536, "bytes per message")
		outstanding = fs.Int("outstanding", 32, "messages in flight at once")
		streams     = fs.Int("streams", 4, "streams the messages are spread over")
		seed        = fs.Uint64("seed", 1, "random seed (runs are deterministic per seed)")
		loss        = fs.Float64("loss", 0, "per-packet loss probability on each link direction")
		reorder     = fs.Float64("reorder", 0, "probability a packet is held back (reordered)")
		reorderUs   = fs.Float64("reorder-us", 2, "the most a reordered packet is held back, microseconds")
		dup         = fs.Float64("dup", 0, "probability a packet is duplicated")
		corrupt     = fs.Float64("corrupt", 0, "probability a packet has one bit flipped")
		rate        = fs.Float64("rate-gbps", 100, "link rate, Gb/s")
		delayUs     = fs.Float64("delay-us", 2, "one-way propagation delay, microseconds")
		mtu         = fs.Int("mtu", 1500, "IP MTU")
		paths       = fs.Int("paths", 0, "lossy: logical paths per connection (0: default); failover/degraded: fabric paths (default 8)")
		limit       = fs.Duration("limit", 60*time.Second, "virtual-time limit")
		asJSON      = fs.Bool("json", false, "print one JSON object")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch *scenario {
	case "incast", "fairness", "mixed":
		ccs, err := ccList(*ccName)
		if err != nil {
			return err
		}
		cfg := sim.CCConfig{Scenario: *scenario, Senders: *senders, Rounds: *rounds,
			JoinEvery: time.Duration(*joinUs * 1e3), ShortSize: *shortSize, ShortEvery: time.Duration(*shortUs * 1e3),
			Duration: time.Duration(*durationUs * 1e3), RateBps: *rate * 1e9, HopDelay: time.Duration(*delayUs * 1e3),
			QueueBytes: *queueBytes, ECNBytes: *ecnBytes, Loss: *loss, Seed: *seed, Limit: *limit,
			Transport: transport.Config{MTU: *mtu, Paths: *paths, Mode: transport.Mode(*tmode)}}
		if *scenario != "incast" {
			cfg.Senders = *flows
		}
		if set["size"] {
			cfg.Size = *size // else the scenario's own default
		}
		return runCC(out, *asJSON, ccs, cfg)
	case "lossy":
	case "failover", "degraded":
		return runMultipath(out, *asJSON, sim.MultipathConfig{Scenario: *scenario, Paths: orDefault(*paths, 8),
			Planes: *planes, Fail: *fail, FailPlane: *failPlane, FailAt: time.Duration(*failAt * 1e3),
			SlowFactor: *slowFactor, PathLoss: *pathLoss, Conns: *conns, Messages: *messages, Size: *size,
			Seed: *seed, NICBps: *rate * 1e9, Delay: time.Duration(*delayUs * 1e3), Limit: *limit,
			Transport: transport.Config{MTU: *mtu, Mode: transport.Mode(*tmode)}})
	default:
		return fmt.Errorf("sim: unknown scenario %q (available: lossy, failover, degraded)", *scenario)
	}
	if *tmode != "metaroce" {
		return fmt.Errorf("sim: -transport %s applies to the failover and degraded scenarios", *tmode)
	}
	for name, p := range map[string]float64{"loss": *loss, "reorder": *reorder, "dup": *dup, "corrupt": *corrupt} {
		if p < 0 || p >= 1 {
			return fmt.Errorf("sim: -%s %v: want a probability in [0, 1)", name, p)
		}
	}
	if *rate <= 0 || *delayUs < 0 || *reorderUs < 0 {
		return errors.New("sim: -rate-gbps must be positive, delays non-negative")
	}
	link := sim.LinkConfig{
		RateBps: *rate * 1e9, Delay: time.Duration(*delayUs * 1e3),
		Loss: *loss, Reorder: *reorder, ReorderDelay: time.Duration(*reorderUs * 1e3),
		Dup: *dup, Corrupt: *corrupt,
	}
	res, err := sim.RunLossy(sim.LossyConfig{
		Op: *op, Messages: *messages, Size: *size, Outstanding: *outstanding, Streams: *streams,
		Seed: *seed, Link: link, Limit: *limit,
		Transport: transport.Config{MTU: *mtu, Paths: *paths},
	})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(out)
		if err := enc.Encode(res); err != nil {
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
		fmt.Fprintf(out, "fault      goodput %.1f Gb/s before, %.1f after; recovered %v in %.0f us; longest connection stall %.0f us\n",
			res.GoodputBeforeGbps, res.GoodputAfterGbps, res.Recovered, res.RecoveryUs, res.ConnStallUs)
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
