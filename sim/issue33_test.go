package sim

import (
	"math"
	"strings"
	"testing"
)

// Issue 33, item 1: a 95% interval of the mean of n trials uses Student's
// t with n−1 degrees of freedom (4.303 for 3 trials), not the normal
// 1.96, which makes an 81% interval of 3 trials.
func TestConfidenceIntervalsUseStudentsT(t *testing.T) {
	for _, c := range []struct {
		df   int
		want float64
		tol  float64
	}{{1, 12.706, 0}, {2, 4.303, 0}, {3, 3.182, 0}, {10, 2.228, 0}, {30, 2.042, 0},
		{31, 2.0395, 0.001}, {40, 2.0211, 0.001}, {60, 2.0003, 0.001}, {120, 1.9799, 0.001}, {1 << 30, 1.95996, 0.0001}} {
		if got := TQuantile95(c.df); math.Abs(got-c.want) > c.tol {
			t.Errorf("TQuantile95(%d) = %.4f, want %.4f", c.df, got, c.want)
		}
	}
	if TQuantile95(0) != 0 || TQuantile95(-1) != 0 {
		t.Errorf("no interval for one value")
	}
	xs := []float64{1, 2, 3}
	if got, want := CIHalfWidth(xs), 4.303*StdErr(xs); math.Abs(got-want) > 1e-12 {
		t.Errorf("CIHalfWidth %v, want %v", got, want)
	}
}

// ampCellOf returns the peak× cell of policy in a table.
func ampCellOf(t *testing.T, tb Table, policy string) string {
	t.Helper()
	col := -1
	for i, h := range tb.Header {
		if h == "peak×" {
			col = i
		}
	}
	for _, r := range tb.Rows {
		if r[0] == policy {
			return r[col]
		}
	}
	t.Fatalf("no row %s in %q", policy, tb.Title)
	return ""
}

// Issue 33, item 1: with 95% intervals of 3 trials, gateway-restart's
// full, full+budget and full+shared-budget cannot be told apart from the
// lowest peak, and the table marks them so.
func TestGatewayRestartMarksThePeaksThreeTrialsCannotTellApart(t *testing.T) {
	rep := runScenario(t, "gateway-restart", Options{Seed: 1})
	tb := rep.Tables[0]
	for _, p := range []string{PolicyFull, PolicyBudget, "full+shared-budget"} {
		if cell := ampCellOf(t, tb, p); !strings.HasPrefix(cell, "≈") {
			t.Errorf("%s: peak× %q, want it marked ≈", p, cell)
		}
	}
	if !strings.Contains(strings.Join(tb.Notes, "\n"), "4.30 standard errors") {
		t.Errorf("the note does not give the t factor of 3 trials: %q", tb.Notes)
	}
}

// Issue 33, item 1: the brownout verdict names the highest peak together
// with every policy whose interval overlaps it: 3 trials cannot tell
// sre-k2 from breaker or sre-k1.1.
func TestBrownoutVerdictNamesThePeaksItCannotTellApart(t *testing.T) {
	rep := runScenario(t, "brownout", Options{Seed: 1})
	c := &rep.Cases[0]
	v := JudgeCase(c)
	hi := row(t, *c, v.HighPeak)
	for _, r := range c.Rows {
		if r.Policy == v.HighPeak || !overlaps(r.Metrics, hi) || overlaps(r.Metrics, row(t, *c, v.LowPeak)) {
			continue
		}
		if !strings.Contains(v.String(), "not told apart from") || !strings.Contains(v.String(), r.Policy) {
			t.Errorf("%s's peak %.2f ±%.2f overlaps the highest (%s %.2f ±%.2f), the verdict does not say so: %s",
				r.Policy, r.Metrics.Amplification, r.Metrics.AmplificationCI, v.HighPeak, hi.Amplification, hi.AmplificationCI, v)
		}
	}
	if strings.Contains(rep.Verdict[0], "(sre-k2).") || strings.Contains(rep.Verdict[0], "(sre-k2);") {
		t.Errorf("the verdict names sre-k2 alone as the highest peak: %s", rep.Verdict[0])
	}
}
