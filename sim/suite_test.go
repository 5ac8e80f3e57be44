package sim

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// suiteGolden is the MD5 of the default suite's JSON for seed 1, the bytes
// "stormsim --seed 1 --json" prints (json.MarshalIndent of the reports,
// two-space indent, and a newline), with the per-scenario MD5s of
// json.MarshalIndent of each report to tell which one moved. A change that
// is meant to change the numbers raises ModelVersion and updates these.
var suiteGolden = struct {
	all        string
	byScenario map[string]string
}{
	all: "9864c84a170bf2a9eb1c085cb7140839",
	byScenario: map[string]string{
		"aws-occ":         "786399d273cfc492e6278c214192d1ba",
		"retry-budget":    "605b12a44aa9e463832213f2f5f837ff",
		"gateway-restart": "b49f18f46266467f8abc58bedce9aebb",
		"packet-loss":     "5d403ea738c22ec8af55edbd2b2eb513",
		"metastable":      "fc8af2184529c8ddef54ed92bf1f2ed2",
		"cascade":         "f80e5143ca50fcd6b5993960b6e193ca",
		"brownout":        "03fc780adfcc0783763e5b860b8e2107",
		"straggler":       "26782274c6ee6620f1a16f9136dc388e",
	},
}

// runDefaultSuite runs every scenario of the default suite with seed 1 and
// the default options, as "stormsim --seed 1" does.
func runDefaultSuite(tb testing.TB) []*Report {
	tb.Helper()
	var reps []*Report
	for _, sc := range Scenarios() {
		rep, err := sc.Run(context.Background(), Options{Seed: 1})
		if err != nil {
			tb.Fatalf("%s: %v", sc.Name, err)
		}
		reps = append(reps, rep)
	}
	return reps
}

func md5JSON(tb testing.TB, v any, nl bool) string {
	tb.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		tb.Fatal(err)
	}
	if nl {
		b = append(b, '\n')
	}
	h := md5.Sum(b)
	return hex.EncodeToString(h[:])
}

// TestDefaultSuiteOutputUnchanged: the engine's speed-ups (issue #36) keep
// the default suite's output byte-identical for a seed.
func TestDefaultSuiteOutputUnchanged(t *testing.T) {
	fullModel(t)
	if testing.Short() {
		t.Skip("runs the whole default suite")
	}
	reps := runDefaultSuite(t)
	for _, r := range reps {
		got := md5JSON(t, r, false)
		t.Logf("%s: %s (%d events)", r.Scenario, got, r.Events)
		if want, ok := suiteGolden.byScenario[r.Scenario]; ok && got != want {
			t.Errorf("%s: JSON MD5 %s, want %s", r.Scenario, got, want)
		}
	}
	if got := md5JSON(t, reps, true); got != suiteGolden.all {
		t.Errorf("default suite: JSON MD5 %s, want %s", got, suiteGolden.all)
	}
}

// BenchmarkDefaultSuite runs the default suite with seed 1 (what
// "stormsim --seed 1 --json" simulates): one op is the whole suite.
func BenchmarkDefaultSuite(b *testing.B) {
	var events uint64
	for b.Loop() {
		for _, r := range runDefaultSuite(b) {
			events += r.Events
		}
	}
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
}

// BenchmarkSuiteScenario runs each scenario of the default suite with
// seed 1, one sub-benchmark per scenario (-bench SuiteScenario/cascade).
func BenchmarkSuiteScenario(b *testing.B) {
	for _, sc := range Scenarios() {
		b.Run(sc.Name, func(b *testing.B) {
			var events uint64
			for b.Loop() {
				rep, err := sc.Run(context.Background(), Options{Seed: 1})
				if err != nil {
					b.Fatal(err)
				}
				events += rep.Events
			}
			b.ReportMetric(float64(events)/float64(b.N), "events/op")
		})
	}
}
