package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
	"github.com/metaroce/metaroce/transport"
	"github.com/metaroce/metaroce/wire"
)

// The leaf-spine demo: metaroce WRITEs from a host on leaf 0 to a host on
// leaf 1 across four rate-limited spines, one spine failed mid-run, goodput
// sampled every few milliseconds from the bytes the receiving application
// verified (demo_leafspine_flow.go); then the same with Linux TCP flows. docs/demo.md defines the
// windows and recovery_ms.

// LeafSpineResult is the JSON of `metaroce demo -topology leafspine`.
type LeafSpineResult struct {
	Topology     string  `json:"topology"`
	Spines       int     `json:"spines"`
	HostsPerLeaf int     `json:"hosts_per_leaf"`
	SpineRateBps uint64  `json:"spine_link_rate_bps"`
	MTU          int     `json:"mtu"` // every link's, the daemons' and TCP's
	CutSpine     int     `json:"cut_spine"`
	CutMode      string  `json:"cut_mode"`
	Backend      string  `json:"backend"`
	Congestion   string  `json:"congestion"` // the daemons' controller (DemoResult's)
	SampleMs     float64 `json:"sample_ms"`

	// OK is the verdict: every part ran without error, every WRITE was
	// verified and none was lost; the command exits non-zero without it.
	OK bool `json:"ok"`
	// metaroce: goodput of verified WRITEs.
	Messages      int     `json:"messages"`
	MessagesLost  int     `json:"messages_lost"`
	DataVerified  bool    `json:"data_verified"`
	BytesVerified int64   `json:"bytes_verified"`
	GoodputBefore float64 `json:"goodput_before_gbps"`
	GoodputDuring float64 `json:"goodput_during_gbps"`
	GoodputAfter  float64 `json:"goodput_after_gbps"`
	// PayloadCeiling is the most WRITE payload the spines carry before
	// the cut: their bit rate times the share of a full frame that is
	// payload (at the daemons' MTU, with this run's IP header and
	// Ethernet's 14 bytes, which tbf counts). After the cut it is
	// (spines-1)/spines of this.
	PayloadCeiling float64 `json:"payload_ceiling_before_gbps"`
	RecoveryMs     float64 `json:"recovery_ms"` // -1: never back at 90% of the after-level
	// RecoveryResMs is recovery_ms's resolution: its trailing window lies
	// after the cut, so a transfer that never dips reads this.
	RecoveryResMs float64 `json:"recovery_resolution_ms"`
	// MinAfterCut is the lowest goodput of one sample interval in the
	// during window: how deep the dip went.
	MinAfterCut float64 `json:"min_sample_gbps_during"`
	// StallMs is the time after the cut spent in samples with (almost) no
	// goodput, below 5% of the before-level: recovery_ms says when goodput
	// first came back, this says whether it stayed.
	StallMs        float64      `json:"stall_ms_after_cut"`
	Recovered      bool         `json:"recovered"`
	Retransmitted  uint64       `json:"packets_retransmitted"`
	PathsRetired   uint64       `json:"paths_retired"`
	PathsSuspected uint64       `json:"paths_suspected"`
	SpinePackets   []SpineShare `json:"spine_packets"`
	CutSpineAfter  uint64       `json:"cut_spine_packets_after_cut"`
	Windows        Windows      `json:"windows"`
	Series         []Point      `json:"series,omitempty"`

	TCP    *TCPFabricResult `json:"tcp,omitempty"`
	Errors []string         `json:"errors,omitempty"`
	PNG    string           `json:"png,omitempty"`
	WallS  float64          `json:"wall_s"`
}

// SpineShare is one spine's forwarded packets (its nft counters) during
// the metaroce run, before and after the cut.
type SpineShare struct {
	Spine       int     `json:"spine"`
	Before      uint64  `json:"before_cut"`
	After       uint64  `json:"after_cut"`
	Share       float64 `json:"share_before_cut"`
	BytesBefore uint64  `json:"bytes_before_cut"` // IP bytes of the packets before the cut
}

// Windows are the measurement windows, in ms relative to the cut.
type Windows struct {
	BeforeFromMs float64 `json:"before_from_ms"`
	DuringToMs   float64 `json:"during_to_ms"`
	AfterFromMs  float64 `json:"after_from_ms"`
	AfterToMs    float64 `json:"after_to_ms"`
	SmoothMs     float64 `json:"recovery_window_ms"`
}

