package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"

	"github.com/stormguard/stormguard/sim"
)

// reportPage is the HTML report: one self-contained file with the tables
// and the charts inlined as SVG. It loads nothing: no script, no style
// sheet, no font, no image from elsewhere.
var reportPage = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stormguard storm lab report</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif; margin: 2em auto; max-width: 1100px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2.2em; border-bottom: 1px solid #ccc; padding-bottom: .2em; } h3 { margin-top: 1.5em; }
pre.doc { white-space: pre-wrap; background: #f6f6f6; padding: .8em; font-size: .9em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
th, td { padding: .25em .6em; border-bottom: 1px solid #e3e3e3; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
th { background: #fafafa; }
.chart { margin: .5em 0; }
.chart svg { width: 100%; height: auto; }
.grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(480px, 1fr)); gap: .5em 1.5em; }
.meta, .note { color: #666; font-size: .9em; }
.verdict { background: #f3f7fb; border-left: 4px solid #0072b2; padding: .2em 1em; }
dl.legend { display: grid; grid-template-columns: minmax(6em, max-content) 1fr; gap: .3em 1em; align-items: baseline; }
dl.legend dt { font-weight: bold; grid-column: 1; margin: 0; }
dl.legend dd { grid-column: 2; margin: 0; }
</style>
</head>
<body>
<h1>stormguard storm lab</h1>
{{if .Live}}<p class="meta">Seed {{.Seed}}. Every number below was measured on real HTTP traffic on 127.0.0.1: a server with a capacity limit and the scenario's fault schedule, and real client goroutines calling it through httpretry with each policy. The seed fixes the schedule; the machine's timing is not reproducible.</p>{{else}}<p class="meta">Seed {{.Seed}}. Every number below comes from a discrete-event simulation in virtual time that runs the real backoff, budget and breaker code; the same seed reproduces it exactly.</p>{{end}}
<nav><ul>{{range .Sections}}<li><a href="#{{.ID}}">{{.Report.Scenario}}</a>: {{.Report.Title}}</li>{{end}}</ul></nav>
{{range .Sections}}
<section id="{{.ID}}">
<h2>{{.Report.Scenario}}: {{.Report.Title}}</h2>
{{if $.Live}}<p class="meta">Measured on the wire, one run per policy.</p>{{else}}<p class="meta">{{.Report.Trials}} trial(s) per case and policy, {{.Report.Events}} simulated events.</p>{{end}}
<pre class="doc">{{.Report.Description}}</pre>
{{range .Report.Tables}}
<h3>{{.Title}}</h3>
<table>
<thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>{{end}}</tbody>
</table>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{end}}
{{with .Report.Verdict}}<div class="verdict"><h3>Verdict</h3>{{range .}}<p>{{.}}</p>{{end}}</div>{{end}}
{{with .Report.PolicyLegend}}<h3>Policies</h3>
<dl class="legend">{{range .}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>{{end}}
{{range .Groups}}
{{if .Heading}}<h3>{{.Heading}}</h3>{{end}}
{{with .Wide}}<figure class="chart" data-chart="{{.ID}}">{{.SVG}}</figure>{{end}}
<div class="grid">{{range .Grid}}<figure class="chart" data-chart="{{.ID}}">{{.SVG}}</figure>{{end}}</div>
{{end}}
</section>
{{end}}
<h2 id="legend">Reading the tables</h2>
<dl class="legend">{{range .Legend}}<dt>{{index . 0}}</dt><dd>{{index . 1}}</dd>{{end}}</dl>
</body>
</html>
`))

type pageData struct {
	Seed     uint64
	Live     bool
	Sections []section
	Legend   [][2]string
}

// reportSet is what the command outputs: the reports the page shows and
// charts, what --json and report.json encode (the reports themselves, or
// the live reports they come from), whether they were measured live (not
// simulated), and the legend of their tables.
type reportSet struct {
	Reports []*sim.Report
	Data    any
	Live    bool
	Legend  [][2]string
}

type section struct {
	ID     string
	Report *sim.Report
	Groups []chartGroup
}

// chartGroup is a heading, an optional full-width chart and a grid of
// smaller ones.
type chartGroup struct {
	Heading string
	Wide    *chart
	Grid    []chart
}

type chart struct {
	ID  string
	SVG template.HTML // produced by renderSVG from our own data
}

// renderAll draws every plot of every report as SVG.
func renderAll(reports []*sim.Report) ([][][]byte, error) {
	out := make([][][]byte, len(reports))
	for i, rep := range reports {
		for _, p := range rep.Plots {
			svg, err := renderSVG(p)
			if err != nil {
				return nil, fmt.Errorf("stormsim: chart %q of %s: %w", p.Title, rep.Scenario, err)
			}
			out[i] = append(out[i], svg)
		}
	}
	return out, nil
}

// writeHTML renders the reports as one self-contained HTML page; svgs
// holds each report's charts as renderAll drew them.
func writeHTML(w io.Writer, set reportSet, svgs [][][]byte, seed uint64) error {
	data := pageData{Seed: seed, Live: set.Live, Legend: set.Legend}
	for i, rep := range set.Reports {
		s := section{ID: fmt.Sprintf("s%d-%s", i, rep.Scenario), Report: rep}
		for j, p := range rep.Plots {
			c := chart{ID: fmt.Sprintf("%s-%d", s.ID, j), SVG: template.HTML(svgs[i][j])}
			if n := len(s.Groups); n == 0 || s.Groups[n-1].Heading != p.Group {
				g := chartGroup{Heading: p.Group}
				if p.Group != "" { // a load group opens with its overview
					g.Wide = &c
					s.Groups = append(s.Groups, g)
					continue
				}
				s.Groups = append(s.Groups, g)
			}
			g := &s.Groups[len(s.Groups)-1]
			g.Grid = append(g.Grid, c)
		}
		data.Sections = append(data.Sections, s)
	}
	return reportPage.Execute(w, data)
}

// writeOutDir writes report.html, report.json and every chart as
// charts/<scenario>-<n>.svg (and .png with png) into dir.
func writeOutDir(dir string, set reportSet, seed uint64, png bool) error {
	reports := set.Reports
	charts := filepath.Join(dir, "charts")
	if err := os.MkdirAll(charts, 0o755); err != nil {
		return fmt.Errorf("stormsim: %w", err)
	}
	svgs, err := renderAll(reports)
	if err != nil {
		return err
	}
	for r, rep := range reports {
		for i, p := range rep.Plots {
			base := filepath.Join(charts, fmt.Sprintf("%s-%02d", fileName(rep.Scenario), i+1))
			if err := os.WriteFile(base+".svg", svgs[r][i], 0o644); err != nil {
				return fmt.Errorf("stormsim: %w", err)
			}
			if png {
				img, err := renderPNG(p)
				if err != nil {
					return fmt.Errorf("stormsim: chart %q of %s: %w", p.Title, rep.Scenario, err)
				}
				if err := os.WriteFile(base+".png", img, 0o644); err != nil {
					return fmt.Errorf("stormsim: %w", err)
				}
			}
		}
	}
	var page bytes.Buffer
	if err := writeHTML(&page, set, svgs, seed); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.html"), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("stormsim: %w", err)
	}
	js, err := encodeJSON(set.Data)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), js, 0o644); err != nil {
		return fmt.Errorf("stormsim: %w", err)
	}
	return nil
}

// fileName turns a scenario's name into a file name: every byte other
// than an ASCII letter, digit, '.', '_' or '-' becomes '-' ("live:x" is
// "live-x"; a name from a scenario file cannot reach another directory).
func fileName(name string) string {
	b := []byte(name)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			b[i] = '-'
		}
	}
	if s := string(b); s != "" && s != "." && s != ".." {
		return s
	}
	return "scenario"
}

// encodeJSON encodes the reports (a slice of *sim.Report or *live.Report)
// deterministically: the same reports give the same bytes.
func encodeJSON(reports any) ([]byte, error) {
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("stormsim: encoding JSON: %w", err)
	}
	return append(b, '\n'), nil
}
