package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
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
	fullModel(t)
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
	fullModel(t)
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

// Issue 33, item 2: every policy of a case is measured against one
// baseline, the same workload with no fault and no retries, so the steady
// cost of hedging shows: hedge-10ms sends about 1.38 attempts per call in
// the straggler scenario, and its peak× and its steady× say so instead of
// reading ≈1.1x beside no-hedge. The straggler verdict speaks of p99.9
// and names the heaviest peak.
func TestStragglerMeasuresEveryPolicyAgainstOneBaseline(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "straggler", Options{Seed: 1})
	c := rep.Cases[0]
	none, fixed := row(t, c, PolicyNoHedge), row(t, c, PolicyHedgeFixed)
	for _, r := range c.Rows {
		if r.Metrics.ReferenceLoad != none.ReferenceLoad || r.Metrics.ReferenceLoad == 0 {
			t.Errorf("%s: reference load %.1f/s, no-hedge's %.1f/s: want one baseline", r.Policy, r.Metrics.ReferenceLoad, none.ReferenceLoad)
		}
	}
	if math.Abs(fixed.SteadyLoad-fixed.AttemptsPerCall) > 0.03 || fixed.SteadyLoad < 1.3 {
		t.Errorf("hedge-10ms: steady load %.2fx for %.2f attempts per call", fixed.SteadyLoad, fixed.AttemptsPerCall)
	}
	if math.Abs(none.SteadyLoad-1) > 0.005 {
		t.Errorf("no-hedge: steady load %.3fx, want 1", none.SteadyLoad)
	}
	if fixed.Amplification < none.Amplification*1.3 || overlaps(fixed, none) {
		t.Errorf("hedge-10ms peak %.2f ±%.2f against no-hedge's %.2f ±%.2f: its steady cost is invisible", fixed.Amplification, fixed.AmplificationCI, none.Amplification, none.AmplificationCI)
	}
	if cell := ampCellOf(t, rep.Tables[0], PolicyHedgeFixed); strings.HasPrefix(cell, "≈") {
		t.Errorf("hedge-10ms peak× %q is marked as not told apart", cell)
	}
	v := JudgeCase(&c)
	if v.HighPeak != PolicyHedgeFixed {
		t.Errorf("the heaviest peak is %s's, want hedge-10ms's", v.HighPeak)
	}
	for _, want := range []string{"p99.9 runs from", "(hedge-10ms)", "steady load runs from 1.00x (no-hedge) to 1.38x (hedge-10ms)"} {
		if !strings.Contains(rep.Verdict[0], want) {
			t.Errorf("verdict lacks %q: %s", want, rep.Verdict[0])
		}
	}
}

// Issue 33, item 7: "stuck" needs an observation window: at least the
// recovery tolerance (10s unless the model sets one) plus 10s of traffic
// after the fault; a run that stops sooner without recovering is
// "unobserved", in the simulator and in the live lab alike (both judge
// through Recording.Metrics).
func TestStuckNeedsAnObservationWindow(t *testing.T) {
	const bucket = 10 * time.Millisecond
	fault := []Fault{{Kind: FaultUnavailable, Start: 10 * time.Second, End: 20 * time.Second}}
	for _, c := range []struct {
		after, tolerance time.Duration
		unobserved       bool
	}{
		{time.Second, 0, true}, {19 * time.Second, 0, true}, {20 * time.Second, 0, false},
		{39 * time.Second, 30 * time.Second, true}, {40 * time.Second, 30 * time.Second, false},
	} {
		duration := fault[0].End + c.after
		rec := NewRecording(bucket, int(duration/bucket)+1)
		rec.RecoveryTolerance = c.tolerance
		for b := range int(fault[0].Start / bucket) {
			rec.CallsOK[b], rec.AttemptsOK[b], rec.Attempts[b] = 5, 5, 5
		}
		for b := int(fault[0].Start / bucket); b < rec.Len(); b++ {
			rec.CallsFailed[b], rec.AttemptsFailed[b], rec.Attempts[b] = 5, 5, 5
		}
		rec.Calls = int64(5 * rec.Len())
		m := rec.Metrics(time.Second, duration, fault)
		if m.Recovered != 0 || (m.Unobserved == 1) != c.unobserved {
			t.Errorf("%v of traffic after the fault, tolerance %v: recovered %v, unobserved %v; want unobserved %v",
				c.after, c.tolerance, m.Recovered, m.Unobserved, c.unobserved)
		}
		if cell := recoveryCell(&m); (cell == "unobserved") != c.unobserved || !c.unobserved && cell != "stuck" {
			t.Errorf("%v after, tolerance %v: recovery cell %q", c.after, c.tolerance, cell)
		}
	}
	if got := StuckWindow(math.MaxInt64); got != math.MaxInt64 {
		t.Errorf("StuckWindow overflows: %v", got)
	}
}

