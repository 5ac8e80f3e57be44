package main

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/stormguard/stormguard/sim"
)

// palette colours the lines of a chart (the Okabe–Ito colours, readable
// by colour-blind readers), then repeats with dashes.
var palette = []color.RGBA{
	{0, 114, 178, 255},   // blue
	{213, 94, 0, 255},    // vermillion
	{0, 158, 115, 255},   // green
	{204, 121, 167, 255}, // purple
	{230, 159, 0, 255},   // orange
	{86, 180, 233, 255},  // sky
	{0, 0, 0, 255},       // black
	{240, 228, 66, 255},  // yellow
}

// maxPoints bounds the points drawn per line; longer series are reduced
// by keeping the largest value of each group, so spikes stay visible.
const maxPoints = 500

func downsample(x, y []float64) ([]float64, []float64) {
	n := len(x)
	if n <= maxPoints {
		return x, y
	}
	k := (n + maxPoints - 1) / maxPoints
	var xs, ys []float64
	for i := 0; i < n; i += k {
		end := min(i+k, n)
		m := y[i]
		for _, v := range y[i:end] {
			m = max(m, v)
		}
		xs = append(xs, x[i])
		ys = append(ys, m)
	}
	return xs, ys
}

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// buildPlot turns a sim.Plot into a gonum plot.
func buildPlot(p sim.Plot) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.Title.Padding = vg.Points(6)
	pl.X.Label.Text = p.XLabel
	pl.Y.Label.Text = p.YLabel
	pl.Legend.Top = true
	pl.Add(plotter.NewGrid())

	xmin, xmax, ymax := math.Inf(1), math.Inf(-1), 0.0
	for _, ln := range p.Lines {
		for i := range ln.X {
			xmin, xmax = min(xmin, ln.X[i]), max(xmax, ln.X[i])
			ymax = max(ymax, ln.Y[i])
		}
	}
	if math.IsInf(xmin, 0) {
		xmin, xmax = 0, 1
	}
	ymax = max(ymax, p.HLine, 1) * 1.08
	ymin := 0.0
	logY, floor := logScale(p)
	if logY {
		// A log axis: values at or below the floor sit on it.
		pl.Y.Scale = plot.LogScale{}
		pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		pl.Y.Label.Text += " (log scale)"
		ymin, ymax = floor, ymax*1.5
	}
	pl.Y.Min, pl.Y.Max = ymin, ymax
	// labelY places a mark's label at share f of the axis' height.
	labelY := func(f float64) float64 {
		if logY {
			return ymin * math.Pow(ymax/ymin, f)
		}
		return ymax * f
	}
	// Room on the right for the legend, clear of the data.
	pl.X.Min, pl.X.Max = xmin, xmax+0.3*(xmax-xmin)
	pl.Legend.TextStyle.Font.Size = vg.Points(8)

	if p.ShadeTo > p.ShadeFrom {
		shade, err := plotter.NewPolygon(plotter.XYs{{X: p.ShadeFrom, Y: ymin}, {X: p.ShadeTo, Y: ymin}, {X: p.ShadeTo, Y: ymax}, {X: p.ShadeFrom, Y: ymax}})
		if err != nil {
			return nil, err
		}
		shade.Color = color.RGBA{255, 205, 205, 255}
		shade.LineStyle.Width = 0
		pl.Add(shade)
		pl.Legend.Add("fault", shade)
	}
	for i, ln := range p.Lines {
		xs, ys := downsample(ln.X, ln.Y)
		pts := make(plotter.XYs, len(xs))
		for j := range xs {
			pts[j] = plotter.XY{X: xs[j], Y: max(ys[j], ymin)}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("line %q: %w", ln.Name, err)
		}
		l.Color = palette[i%len(palette)]
		l.Width = vg.Points(1.3)
		if i >= len(palette) {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		pl.Add(l)
		pl.Legend.Add(ln.Name, l)
		if len(xs) <= 12 { // a sweep: mark its points
			sc, err := plotter.NewScatter(pts)
			if err != nil {
				return nil, err
			}
			sc.Color = l.Color
			sc.Radius = vg.Points(2)
			pl.Add(sc)
		}
	}
	for i, mk := range p.Marks {
		v, err := plotter.NewLine(plotter.XYs{{X: mk.X, Y: ymin}, {X: mk.X, Y: ymax}})
		if err != nil {
			return nil, err
		}
		v.Color = color.RGBA{90, 90, 90, 255}
		v.Dashes = []vg.Length{vg.Points(2), vg.Points(2)}
		v.Width = vg.Points(0.8)
		pl.Add(v)
		// Stagger the labels so that close marks stay readable.
		y := labelY(0.97 - 0.06*float64(i%3))
		lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: mk.X, Y: y}}, Labels: []string{" " + mk.Label}})
		if err != nil {
			return nil, err
		}
		for j := range lb.TextStyle {
			lb.TextStyle[j].Font.Size = vg.Points(7)
		}
		pl.Add(lb)
	}
	if p.HLine > 0 || len(p.HLineX) > 0 {
		h, err := plotter.NewLine(referenceLine(p, xmin, xmax))
		if err != nil {
			return nil, err
		}
		h.Color = color.RGBA{110, 110, 110, 255}
		h.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		pl.Add(h)
		pl.Legend.Add(p.HLineLabel, h)
	}
	return pl, nil
}

