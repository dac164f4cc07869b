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
	"time"

	"github.com/metaroce/metaroce/internal/cli"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
)

// The plane demo (docs/spec.md §7.9): two hosts with one veth per plane,
// each plane its own switch namespace rate-limited towards the hosts; a
// daemon per host serves its ports as the planes of one endpoint, and the
// demo's application WRITEs verified messages from one to the other (the
// leaf-spine demo's flow, demo_leafspine_flow.go). One plane is
// blackholed mid-transfer (its switch drops everything it forwards; the
// links stay up) and restored later. Goodput is sampled from the bytes the
// receiver verified; the kernel's counters of the sender's ports give each
// plane's packets. Then the same schedule under MPTCP (one subflow per
// plane) and under plain TCP on the plane that is cut (demo_planes_tcp.go).
//
// Windows, relative to the cut (C) and the restore (R), the transfer
// ending at E:
//
//	before     [start + warmUp, C]
//	during     [C, C + planeDuringWin]: detection and rerouting
//	cut        [C + planeSettle, R]: the level on the surviving planes
//	restored   [R + planeSettle, E - tailSkip]
//
// recovery_ms is the first instant after C at which goodput over the
// trailing smoothing window (-smooth, 5 ms by default; samples every -sample,
// 1 ms) is at least 90% of the cut level: the time from the blackhole to
// full use of the surviving planes, at the smoothing window's resolution.
// restore_ms is the same after R against 90% of the before level: the time
// until the restored plane carries its share again.
// surviving_capacity_share is the cut level over the before level times
// (P-1)/P: the fraction of the surviving planes' capacity, as measured in
// the same run, that metaroce keeps while the plane is gone.

// PlanesResult is the JSON of `metaroce demo -topology planes`.
type PlanesResult struct {
	Topology     string  `json:"topology"`
	Planes       int     `json:"planes"`
	PlaneRateBps uint64  `json:"plane_link_rate_bps"`
	CutPlane     int     `json:"cut_plane"`
	Backend      string  `json:"backend"`
	SampleMs     float64 `json:"sample_ms"`
	SmoothMs     float64 `json:"smooth_ms"`

	// OK: every part ran, every WRITE was verified and none was lost.
	OK            bool  `json:"ok"`
	Messages      int   `json:"messages"`
	MessagesLost  int   `json:"messages_lost"`
	DataVerified  bool  `json:"data_verified"`
	BytesVerified int64 `json:"bytes_verified"`

	Goodput PlaneGoodput `json:"goodput"`
	// SurvivingShare: the cut level over the surviving planes' share of
	// the before level; NominalShare: over their configured rate.
	SurvivingShare float64 `json:"surviving_capacity_share"`
	NominalShare   float64 `json:"nominal_capacity_share"`

	Retransmitted  uint64 `json:"packets_retransmitted"`
	PlanesDown     uint64 `json:"planes_down"`
	PlanesUp       uint64 `json:"planes_up"`
	PathsSuspected uint64 `json:"paths_suspected"`
	PathTimeouts   uint64 `json:"path_timeouts"`
	PathsSlow      uint64 `json:"paths_slow"`
	// PlanePackets: frames each of the sender's ports sent (the kernel's
	// counters), before the cut, during it and after the restore.
	PlanePackets []PlanePackets `json:"plane_packets"`
	Windows      PlaneWindows   `json:"windows"`
	Series       []Point        `json:"series,omitempty"`

	// Engine is the sending daemon's status at the end: its transport
	// counters and each plane's link and socket counters.
	Engine *daemon.EngineStatus `json:"engine,omitempty"`

	MPTCP  *StreamResult `json:"mptcp,omitempty"`
	TCP    *StreamResult `json:"tcp,omitempty"`
	Errors []string      `json:"errors,omitempty"`
	PNG    string        `json:"png,omitempty"`
	WallS  float64       `json:"wall_s"`
}

