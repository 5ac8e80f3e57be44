package sim

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// cellX reads a table's "1.2x" cell.
func cellX(t *testing.T, cell string) float64 {
	t.Helper()
	f := strings.Fields(strings.TrimPrefix(cell, "≈"))
	if len(f) == 0 {
		t.Fatalf("empty cell")
	}
	x, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "x"), 64)
	if err != nil {
		t.Fatalf("cell %q: %v", cell, err)
	}
	return x
}

// The verdict printed under each table says what the table shows: every
// policy it calls stuck reads "stuck" in the recovery column, every one it
// says recovers reads a time there (within the range it gives), and its
// lowest and highest peaks are the column's. A verdict computed otherwise
// than the table fails here.
func TestVerdictAgreesWithTheTable(t *testing.T) {
	fullModel(t)
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"metastable", Options{Seed: 2, Duration: 60 * time.Second, Policies: []string{PolicyNoRetry, PolicyImmediate, PolicyFull, PolicyBudget, "retry-once"}}},
		{"gateway-restart", Options{Seed: 3, Clients: 1000, Duration: 40 * time.Second}},
		{"packet-loss", Options{Seed: 1, Clients: 10, Policies: []string{PolicyImmediate, "full+budget-10%"}}},
	} {
		rep := runScenario(t, tc.name, tc.o)
		if len(rep.Verdict) != len(rep.Cases) {
			t.Fatalf("%s: %d verdicts for %d cases", tc.name, len(rep.Verdict), len(rep.Cases))
		}
		for i := range rep.Cases {
			c, tb := &rep.Cases[i], rep.Tables[i]
			v := JudgeCase(c)
			if rep.Verdict[i] != v.String() {
				t.Errorf("%s: printed verdict %q is not the case's %q", tc.name, rep.Verdict[i], v.String())
			}
			col := map[string]int{}
			for j, h := range tb.Header {
				col[h] = j
			}
			cells := map[string][]string{}
			lo, hi := 1e18, 0.0
			for _, r := range tb.Rows {
				cells[r[0]] = r
				x := cellX(t, r[col["peak×"]])
				lo, hi = min(lo, x), max(hi, x)
			}
			for _, p := range v.Stuck {
				if got := cells[p][col["recovery"]]; got != "stuck" {
					t.Errorf("%s %s: the verdict says %s stays stuck, the table reads %q", tc.name, c.Name, p, got)
				}
				if !strings.Contains(rep.Verdict[i], "every policy stays stuck") && !strings.Contains(rep.Verdict[i], p) {
					t.Errorf("%s %s: verdict does not name %s", tc.name, c.Name, p)
				}
			}
			for _, p := range v.Recovered {
				got := cells[p][col["recovery"]]
				s, err := strconv.ParseFloat(strings.TrimSuffix(got, "s"), 64)
				if err != nil || s < v.RecoveryMin-0.05 || s > v.RecoveryS+0.05 {
					t.Errorf("%s %s: the verdict says %s recovers in %.1fs to %.1fs, the table reads %q", tc.name, c.Name, p, v.RecoveryMin, v.RecoveryS, got)
				}
			}
			if l, h := cellX(t, cells[v.LowPeak][col["peak×"]]), cellX(t, cells[v.HighPeak][col["peak×"]]); l != lo || h != hi {
				t.Errorf("%s %s: the verdict's peaks %s %.1fx and %s %.1fx, the table's range %.1fx to %.1fx", tc.name, c.Name, v.LowPeak, l, v.HighPeak, h, lo, hi)
			}
		}
		if len(rep.PolicyLegend) != len(rep.Cases[0].Rows) {
			t.Errorf("%s: %d policy definitions for %d policies", tc.name, len(rep.PolicyLegend), len(rep.Cases[0].Rows))
		}
		for _, l := range rep.PolicyLegend {
			if l[1] == "" {
				t.Errorf("%s: policy %s undefined", tc.name, l[0])
			}
		}
	}
}

// Every built-in scenario defines every policy it runs by default.
func TestEveryPolicyHasALegend(t *testing.T) {
	fullModel(t)
	for _, sc := range Scenarios() {
		rep, err := sc.Run(t.Context(), Options{Seed: 1, Trials: 1, Clients: 5, Duration: 40 * time.Second}) // every fault starts before 40s
		if sc.Name == "aws-occ" {
			rep, err = sc.Run(t.Context(), Options{Seed: 1, Trials: 1, Clients: 5})
		}
		if err != nil {
			t.Fatalf("%s: %v", sc.Name, err)
		}
		for _, p := range sc.Policies {
			found := false
			for _, l := range rep.PolicyLegend {
				found = found || (l[0] == p || l[0] == occLabel(p)) && l[1] != ""
			}
			if !found {
				t.Errorf("%s: no definition of %s", sc.Name, p)
			}
		}
		if len(rep.Verdict) == 0 {
			t.Errorf("%s: no verdict", sc.Name)
		}
	}
}