// Issue 33, item 7: in the default suite brownout's sre-k1.1 has not
// recovered 30s after the brownout, but it recovers later (after about
// 66s with --duration 180s): 30s is too short to call it stuck.
func TestBrownoutSlowRecoveryIsNotCalledStuck(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "brownout", Options{Seed: 1, Trials: 1, Policies: []string{PolicySREK11}})
	m := rep.Cases[0].Rows[0].Metrics
	if m.Recovered == 0 && m.Unobserved == 0 {
		t.Errorf("sre-k1.1 is called stuck after 30s of traffic: %s", rep.Verdict[0])
	}
	long := runScenario(t, "brownout", Options{Seed: 1, Trials: 1, Duration: 180 * time.Second, Policies: []string{PolicySREK11}})
	if m := long.Cases[0].Rows[0].Metrics; m.Recovered != 1 {
		t.Errorf("sre-k1.1 with 90s of traffic after the brownout: recovered %v, unobserved %v", m.Recovered, m.Unobserved)
	}
}

// verdictCase builds a case of a fault from 10s to 20s with rows of the
// given peak×, interval and recovery share over 3 trials.
func verdictCase(floor float64, rows ...Row) Case {
	return Case{Name: "c", FaultStartS: 10, FaultEndS: 20, AmpNoiseFloor: floor, Rows: rows}
}

func vrow(policy string, amp, ci, recovered float64) Row {
	return Row{Policy: policy, Metrics: &Metrics{Trials: 3, Amplification: amp, AmplificationCI: ci, Recovered: recovered, RecoveryS: 12.6, SuccessRate: 0.7}}
}

// Issue 33, item 6: a policy that recovered in only some trials is in the
// verdict, with the number of trials, and the verdict no longer says
// "every policy recovers" beside it.
func TestVerdictNamesPoliciesThatRecoveredInSomeTrials(t *testing.T) {
	c := verdictCase(1.1, vrow("a", 1.2, 0.1, 1), vrow("aws-adaptive", 1.3, 0.1, 2.0/3))
	got := JudgeCase(&c).String()
	if strings.Contains(got, "every policy recovers") || !strings.Contains(got, "aws-adaptive recovers in only 2 of 3 trials") {
		t.Errorf("verdict: %s", got)
	}
}

// Issue 33, item 8: "all within the noise floor" is never said of a
// storm whose policies merely agree, and a tie names no policy twice.
func TestVerdictNoiseFloorAndTies(t *testing.T) {
	storm := verdictCase(1.05, vrow(PolicyImmediate, 5.82, 0.01, 0), vrow(PolicyFull, 5.86, 0.01, 0))
	got := JudgeCase(&storm).String()
	if strings.Contains(got, "within the") || !strings.Contains(got, "differ by less than the 1.05x noise floor") {
		t.Errorf("a 5.8x–5.9x storm: %s", got)
	}
	quiet := verdictCase(1.2, vrow("a", 1.1, 0.05, 1), vrow("b", 1.15, 0.05, 1))
	if got := JudgeCase(&quiet).String(); !strings.Contains(got, "all within the 1.20x noise floor") {
		t.Errorf("peaks under the noise floor: %s", got)
	}
	for _, c := range []Case{
		verdictCase(0, vrow("a", 1.1, 0, 1), vrow("b", 1.1, 0, 1)),
		verdictCase(0, vrow("a", 1.1, 0, 1)),
		verdictCase(0, vrow("a", 1.1, 0.3, 1), vrow("b", 1.3, 0.3, 1), vrow("c", 1.2, 0.3, 1)),
		verdictCase(0, vrow("a", 1.0, 0.1, 1), vrow("b", 3.0, 0.1, 1), vrow("c", 2.0, 1.5, 1)),
	} {
		got := JudgeCase(&c).String()
		peak := got[strings.Index(got, "Peak load"):]
		for _, r := range c.Rows {
			if n := strings.Count(peak, "("+r.Policy) + strings.Count(peak, " "+r.Policy+")") + strings.Count(peak, " "+r.Policy+" "); n > 1 {
				t.Errorf("%s named %d times: %s", r.Policy, n, peak)
			}
		}
	}
}

