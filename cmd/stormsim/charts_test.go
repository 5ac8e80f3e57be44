package main

import (
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/stormguard/stormguard/sim"
)

// The cascade's overview drew five policies on a linear axis: retries at
// every tier (64×) flattened the four others (1×–4×) against the floor. A
// chart whose lines' peaks spread by 10× or more draws a log axis; one
// whose lines are alike, or a policy's own panel, keeps a linear one.
func TestCascadeChartDoesNotFlattenLines(t *testing.T) {
	line := func(name string, peak float64) sim.Line {
		return sim.Line{Name: name, X: []float64{0, 1, 2, 3}, Y: []float64{0, 300, 300 * peak, 300}}
	}
	cascade := sim.Plot{Title: "Offered load on the database", YLabel: "attempts/s", ShadeFrom: 1, ShadeTo: 2.5, HLine: 500,
		Marks: []sim.Mark{{X: 3, Label: "end of traffic"}},
		Lines: []sim.Line{line("retry-every-tier", 64), line("retry-at-one-tier", 4), line("budget-every-tier", 1.1), line("layer-rule", 4), line("layer-rule+marker+budget", 1.1)}}
	alike := sim.Plot{Title: "alike", Lines: []sim.Line{line("a", 1), line("b", 2)}}
	own := sim.Plot{Title: "full", Lines: []sim.Line{line("attempts", 20), line("retries", 0.5)}}
	for _, c := range []struct {
		p   sim.Plot
		log bool
	}{{cascade, true}, {alike, false}, {own, false}} {
		pl, err := buildPlot(c.p)
		if err != nil {
			t.Fatal(err)
		}
		_, isLog := pl.Y.Scale.(plot.LogScale)
		if isLog != c.log {
			t.Errorf("%s: log axis %v, want %v", c.p.Title, isLog, c.log)
		}
		if c.log && (pl.Y.Min <= 0 || pl.Y.Min > 300) {
			t.Errorf("%s: log axis from %v, want a positive floor at or below the lowest value", c.p.Title, pl.Y.Min)
		}
		if _, err := renderSVG(c.p); err != nil {
			t.Errorf("%s: %v", c.p.Title, err)
		}
	}
}

// TestCapacityLineStepsDuringCapacityFaults: a plot with a capacity step
// function (sim.Plot.HLineX/HLineY, set for a capacity fault) draws the
// capacity it has at each time, not the full capacity throughout (issue
// #33 item 14).
func TestCapacityLineStepsDuringCapacityFaults(t *testing.T) {
	p := sim.Plot{HLine: 300, HLineX: []float64{0, 10, 20}, HLineY: []float64{300, 150, 300}}
	got := referenceLine(p, 0, 30)
	want := plotter.XYs{{X: 0, Y: 300}, {X: 10, Y: 300}, {X: 10, Y: 150}, {X: 20, Y: 150}, {X: 20, Y: 300}, {X: 30, Y: 300}}
	if len(got) != len(want) {
		t.Fatalf("line %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %v, want %v", got, want)
		}
	}
	if flat := referenceLine(sim.Plot{HLine: 300}, 0, 30); len(flat) != 2 || flat[0].Y != 300 || flat[1].Y != 300 {
		t.Fatalf("a plot without a step function: %v", flat)
	}
}
