package main

import (
	"image/color"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

var colors = map[string]color.Color{
	"direct":   color.RGBA{0x55, 0x55, 0x55, 0xff},
	"socklb":   color.RGBA{0x1f, 0x77, 0xb4, 0xff},
	"iptables": color.RGBA{0xd6, 0x27, 0x28, 0xff},
	"nftables": color.RGBA{0xff, 0x7f, 0x0e, 0xff},
}

func plotMetric(runs []Run, sizes []int, dps []string, m metric, title, path string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "Services (N), each with 10 endpoints"
	p.Y.Label.Text = m.unit
	if len(sizes) > 1 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{}
	} else {
		p.X.Min, p.X.Max = float64(sizes[0])*0.5, float64(sizes[0])*1.5
	}
	p.Y.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	ymax := 0.0
	for i, d := range dps {
		var xys plotter.XYs
		for _, n := range sizes {
			if v, ok := value(runs, n, d, m.get); ok {
				xys = append(xys, plotter.XY{X: float64(n), Y: v})
				ymax = max(ymax, v)
			}
		}
		if len(xys) == 0 {
			continue
		}
		l, s, err := plotter.NewLinePoints(xys)
		if err != nil {
			return err
		}
		l.Color, s.Color = colors[d], colors[d]
		l.Width = vg.Points(2)
		s.Shape = draw.GlyphDrawer(shapes[i%len(shapes)])
		s.Radius = vg.Points(4)
		p.Add(l, s)
		p.Legend.Add(d, l, s)
	}
	p.Y.Max = ymax * 1.25
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return p.Save(7*vg.Inch, 4.5*vg.Inch, path)
}

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}}
