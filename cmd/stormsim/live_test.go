package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// A short live run through the command: the tables, the legend, the JSON
// and the HTML report, with the live-only measures in each.
func TestLiveRunWritesTablesAndReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "live", "gateway-restart", "--clients", "50", "--duration", "3s", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"(live, shared): on the wire", "peak×", "conns", "recovery",
		"cancellation, duplicates, entry traffic", "sent/recv", "wasted", "dup exec", "dup done", "conc/key", "entry", "lag",
		"immediate", "exponential", "full+budget+breaker", "50 clients, 3s", "Columns:", "Idempotency-Key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "kurt") {
		t.Error("the legend explains a column the live tables do not have (kurt)")
	}
	// The 3s run ends before the fault of 5s to 8s: the command says so.
	if !strings.Contains(errOut, "recovery cannot be judged") || !strings.Contains(errOut, "of wall time") ||
		!strings.Contains(errOut, "50 clients is a small scale") {
		t.Errorf("stderr %q", errOut)
	}

	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var reports []live.Report
	if err := json.Unmarshal(js, &reports); err != nil || len(reports) != 1 {
		t.Fatalf("report.json: %v (%d reports)", err, len(reports))
	}
	rep := reports[0]
	if rep.Scenario != "gateway-restart" || rep.ModelVersion != sim.ModelVersion || rep.Clients != 50 || rep.DurationS != 3 || len(rep.Rows) != 5 {
		t.Fatalf("report %+v", rep)
	}
	for _, row := range rep.Rows {
		if row.Metrics.Calls < 50 || row.Extra.ServerAttempts == 0 || row.Extra.ClientSent != row.Extra.ServerAttempts || len(row.Series.Load) == 0 || len(row.Live.Entry) == 0 {
			t.Errorf("%s: metrics %+v, live %+v", row.Policy, row.Metrics, row.Extra)
		}
	}
	for _, key := range []string{`"live": {`, `"wasted": {`, `"duplicates": {`, `"entry": {`, `"live_series": {`, `"amplification"`} {
		if !bytes.Contains(js, []byte(key)) {
			t.Errorf("report.json lacks %s", key)
		}
	}

	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	for _, want := range []string{"measured on real HTTP traffic on 127.0.0.1", "Measured on the wire", "cancellation, duplicates, entry traffic", "<th>dup exec</th>", "Idempotency-Key", "Entry traffic (first attempts)"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if strings.Contains(html, "simulated events") {
		t.Error("report.html describes a live run as a simulation")
	}
	if n, want := strings.Count(html, "<svg"), 5+4; n != want {
		t.Errorf("%d charts, want %d (load, 5 policies, entry, concurrency, wasted work)", n, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "charts", "live-gateway-restart-01.svg")); err != nil {
		t.Error(err)
	}
}

// --json prints the live reports; the live flags reach the run.
func TestLiveJSONAndFlags(t *testing.T) {
	t.Parallel()
	code, out, errOut := runCLI(t, "--json", "live", "gateway-restart", "--clients", "20", "--duration", "1s",
		"--policies", "naive,full+budget,immediate", "--scope", "per-client", "--sequential", "--ignore-cancel", "--seed", "7", "--quiet")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var reports []live.Report
	if err := json.Unmarshal([]byte(out), &reports); err != nil || len(reports) != 1 {
		t.Fatalf("stdout is not one live report: %v\n%.300s", err, out)
	}
	rep := reports[0]
	if rep.Scope != "per-client" || !rep.Sequential || rep.Seed != 7 || rep.Clients != 20 {
		t.Errorf("report %+v", rep)
	}
	if len(rep.Rows) != 2 || rep.Rows[0].Policy != sim.PolicyImmediate || rep.Rows[1].Policy != sim.PolicyBudget {
		t.Errorf("rows %+v, want immediate (naive, once) and full+budget", rep.Rows)
	}
	if strings.Contains(out, "on the wire") || strings.Contains(out, "Columns:") {
		t.Error("--json printed tables too")
	}
	if strings.Contains(errOut, "wall time") {
		t.Errorf("--quiet printed timings: %q", errOut)
	}
}

func TestLiveUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"live", "--trials", "3"}, {"live", "--workers", "2"}, {"live", "--file", "testdata/example.yaml"},
		{"--scope", "shared"}, {"--sequential"}, {"metastable", "--ignore-cancel"},
		{"live", "--scope", "galaxy"}, {"live", "--clients", "10001"}, {"live", "--clients", "-1"},
		{"live", "--duration", "11m"}, {"live", "nope"}, {"live", "metastable"},
		{"live", "gateway-restart", "--policies", "fulll"}, {"live", "--policies", ","},
	} {
		if code, out, errOut := runCLI(t, args...); code != exitUsage || errOut == "" || out != "" {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want %d and a message", args, code, errOut, out, exitUsage)
		}
	}
}

func TestLiveCancelledRunStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var out, errOut bytes.Buffer
	code := run(ctx, []string{"live", "gateway-restart", "--clients", "5", "--duration", "1s"}, &out, &errOut, false)
	if code != exitError || !strings.Contains(errOut.String(), "canceled") {
		t.Fatalf("exit %d, %q", code, errOut.String())
	}
}

func TestListShowsLiveScenarios(t *testing.T) {
	code, out, _ := runCLI(t, "list")
	if code != exitOK {
		t.Fatalf("exit %d", code)
	}
	for _, sc := range live.Scenarios() {
		if !strings.Contains(out, sc.Title) {
			t.Errorf("list lacks live scenario %s", sc.Name)
		}
	}
	if !strings.Contains(out, "stormsim live NAME") {
		t.Error("list does not say how to run a live scenario")
	}
}

func TestFileName(t *testing.T) {
	for in, want := range map[string]string{
		"gateway-restart": "gateway-restart", "live:gateway-restart": "live-gateway-restart",
		"../../etc/x": "..-..-etc-x", "": "scenario", "..": "scenario", "a b/ü": "a-b---",
	} {
		if got := fileName(in); got != want {
			t.Errorf("fileName(%q) = %q, want %q", in, got, want)
		}
	}
}

// "stormsim live cascade" and "stormsim live slowdown-hedging" run the
// multi-tier and hedging live runs and print their tables.
func TestLiveTopologies(t *testing.T) {
	if testing.Short() {
		t.Skip("real traffic for a few seconds")
	}
	for _, c := range []struct {
		name string
		want []string
	}{
		{"cascade", []string{"Live cascade", "retry-every-tier", "layer-rule", "bottom ×", "open loop", "Policies:"}},
		{"slowdown-hedging", []string{"no-hedge", "hedge+budget", "Policies:"}},
	} {
		var out, errOut bytes.Buffer
		code := run(t.Context(), []string{"live", c.name, "--clients", "10", "--duration", "1s"}, &out, &errOut, false)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s", c.name, code, &errOut)
		}
		for _, w := range c.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", c.name, w, &out)
			}
		}
	}
}