// PlaneGoodput is goodput in the windows of one run, and its recoveries.
type PlaneGoodput struct {
	Before    float64 `json:"before_gbps"`
	During    float64 `json:"during_gbps"`
	Cut       float64 `json:"cut_gbps"`
	Restored  float64 `json:"restored_gbps"`
	MinDuring float64 `json:"min_sample_gbps_during"`
	// RecoveryMs and RestoreMs: -1 when never reached.
	RecoveryMs float64 `json:"recovery_ms"`
	RestoreMs  float64 `json:"restore_ms"`
}

// PlanePackets is one plane's frames out of the sender's port.
type PlanePackets struct {
	Plane        int     `json:"plane"`
	Before       uint64  `json:"before_cut"`
	During       uint64  `json:"during_cut"`
	Restored     uint64  `json:"after_restore"`
	ShareBefore  float64 `json:"share_before_cut"`
	ShareRestore float64 `json:"share_after_restore"`
}

// PlaneWindows are the windows, ms relative to the cut.
type PlaneWindows struct {
	BeforeFromMs   float64 `json:"before_from_ms"`
	DuringToMs     float64 `json:"during_to_ms"`
	CutFromMs      float64 `json:"cut_from_ms"`
	RestoreMs      float64 `json:"restore_at_ms"`
	RestoredFromMs float64 `json:"restored_from_ms"`
	EndMs          float64 `json:"end_ms"`
}

type planesOpts struct {
	planes    int
	planeRate uint64
	size      int
	before    time.Duration
	cutFor    time.Duration
	after     time.Duration
	sample    time.Duration
	smooth    time.Duration
	cutPlane  int
	backend   string
	paths     int
	cc        string
	mptcp     bool
	tcp       bool
	out       string
	series    bool
}

// Plane demo windows (see above).
const (
	planeDuringWin = 100 * time.Millisecond
	planeSettle    = 200 * time.Millisecond
)

func runPlanesDemo(args []string, out io.Writer) error {
	fs := cli.NewFlagSet("metaroce demo -topology planes", out)
	o := planesOpts{}
	fs.String("topology", "planes", topologyUsage)
	fs.IntVar(&o.planes, "planes", 2, "planes (one veth per host and one switch namespace each), 2..8")
	cli.RateVar(fs, &o.planeRate, "plane-rate", 400_000_000, "bit rate of every host-plane link towards the host (tc tbf on the switch)")
	fs.IntVar(&o.paths, "paths", 16, "logical paths per connection (path i on plane i mod planes)")
	fs.StringVar(&o.cc, "cc", "", "congestion controller of the daemons (empty: the daemon's default)")
	cli.IntSizeVar(fs, &o.size, "size", 16<<10, "bytes per WRITE (small, so a 1 ms sample holds several)")
	cli.DurationVar(fs, &o.before, "before", time.Second, "traffic before the cut")
	cli.DurationVar(fs, &o.cutFor, "cut-for", time.Second, "how long the plane stays blackholed")
	cli.DurationVar(fs, &o.after, "after", time.Second, "traffic after the restore")
	cli.DurationVar(fs, &o.sample, "sample", time.Millisecond, "goodput sampling interval")
	cli.DurationVar(fs, &o.smooth, "smooth", 5*time.Millisecond, "trailing window recovery_ms and restore_ms are judged on")
	fs.IntVar(&o.cutPlane, "cut-plane", 1, "the plane to blackhole")
	fs.StringVar(&o.backend, "backend", "afxdp", "metaroced backend: afxdp or udp")
	fs.BoolVar(&o.mptcp, "mptcp", true, "run the same cut under MPTCP, one subflow per plane")
	fs.BoolVar(&o.tcp, "tcp", true, "run the same cut under plain TCP on the cut plane")
	fs.StringVar(&o.out, "out", ".", "directory for the PNG (without -json)")
	fs.BoolVar(&o.series, "series", false, "include the goodput samples in the JSON")
	asJSON := fs.Bool("json", false, "print one JSON object")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if err := checkCC(o.cc); err != nil {
		return err
	}
	if err := cli.Check(cli.Int("planes", o.planes, 2, 8), cli.Int("size", o.size, 1, 1<<30), cli.Int("paths", o.paths, o.planes, 256),
		cli.Int("cut-plane", o.cutPlane, 0, o.planes-1)); err != nil {
		return err
	}
	if err := cli.CheckRate("plane-rate", o.planeRate, 1e6, 1e12); err != nil {
		return err
	}
	if o.before < 400*time.Millisecond || o.cutFor < 2*planeSettle || o.after < 2*planeSettle || o.sample <= 0 || o.smooth < o.sample {
		return cli.UsageError("-before %v, -cut-for %v, -after %v, -sample %v, -smooth %v: want -before at least 400ms, -cut-for and -after at least 400ms, -smooth at least -sample",
			o.before, o.cutFor, o.after, o.sample, o.smooth)
	}
	if os.Geteuid() != 0 {
		return errors.New("demo: needs root (network namespaces, XDP, AF_XDP): run with sudo")
	}
	start := time.Now()
	res, err := planesDemo(o)
	if res != nil {
		if !*asJSON {
			png, perr := plotPlanes(res, o.out)
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
				for _, s := range []*StreamResult{res.MPTCP, res.TCP} {
					if s != nil {
						s.Series = nil
					}
				}
			}
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			enc.Encode(res)
		} else {
			printPlanes(out, res)
		}
	}
	return err
}

