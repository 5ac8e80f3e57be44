package sim

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stallModel is the review's model: a policy bounded only by MaxElapsed
// that retries at once, a tier with no latency and no service time, and a
// window of 503s. Every retry lands at the same instant, so virtual time
// never reaches MaxElapsed.
func stallModel() (Model, Variant) {
	m := Model{
		Clients: 1, Arrival: Arrival{Kind: Periodic, Interval: time.Second}, Duration: 5 * time.Second,
		Tiers:  []Tier{{}},
		Faults: []Fault{{Kind: FaultUnavailable, Start: time.Second, End: 3 * time.Second}},
	}
	return m, Single(Policy{Name: "tight", MaxElapsed: 10 * time.Second})
}

func TestRunWithoutProgressStopsWithItsCause(t *testing.T) {
	fullModel(t)
	m, v := stallModel()
	done := make(chan error, 1)
	go func() {
		_, err := Run(&m, v, 1)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNoProgress) {
			t.Fatalf("err = %v, want ErrNoProgress", err)
		}
		t.Log(err)
	case <-time.After(2 * time.Minute): // a guard for a hang, not a measurement
		t.Fatal("the stalled model never ended")
	}
}

// Issue 33, item 14: the call limit and the event cap agree: a workload
// whose calls alone would pass the cap is refused by Validate, naming the
// cap; one that passes and whose retries multiply the work past the cap
// stops with ErrEventCap, which says so (not "makes no progress").
func TestRunStopsAtItsEventCap(t *testing.T) {
	m := Model{
		Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 100}, Duration: 10 * time.Second,
		Tiers:     []Tier{{Service: Const(time.Millisecond)}},
		MaxEvents: 1000,
	}
	if err := m.Validate(); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), "event cap of 1000") {
		t.Fatalf("10,000 calls under a cap of 1,000 events: %v", err)
	}
	m.Arrival.Rate, m.Tiers[0].FailProb, m.Tiers[0].Latency = 1, 1, Const(time.Millisecond)
	_, err := Run(&m, Single(Policy{Name: "forever"}), 1)
	if !errors.Is(err, ErrEventCap) || !errors.Is(err, ErrNoProgress) || strings.Contains(err.Error(), "makes no progress") {
		t.Fatalf("err = %v, want the event cap's ErrEventCap", err)
	}
	m.MaxEvents, m.Tiers[0].FailProb = 0, 0
	if _, err := Run(&m, noRetry, 1); err != nil {
		t.Fatalf("the default cap stopped a small model: %v", err)
	}
	big := Model{Clients: 1000, Arrival: Arrival{Kind: Poisson, Rate: 1000}, Duration: 200 * time.Second, Tiers: []Tier{{}}}
	if err := big.Validate(); err == nil || !strings.Contains(err.Error(), "MaxExpectedCalls") && !strings.Contains(err.Error(), "event cap") {
		t.Errorf("2e8 calls: %v", err)
	}
}

// countdownCtx is a context whose Err turns to Canceled after n calls,
// which stops a trial in the middle, deterministically.
type countdownCtx struct {
	context.Context
	n atomic.Int64
}