// Issue 33, item 9: a cancelled run reports the policies without a
// finished trial as not run (not as measured zeros called stuck), and
// its partial report renders, charts and encodes.
func TestCancelledRunShowsUnrunPoliciesAsNotRun(t *testing.T) {
	sc, _ := Lookup("brownout")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := sc.Run(ctx, Options{Seed: 1, Trials: 1, Workers: 1, Duration: 45 * time.Second,
		Progress: func(done, total int) { cancel() }})
	if !errors.Is(err, context.Canceled) || rep == nil || !rep.Partial || rep.TrialsDone == 0 {
		t.Fatalf("err %v, report %v", err, rep != nil)
	}
	c := rep.Cases[0]
	notRun := 0
	for i, r := range c.Rows {
		if r.NotRun {
			notRun++
			if r.Metrics != nil || rep.Tables[0].Rows[i][1] != "not run" {
				t.Errorf("%s: metrics %v, row %q", r.Policy, r.Metrics, rep.Tables[0].Rows[i])
			}
			if !strings.Contains(rep.Verdict[0], r.Policy) {
				t.Errorf("the verdict does not name %s: %s", r.Policy, rep.Verdict[0])
			}
		}
	}
	if notRun == 0 || notRun == len(c.Rows) || !strings.Contains(rep.Verdict[0], "not run") || strings.Contains(rep.Verdict[0], "stays stuck") || strings.Contains(rep.Verdict[0], "stay stuck") {
		t.Errorf("%d of %d not run; verdict %s", notRun, len(c.Rows), rep.Verdict[0])
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, tb := range rep.Tables {
		tb.WriteTo(&b)
	}
	if len(rep.Plots) == 0 || !strings.Contains(b.String(), "partial: cancelled") {
		t.Errorf("%d plots; tables:\n%s", len(rep.Plots), b.String())
	}
}

// Issue 33, item 10: the notes beside published figures read the run's
// own windows and every trial: a brownout that ends before the
// throttles settle prints no NaN, and the metastable paper note says
// what the table's recovery column says.
func TestNotesFollowTheRunsWindowsAndTrials(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "brownout", Options{Seed: 1, Duration: 31 * time.Second, Policies: []string{PolicySREK2, PolicySREK11}})
	notes := strings.Join(rep.Tables[0].Notes, "\n")
	if strings.Contains(notes, "NaN") || strings.Contains(notes, "Inf") || !strings.Contains(notes, "The lab cannot say") {
		t.Errorf("brownout ending at 31s: %s", notes)
	}
	rep = runScenario(t, "brownout", Options{Seed: 1, Trials: 2, Duration: 70 * time.Second, Policies: []string{PolicySREK2}})
	if notes := strings.Join(rep.Tables[0].Notes, "\n"); !strings.Contains(notes, "from 50s to 70s, the mean of 2 trials") {
		t.Errorf("brownout ending at 70s, 2 trials: %s", notes)
	}
	rep = runScenario(t, "metastable", Options{Seed: 1, Duration: 45 * time.Second, Policies: []string{"retry-once"}})
	for i, c := range rep.Cases {
		if c.Name != "paper: retries alone" {
			continue
		}
		cell := recoveryCell(c.Rows[0].Metrics)
		notes := strings.Join(rep.Tables[i].Notes, "\n")
		if !strings.Contains(notes, "recovery: "+cell) || strings.Contains(notes, "NaN") || !strings.Contains(notes, "from 40s to 45s") {
			t.Errorf("paper note beside a table reading %q: %s", cell, notes)
		}
	}
}

// Issue 33, item 9: a sweep cancelled before its last case ran reports
// and sums up what it has.
func TestCancelledSweepReports(t *testing.T) {
	sc, _ := Lookup("retry-budget")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := sc.Run(ctx, Options{Seed: 1, Trials: 1, Workers: 1, Clients: 5, Progress: func(done, total int) { cancel() }})
	if !errors.Is(err, context.Canceled) || rep == nil || !rep.Partial {
		t.Fatalf("err %v, report %v", err, rep != nil)
	}
	if len(rep.Verdict) == 0 || len(rep.Tables) == 0 || !strings.Contains(strings.Join(rep.Tables[0].Rows[len(rep.Tables[0].Rows)-1], " "), "not run") {
		t.Errorf("verdict %q, tables %v", rep.Verdict, rep.Tables)
	}
}

// Issue 33, item 14: an attempt waiting for the AWS adaptive bucket
// reserves its token, as throttle.Adaptive's Acquire does, so attempts
// that ask together wait one refill apart instead of all asking again at
// the same instant (where one would get the token and the rest wait
// again); a wait past the call's deadline is refused.
func TestAWSAdaptiveWaitersReserveTheirTokens(t *testing.T) {
	s := New(1)
	lim := AdaptiveLimiter(throttle.AdaptiveConfig{})(Env{Clock: s.Clock()})
	ctx := &askContext{}
	done, err := lim.Acquire(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	done(ErrOverloaded) // a throttle: the bucket is on
	var waits []time.Duration
	for i := 0; i < 4; i++ {
		done, err := lim.Acquire(ctx, true)
		if err != nil {
			t.Fatalf("ask %d: %v", i, err)
		}
		w, ok := lim.(reserver).reserved()
		if !ok {
			w = 0
		}
		waits = append(waits, w)
		defer done(nil)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Fatalf("waits %v: want each behind the one before", waits)
		}
	}
	ctx.dl, ctx.has = s.Clock().Now().Add(waits[len(waits)-1]/2), true
	if _, err := lim.Acquire(ctx, true); !errors.Is(err, throttle.ErrWaitTooLong) {
		t.Errorf("a wait past the deadline: %v, want ErrWaitTooLong", err)
	}
}

