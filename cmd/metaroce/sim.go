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
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	var (
		scenario    = fs.String("scenario", "lossy", "scenario: lossy")
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
		paths       = fs.Int("paths", 0, "logical paths per connection (0: default)")
		limit       = fs.Duration("limit", 60*time.Second, "virtual-time limit")
		asJSON      = fs.Bool("json", false, "print one JSON object")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *scenario != "lossy" {
		return fmt.Errorf("sim: unknown scenario %q (available: lossy)", *scenario)
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
