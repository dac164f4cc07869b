package demo

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// mpiColors are the transports' line colours; 1% (any loss above 0) is
// dashed.
var mpiColors = map[string]color.RGBA{
	"metaroce": {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"tcp":      {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
}

// plotMPI draws Allreduce and Alltoall time against message size (both
// axes log) for every transport and loss that ran, side by side, and
// returns the PNG's path ("" when there is nothing to draw).
func plotMPI(r *MPIResult, dir string) (string, error) {
	var plots []*plot.Plot
	for _, b := range mpiRatioBenchmarks {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s, %d ranks (%d hosts x %d)", b, r.Ranks, r.Hosts, r.RanksPerHost)
		p.X.Label.Text = "message size (bytes)"
		p.Y.Label.Text = "average latency (us)"
		p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
		p.X.Tick.Marker, p.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		lines := 0
		for _, run := range r.Benchmarks {
			if run.Benchmark != b || len(run.Rows) == 0 {
				continue
			}
			xy := plotter.XYs{}
			for _, row := range run.Rows {
				if row.LatencyUs > 0 {
					xy = append(xy, plotter.XY{X: float64(row.Bytes), Y: row.LatencyUs})
				}
			}
			if len(xy) == 0 {
				continue
			}
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return "", err
			}
			l.Color, pts.Color = mpiColors[run.Transport], mpiColors[run.Transport]
			l.Width = vg.Points(1.5)
			pts.Radius = vg.Points(2)
			if run.Loss > 0 {
				l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
			}
			p.Add(l, pts)
			label := fmt.Sprintf("%s, %.1f%% loss", run.Transport, run.Loss*100)
			if !run.Pass {
				label += " (failed)"
			}
			p.Legend.Add(label, l, pts)
			lines++
		}
		if lines > 0 {
			plots = append(plots, p)
		}
	}
	if len(plots) == 0 {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path, err := filepath.Abs(filepath.Join(dir, "mpi-collectives.png"))
	if err != nil {
		return "", err
	}
	img := vgimg.New(vg.Length(len(plots))*7*vg.Inch, 5*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := [][]*plot.Plot{plots}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}
