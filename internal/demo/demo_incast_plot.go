package demo

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// incastColors are the contenders' line colours, in incastContenders'
// order.
var incastColors = []color.RGBA{
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // metaroce
	{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}, // none
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // dcqcn
	{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, // receiver-hint
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // tcp_cubic
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // tcp_bbr
}

// plotIncast draws each contender's completion times as a distribution
// (the fraction of messages completed within x ms) with the ideal as a
// dashed vertical line, and returns the PNG's path.
func plotIncast(r *IncastResult, dir string) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Incast, %d senders x %d KiB into a %.0f Mb/s ECN-marking port: completion times",
		r.Senders, r.Size>>10, float64(r.PortRateBps)/1e6)
	p.X.Label.Text = "completion time (ms, log scale), from the release of a round to the sender's completion"
	p.Y.Label.Text = "fraction of messages"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = false
	// A log axis: a contender that collapses takes seconds where the
	// others take tens of milliseconds, and both must stay readable.
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	xmin, xmax := r.IdealFCTus/1e3, r.IdealFCTus/1e3
	for i, name := range incastContenders {
		c := *r.contender(name)
		if c == nil || len(c.fcts) == 0 {
			continue
		}
		xy := make(plotter.XYs, 0, 2*len(c.fcts))
		for k, d := range c.fcts { // sorted
			ms := float64(d) / 1e6
			xy = append(xy, plotter.XY{X: ms, Y: float64(k) / float64(len(c.fcts))},
				plotter.XY{X: ms, Y: float64(k+1) / float64(len(c.fcts))})
			xmin, xmax = min(xmin, ms), max(xmax, ms)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return "", err
		}
		l.Color = incastColors[i]
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(fmt.Sprintf("%s: p99 %.1f ms (%.2fx ideal), %d timeouts", name, c.FCTP99us/1e3, c.P99OverIdeal, c.Timeouts), l)
	}
	ideal, err := plotter.NewLine(plotter.XYs{{X: r.IdealFCTus / 1e3, Y: 0}, {X: r.IdealFCTus / 1e3, Y: 1}})
	if err != nil {
		return "", err
	}
	ideal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	ideal.Color = color.Black
	p.Add(ideal)
	p.Legend.Add(fmt.Sprintf("ideal %.1f ms", r.IdealFCTus/1e3), ideal)
	p.X.Min, p.X.Max = xmin/1.2, xmax*1.2
	p.Y.Min, p.Y.Max = 0, 1.6 // room for the legend above the curves
	path, err := incastPNG(dir)
	if err != nil {
		return "", err
	}
	if err := p.Save(10*vg.Inch, 6*vg.Inch, path); err != nil {
		return "", err
	}
	return path, nil
}
