package promretry_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// opsDir holds the dashboard and alerting rules shipped with stormguard.
var opsDir = filepath.Join("..", "ops")

// targetLabels are added by Prometheus at scrape time, not by the Collector.
var targetLabels = []string{"job", "instance"}

var descRE = regexp.MustCompile(`fqName: "([^"]+)".*constLabels: \{([^}]*)\}, variableLabels: \{([^}]*)\}`)

// exportedMetrics returns every series name the Collector can export (a
// histogram's _bucket, _sum and _count included) with its label names,
// read from Describe.
func exportedMetrics(t *testing.T) map[string][]string {
	t.Helper()
	c := promretry.New(promretry.Config{})
	ch := make(chan *prometheus.Desc, 64)
	c.Describe(ch)
	close(ch)
	// The histogram is the only family whose descriptor gives no type.
	reg := registry(t, c)
	c.CallEnd(t.Context(), retry.CallEnd{Operation: "describe"})
	al, err := admission.New(admission.Config{})
	if err != nil {
		t.Fatal(err)
	}
	c.WatchAdmission("describe", al) // the queue delay summary's type
	histograms, summaries := map[string]bool{}, map[string]bool{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		switch mf.GetType() {
		case dto.MetricType_HISTOGRAM:
			histograms[mf.GetName()] = true
		case dto.MetricType_SUMMARY:
			summaries[mf.GetName()] = true
		}
	}

	out := map[string][]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read descriptor %s", d)
		}
		var labels []string
		for _, part := range []string{m[2], m[3]} {
			for _, l := range strings.Split(part, ",") {
				if l = strings.TrimSpace(l); l != "" {
					labels = append(labels, strings.SplitN(l, "=", 2)[0])
				}
			}
		}
		labels = append(labels, targetLabels...)
		name := m[1]
		if histograms[name] {
			out[name+"_bucket"] = append(slices.Clone(labels), "le")
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
			continue
		}
		if summaries[name] {
			out[name+"_sum"] = labels
			out[name+"_count"] = labels
			continue
		}
		out[name] = labels
	}
	if len(out) == 0 {
		t.Fatal("Describe sent nothing")
	}
	return out
}

// checkExpr checks that every metric in expr is exported (or recorded by a
// rule in recorded) and that its matchers use labels it has.
func checkExpr(t *testing.T, where, expr string, exported map[string][]string, recorded map[string]bool) []string {
	t.Helper()
	sels, err := metricSelectors(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	if len(sels) == 0 {
		t.Errorf("%s: no metric in %q", where, expr)
	}
	var names []string
	for _, s := range sels {
		names = append(names, s.metric)
		labels, ok := exported[s.metric]
		if !ok {
			if !recorded[s.metric] {
				t.Errorf("%s: metric %q is neither exported by the Collector nor recorded by a rule", where, s.metric)
			}
			continue
		}
		for _, l := range s.labels {
			if !slices.Contains(labels, l) {
				t.Errorf("%s: metric %q has no label %q (it has %v)", where, s.metric, l, labels)
			}
		}
		// A StateSet has a series per state, 1 for the current one: a
		// query that does not pick a state adds or compares them all.
		if stateSets[s.metric] && !slices.Contains(s.labels, "state") {
			t.Errorf("%s: %s is a StateSet: select a state (state=\"open\")", where, s.metric)
		}
	}
	return names
}

// stateSets are the metrics exported as StateSets.
var stateSets = map[string]bool{"stormguard_breaker_state": true}

type ruleFile struct {
	Groups []struct {
		Name     string `yaml:"name"`
		Interval string `yaml:"interval"`
		Rules    []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestAlertRulesUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	data, err := os.ReadFile(filepath.Join(opsDir, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rf ruleFile
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&rf); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	recorded := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				recorded[r.Record] = true
			}
		}
	}
	alerts := map[string]bool{}
	used := map[string]bool{}
	for _, g := range rf.Groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q: a name and rules are required", g.Name)
		}
		for _, r := range g.Rules {
			where := "alerts.yaml " + r.Record + r.Alert
			if (r.Record == "") == (r.Alert == "") {
				t.Errorf("%s: a rule is either a record or an alert", where)
			}
			if r.Alert != "" {
				alerts[r.Alert] = true
				if r.Labels["severity"] == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
					t.Errorf("%s: severity label, summary and description are required", where)
				}
			}
			for _, m := range checkExpr(t, where, r.Expr, exported, recorded) {
				used[m] = true
			}
		}
	}
	for _, a := range []string{"StormguardRetryRatioHigh", "StormguardRetryBudgetExhausted", "StormguardBreakerOpen"} {
		if !alerts[a] {
			t.Errorf("alerts.yaml has no %s alert", a)
		}
	}
	for _, m := range []string{"stormguard_attempts_total", "stormguard_retry_budget_exhausted_total", "stormguard_breaker_state"} {
		if !used[m] {
			t.Errorf("alerts.yaml does not use %s", m)
		}
	}
}

func TestDashboardUsesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	data, err := os.ReadFile(filepath.Join(opsDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID        string `json:"uid"`
		Title      string `json:"title"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr  string `json:"expr"`
				RefID string `json:"refId"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Error("dashboard needs a uid and a title")
	}
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		checkExpr(t, "variable "+v.Name, q.Query, exported, nil)
	}
	ids := map[int]bool{}
	panelMetrics := map[string][]string{}
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d used twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			panelMetrics[p.Title] = append(panelMetrics[p.Title],
				checkExpr(t, "panel "+p.Title+" "+tg.RefID, tg.Expr, exported, nil)...)
		}
	}
	// The panels the issue asks for, each on the metric it is about.
	for title, metric := range map[string]string{
		"Retry ratio":                    "stormguard_attempts_total",
		"Attempts by outcome":            "stormguard_attempts_total",
		"Retry budget tokens":            "stormguard_retry_budget_tokens",
		"Breaker state":                  "stormguard_breaker_state",
		"p99 call duration":              "stormguard_call_duration_seconds_bucket",
		"Throttle rejection probability": "stormguard_throttle_rejection_probability",
		"Attempts shed on the client":    "stormguard_throttle_local_rejections_total",
		"Hedges":                         "stormguard_hedges_total",
		"Hedge share and refusals":       "stormguard_hedges_refused_total",
		"Open breakers by key":           "stormguard_breaker_open_keys",
		"Admission limit and in flight":  "stormguard_admission_limit",
		"Admission sheds by reason":      "stormguard_admission_shed_total",
		"Admission queue delay":          "stormguard_admission_queue_delay_seconds_sum",
	} {
		if !slices.Contains(panelMetrics[title], metric) {
			t.Errorf("panel %q missing or not on %s (uses %v)", title, metric, panelMetrics[title])
		}
	}
}

