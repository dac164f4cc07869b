package main

import (
	"encoding/csv"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/metaroce/metaroce/sim"
)

// Files of `metaroce sim -topology ... -out DIR`, one set per transport
// run: fct_<t>.csv (each collective message's completion time, sorted,
// with its CDF), goodput_<t>.csv (bytes placed over all hosts per bin),
// links_<t>.csv (every link's utilisation over the collective, drops,
// marks, queue p99); the CDFs are over all the collective's messages, so
// a run that left some incomplete tops out below 1. Three plots draw
// every run together:
// fct_cdf.png, goodput.png (with the fault's time marked) and
// link_util.png (switch-to-switch links, busiest first).

var runColors = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 255}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 255}}

func writeFabricFiles(dir string, runs []*sim.FabricResult) error {
	for _, r := range runs {
		if err := writeFabricCSV(dir, r); err != nil {
			return err
		}
	}
	title := func(what string) string {
		r := runs[0]
		t := fmt.Sprintf("%s, %s %s, %d hosts", what, r.Topology, r.Scenario, r.Hosts)
		if r.Loss > 0 {
			t += fmt.Sprintf(", loss %g", r.Loss)
		}
		if r.Fault != "" {
			t += ", " + r.Fault
		}
		return t
	}

	// Completion time CDF.
	p := plot.New()
	p.Title.Text = title("Message completion CDF")
	// Log scale: the body and a tail a hundred times longer both show.
	p.X.Label.Text = "completion time (us, log scale)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Label.Text = "fraction of messages"
	p.Legend.Left = true
	p.Legend.Top = true
	for i, r := range runs {
		// Over all the collective's messages: a run that left some
		// incomplete tops out below 1, and its legend says so.
		pts := make(plotter.XYs, len(r.FCTs))
		for k, v := range r.FCTs {
			pts[k] = plotter.XY{X: v, Y: float64(k+1) / float64(max(r.Messages, 1))}
		}
		name := r.Transport
		if r.MessagesCompleted < r.Messages {
			name += fmt.Sprintf(" (%d of %d complete)", r.MessagesCompleted, r.Messages)
		}
		if err := addLine(p, pts, name, i); err != nil {
			return err
		}
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "fct_cdf.png")); err != nil {
		return err
	}

	// Goodput over time, the fault marked.
	p = plot.New()
	p.Title.Text = title("Goodput over time")
	p.X.Label.Text = "time since the workload started (us)"
	p.Y.Label.Text = "goodput, all hosts (Gb/s)"
	p.Legend.Top = true
	top := 0.0
	for i, r := range runs {
		pts := make(plotter.XYs, len(r.GoodputSeries))
		for k, v := range r.GoodputSeries {
			pts[k] = plotter.XY{X: float64(k+1) * r.BinUs, Y: v}
			top = max(top, v)
		}
		if err := addLine(p, pts, r.Transport, i); err != nil {
			return err
		}
	}
	if at := runs[0].FaultAtUs; runs[0].Fault != "" {
		l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: top}})
		if err != nil {
			return err
		}
		l.Color = color.Gray{Y: 0x60}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add(runs[0].Fault, l)
	}
	if err := p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "goodput.png")); err != nil {
		return err
	}

	// Per-link utilisation, switch-to-switch links sorted busiest first.
	p = plot.New()
	p.Title.Text = title("Switch-to-switch link utilisation")
	p.X.Label.Text = "links, busiest first"
	p.Y.Label.Text = "utilisation over the collective"
	p.Legend.Top = true
	for i, r := range runs {
		var u []float64
		for _, l := range r.Links {
			if l.Fabric {
				u = append(u, l.Util)
			}
		}
		slices.Sort(u)
		slices.Reverse(u)
		pts := make(plotter.XYs, len(u))
		for k, v := range u {
			pts[k] = plotter.XY{X: float64(k), Y: v}
		}
		if err := addLine(p, pts, r.Transport, i); err != nil {
			return err
		}
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, filepath.Join(dir, "link_util.png"))
}

func addLine(p *plot.Plot, pts plotter.XYs, name string, i int) error {
	l, err := plotter.NewLine(pts)
	if err != nil {
		return err
	}
	l.Color = runColors[i%len(runColors)]
	l.Width = vg.Points(1.5)
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

func writeFabricCSV(dir string, r *sim.FabricResult) error {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	rows := [][]string{{"fct_us", "cdf"}}
	for k, v := range r.FCTs {
		rows = append(rows, []string{f(v), f(float64(k+1) / float64(max(r.Messages, 1)))})
	}
	if err := writeCSV(filepath.Join(dir, "fct_"+r.Transport+".csv"), rows); err != nil {
		return err
	}
	rows = [][]string{{"time_us", "goodput_gbps"}}
	for k, v := range r.GoodputSeries {
		rows = append(rows, []string{f(float64(k+1) * r.BinUs), f(v)})
	}
	if err := writeCSV(filepath.Join(dir, "goodput_"+r.Transport+".csv"), rows); err != nil {
		return err
	}
	rows = [][]string{{"link", "fabric", "utilisation", "dropped", "queue_drops", "ecn_marked", "queue_p99_bytes", "fault_target"}}
	for _, l := range r.Links {
		rows = append(rows, []string{l.Name, strconv.FormatBool(l.Fabric), f(l.Util), strconv.FormatUint(l.Drops, 10),
			strconv.FormatUint(l.QueueDrops, 10), strconv.FormatUint(l.Marked, 10), strconv.Itoa(l.QueueP99),
			strconv.FormatBool(l.FaultTarget)})
	}
	return writeCSV(filepath.Join(dir, "links_"+r.Transport+".csv"), rows)
}

func writeCSV(path string, rows [][]string) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(fh)
	if err := w.WriteAll(rows); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}