// "stormsim live cascade" and "live brownout" ignored --policies (an
// unknown name ran all three, exit 0), --out, --seed, --scope,
// --sequential and --ignore-cancel, and "live cascade brownout" was
// refused. Two runs named together run both, with every option, and
// --out writes both.
func TestLiveTopologiesHonourOptions(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "live", "cascade", "slowdown-hedging", "--clients", "5", "--duration", "1s",
		"--policies", "layer-rule,no-hedge,hedge", "--seed", "3", "--sequential", "--scope", "per-client", "--json", "--quiet", "--out", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	type row struct {
		Policy struct{ Name string } `json:"policy"`
		P99S   *float64              `json:"p99_s"`
	}
	var reps []struct {
		Scenario     string  `json:"scenario"`
		Seed         uint64  `json:"seed"`
		Clients      int     `json:"clients"`
		DurationS    float64 `json:"duration_s"`
		Scope        string  `json:"scope"`
		Sequential   bool    `json:"sequential"`
		IgnoreCancel *bool   `json:"ignore_cancel"`
		Rows         []row   `json:"rows"`
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 2 {
		t.Fatalf("stdout is not two reports: %v\n%.400s", err, out)
	}
	names := func(rows []row) (out []string) {
		for _, r := range rows {
			if r.P99S == nil {
				t.Errorf("row %s has no p99_s", r.Policy.Name)
			}
			out = append(out, r.Policy.Name)
		}
		return out
	}
	for i, want := range []struct {
		scenario string
		policies string
	}{{"cascade", "layer-rule"}, {"slowdown-hedging", "no-hedge,hedge"}} {
		r := reps[i]
		if r.Scenario != want.scenario || r.Seed != 3 || r.Clients != 5 || r.DurationS != 1 || r.Scope != "per-client" || !r.Sequential {
			t.Errorf("report %d: %+v", i, r)
		}
		if got := strings.Join(names(r.Rows), ","); got != want.policies {
			t.Errorf("%s ran %s, want %s", r.Scenario, got, want.policies)
		}
	}
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil || string(js) != out {
		t.Errorf("report.json differs from --json's output (%v)", err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Live cascade", "Live slowdown with hedging", "<svg"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}

	// --ignore-cancel reaches slowdown-hedging.
	code, out, errOut = runCLI(t, "live", "slowdown-hedging", "--clients", "5", "--duration", "1s", "--policies", "hedge", "--ignore-cancel", "--json", "--quiet")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if err := json.Unmarshal([]byte(out), &reps); err != nil || len(reps) != 1 || reps[0].IgnoreCancel == nil || !*reps[0].IgnoreCancel {
		t.Errorf("--ignore-cancel did not reach the run: %v\n%.300s", err, out)
	}
}

// An option a live run cannot honour is refused with a message naming
// why, before any traffic.
func TestLiveTopologiesRefuseWhatCannotApply(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"live", "cascade", "--policies", "no-such-policy"}, []string{"no-such-policy", "retry-every-tier", "layer-rule+marker+budget"}},
		{[]string{"live", "slowdown-hedging", "--policies", "full"}, []string{`unknown policy "full"`, "no-hedge, hedge, hedge+budget"}},
		{[]string{"live", "gateway-restart", "slowdown-hedging", "--policies", "full"}, []string{"none of", "no-hedge, hedge, hedge+budget"}},
		{[]string{"live", "cascade", "--ignore-cancel"}, []string{"--ignore-cancel does not apply to cascade"}},
		{[]string{"live", "brownout"}, []string{"slowdown-hedging", "sim's brownout"}},
		{[]string{"live", "nope"}, []string{"cascade", "slowdown-hedging", "gateway-restart"}},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d", c.args, code, out, exitUsage)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q lacks %q", c.args, errOut, w)
			}
		}
	}
}

// Plain "stormsim live" runs every live run, cascade and
// slowdown-hedging included (it ran neither).
func TestLiveRunsEveryLiveRunByDefault(t *testing.T) {
	runs, err := pickLiveRuns(nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.name())
	}
	if want := "gateway-restart,slow-downstream,cascade,slowdown-hedging"; strings.Join(got, ",") != want {
		t.Errorf("plain live runs %v, want %s", got, want)
	}
}

// list named the policies otherwise than the tables (no-hedge and
// no-hedging; layer-rule+marker+budget and layer+marker+budget).
func TestListNamesTheLivePoliciesAsTheTablesDo(t *testing.T) {
	_, out, _ := runCLI(t, "list")
	var names []string
	for _, p := range live.CascadePolicies() {
		names = append(names, p.Name)
	}
	for _, p := range live.SlowdownHedgingPolicies() {
		names = append(names, p.Name)
	}
	for _, n := range names {
		if !strings.Contains(out, n) {
			t.Errorf("list lacks the policy %q the tables name", n)
		}
	}
	for _, old := range []string{"no-hedging", "layer+marker+budget", "policies: naive"} {
		if strings.Contains(out, old) {
			t.Errorf("list still says %q", old)
		}
	}
	if !strings.Contains(out, "slowdown-hedging") {
		t.Error("list lacks slowdown-hedging")
	}
}