// TestMetricSelectors pins the tokenizer the ops tests rely on.
func TestMetricSelectors(t *testing.T) {
	tests := []struct {
		expr string
		want []selector
		bad  bool
	}{
		{expr: `sum(rate(stormguard_attempts_total{attempt_kind="retry"}[1m])) / sum(rate(stormguard_attempts_total{attempt_kind="first"}[1m]))`,
			want: []selector{{"stormguard_attempts_total", []string{"attempt_kind"}}, {"stormguard_attempts_total", []string{"attempt_kind"}}}},
		{expr: `histogram_quantile(0.99, sum by (le, operation) (rate(x_bucket{job=~"$job"}[$__rate_interval])))`,
			want: []selector{{"x_bucket", []string{"job"}}}},
		{expr: `a:b:c > 3 * avg_over_time(d[1d] offset 1h) and on (op) group_left e`,
			want: []selector{{"a:b:c", nil}, {"d", nil}, {"e", nil}}},
		{expr: `sum(rate(m [5m])) without (x) > bool 1e3`, want: []selector{{"m", nil}}},
		{expr: `{__name__="m", a!="1"}`, want: []selector{{"m", []string{"a"}}}},
		{expr: `m {a='x\'y', b=~"}"}`, want: []selector{{"m", []string{"a", "b"}}}},
		{expr: `label_values(stormguard_calls_total{job=~"$job"}, operation)`,
			want: []selector{{"stormguard_calls_total", []string{"job", "operation"}}}},
		{expr: `sum(rate(m[5m])`, bad: true},
		{expr: `m{a}`, bad: true},
		{expr: `m{a="x}`, bad: true},
		{expr: `{a="b"}`, bad: true},
		{expr: `m[5m`, bad: true},
	}
	for _, tt := range tests {
		got, err := metricSelectors(tt.expr)
		if tt.bad {
			if err == nil {
				t.Errorf("metricSelectors(%q) = %v, want an error", tt.expr, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("metricSelectors(%q): %v", tt.expr, err)
			continue
		}
		if len(got) != len(tt.want) {
			t.Errorf("metricSelectors(%q) = %v, want %v", tt.expr, got, tt.want)
			continue
		}
		for i := range got {
			if got[i].metric != tt.want[i].metric || !slices.Equal(got[i].labels, tt.want[i].labels) &&
				!(len(got[i].labels) == 0 && len(tt.want[i].labels) == 0) {
				t.Errorf("metricSelectors(%q)[%d] = %v, want %v", tt.expr, i, got[i], tt.want[i])
			}
		}
	}
}

// FuzzMetricSelectors: the tokenizer never panics, and every metric name it
// returns is a valid Prometheus metric name.
func FuzzMetricSelectors(f *testing.F) {
	f.Add(`sum(rate(stormguard_attempts_total{attempt_kind="retry"}[1m])) / sum(rate(stormguard_attempts_total{attempt_kind="first"}[1m]))`)
	f.Add(`histogram_quantile(0.99, sum by (le) (rate(x_bucket{job=~"$job"}[5m])))`)
	f.Add(`label_values(m{a="b"}, c)`)
	f.Add(`{__name__="m"} offset 5m`)
	name := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	f.Fuzz(func(t *testing.T, expr string) {
		sels, err := metricSelectors(expr)
		if err != nil {
			return
		}
		for _, s := range sels {
			quoted := strings.Contains(expr, `"`+s.metric+`"`) || strings.Contains(expr, `'`+s.metric+`'`) ||
				strings.Contains(expr, "`"+s.metric+"`")
			if !name.MatchString(s.metric) && !quoted {
				t.Errorf("metricSelectors(%q) returned metric %q", expr, s.metric)
			}
		}
	})
}

// TestAlertRuleTestsUseExportedMetrics: the series fed to the promtool
// unit tests of the alerts are ones the Collector exports.
func TestAlertRuleTestsUseExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)
	data, err := os.ReadFile(filepath.Join(opsDir, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			InputSeries []struct {
				Series string `yaml:"series"`
			} `yaml:"input_series"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(tests.RuleFiles, "alerts.yaml") || len(tests.Tests) == 0 {
		t.Fatalf("alerts_test.yaml does not test alerts.yaml")
	}
	for _, tc := range tests.Tests {
		for _, s := range tc.InputSeries {
			where := "alerts_test.yaml series " + s.Series
			checkExpr(t, where, s.Series, exported, nil)
			// A test series has every label the Collector gives the
			// metric, so the rules are tested on series as scraped.
			sels, err := metricSelectors(s.Series)
			if err != nil || len(sels) != 1 {
				continue // reported by checkExpr
			}
			for _, l := range exported[sels[0].metric] {
				if l != "instance" && !slices.Contains(sels[0].labels, l) {
					t.Errorf("%s: no label %q, which the Collector exports", where, l)
				}
			}
		}
	}
}

// TestAlertRulesWithPromtool checks alerts.yaml and runs its unit tests
// (alerts_test.yaml) with Prometheus's promtool (Debian: apt-get install
// prometheus). Without promtool it skips, except under CI=true, where it
// fails.
func TestAlertRulesWithPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed (Debian: apt-get install prometheus); CI=true requires it")
		}
		t.Skip("promtool not installed")
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.CommandContext(t.Context(), promtool, args...)
		cmd.Dir = opsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
