package demo

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/metaroce/metaroce/bench"
	"github.com/metaroce/metaroce/internal/daemon"
	"github.com/metaroce/metaroce/internal/testnet"
)

// sweepLosses are the switch's drop fractions of `demo -sweep`.
var sweepLosses = []float64{0, 0.001, 0.01, 0.05, 0.1}

// SweepPoint is one loss rate of the sweep: metaroce (a perf write-bw
// through the client library, every WRITE checked where it landed) and
// Linux TCP through the same switch, offloads on (what users get) and off
// (the like-for-like wire-packet loss).
type SweepPoint struct {
	Loss          float64 `json:"loss"`
	MetaroceGbps  float64 `json:"metaroce_gbps"`
	DataVerified  bool    `json:"data_verified"`
	Retransmitted uint64  `json:"packets_retransmitted"`
	PacketsSent   uint64  `json:"packets_sent"`
	TCPOnGbps     float64 `json:"tcp_offloads_on_gbps"`
	TCPOffGbps    float64 `json:"tcp_offloads_off_gbps"`
	// A TCP run that moved data but delivered nothing in its window (a
	// backed-off timeout at high loss): its 0 Gb/s is measured.
	TCPOnStalled  bool `json:"tcp_offloads_on_stalled,omitempty"`
	TCPOffStalled bool `json:"tcp_offloads_off_stalled,omitempty"`
	// Ratios: metaroce over each TCP (0 where TCP measured nothing).
	VsTCPOn  float64 `json:"metaroce_vs_tcp_offloads_on"`
	VsTCPOff float64 `json:"metaroce_vs_tcp_offloads_off"`
}

// SweepResult is the JSON of `metaroce demo -sweep`.
type SweepResult struct {
	OK     bool         `json:"ok"`
	MTU    int          `json:"mtu"`
	Points []SweepPoint `json:"points"`
	// Round trips at no loss, in the same run: a 64-byte WRITE through
	// the client API at both ends, the raw AF_XDP floor, a TCP ping-pong.
	WriteRTTP50us    float64  `json:"write_rtt_p50_us"`
	WriteRTTP99us    float64  `json:"write_rtt_p99_us"`
	RawAFXDPGbps     float64  `json:"raw_afxdp_gbps"`
	RawAFXDPRTTP50us float64  `json:"raw_afxdp_rtt_p50_us"`
	TCPRTTP50us      float64  `json:"tcp_rtt_p50_us"`
	TCPRTTP99us      float64  `json:"tcp_rtt_p99_us"`
	CSV              string   `json:"csv,omitempty"`
	PNG              string   `json:"png,omitempty"`
	Errors           []string `json:"errors,omitempty"`
	WallS            float64  `json:"wall_s"`
}

func runSweep(o demoOpts, asJSON bool, out io.Writer) error {
	start := time.Now()
	res, err := sweep(o)
	if res == nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err == nil {
		if res.CSV, err = writeSweepCSV(res, o.out); err != nil {
			res.Errors = append(res.Errors, "csv: "+err.Error())
		}
		if res.PNG, err = plotSweep(res, o.out); err != nil {
			res.Errors = append(res.Errors, "png: "+err.Error())
		}
	} else {
		res.Errors = append(res.Errors, "-out: "+err.Error())
	}
	res.OK = len(res.Errors) == 0
	for _, p := range res.Points {
		res.OK = res.OK && p.DataVerified
	}
	res.WallS = time.Since(start).Seconds()
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		printSweep(out, res)
	}
	if !res.OK {
		return fmt.Errorf("demo -sweep: not ok: %s", strings.Join(res.Errors, "; "))
	}
	return nil
}