// logRatio is the spread of the lines' peaks from which a chart draws a
// log axis: on a linear one, a line peaking at a tenth of another's or
// less is flattened against the floor (the cascade's retries at every
// tier against its guards, 64× against 1×–4×).
const logRatio = 10

// logScale reports whether p compares lines whose peaks spread by
// logRatio or more, and the axis' floor then: the power of ten at or
// below the smallest positive value drawn. A policy's own panel (a line
// named "retries" beside its attempts) keeps its linear axis: how small
// the retries are against the attempts is what it shows.
func logScale(p sim.Plot) (bool, float64) {
	lo, hi, least := math.Inf(1), 0.0, math.Inf(1)
	for _, ln := range p.Lines {
		if ln.Name == "retries" {
			return false, 0
		}
		peak := 0.0
		for _, y := range ln.Y {
			peak = max(peak, y)
			if y > 0 {
				least = min(least, y)
			}
		}
		if peak > 0 {
			lo, hi = min(lo, peak), max(hi, peak)
		}
	}
	if math.IsInf(lo, 0) || hi < logRatio*lo {
		return false, 0
	}
	return true, math.Pow(10, math.Floor(math.Log10(least)))
}

// Chart sizes.
const (
	chartW = 7.5 * vg.Inch
	chartH = 3.4 * vg.Inch
)

// renderSVG draws p as an SVG document, without an XML prologue so that it
// can be inlined into HTML. Fonts are named, not embedded: the browser
// uses a local font, and nothing is fetched.
func renderSVG(p sim.Plot) ([]byte, error) {
	pl, err := buildPlot(p)
	if err != nil {
		return nil, err
	}
	c := vgsvg.New(chartW, chartH)
	pl.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	out := buf.String()
	if i := strings.Index(out, "<svg"); i > 0 {
		out = out[i:]
	}
	return []byte(out), nil
}

// renderPNG draws p as a PNG image (for the README).
func renderPNG(p sim.Plot) ([]byte, error) {
	pl, err := buildPlot(p)
	if err != nil {
		return nil, err
	}
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(chartW, chartH), vgimg.UseDPI(110))}
	pl.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// referenceLine is the plot's reference (capacity) line from xmin to xmax:
// flat at HLine, or the step function HLineX/HLineY when it is set, so
// that the capacity drawn drops during a capacity fault.
func referenceLine(p sim.Plot, xmin, xmax float64) plotter.XYs {
	if len(p.HLineX) == 0 || len(p.HLineX) != len(p.HLineY) {
		return plotter.XYs{{X: xmin, Y: p.HLine}, {X: xmax, Y: p.HLine}}
	}
	var xy plotter.XYs
	for i, x := range p.HLineX {
		end := xmax
		if i+1 < len(p.HLineX) {
			end = p.HLineX[i+1]
		}
		xy = append(xy, plotter.XY{X: max(x, xmin), Y: p.HLineY[i]}, plotter.XY{X: min(end, xmax), Y: p.HLineY[i]})
	}
	return xy
}