func (c *countdownCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestRunContextStopsInsideATrial(t *testing.T) {
	m := Model{
		Clients: 100, Arrival: Arrival{Kind: Poisson, Rate: 100}, Duration: 10 * time.Second,
		Tiers: []Tier{{Service: Const(time.Millisecond)}},
	}
	full, err := Run(&m, noRetry, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := &countdownCtx{Context: context.Background()}
	ctx.n.Store(3)
	r, err := RunContext(ctx, &m, noRetry, 1)
	if !errors.Is(err, context.Canceled) || r != nil {
		t.Fatalf("RunContext = %v, %v; want nil, context.Canceled", r, err)
	}
	if full.Events < 10*checkEvery {
		t.Fatalf("the model has only %d events: too few to show a stop inside the trial", full.Events)
	}
}

func TestScenarioCancelledReturnsPartialReport(t *testing.T) {
	sc, err := NewModelScenario(ModelSpec{
		Name: "cancel",
		Model: Model{
			Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 50}, Duration: 60 * time.Second,
			Tiers:  []Tier{{Workers: 4, Service: Exp(10 * time.Millisecond)}},
			Faults: []Fault{{Kind: FaultUnavailable, Start: 20 * time.Second, End: 25 * time.Second}},
		},
		Policies: []string{"none"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rep, err := sc.Run(ctx, Options{Seed: 1, Trials: 6, Workers: 1, Progress: func(done, _ int) {
		if done == 2 {
			cancel() // the third trial is under way: it must stop, not finish
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if rep == nil || !rep.Partial {
		t.Fatalf("report %+v, want one marked partial", rep)
	}
	if rep.TrialsDone < 2 || rep.TrialsDone >= 6 {
		t.Fatalf("TrialsDone = %d, want the finished trials only (2 or 3 of 6)", rep.TrialsDone)
	}
	if rep.Cases[0].Rows[0].Metrics.Calls == 0 {
		t.Fatal("the partial report lost the finished trials' figures")
	}
	found := false
	for _, tb := range rep.Tables {
		for _, n := range tb.Notes {
			found = found || len(n) > 8 && n[:8] == "partial:"
		}
	}
	if !found {
		t.Fatal("the tables do not say the report is partial")
	}
}

// A fault that ends too close to the end of the traffic leaves no window
// in which recovery could show: the lab must say "unobserved", not claim
// the system stayed stuck.
func TestRecoveryNotJudgedWithoutEvidence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		start, end time.Duration
		want       string
	}{
		{"fault ends in the last second", 5 * time.Second, 9500 * time.Millisecond, "unobserved"},
		{"fault ends after the traffic", 5 * time.Second, 15 * time.Second, "unobserved"},
		{"fault ends with room to recover", 3 * time.Second, 5 * time.Second, "0.0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Model{
				Clients: 20, Arrival: Arrival{Kind: Poisson, Rate: 20}, Duration: 10 * time.Second, Warmup: time.Second,
				Tiers:  []Tier{{Service: Const(time.Millisecond)}},
				Faults: []Fault{{Kind: FaultUnavailable, Start: tc.start, End: tc.end}},
			}
			x := mustRun(t, m, Single(Policy{Name: "p", MaxAttempts: 1}), 1).Metrics
			if got := recoveryCell(&x); got != tc.want {
				t.Fatalf("recovery %q (Recovered %v Unobserved %v), want %q", got, x.Recovered, x.Unobserved, tc.want)
			}
		})
	}
	// Still stuck when the run went on after the fault and never healed.
	x := Metrics{Recovered: 0}
	if recoveryCell(&x) != "stuck" {
		t.Fatal("a judged trial that never recovered must read stuck")
	}
}

func TestModelRefusesFaultsThatDoNothingAndUnboundedWork(t *testing.T) {
	base := func() Model {
		return Model{
			Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 10}, Duration: 10 * time.Second, Warmup: time.Second,
			Tiers: []Tier{{Workers: 4, Service: Const(time.Millisecond)}, {}},
		}
	}
	for name, tc := range map[string]struct {
		edit func(*Model)
		want string
	}{
		"loss without prob":   {func(m *Model) { m.Faults = []Fault{{Kind: FaultLoss, Start: 2 * time.Second, End: 3 * time.Second}} }, "probability 0 does nothing"},
		"errors without prob": {func(m *Model) { m.Faults = []Fault{{Kind: FaultErrors, Start: 2 * time.Second, End: 3 * time.Second}} }, "probability 0 does nothing"},
		"capacity, no workers": {func(m *Model) {
			m.Faults = []Fault{{Kind: FaultCapacity, Tier: 1, Factor: 0.5, Start: 2 * time.Second, End: 3 * time.Second}}
		}, "workers are unlimited"},
		"unbounded work": {func(m *Model) { m.Clients, m.Arrival.Rate, m.Duration = 10_000_000, 1e6, 24*time.Hour }, "more than the"},
	} {
		m := base()
		tc.edit(&m)
		if err := m.Validate(); !errors.Is(err, ErrModel) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want ErrModel saying %q", name, err, tc.want)
		}
	}
	m := base()
	m.Faults = []Fault{{Kind: FaultUnavailable, Start: time.Second, End: 3 * time.Second}}
	if err := m.CheckBaseline(); !errors.Is(err, ErrModel) {
		t.Errorf("a fault at the end of the warm-up: CheckBaseline = %v, want ErrModel", err)
	}
	if _, err := NewModelScenario(ModelSpec{Name: "x", Model: m, Policies: []string{"none"}}); !errors.Is(err, ErrModel) {
		t.Errorf("a scenario without a baseline: %v, want ErrModel", err)
	}
	m.Faults[0].Start = 2 * time.Second
	if err := m.CheckBaseline(); err != nil {
		t.Errorf("a fault after the warm-up: %v", err)
	}
}

// A hang without a timeout leaves most calls open at the end: the
// percentiles must count them (as lower bounds) and the table must say
// how many there were, instead of showing the latency of the few that
// ended.
func TestLatencyCountsCallsStillOpen(t *testing.T) {
	m := Model{
		Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 10}, Duration: 20 * time.Second, Drain: 5 * time.Second, Warmup: time.Second,
		Tiers:  []Tier{{Service: Const(9 * time.Millisecond)}},
		Faults: []Fault{{Kind: FaultHang, Start: 5 * time.Second, End: 25 * time.Second}},
	}
	x := mustRun(t, m, noRetry, 1).Metrics
	if x.OpenCalls < x.Calls/2 {
		t.Fatalf("open calls %v of %v: the hang should hold most of them", x.OpenCalls, x.Calls)
	}
	if x.P50Open != 1 || x.P50ms < 1000 {
		t.Fatalf("p50 %vms (open %v): want a lower bound from the calls still open, not the 9ms of those that ended", x.P50ms, x.P50Open)
	}
	tb := MetricsTable("hang", []Column{mustColumn(t, "p50")}, []Row{{Policy: "none", Metrics: &x}})
	if cell := tb.Rows[0][1]; !strings.HasPrefix(cell, "> ") {
		t.Fatalf("p50 cell %q, want a \"> \" lower bound", cell)
	}
	if len(tb.Notes) == 0 || !strings.Contains(tb.Notes[len(tb.Notes)-1], "still open") {
		t.Fatalf("notes %q do not count the open calls", tb.Notes)
	}
	// Without open calls nothing changes.
	m.Faults = nil
	y := mustRun(t, m, noRetry, 1).Metrics
	if y.OpenCalls != 0 || y.P50Open != 0 || y.P50ms != 9 {
		t.Fatalf("no fault: open %v p50 %vms (open %v), want 0 and 9ms", y.OpenCalls, y.P50ms, y.P50Open)
	}
}

func mustColumn(t *testing.T, key string) Column {
	t.Helper()
	c, ok := LookupColumn(key)
	if !ok {
		t.Fatalf("no column %q", key)
	}
	return c
}

func TestLatencyPercentileMergesOpenCalls(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 200; round++ {
		r := &Recording{}
		type v struct {
			d    time.Duration
			open bool
		}
		var all []v
		for i := rng.IntN(20); i > 0; i-- {
			d := time.Duration(rng.IntN(50))
			r.Latencies = append(r.Latencies, d)
			all = append(all, v{d, false})
		}
		for i := rng.IntN(20) + 1; i > 0; i-- {
			d := time.Duration(rng.IntN(50))
			r.Open = append(r.Open, d)
			all = append(all, v{d, true})
		}
		slices.Sort(r.Latencies)
		slices.Sort(r.Open)
		// Ties: the merge takes an ended call before an open one of the
		// same value.
		slices.SortStableFunc(all, func(a, b v) int {
			if a.d != b.d {
				return cmp.Compare(a.d, b.d)
			}
			if a.open == b.open {
				return 0
			}
			if a.open {
				return 1
			}
			return -1
		})
		for _, p := range []float64{0, 0.5, 0.99, 0.999, 1} {
			want := all[nearestRank(len(all), p)]
			d, open := r.latencyPercentile(p)
			if d != want.d || open != want.open {
				t.Fatalf("round %d p%v: got %v open=%v, want %v open=%v", round, p, d, open, want.d, want.open)
			}
		}
	}
}