func sweep(o demoOpts) (*SweepResult, error) {
	testnet.Sweep()
	star, err := testnet.OpenStar(2, testnet.Config{Link: testnet.LinkConfig{MTU: o.mtu}})
	if err != nil {
		return nil, err
	}
	defer star.Close()
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "metaroce-sweep-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	a, b := star.Hosts[0], star.Hosts[1]
	peer := b.IPv4
	if o.ipv6 {
		peer = b.IPv6
	}
	res := &SweepResult{MTU: o.mtu}
	for _, l := range sweepLosses {
		res.Points = append(res.Points, SweepPoint{Loss: l})
	}
	fail := func(format string, args ...any) { res.Errors = append(res.Errors, fmt.Sprintf(format, args...)) }

	// metaroce at each loss, the daemons up throughout; the latency at
	// no loss first.
	err = withDaemonsYAML(self, dir, "afxdp", o.ipv6, a, b, fmt.Sprintf("mtu: %d\n", o.mtu)+ccYAML(o.cc), func(ca, cb *daemon.Client) error {
		if err := star.Switch.SetLoss(0); err != nil {
			return err
		}
		lat, err := runPerfPair(self, dir, "afxdp", a, b, peer, 18600, "write-lat", fmt.Sprintf("-s 64 -n %d", o.latCount))
		if err != nil {
			fail("write-lat: %v", err)
		} else {
			res.WriteRTTP50us, res.WriteRTTP99us = lat.Rows[0].RTTP50us, lat.Rows[0].RTTP99us
		}
		msgs := max(1, o.bytes/int64(o.size))
		for i := range res.Points {
			p := &res.Points[i]
			if err := star.Switch.SetLoss(p.Loss); err != nil {
				return fmt.Errorf("switch: loss %g: %w", p.Loss, err)
			}
			before, _ := ca.Do(daemon.Request{Op: "status"})
			bw, err := runPerfPair(self, dir, "afxdp", a, b, peer, 18601+i, "write-bw", fmt.Sprintf("-s %d -n %d -seed %d", o.size, msgs, 10+i))
			if err != nil {
				fail("metaroce at %g loss: %v", p.Loss, err)
				continue
			}
			p.MetaroceGbps, p.DataVerified = bw.Rows[0].BWAvgGbps, bw.Verified
			if after, err := ca.Do(daemon.Request{Op: "status"}); err == nil && before != nil {
				p.Retransmitted = after.Engines[0].Transport.DataRetransmitted - before.Engines[0].Transport.DataRetransmitted
				p.PacketsSent = after.Engines[0].Transport.DataSent - before.Engines[0].Transport.DataSent
			}
		}
		return nil
	})
	if err != nil {
		fail("metaroce: %v", err)
	}

	// The baselines with the daemons stopped: the raw ceiling and the
	// TCP ping-pong at no loss, then TCP at each loss, offloads on for
	// every point first (turning them off is not undone).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := star.Switch.SetLoss(0); err != nil {
		return res, err
	}
	if r, err := bench.RawAFXDP(ctx, a, b, bench.RawOptions{Duration: o.duration, IPv6: o.ipv6, MTU: o.mtu}); err == nil {
		res.RawAFXDPGbps, res.RawAFXDPRTTP50us = r.Gbps, r.LatP50
	} else {
		fail("raw AF_XDP: %v", err)
	}
	if r, err := bench.TCPPingPong(ctx, a, b, bench.TCPPingOptions{Count: o.latCount, IPv6: o.ipv6}); err == nil {
		res.TCPRTTP50us, res.TCPRTTP99us = r.RTTP50us, r.RTTP99us
	} else {
		fail("TCP ping-pong: %v", err)
	}
	for _, off := range []bool{false, true} {
		for i := range res.Points {
			p := &res.Points[i]
			if err := star.Switch.SetLoss(0); err != nil {
				return res, err
			}
			to := bench.TCPOptions{Duration: o.duration, IPv6: o.ipv6, NoOffloads: off, Port: uint16(5300 + i),
				Connected: func() error { return star.Switch.SetLoss(p.Loss) }}
			r, err := bench.TCP(ctx, a, b, to)
			if err != nil {
				fail("TCP (offloads off %v) at %g loss: %v", off, p.Loss, err)
				continue
			}
			if off {
				p.TCPOffGbps, p.TCPOffStalled = r.Gbps, r.Stalled
			} else {
				p.TCPOnGbps, p.TCPOnStalled = r.Gbps, r.Stalled
			}
		}
	}
	for i := range res.Points {
		p := &res.Points[i]
		if p.TCPOnGbps > 0 {
			p.VsTCPOn = p.MetaroceGbps / p.TCPOnGbps
		}
		if p.TCPOffGbps > 0 {
			p.VsTCPOff = p.MetaroceGbps / p.TCPOffGbps
		}
	}
	return res, nil
}