// Issue 33, item 14: a fault that starts when the clients have stopped
// starting calls meets no call, and Validate refuses it.
func TestFaultAfterTheRunIsRefused(t *testing.T) {
	m := Model{Clients: 1, Arrival: Arrival{Kind: Poisson, Rate: 1}, Duration: 10 * time.Second, Tiers: []Tier{{}},
		Faults: []Fault{{Kind: FaultUnavailable, Start: 10 * time.Second, End: 20 * time.Second}}}
	if err := m.Validate(); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "no call would meet it") {
		t.Errorf("a fault at the end of the traffic: %v", err)
	}
	m.Faults[0].Start = 9 * time.Second
	if err := m.Validate(); err != nil {
		t.Errorf("a fault inside the run: %v", err)
	}
	sc, _ := Lookup("gateway-restart")
	if _, err := sc.Run(context.Background(), Options{Seed: 1, Trials: 1, Duration: 15 * time.Second}); !errors.Is(err, ErrModel) {
		t.Errorf("gateway-restart --duration 15s (its restart at 20s): %v", err)
	}
}

// Issue 33, item 14: the charts' capacity line follows the capacity
// faults: brownout's backend serves 400/s, then 200/s from 30s to 90s.
func TestCapacityLineFollowsCapacityFaults(t *testing.T) {
	fullModel(t)
	rep := runScenario(t, "brownout", Options{Seed: 1, Trials: 1, Policies: []string{PolicyNoRetry}})
	p := rep.Plots[0]
	if fmt.Sprint(p.HLineX) != "[0 30 90]" || fmt.Sprint(p.HLineY) != "[400 200 400]" || p.HLine != 400 {
		t.Errorf("capacity line x %v y %v (HLine %v), want 400/s, 200/s from 30s to 90s, 400/s", p.HLineX, p.HLineY, p.HLine)
	}
	rep = runScenario(t, "straggler", Options{Seed: 1, Trials: 1, Policies: []string{PolicyNoHedge}})
	if p := rep.Plots[0]; p.HLineX != nil {
		t.Errorf("an unbounded tier has no capacity steps: %v", p.HLineX)
	}
}

// Class sweep: a policy's code that panics inside a trial (here its
// budget's constructor) ends the run with the panic in the caller's
// goroutine, after the other workers stopped, instead of crashing a
// worker goroutine; a panicking progress callback too.
func TestRunPanicsReachTheCaller(t *testing.T) {
	m := Model{Clients: 2, Arrival: Arrival{Kind: Poisson, Rate: 5}, Duration: 5 * time.Second, Tiers: []Tier{{}}}
	boom := Policy{Name: "boom", MaxAttempts: 2, Budget: func(Env) retry.Budget { panic("budget boom") }}
	sc, err := NewModelScenario(ModelSpec{Name: "panics", Model: m, Custom: []Variant{Single(boom)}, Policies: []string{"boom", PolicyNoRetry}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Seed: 1, Trials: 4, Workers: 2}, "budget boom"},
		{Options{Seed: 1, Trials: 4, Workers: 2, Policies: []string{PolicyNoRetry}, Progress: func(int, int) { panic("progress boom") }}, "progress boom"},
	} {
		func() {
			defer func() {
				if r := recover(); r != c.want {
					t.Errorf("recovered %v, want %q", r, c.want)
				}
			}()
			sc.Run(context.Background(), c.o)
		}()
	}
}

// Class sweep: a MaxElapsed near the largest duration does not overflow
// the retry deadline (the call retries until its attempt limit).
func TestHugeMaxElapsedDoesNotOverflow(t *testing.T) {
	m := Model{Clients: 2, Arrival: Arrival{Kind: Poisson, Rate: 5}, Duration: 5 * time.Second, Tiers: []Tier{{FailProb: 1, Latency: Const(time.Millisecond)}}}
	for _, p := range []Policy{
		{Name: "long", MaxAttempts: 3, MaxElapsed: math.MaxInt64},
		{Name: "long-limited", MaxAttempts: 3, MaxElapsed: math.MaxInt64, Limiter: AdaptiveLimiter(throttle.AdaptiveConfig{})},
	} {
		res, err := Run(&m, Single(p), 1)
		if err != nil {
			t.Fatal(err)
		}
		if res.Metrics.AttemptsPerCall != 3 {
			t.Errorf("%s: %.2f attempts per call, want 3", p.Name, res.Metrics.AttemptsPerCall)
		}
	}
}