// Point is one sample: ms since the cut and goodput in the interval ending
// there.
type Point struct {
	Ms   float64 `json:"ms"`
	Gbps float64 `json:"gbps"`
}

type leafSpineOpts struct {
	hosts     int
	spineRate uint64
	size      int
	before    time.Duration
	after     time.Duration
	sample    time.Duration
	cutSpine  int
	cutMode   testnet.CutMode
	backend   string
	ipv6      bool
	tcpFlows  int
	tcpRehash bool
	out       string
	series    bool
	paths     int
	cc        string
	mtu       int
}

// demoTopologyArg returns the -topology value in args, if any: runDemo
// hands the whole command line to the leaf-spine demo when it is set.
func demoTopologyArg(args []string) string {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, "topology="); ok {
			return v
		}
		if a == "topology" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

func runLeafSpineDemo(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce demo -topology leafspine", out)
	o := leafSpineOpts{}
	fs.String("topology", "leafspine", topologyUsage)
	fs.IntVar(&o.hosts, "hosts-per-leaf", 2, "hosts on each leaf (traffic runs between the first of each)")
	cli.RateVar(fs, &o.spineRate, "spine-rate", 250_000_000, "bit rate of every leaf-spine link, each direction (tc tbf; 250Mbit, 1Gbit)")
	// 16 random entropy values over 4 spines leave one spine with half
	// of them often enough (binomial), and that spine's link then caps
	// the connection; 64 puts 16 +- 3.5 on each.
	fs.IntVar(&o.paths, "paths", 64, "logical paths per connection (the daemons' paths setting)")
	fs.StringVar(&o.cc, "cc", "", "congestion controller of the daemons (empty: the daemon's default)")
	fs.IntVar(&o.mtu, "mtu", 1500, "IP MTU of every link, 576 to 9000: the daemons and the TCP flows run at it")
	cli.IntSizeVar(fs, &o.size, "size", 64<<10, "bytes per WRITE")
	cli.DurationVar(fs, &o.before, "before", 1500*time.Millisecond, "traffic before the cut")
	cli.DurationVar(fs, &o.after, "after", 2500*time.Millisecond, "traffic after the cut (at the rate measured before it)")
	cli.DurationVar(fs, &o.sample, "sample", 10*time.Millisecond, "goodput sampling interval")
	fs.IntVar(&o.cutSpine, "cut-spine", 1, "the spine to fail")
	cut := fs.String("cut", "blackhole", "how the spine fails: blackhole (links stay up, leaves keep hashing onto it) or linkdown")
	fs.StringVar(&o.backend, "backend", "afxdp", "metaroced backend: afxdp or udp")
	fs.BoolVar(&o.ipv6, "ipv6", false, "run over IPv6")
	fs.IntVar(&o.tcpFlows, "tcp-flows", 8, "Linux TCP flows in the comparison (0 skips it)")
	fs.BoolVar(&o.tcpRehash, "tcp-rehash", false, "leave net.core.txrehash at the kernel default on the hosts (docs/demo.md)")
	fs.StringVar(&o.out, "out", ".", "directory for the PNG (without -json)")
	fs.BoolVar(&o.series, "series", false, "include the goodput samples in the JSON")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	var err error
	if err := checkCC(o.cc); err != nil {
		return err
	}
	if o.cutMode, err = testnet.ParseCutMode(*cut); err != nil {
		return cli.UsageError("-cut %q: want blackhole or linkdown", *cut)
	}
	if err := cli.Check(cli.Int("size", o.size, 1, 1<<30), cli.Int("hosts-per-leaf", o.hosts, 1, 8), cli.Int("paths", o.paths, 1, 256),
		cli.Int("tcp-flows", o.tcpFlows, 0, 256), cli.Int("mtu", o.mtu, 576, 9000)); err != nil {
		return err
	}
	if err := cli.CheckRate("spine-rate", o.spineRate, 1e6, 1e12); err != nil {
		return err
	}
	if o.before < 200*time.Millisecond || o.after < 700*time.Millisecond || o.sample <= 0 {
		return cli.UsageError("-before %v, -after %v, -sample %v: want -before at least 200ms, -after at least 700ms, -sample positive", o.before, o.after, o.sample)
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: needs root (network namespaces, XDP, AF_XDP): run with sudo")
	}
	start := time.Now()
	res, err := leafSpineDemo(o)
	if res != nil {
		if !*asJSON {
			png, perr := plotLeafSpine(res, o.out)
			if perr != nil {
				res.Errors = append(res.Errors, "plot: "+perr.Error())
				res.OK = false
				if err == nil {
					err = fmt.Errorf("demo: plot: %w", perr)
				}
			}
			res.PNG = png
		}
		res.WallS = time.Since(start).Seconds()
		if *asJSON {
			if !o.series {
				res.Series = nil
				if res.TCP != nil {
					res.TCP.Series = nil
				}
			}
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			printLeafSpine(out, res)
		}
	}
	return err
}