func planesDemo(o planesOpts) (*PlanesResult, error) {
	testnet.Sweep()
	f, err := testnet.OpenPlanes(2, o.planes, testnet.Config{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	for _, sw := range f.Switches {
		for i := range sw.Ports {
			if err := sw.SetRate(i, o.planeRate, 0); err != nil {
				return nil, fmt.Errorf("demo: rate-limit %s: %w", sw.Name, err)
			}
		}
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metaroce-planes-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	a, b := f.Hosts[0], f.Hosts[1]
	res := &PlanesResult{Topology: "planes", Planes: o.planes, PlaneRateBps: o.planeRate, CutPlane: o.cutPlane,
		Backend: o.backend, SampleMs: float64(o.sample) / 1e6, SmoothMs: float64(o.smooth) / 1e6}
	var nss []*testnet.Namespace
	var ifaces []string
	for _, h := range []*testnet.PlaneHost{a, b} {
		nss = append(nss, h.Namespace)
		var y strings.Builder
		y.WriteString("plane_interfaces: true\ninterfaces:\n")
		for _, p := range h.Ports {
			fmt.Fprintf(&y, "  - name: %s\n    backend: %s\n", p.Name, o.backend)
		}
		ifaces = append(ifaces, y.String())
	}
	extra := fmt.Sprintf("paths: %d\n", o.paths) + ccYAML(o.cc)
	err = withDaemonsIn(self, dir, o.backend, false, nss, ifaces, extra, func(ca, cb *daemon.Client) error {
		flow, err := openCutFlow(context.Background(), filepath.Join(dir, a.Label+"-"+o.backend+".sock"),
			filepath.Join(dir, b.Label+"-"+o.backend+".sock"), b.IPv4[0], o.size)
		if err != nil {
			return err
		}
		defer flow.close()
		// Warm-up (~200 ms at the planes' rate), and the rate that sizes
		// the run; half the planes' capacity is a floor.
		capacity := float64(o.planeRate) * float64(o.planes) / 8
		warm := max(1, int(capacity/5/float64(o.size)))
		wctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		start := time.Now()
		wr := flow.run(wctx, warm, 21)
		cancel()
		if wr.Err != nil {
			return fmt.Errorf("warm-up: %w", wr.Err)
		}
		if wr.Completed != warm || wr.Verified != warm || wr.Corrupt != 0 {
			return fmt.Errorf("warm-up: %d of %d completed, %d verified, %d corrupt", wr.Completed, warm, wr.Verified, wr.Corrupt)
		}
		rate := max(float64(wr.Bytes)/wr.End.Sub(start).Seconds(), capacity/2)
		msgs := int(rate * (o.before + o.cutFor + o.after).Seconds() / float64(o.size))
		res.Messages = msgs
		return runPlanesMetaroce(res, f, o, ca, flow, msgs)
	})
	if err != nil {
		res.Errors = append(res.Errors, "metaroce: "+err.Error())
	}
	if err := f.Switches[o.cutPlane].SetLoss(0); err != nil {
		return res, fmt.Errorf("demo: restore plane: %w", err)
	}
	if o.mptcp {
		s, err := runPlaneStream(f, o, true)
		if err != nil {
			res.Errors = append(res.Errors, "mptcp: "+err.Error())
		}
		res.MPTCP = s
	}
	if o.tcp {
		s, err := runPlaneStream(f, o, false)
		if err != nil {
			res.Errors = append(res.Errors, "tcp: "+err.Error())
		}
		res.TCP = s
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

// planeEvent is when a cut or restore took effect (the command returned:
// the latest it can have) and the sender's port counters right after it.
type planeEvent struct {
	at     time.Time
	counts []testnet.IfaceCount
	err    error
}

// planeCounts reads the counters of every port of h.
func planeCounts(h *testnet.PlaneHost) ([]testnet.IfaceCount, error) {
	var out []testnet.IfaceCount
	for _, p := range h.Ports {
		c, err := p.Counters()
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// blackhole sets the loss of the cut plane's switch (1: everything it
// forwards dropped, links up; 0: restored) and reads the counters.
func blackhole(f *testnet.Planes, o planesOpts, loss float64) planeEvent {
	if err := f.Switches[o.cutPlane].SetLoss(loss); err != nil {
		return planeEvent{err: err}
	}
	at := time.Now()
	c, err := planeCounts(f.Hosts[0])
	return planeEvent{at: at, counts: c, err: err}
}

// schedule is one run's timeline: samples of cumulative bytes, the cut and
// the restore, and the sender's counters at the start, the cut, the
// restore and the end.
type schedule struct {
	samples      []sample
	start        time.Time
	cut, restore planeEvent
	c0, c1       []testnet.IfaceCount
}

// runSchedule samples bytes() every o.sample, blackholes the cut plane
// o.before after the start and restores it o.cutFor later, until done
// closes or, with done nil, o.before + o.cutFor + o.after have passed.
func runSchedule(f *testnet.Planes, o planesOpts, bytes func() int64, done <-chan struct{}) (*schedule, error) {
	s := &schedule{}
	var err error
	if s.c0, err = planeCounts(f.Hosts[0]); err != nil {
		return nil, err
	}
	s.start = time.Now()
	evc := make(chan planeEvent, 2)
	cutting, restoring := false, false
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	total := o.before + o.cutFor + o.after
	for finished := false; !finished; {
		select {
		case <-done:
			finished = true
		case <-tick.C:
		}
		now := time.Now()
		s.samples = append(s.samples, sample{now, bytes()})
		if done == nil && now.Sub(s.start) >= total {
			finished = true
		}
		// The cut and the counter reads are processes (nft, ip) taking
		// milliseconds: off the sampling loop, so the samples go on.
		if !cutting && now.Sub(s.start) >= o.before {
			cutting = true
			go func() { evc <- blackhole(f, o, 1) }()
		}
		if !restoring && !s.cut.at.IsZero() && now.Sub(s.cut.at) >= o.cutFor {
			restoring = true
			go func() { evc <- blackhole(f, o, 0) }()
		}
		select {
		case ev := <-evc:
			if ev.err != nil {
				return nil, ev.err
			}
			if s.cut.at.IsZero() {
				s.cut = ev
			} else {
				s.restore = ev
			}
		default:
		}
	}
	for (cutting && s.cut.at.IsZero()) || (restoring && s.restore.at.IsZero()) {
		ev := <-evc
		if ev.err != nil {
			return nil, ev.err
		}
		if s.cut.at.IsZero() {
			s.cut = ev
		} else {
			s.restore = ev
		}
	}
	if s.restore.at.IsZero() {
		return nil, errors.New("the run ended before the restore: raise the message count (-after)")
	}
	s.c1, err = planeCounts(f.Hosts[0])
	return s, err
}

// measurePlanes computes the windows' goodput, the recoveries and the
// series (ms since the cut) of a schedule whose transfer ended at end.
func measurePlanes(s *schedule, end time.Time, o planesOpts) (PlaneGoodput, PlaneWindows, []Point) {
	gbps := goodputOf(s.samples)
	cut, rest := s.cut.at, s.restore.at
	ms := func(t time.Time) float64 { return float64(t.Sub(cut)) / 1e6 }
	g := PlaneGoodput{RecoveryMs: -1, RestoreMs: -1, MinDuring: -1}
	g.Before = gbps(s.start.Add(warmUp), cut)
	g.During = gbps(cut, cut.Add(planeDuringWin))
	g.Cut = gbps(cut.Add(planeSettle), rest)
	g.Restored = gbps(rest.Add(planeSettle), end.Add(-tailSkip))
	w := PlaneWindows{BeforeFromMs: ms(s.start.Add(warmUp)), DuringToMs: float64(planeDuringWin) / 1e6,
		CutFromMs: float64(planeSettle) / 1e6, RestoreMs: ms(rest), RestoredFromMs: ms(rest.Add(planeSettle)), EndMs: ms(end)}
	first := func(from, to time.Time, level float64) float64 {
		for t := from.Add(o.smooth); !t.After(to); t = t.Add(o.sample / 4) {
			if gbps(t.Add(-o.smooth), t) >= 0.9*level {
				return float64(t.Sub(from)) / 1e6
			}
		}
		return -1
	}
	if g.Cut > 0 {
		g.RecoveryMs = first(cut, rest, g.Cut)
	}
	if g.Before > 0 {
		g.RestoreMs = first(rest, end, g.Before)
	}
	var series []Point
	if n := len(s.samples); n > 1 {
		step := o.sample
		for t := s.samples[0].at.Add(step); !t.After(s.samples[n-1].at); t = t.Add(step) {
			p := Point{Ms: ms(t), Gbps: gbps(t.Add(-step), t)}
			series = append(series, p)
			if p.Ms > 0 && p.Ms <= float64(planeDuringWin)/1e6 && (g.MinDuring < 0 || p.Gbps < g.MinDuring) {
				g.MinDuring = p.Gbps
			}
		}
	}
	return g, w, series
}

// planePackets turns the counter readings into frames per plane and window.
func planePackets(s *schedule) []PlanePackets {
	var out []PlanePackets
	var before, restored uint64
	for p := range s.c0 {
		pp := PlanePackets{Plane: p, Before: s.cut.counts[p].TxPackets - s.c0[p].TxPackets,
			During:   s.restore.counts[p].TxPackets - s.cut.counts[p].TxPackets,
			Restored: s.c1[p].TxPackets - s.restore.counts[p].TxPackets}
		before += pp.Before
		restored += pp.Restored
		out = append(out, pp)
	}
	for i := range out {
		if before > 0 {
			out[i].ShareBefore = float64(out[i].Before) / float64(before)
		}
		if restored > 0 {
			out[i].ShareRestore = float64(out[i].Restored) / float64(restored)
		}
	}
	return out
}

// runPlanesMetaroce runs the flow for msgs messages on the schedule and
// fills in res.
func runPlanesMetaroce(res *PlanesResult, f *testnet.Planes, o planesOpts, ca *daemon.Client, flow *cutFlow, msgs int) error {
	limit := 4*(o.before+o.cutFor+o.after) + 30*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	done := make(chan struct{})
	var fr flowResult
	go func() { fr = flow.run(ctx, msgs, 22); close(done) }()
	s, err := runSchedule(f, o, flow.verified.Load, done)
	<-done
	if err != nil {
		return err
	}
	if errors.Is(fr.Err, context.DeadlineExceeded) {
		return fmt.Errorf("the transfer did not finish within %v", limit)
	}
	if fr.Err != nil {
		return fr.Err
	}
	res.MessagesLost = msgs - fr.Completed
	res.BytesVerified = fr.Bytes
	res.DataVerified = fr.Verified == msgs && fr.Corrupt == 0 && fr.Duplicates == 0
	if st, err := ca.Do(daemon.Request{Op: "status"}); err == nil && len(st.Engines) > 0 {
		tr := st.Engines[0].Transport
		res.Retransmitted, res.PlanesDown, res.PlanesUp = tr.DataRetransmitted, tr.PlanesDown, tr.PlanesUp
		res.PathsSuspected, res.PathTimeouts, res.PathsSlow = tr.PathsSuspected, tr.PathTimeouts, tr.PathsSlow
		res.Engine = &st.Engines[0]
	}
	res.PlanePackets = planePackets(s)
	res.Goodput, res.Windows, res.Series = measurePlanes(s, fr.End, o)
	if res.Goodput.Before > 0 {
		res.SurvivingShare = res.Goodput.Cut / (res.Goodput.Before * float64(o.planes-1) / float64(o.planes))
	}
	res.NominalShare = res.Goodput.Cut * 1e9 / (float64(o.planeRate) * float64(o.planes-1))
	return nil
}

func printPlanes(w io.Writer, r *PlanesResult) {
	fmt.Fprintf(w, "metaroce demo: 2 hosts on %d planes, %.0f Mb/s per host link; plane %d blackholed, then restored; verdict ok %v\n",
		r.Planes, float64(r.PlaneRateBps)/1e6, r.CutPlane, r.OK)
	fmt.Fprintf(w, "metaroce   %d WRITEs of verified data (%s backend): verified %v, %d lost, %d bytes; planes down %d, up %d; %d retransmitted\n",
		r.Messages, r.Backend, r.DataVerified, r.MessagesLost, r.BytesVerified, r.PlanesDown, r.PlanesUp, r.Retransmitted)
	printGoodput(w, "metaroce", r.Goodput)
	fmt.Fprintf(w, "           during the cut %.2f of the surviving planes' capacity measured before it (%.2f of their nominal rate)\n",
		r.SurvivingShare, r.NominalShare)
	fmt.Fprintf(w, "planes     frames out of the sender's ports before / during / after the restore:")
	for _, p := range r.PlanePackets {
		fmt.Fprintf(w, "  %d: %d (%.0f%%) / %d / %d (%.0f%%)", p.Plane, p.Before, 100*p.ShareBefore, p.During, p.Restored, 100*p.ShareRestore)
	}
	fmt.Fprintln(w)
	for _, s := range []*StreamResult{r.MPTCP, r.TCP} {
		if s == nil {
			continue
		}
		fmt.Fprintf(w, "%-10s %s\n", s.Kind, s.What)
		printGoodput(w, s.Kind, s.Goodput)
	}
	if r.PNG != "" {
		fmt.Fprintf(w, "plot       %s\n", r.PNG)
	}
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error      %s\n", e)
	}
}

func printGoodput(w io.Writer, name string, g PlaneGoodput) {
	fmt.Fprintf(w, "%-10s goodput before %.3f Gb/s, first %.0f ms of the cut %.3f (lowest sample %.3f), cut %.3f, restored %.3f; recovery %s, restore %s\n",
		"", g.Before, float64(planeDuringWin)/1e6, g.During, g.MinDuring, g.Cut, g.Restored, msStr(g.RecoveryMs), msStr(g.RestoreMs))
}

func msStr(v float64) string {
	if v < 0 {
		return "never"
	}
	return fmt.Sprintf("%.1f ms", v)
}
