package simtest

import (
	"fmt"
	"html/template"
	"io"
	"strings"
)

// WriteHTML writes the report as one self-contained HTML page (no
// scripts, no external files): the downstream and gates, then per policy
// a table of the storms with a chart of the offered load in each.
func (r *Report) WriteHTML(w io.Writer) error {
	return htmlPage.Execute(w, r)
}

var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":   func(x float64) string { return fmt.Sprintf("%.1f%%", 100*x) },
	"x2":    func(x float64) string { return fmt.Sprintf("%.2f", x) },
	"ms":    fmtMS,
	"rec":   recoveryCell,
	"chart": chart,
	"gates": func(g GatesReport) string { return g.describe() },
	"gatelist": func(fs []Failure) string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Gate)
		}
		return strings.Join(out, ", ")
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>stormsim check{{with .File}}: {{.}}{{end}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em}
th,td{padding:.25em .7em;border-bottom:1px solid #ddd;text-align:right}
th:first-child,td:first-child{text-align:left}
.pass{color:#176f2c}.fail{color:#b00020;font-weight:bold}
.weak{font-style:italic}
svg{background:#fafafa;border:1px solid #eee}
code{background:#f3f3f3;padding:0 .2em}
</style></head><body>
<h1>stormsim check{{with .File}}: <code>{{.}}</code>{{end}}</h1>
<p>{{if .Pass}}<span class="pass">PASS</span>: every policy kept every gate{{else}}<span class="fail">FAIL</span>: {{len .Failures}} gate(s) failed{{end}}.
{{with .Version}}Version {{.}}, {{end}}seed {{.Seed}}.</p>
{{with .Downstream}}<p>Downstream: {{.Workers}} workers × service {{.Service}} (capacity {{printf "%.0f" .Capacity}}/s), queue {{.Queue}}, latency {{.Latency}};
a fleet of {{.Clients}} clients at {{printf "%.0f" .Rate}} calls/s; client timeout {{.Timeout}}.</p>{{end}}
<p>Gates: {{gates .Gates}}.</p>
<h2>Storms</h2><ul>{{range .Storms}}<li><b>{{.Name}}</b> ({{.Title}}): {{.Doc}}.</li>{{end}}</ul>
{{if .Failures}}<h2>Failures</h2><ul>{{range .Failures}}<li class="fail">{{.Message}}</li>{{end}}</ul>{{end}}
{{range .Policies}}
<h2>{{.Policy}} {{if .Pass}}<span class="pass">pass</span>{{else}}<span class="fail">fail</span>{{end}}</h2>
<p class="weak">Weakest point: {{.Weakest}}.</p>
{{range .Notes}}<p>Note: {{.}}.</p>{{end}}
<table><tr><th>storm</th><th>peak×</th><th>mean×</th><th>recovery</th><th>success during</th><th>success after</th><th>p99</th><th>verdict</th><th>offered load (attempts/s)</th></tr>
{{range .Storms}}<tr><td>{{.Storm}}</td><td>{{x2 .PeakAmplification.Mean}} ({{x2 .PeakAmplification.Low}}–{{x2 .PeakAmplification.High}})</td><td>{{x2 .MeanAmplification}}</td><td>{{rec .}}</td><td>{{pct .SuccessStorm.Mean}}</td><td>{{pct .SuccessRecovery.Mean}}</td>
<td>{{if .P99Open}}&gt; {{end}}{{ms .P99ms}}</td><td>{{if .Failures}}<span class="fail">{{gatelist .Failures}}</span>{{else}}<span class="pass">pass</span>{{end}}</td>
<td>{{chart .}}</td></tr>
{{end}}</table>
{{end}}
<p>Peak× is the highest offered load over any 1s window divided by the baseline load before the trigger; mean× the mean
offered load while the trigger lasts, divided likewise. Recovery is the time from the end of the trigger until calls and
attempts succeed at 99% of their baseline rates for a second and the backlog has drained; stuck: not within the run.
Success during and after is the share of the calls ending while the trigger lasts, and from its end to the end of
the run, that succeeded. Every figure is the mean over the trials; peak× shows its 95% interval. The shaded band is the trigger.</p>
</body></html>
`))

// chart draws the offered load of one run as an inline SVG line, the
// trigger shaded.
func chart(s StormResult) template.HTML {
	const w, h = 240.0, 48.0
	if len(s.Load) == 0 {
		return ""
	}
	peak := 0.0
	for _, v := range s.Load {
		peak = max(peak, v)
	}
	if peak == 0 {
		peak = 1
	}
	n := float64(len(s.Load))
	var pts strings.Builder
	for i, v := range s.Load {
		fmt.Fprintf(&pts, "%.1f,%.1f ", w*float64(i)/n, h-h*v/peak)
	}
	var start, end float64
	for _, st := range Storms() {
		if st.Name == s.Storm {
			start, end = stormStart.Seconds(), (stormStart + st.Length).Seconds()
		}
	}
	step := 0.1 // sim.ChartStep in seconds
	x0, x1 := w*start/step/n, w*end/step/n
	return template.HTML(fmt.Sprintf(`<svg width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" role="img" aria-label="offered load, peak %.0f/s">`+
		`<rect x="%.1f" y="0" width="%.1f" height="%.0f" fill="#fde2e2"/>`+
		`<polyline fill="none" stroke="#1f5fa8" stroke-width="1" points="%s"/></svg>`,
		w, h, w, h, peak, x0, x1-x0, h, strings.TrimSpace(pts.String())))
}
