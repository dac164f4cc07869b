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

// plotLeafSpine draws goodput over time, metaroce and Linux TCP on the same
// axes with time relative to the cut (each run's own cut), and a vertical
// line at the cut. It returns the PNG's path.
func plotLeafSpine(r *LeafSpineResult, dir string) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Leaf-spine, %d spines x %.0f Mb/s: goodput when spine %d fails (%s)",
		r.Spines, float64(r.SpineRateBps)/1e6, r.CutSpine, r.CutMode)
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
		l.Width = vg.Points(1.2)
		p.Add(l)
		p.Legend.Add(name, l)
		return nil
	}
	if err := add(fmt.Sprintf("metaroce WRITEs, verified (recovery %.0f ms)", r.RecoveryMs), r.Series, color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}); err != nil {
		return "", err
	}
	if r.TCP != nil {
		name := fmt.Sprintf("Linux TCP, %d flows (%d stalled)", r.TCP.Flows, r.TCP.Stalled)
		if err := add(name, r.TCP.Series, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}); err != nil {
			return "", err
		}
	}
	// The cut: a dashed vertical line at 0.
	cut, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: ymax * 1.1}})
	if err != nil {
		return "", err
	}
	cut.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	cut.Color = color.Black
	p.Add(cut)
	p.Legend.Add(fmt.Sprintf("spine %d cut", r.CutSpine), cut)
	// Ticks every 100 ms, labelled every 500: the default ticker labels
	// only two or three, too few to read a recovery off.
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
	p.Y.Max = ymax * 1.25 // room for the legend

	path, err := filepath.Abs(filepath.Join(dir, "leafspine-goodput.png"))
	if err != nil {
		return "", err
	}
	if err := p.Save(10*vg.Inch, 5*vg.Inch, path); err != nil {
		return "", err
	}
	return path, nil
}
