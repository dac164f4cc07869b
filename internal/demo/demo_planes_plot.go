package demo

import (
	"fmt"
	"image/color"
	"math"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plotPlanes draws goodput over time for metaroce, MPTCP and TCP on the
// same axes, time relative to each run's own cut, with dashed lines at the
// cut and at metaroce's restore. It returns the PNG's path.
func plotPlanes(r *PlanesResult, dir string) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%d planes x %.0f Mb/s: goodput when plane %d is blackholed, then restored",
		r.Planes, float64(r.PlaneRateBps)/1e6, r.CutPlane)
	p.X.Label.Text = fmt.Sprintf("time since the cut (ms), %.0f ms samples", r.SampleMs)
	p.Y.Label.Text = "goodput (Gb/s)"
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	ymax := 0.0
	add := func(name string, pts []Point, c color.Color) error {
		if len(pts) == 0 {
			return nil
		}
		xy := make(plotter.XYs, len(pts))
		for i, pt := range pts {
			xy[i].X, xy[i].Y = pt.Ms, pt.Gbps
			ymax = max(ymax, pt.Gbps)
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(1)
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	if err := add(fmt.Sprintf("metaroce WRITEs, verified (recovery %s, restore %s)", msStr(r.Goodput.RecoveryMs), msStr(r.Goodput.RestoreMs)),
		smoothPoints(r.Series, r.SmoothMs, r.SampleMs), color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}); err != nil {
		return "", err
	}
	for _, s := range []struct {
		r *StreamResult
		c color.Color
	}{{r.MPTCP, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}, {r.TCP, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}}} {
		if s.r == nil {
			continue
		}
		if err := add(fmt.Sprintf("Linux %s: %s", s.r.Kind, s.r.What), smoothPoints(s.r.Series, r.SmoothMs, r.SampleMs), s.c); err != nil {
			return "", err
		}
	}
	for _, v := range []struct {
		x    float64
		name string
	}{{0, fmt.Sprintf("plane %d blackholed", r.CutPlane)}, {r.Windows.RestoreMs, "plane restored (metaroce run)"}} {
		l, err := plotter.NewLine(plotter.XYs{{X: v.x, Y: 0}, {X: v.x, Y: ymax * 1.1}})
		if err != nil {
			return "", err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Black
		p.Add(l)
		p.Legend.Add(v.name, l)
	}
	p.X.Tick.Marker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
		var ts []plot.Tick
		for v := math.Ceil(lo/100) * 100; v <= hi; v += 100 {
			t := plot.Tick{Value: v}
			if math.Mod(v, 500) == 0 {
				t.Label = strconv.FormatFloat(v, 'f', 0, 64)
			}
			ts = append(ts, t)
		}
		return ts
	})
	p.Y.Min = 0
	p.Y.Max = ymax * 1.3
	path, err := filepath.Abs(filepath.Join(dir, "planes-goodput.png"))
	if err != nil {
		return "", err
	}
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return "", err
	}
	return path, nil
}

// smoothPoints averages a series over windows of smoothMs (the samples are
// sampleMs apart): 1 ms samples of 16 KiB messages are a comb, the
// smoothing window is what recovery is judged on.
func smoothPoints(pts []Point, smoothMs, sampleMs float64) []Point {
	k := max(1, int(math.Round(smoothMs/sampleMs)))
	if k == 1 || len(pts) < k {
		return pts
	}
	out := make([]Point, 0, len(pts)/k+1)
	for i := k; i <= len(pts); i += k {
		sum := 0.0
		for _, p := range pts[i-k : i] {
			sum += p.Gbps
		}
		out = append(out, Point{Ms: pts[i-1].Ms, Gbps: sum / float64(k)})
	}
	return out
}