func leafSpineDemo(o leafSpineOpts) (*LeafSpineResult, error) {
	testnet.Sweep()
	f, err := testnet.OpenLeafSpine(testnet.LeafSpineConfig{HostsPerLeaf: o.hosts, SpineRate: o.spineRate,
		Link: testnet.LinkConfig{MTU: o.mtu}})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if o.cutSpine < 0 || o.cutSpine >= len(f.Spines) {
		return nil, fmt.Errorf("demo: no spine %d", o.cutSpine)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metaroce-leafspine-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	a, b := f.Leaves[0].Hosts[0], f.Leaves[1].Hosts[0]
	peer := b.IPv4
	if o.ipv6 {
		peer = b.IPv6
	}
	res := &LeafSpineResult{Topology: "leafspine", Spines: len(f.Spines), HostsPerLeaf: o.hosts,
		SpineRateBps: o.spineRate, MTU: o.mtu, CutSpine: o.cutSpine, CutMode: o.cutMode.String(), Backend: o.backend, Congestion: daemonCC(o.cc),
		SampleMs: float64(o.sample) / 1e6}
	res.PayloadCeiling = payloadCeiling(float64(o.spineRate)*float64(len(f.Spines)), o.mtu, o.ipv6)

	extra := fmt.Sprintf("paths: %d\nmtu: %d\n", o.paths, o.mtu)
	extra += ccYAML(o.cc)
	err = withDaemonsYAML(self, dir, o.backend, o.ipv6, a, b, extra, func(ca, cb *daemon.Client) error {
		flow, err := openCutFlow(context.Background(), filepath.Join(dir, a.Label+"-"+o.backend+".sock"),
			filepath.Join(dir, b.Label+"-"+o.backend+".sock"), peer, o.size)
		if err != nil {
			return err
		}
		defer flow.close()
		// Warm-up, and the rate that sizes the run: the run is a message
		// count, so before + after at this rate (the after part takes
		// longer once a spine is gone, which is fine).
		warm := max(1, int(int64(o.spineRate)*int64(len(f.Spines))/8/5/int64(o.size))) // ~200 ms at line rate
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		wr := flow.run(wctx, warm, 11)
		cancel()
		if wr.Err != nil {
			return fmt.Errorf("warm-up: %w", wr.Err)
		}
		if wr.Completed != warm || wr.Verified != warm || wr.Corrupt != 0 {
			return fmt.Errorf("warm-up: %d of %d completed, %d verified, %d corrupt", wr.Completed, warm, wr.Verified, wr.Corrupt)
		}
		// The warm-up includes the paths' first RTTs, so it can come out
		// low; half the fabric's capacity is a floor.
		warmRate := float64(wr.Bytes) / wr.End.Sub(start).Seconds()
		rate := max(warmRate, float64(o.spineRate)*float64(len(f.Spines))/8/2) // bytes/s
		msgs := int(rate * (o.before + o.after).Seconds() / float64(o.size))
		res.Messages = msgs
		return runCutMetaroce(res, f, o, ca, flow, msgs)
	})
	if err != nil {
		res.Errors = append(res.Errors, "metaroce: "+err.Error())
	}
	if err := f.RestoreSpine(o.cutSpine); err != nil {
		return res, fmt.Errorf("demo: restore spine: %w", err)
	}
	if o.tcpFlows > 0 {
		t, err := runTCPFabric(f, a, b, o)
		if err != nil {
			res.Errors = append(res.Errors, "tcp: "+err.Error())
		}
		res.TCP = t
	}
	res.OK = res.DataVerified && res.MessagesLost == 0 && len(res.Errors) == 0
	switch {
	case !res.DataVerified || res.MessagesLost != 0:
		return res, fmt.Errorf("demo: data not verified or messages lost (%d lost)", res.MessagesLost)
	case !res.OK:
		return res, errors.New("demo: " + strings.Join(res.Errors, "; "))
	}
	return res, nil
}

// sample is the receiver's verified bytes at an instant.
type sample struct {
	at    time.Time
	bytes int64
}

// runCutMetaroce runs the flow for msgs messages, samples its verified
// bytes every o.sample, fails the spine o.before after the start, and
// fills in res.
func runCutMetaroce(res *LeafSpineResult, f *testnet.LeafSpine, o leafSpineOpts, ca *daemon.Client, flow *cutFlow, msgs int) error {
	c0, err := f.SpineCounts()
	if err != nil {
		return err
	}
	// A transfer that stops making progress must not hang the demo: past
	// this, the run gives up.
	limit := 4*(o.before+o.after) + 30*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	done := make(chan flowResult, 1)
	start := time.Now()
	go func() { done <- flow.run(ctx, msgs, 12) }()
	var samples []sample
	var cutAt time.Time
	var cCut []testnet.SpineCount
	var fr flowResult
	var finished, cutting bool
	cutc := make(chan cutDone, 1)
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	for !finished {
		select {
		case fr = <-done:
			finished = true
		case <-tick.C:
		}
		samples = append(samples, sample{time.Now(), flow.verified.Load()})
		if !cutting && time.Since(start) >= o.before {
			// The cut and the counter reads are processes (nft) taking
			// tens of ms: off the sampling loop, so the samples go on.
			cutting = true
			go func() { cutc <- cutSpine(f, o) }()
		}
		select {
		case c := <-cutc:
			if c.err != nil {
				return c.err
			}
			cutAt, cCut = c.at, c.counts
		default:
		}
	}
	if cutAt.IsZero() && cutting {
		c := <-cutc
		if c.err != nil {
			return c.err
		}
		cutAt, cCut = c.at, c.counts
	}
	if errors.Is(fr.Err, context.DeadlineExceeded) {
		return fmt.Errorf("the transfer did not finish within %v", limit)
	}
	if fr.Err != nil {
		return fr.Err
	}
	if cutAt.IsZero() {
		return errors.New("the run ended before the cut: raise -after or -before")
	}
	c1, err := f.SpineCounts()
	if err != nil {
		return err
	}
	res.MessagesLost = msgs - fr.Completed
	res.BytesVerified = fr.Bytes
	res.DataVerified = fr.Verified == msgs && fr.Corrupt == 0 && fr.Duplicates == 0
	if st, err := ca.Do(daemon.Request{Op: "status"}); err == nil && len(st.Engines) > 0 {
		tr := st.Engines[0].Transport
		res.Retransmitted, res.PathsRetired, res.PathsSuspected = tr.DataRetransmitted, tr.PathsRetired, tr.PathsSuspected
	}
	res.SpinePackets = spineShares(c0, cCut, c1)
	res.CutSpineAfter = res.SpinePackets[o.cutSpine].After
	m := measure(samples, start, cutAt, fr.End.Sub(start), o.sample)
	res.GoodputBefore, res.GoodputDuring, res.GoodputAfter = m.before, m.during, m.after
	res.RecoveryMs, res.Recovered, res.Windows, res.Series = m.recoveryMs, m.recovered, m.windows, m.series
	res.RecoveryResMs, res.MinAfterCut, res.StallMs = m.windows.SmoothMs, m.minDuring, m.stallMs
	return nil
}

// spineShares turns counter readings at the start, the cut and the end
// into packets before and after the cut and each spine's share before it.
func spineShares(c0, cCut, c1 []testnet.SpineCount) []SpineShare {
	var out []SpineShare
	var total uint64
	for i := range c1 {
		b, a := cCut[i].Sub(c0[i]), c1[i].Sub(cCut[i])
		out = append(out, SpineShare{Spine: i, Before: b.Packets, After: a.Packets, BytesBefore: b.Bytes})
		total += b.Packets
	}
	for i := range out {
		if total > 0 {
			out[i].Share = float64(out[i].Before) / float64(total)
		}
	}
	return out
}

// cutDone is when the cut took effect and the spines' counters then.
type cutDone struct {
	at     time.Time
	counts []testnet.SpineCount
	err    error
}

// cutSpine fails the spine and reads the counters. The cut's time is when
// the command returned, the latest it can have taken effect. The counters
// are read after it: the cut spine's count is final by then, so whatever
// it forwards later is really after the cut.
func cutSpine(f *testnet.LeafSpine, o leafSpineOpts) cutDone {
	if err := f.CutSpine(o.cutSpine, o.cutMode); err != nil {
		return cutDone{err: err}
	}
	at := time.Now()
	c, err := f.SpineCounts()
	return cutDone{at: at, counts: c, err: err}
}

// Measurement windows (docs/demo.md): before is from warmUp after the
// start to the cut; during is the first duringWin after the cut; after is
// from afterSkip after the cut to tailSkip before the end of the
// transfer; recovery is judged on trailing windows of smoothWin.
const (
	warmUp    = 250 * time.Millisecond // the writer's first messages and the paths' first RTTs
	duringWin = 200 * time.Millisecond // long enough to hold detection and repathing
	afterSkip = 500 * time.Millisecond // past any recovery we expect, so the level is the settled one
	tailSkip  = 50 * time.Millisecond  // the last messages drain with fewer in flight
	smoothWin = 20 * time.Millisecond  // two 10 ms samples: one sample alone is noise
)

type measured struct {
	before, during, after float64
	recoveryMs            float64
	recovered             bool
	minDuring             float64
	stallMs               float64
	windows               Windows
	series                []Point
}

// measure turns samples of cumulative verified bytes into the before,
// during and after goodput, the recovery time and a series. Bytes between
// samples are interpolated linearly, so a window need not fall on samples.
func measure(s []sample, start, cut time.Time, elapsed, step time.Duration) measured {
	var m measured
	ms := func(t time.Time) float64 { return float64(t.Sub(cut)) / 1e6 }
	gbps := goodputOf(s)
	// The transfer ends at start + elapsed: metaroce's last WRITE
	// completion, the end of the TCP run.
	end := start.Add(elapsed)
	bFrom := start.Add(warmUp)
	aFrom, aTo := cut.Add(afterSkip), end.Add(-tailSkip)
	m.before = gbps(bFrom, cut)
	m.during = gbps(cut, cut.Add(duringWin))
	m.after = gbps(aFrom, aTo)
	m.windows = Windows{BeforeFromMs: ms(bFrom), DuringToMs: float64(duringWin) / 1e6,
		AfterFromMs: ms(aFrom), AfterToMs: ms(aTo), SmoothMs: float64(smoothWin) / 1e6}
	m.recoveryMs = -1
	if m.after > 0 {
		for t := cut.Add(smoothWin); !t.After(aTo); t = t.Add(time.Millisecond) {
			if gbps(t.Add(-smoothWin), t) >= 0.9*m.after {
				m.recoveryMs, m.recovered = ms(t), true
				break
			}
		}
	}
	// The series is on a regular grid of step, each point the goodput over
	// the step ending there: polls are not evenly spaced (each waits for
	// the engine), and a 1 ms gap between two would plot as a spike.
	if len(s) > 1 {
		for t := cut.Add(-cut.Sub(s[0].at).Truncate(step)).Add(step); !t.After(s[len(s)-1].at); t = t.Add(step) {
			m.series = append(m.series, Point{Ms: ms(t), Gbps: gbps(t.Add(-step), t)})
		}
	}
	m.minDuring = -1
	for _, p := range m.series {
		if p.Ms > 0 && p.Ms <= m.windows.AfterToMs && p.Gbps < 0.05*m.before {
			m.stallMs += float64(step) / 1e6
		}
		if p.Ms > 0 && p.Ms <= float64(duringWin)/1e6 && (m.minDuring < 0 || p.Gbps < m.minDuring) {
			m.minDuring = p.Gbps
		}
	}
	return m
}

// goodputOf returns the goodput, Gb/s, between two instants of a series of
// cumulative byte samples, the bytes between samples interpolated linearly
// so an interval need not fall on samples.
func goodputOf(s []sample) func(a, b time.Time) float64 {
	// bytesAt interpolates the cumulative bytes at t.
	bytesAt := func(t time.Time) float64 {
		if len(s) == 0 {
			return 0
		}
		if !t.After(s[0].at) {
			return float64(s[0].bytes)
		}
		for i := 1; i < len(s); i++ {
			if !t.After(s[i].at) {
				f := float64(t.Sub(s[i-1].at)) / float64(s[i].at.Sub(s[i-1].at))
				return float64(s[i-1].bytes) + f*float64(s[i].bytes-s[i-1].bytes)
			}
		}
		return float64(s[len(s)-1].bytes)
	}
	return func(a, b time.Time) float64 {
		if !b.After(a) {
			return 0
		}
		return (bytesAt(b) - bytesAt(a)) * 8 / b.Sub(a).Seconds() / 1e9
	}
}

// payloadCeiling is the WRITE payload, in Gb/s, that bps of link carries
// in full packets at the daemons' MTU.
func payloadCeiling(bps float64, mtu int, ipv6 bool) float64 {
	cfg := transport.Defaults
	cfg.MTU = mtu
	payload := cfg.MaxPayload()
	ip := 20
	if ipv6 {
		ip = 40
	}
	frame := payload + wire.DataLen + wire.TrailerLen + 8 + ip + 14 // UDP, IP, Ethernet
	return bps * float64(payload) / float64(frame) / 1e9
}

func printLeafSpine(w io.Writer, r *LeafSpineResult) {
	fmt.Fprintf(w, "metaroce demo: leaf-spine, 2 leaves x %d hosts, %d spines, %.0f Mb/s per leaf-spine link, MTU %d; spine %d cut (%s)\n",
		r.HostsPerLeaf, r.Spines, float64(r.SpineRateBps)/1e6, r.MTU, r.CutSpine, r.CutMode)
	fmt.Fprintf(w, "metaroce   %d WRITEs of verified data (%s backend): verified %v, %d lost, %d bytes\n",
		r.Messages, r.Backend, r.DataVerified, r.MessagesLost, r.BytesVerified)
	fmt.Fprintf(w, "goodput    before %.3f Gb/s, during %.3f (lowest %.0f ms sample %.3f), after %.3f; the payload the spines carry: %.3f before, %.3f after\n",
		r.GoodputBefore, r.GoodputDuring, r.SampleMs, r.MinAfterCut, r.GoodputAfter,
		r.PayloadCeiling, r.PayloadCeiling*float64(r.Spines-1)/float64(r.Spines))
	if r.Recovered {
		fmt.Fprintf(w, "recovery   %.0f ms to 90%% of the after-level; %.0f ms of stalls after the cut (%d paths retired, %d retransmitted)\n",
			r.RecoveryMs, r.StallMs, r.PathsRetired, r.Retransmitted)
	} else {
		fmt.Fprintf(w, "recovery   not reached\n")
	}
	fmt.Fprintf(w, "spines     packets forwarded before / after the cut:")
	for _, s := range r.SpinePackets {
		fmt.Fprintf(w, "  %d: %d (%.0f%%) / %d", s.Spine, s.Before, 100*s.Share, s.After)
	}
	fmt.Fprintln(w)
	if t := r.TCP; t != nil {
		fmt.Fprintf(w, "Linux TCP  %d flows: before %.3f Gb/s, after %.3f; %d flows stalled after the cut (%d hashed onto the cut spine)",
			t.Flows, t.GoodputBefore, t.GoodputAfter, t.Stalled, t.OnCutSpine)
		if t.Recovered {
			fmt.Fprintf(w, "; aggregate at 90%% of its after-level %.0f ms after the cut\n", t.RecoveryMs)
		} else {
			fmt.Fprintf(w, "; aggregate never back at 90%% of its after-level\n")
		}
	}
	if r.PNG != "" {
		fmt.Fprintf(w, "plot       %s\n", r.PNG)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error      %s\n", e)
	}
}

// errOnce collects the first error of concurrent goroutines.
type errOnce struct {
	mu  sync.Mutex
	err error
}

func (e *errOnce) set(err error) {
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
}

func (e *errOnce) get() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}