func writeSweepCSV(r *SweepResult, dir string) (string, error) {
	path, err := filepath.Abs(filepath.Join(dir, "sweep.csv"))
	if err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	w := csv.NewWriter(f)
	w.Write([]string{"loss", "metaroce_gbps", "tcp_offloads_on_gbps", "tcp_offloads_off_gbps", "metaroce_vs_tcp_on", "metaroce_vs_tcp_off", "retransmitted", "sent", "verified", "tcp_on_stalled", "tcp_off_stalled"})
	g := func(v float64) string { return strconv.FormatFloat(v, 'f', 4, 64) }
	for _, p := range r.Points {
		w.Write([]string{g(p.Loss), g(p.MetaroceGbps), g(p.TCPOnGbps), g(p.TCPOffGbps), g(p.VsTCPOn), g(p.VsTCPOff),
			strconv.FormatUint(p.Retransmitted, 10), strconv.FormatUint(p.PacketsSent, 10), strconv.FormatBool(p.DataVerified),
			strconv.FormatBool(p.TCPOnStalled), strconv.FormatBool(p.TCPOffStalled)})
	}
	w.Flush()
	return path, w.Error()
}

// plotSweep draws goodput against loss, one line per contender, the loss
// axis on a log scale with 0 drawn at a tenth of the smallest loss.
func plotSweep(r *SweepResult, dir string) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Goodput against loss, MTU %d, two hosts through a lossy switch namespace", r.MTU)
	p.X.Label.Text = "packets dropped by the switch (%; 0 drawn at 0.01)"
	p.Y.Label.Text = "goodput (Gb/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	x := func(l float64) float64 {
		if l == 0 {
			return 0.01
		}
		return l * 100
	}
	ymax := 0.0
	for _, c := range []struct {
		name string
		get  func(SweepPoint) float64
		col  color.Color
	}{
		{"metaroce WRITEs through the client API, verified", func(p SweepPoint) float64 { return p.MetaroceGbps }, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
		{"Linux TCP, offloads on (default)", func(p SweepPoint) float64 { return p.TCPOnGbps }, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
		{"Linux TCP, offloads off (per-packet loss)", func(p SweepPoint) float64 { return p.TCPOffGbps }, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
	} {
		var xy plotter.XYs
		for _, pt := range r.Points {
			xy = append(xy, plotter.XY{X: x(pt.Loss), Y: c.get(pt)})
			ymax = max(ymax, c.get(pt))
		}
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return "", err
		}
		l.Color, s.Color = c.col, c.col
		l.Width = vg.Points(1.5)
		p.Add(l, s)
		p.Legend.Add(c.name, l, s)
	}
	p.Y.Min, p.Y.Max = 0, ymax*1.3
	path, err := filepath.Abs(filepath.Join(dir, "sweep.png"))
	if err != nil {
		return "", err
	}
	return path, p.Save(9*vg.Inch, 5*vg.Inch, path)
}

func printSweep(w io.Writer, r *SweepResult) {
	fmt.Fprintf(w, "metaroce demo -sweep: MTU %d; verdict ok %v\n", r.MTU, r.OK)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "loss %\tmetaroce Gb/s\tTCP on Gb/s\tTCP off Gb/s\tvs TCP on\tvs TCP off\tretransmitted\tverified\t")
	for _, p := range r.Points {
		fmt.Fprintf(tw, "%.1f\t%.2f\t%.2f\t%.2f\t%.2fx\t%.2fx\t%d\t%v\t\n", p.Loss*100, p.MetaroceGbps, p.TCPOnGbps, p.TCPOffGbps,
			p.VsTCPOn, p.VsTCPOff, p.Retransmitted, p.DataVerified)
	}
	tw.Flush()
	for _, p := range r.Points {
		if p.TCPOnStalled || p.TCPOffStalled {
			fmt.Fprintf(w, "at %.1f%% loss TCP (offloads on %v, off %v) delivered nothing in its window: a backed-off timeout, measured as 0\n",
				p.Loss*100, p.TCPOnStalled, p.TCPOffStalled)
		}
	}
	fmt.Fprintf(w, "round trips (no loss): WRITE p50 %.1f us, p99 %.1f us; raw AF_XDP p50 %.1f us; TCP ping-pong p50 %.1f us\n",
		r.WriteRTTP50us, r.WriteRTTP99us, r.RawAFXDPRTTP50us, r.TCPRTTP50us)
	fmt.Fprintf(w, "raw AF_XDP ceiling %.2f Gb/s; CSV %s; PNG %s\n", r.RawAFXDPGbps, r.CSV, r.PNG)
	for _, e := range r.Errors {
		fmt.Fprintf(w, "error      %s\n", e)
	}
}
