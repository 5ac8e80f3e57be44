package simtest_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/simtest"
)

// --json prints the report for machines: every policy × storm with the
// measures the issue names, the failures with limit and value, the verdict.
func TestJSON(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--json", "--max-amplification", "1.5", "testdata/infile.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var rep simtest.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not the report's JSON: %v\n%s", err, out)
	}
	if rep.Pass || rep.File != "testdata/infile.yaml" || len(rep.Version) != 12 || rep.Seed != 1 {
		t.Errorf("header: pass %v file %q version %q seed %d", rep.Pass, rep.File, rep.Version, rep.Seed)
	}
	if len(rep.Storms) != 6 || len(rep.Policies) != 2 {
		t.Fatalf("%d storms, %d policies; want 6 and 2", len(rep.Storms), len(rep.Policies))
	}
	names := map[string]bool{}
	for _, p := range rep.Policies {
		names[p.Policy] = true
		if p.Weakest == "" {
			t.Errorf("%s: no weakest point", p.Policy)
		}
		if len(p.Storms) != 6 {
			t.Fatalf("%s: %d storms", p.Policy, len(p.Storms))
		}
		for i, s := range p.Storms {
			if s.Storm != simtest.StormNames()[i] {
				t.Errorf("%s: storm %d is %s", p.Policy, i, s.Storm)
			}
			if s.PeakAmplification.Mean < 1 || s.MeanAmplification <= 0 || s.SuccessRate <= 0 || s.SuccessRate > 1 || s.P99ms <= 0 {
				t.Errorf("%s/%s: implausible %+v", p.Policy, s.Storm, s)
			}
			if s.Metrics.Calls < 1000 {
				t.Errorf("%s/%s: %v calls", p.Policy, s.Storm, s.Metrics.Calls)
			}
		}
	}
	if !names["nobudget"] || !names["budgeted"] {
		t.Errorf("policies %v", names)
	}
	if len(rep.Failures) == 0 {
		t.Fatal("no failures listed")
	}
	for _, f := range rep.Failures {
		if f.Policy != "nobudget" || f.Message == "" || f.Limit == 0 {
			t.Errorf("failure %+v", f)
		}
		if f.Gate == simtest.GateAmplification && !f.Borderline && *f.Value <= f.Limit {
			t.Errorf("failure %+v: value within the limit", f)
		}
	}
}

// The same seed gives the same bytes; another seed other numbers.
func TestDeterministic(t *testing.T) {
	fullModel(t)
	args := []string{"--json", "--storms", "outage,errors-50", "testdata/policies.yaml"}
	_, a, _ := run(t, args...)
	_, b, _ := run(t, args...)
	if a != b {
		t.Fatal("two runs with one seed differ")
	}
	_, c, _ := run(t, append([]string{"--seed", "7"}, args...)...)
	if c == a {
		t.Fatal("seed 7 gives the report of seed 1")
	}
}

// --out writes a self-contained HTML page and the JSON beside it.
func TestHTMLReport(t *testing.T) {
	fullModel(t)
	dir := filepath.Join(t.TempDir(), "report")
	code, out, errs := run(t, "--out", dir, "--storms", "errors-50,brownout", "--max-amplification", "1.5", "testdata/infile.yaml")
	if code != simtest.ExitFail {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	mustContain(t, "stdout", out, "FAIL nobudget")
	mustContain(t, "stderr", errs, ": report written to "+filepath.Join(dir, "index.html"))
	page, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	html := string(page)
	mustContain(t, "index.html", html, "<!DOCTYPE html>", "<h2>nobudget <span class=\"fail\">fail</span></h2>",
		"<h2>budgeted <span class=\"pass\">pass</span></h2>", "<svg", "<polyline", "Weakest point:",
		"nobudget failed errors-50: peak amplification")
	mustNotContain(t, "index.html", html, "<script", "http://", "https://", "<link")
	data, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep simtest.Report
	if err := json.Unmarshal(data, &rep); err != nil || len(rep.Policies) != 2 {
		t.Fatalf("report.json: %v, %d policies", err, len(rep.Policies))
	}
	var again bytes.Buffer
	if err := rep.WriteJSON(&again); err != nil {
		t.Fatal(err)
	}
}

// The README example: its one policy, through its operation.
func TestReadmeExample(t *testing.T) {
	fullModel(t)
	code, out, errs := run(t, "--operation", "charge-card", "testdata/policies.yaml")
	if code != simtest.ExitPass {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	mustContain(t, "stdout", out, "charge-card (payments)", "outage", "brownout", "latency-spike", "errors-10", "errors-50",
		"weakest point:", "PASS charge-card (payments)")
	mustContain(t, "stderr", errs, ": PASS: 1 policies × 6 storms: every gate kept")
}
