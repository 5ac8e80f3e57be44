package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

func mustRun(t *testing.T, m Model, v Variant, seed uint64) *Result {
	t.Helper()
	r, err := Run(&m, v, seed)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var noRetry = Single(Policy{Name: "none", MaxAttempts: 1})

func TestLatencyIsTwoLegsPlusService(t *testing.T) {
	m := Model{
		Clients: 3, Arrival: Arrival{Kind: Periodic, Interval: time.Second}, Duration: 10 * time.Second,
		Tiers: []Tier{{Service: Const(5 * time.Millisecond), Latency: Const(10 * time.Millisecond)}},
	}
	r := mustRun(t, m, noRetry, 1)
	x := r.Metrics
	if x.Calls != 30 || x.Succeeded != 30 || x.Attempts != 30 {
		t.Fatalf("calls %v succeeded %v attempts %v, want 30 each", x.Calls, x.Succeeded, x.Attempts)
	}
	if x.P50ms != 25 || x.P999ms != 25 {
		t.Fatalf("latency p50 %vms p99.9 %vms, want 25ms", x.P50ms, x.P999ms)
	}
}

// Erlang's loss formula: with c workers, no queue and Poisson arrivals of
// a offered erlangs, a share B(c, a) of requests finds every worker busy,
// whatever the service-time distribution.
func TestWorkersWithoutQueueFollowErlangB(t *testing.T) {
	erlangB := func(c int, a float64) float64 {
		b := 1.0
		for k := 1; k <= c; k++ {
			b = a * b / (float64(k) + a*b)
		}
		return b
	}
	for _, svc := range []Dist{Const(10 * time.Millisecond), Exp(10 * time.Millisecond)} {
		m := Model{
			Clients: 10, Arrival: Arrival{Kind: Poisson, Rate: 40}, Duration: 200 * time.Second, // a = 400/s · 10ms = 4
			Tiers: []Tier{{Workers: 5, Queue: -1, Service: svc}},
		}
		x := mustRun(t, m, noRetry, 3).Metrics
		want := 1 - erlangB(5, 4)
		se := math.Sqrt(want * (1 - want) / x.Calls)
		if math.Abs(x.SuccessRate-want) > 5*se+0.005 {
			t.Errorf("%v service: success %.4f, want 1-B(5,4) = %.4f", svc, x.SuccessRate, want)
		}
		if x.PeakConcurrency > 5 || x.PeakQueue != 0 {
			t.Errorf("peak concurrency %v queue %v with 5 workers and no queue", x.PeakConcurrency, x.PeakQueue)
		}
	}
}

func TestQueueLimitAndThroughput(t *testing.T) {
	// 1 worker at 10ms (100/s) under 200/s: the queue fills to its limit,
	// and the server completes no more than its capacity.
	m := Model{
		Clients: 2, Arrival: Arrival{Kind: Poisson, Rate: 100}, Duration: 20 * time.Second, Drain: time.Second,
		Tiers: []Tier{{Workers: 1, Queue: 50, Service: Const(10 * time.Millisecond)}},
	}
	x := mustRun(t, m, noRetry, 5).Metrics
	if x.PeakQueue != 50 || x.PeakConcurrency != 51 {
		t.Fatalf("peak queue %v concurrency %v, want 50 and 51", x.PeakQueue, x.PeakConcurrency)
	}
	if max := 100 * 21.0; x.Succeeded > max {
		t.Fatalf("%v successes exceed capacity %v", x.Succeeded, max)
	}
	if x.Goodput < 95 {
		t.Fatalf("goodput %v/s, want the server busy (about 100/s)", x.Goodput)
	}
}

func steadyModel() Model {
	return Model{
		Clients: 20, Arrival: Arrival{Kind: Poisson, Rate: 10}, Duration: 40 * time.Second, Drain: 5 * time.Second,
		Tiers: []Tier{{Workers: 50, Service: Exp(10 * time.Millisecond), Latency: Const(time.Millisecond), Timeout: 500 * time.Millisecond}},
	}
}

func TestFaultsChangeTheServer(t *testing.T) {
	window := func(k FaultKind) Fault {
		return Fault{Kind: k, Start: 10 * time.Second, End: 20 * time.Second, Prob: 1, Factor: 0}
	}
	t.Run("unavailable", func(t *testing.T) {
		m := steadyModel()
		m.Faults = []Fault{window(FaultUnavailable)}
		x := mustRun(t, m, noRetry, 1).Metrics
		// A quarter of the calls fall in the window and fail at once.
		if math.Abs(x.SuccessRate-0.75) > 0.02 || x.P99ms > 100 {
			t.Fatalf("success %v p99 %vms, want 75%% and fast failures", x.SuccessRate, x.P99ms)
		}
	})
	for _, k := range []FaultKind{FaultHang, FaultLoss} {
		t.Run(k.String(), func(t *testing.T) {
			m := steadyModel()
			m.Faults = []Fault{window(k)}
			x := mustRun(t, m, noRetry, 1).Metrics
			// Failed calls end by timeout: p99 is the 500ms timeout.
			if math.Abs(x.SuccessRate-0.75) > 0.02 || x.P99ms != 500 {
				t.Fatalf("success %v p99 %vms, want 75%% and 500ms", x.SuccessRate, x.P99ms)
			}
		})
	}
	t.Run("capacity", func(t *testing.T) {
		m := steadyModel()
		m.Tiers[0].Timeout = 0
		m.Faults = []Fault{window(FaultCapacity)} // no worker at all for 10s
		r := mustRun(t, m, noRetry, 1)
		x := r.Metrics
		// Nothing is lost: calls in the window wait until it ends.
		if x.SuccessRate != 1 || x.P99ms < 5000 || x.PeakQueue < 1500 {
			t.Fatalf("success %v p99 %vms peak queue %v", x.SuccessRate, x.P99ms, x.PeakQueue)
		}
		// While it lasts nothing succeeds; after it the backlog drains.
		g := r.Series.Goodput
		step := r.Series.StepMS / 1000
		if g[int(15/step)] != 0 || g[int(20.1/step)] == 0 {
			t.Fatalf("goodput during %v after %v", g[int(15/step)], g[int(20.1/step)])
		}
	})
	t.Run("restart", func(t *testing.T) {
		m := steadyModel()
		m.Tiers[0].Service = Const(200 * time.Millisecond)
		m.Tiers[0].Workers = 0 // no queueing: every call takes 202ms or fails sooner
		m.Faults = []Fault{{Kind: FaultRestart, Start: 10 * time.Second, End: 12 * time.Second}}
		x := mustRun(t, m, noRetry, 1).Metrics
		// The calls in service when it restarts (0.2s of them) fail too.
		if want := 1 - 2.2/40; math.Abs(x.SuccessRate-want) > 0.01 || x.P99ms > 205 {
			t.Fatalf("success %v p99 %vms, want %v and nothing waiting for a timeout", x.SuccessRate, x.P99ms, want)
		}
	})
	t.Run("restart with calls downstream", func(t *testing.T) {
		// The front tier restarts while its requests wait for a slow back
		// tier: they fail at once, and the back tier's late answers are
		// dropped.
		m := steadyModel()
		m.Tiers = []Tier{{Name: "front", Workers: 100}, {Name: "back", Service: Const(300 * time.Millisecond)}}
		m.Faults = []Fault{{Kind: FaultRestart, Tier: 0, Start: 10 * time.Second, End: 12 * time.Second}}
		m.Measure = "front"
		x := mustRun(t, m, noRetry, 1).Metrics
		if want := 1 - 2.3/40; math.Abs(x.SuccessRate-want) > 0.01 || x.P99ms > 310 {
			t.Fatalf("success %v p99 %vms, want %v", x.SuccessRate, x.P99ms, want)
		}
	})
	t.Run("latency", func(t *testing.T) {
		m := steadyModel()
		m.Faults = []Fault{{Kind: FaultLatency, Start: 0, End: time.Hour, Extra: Const(100 * time.Millisecond)}}
		x := mustRun(t, m, noRetry, 1).Metrics
		if x.P50ms < 200 || x.SuccessRate != 1 {
			t.Fatalf("p50 %vms, want ≥ 200ms (two legs of +100ms)", x.P50ms)
		}
	})
	t.Run("errors", func(t *testing.T) {
		m := steadyModel()
		m.Faults = []Fault{{Kind: FaultErrors, Start: 0, End: time.Hour, Prob: 0.3}}
		x := mustRun(t, m, noRetry, 1).Metrics
		if math.Abs(x.SuccessRate-0.7) > 0.02 {
			t.Fatalf("success %v, want 70%%", x.SuccessRate)
		}
	})
}

func TestTimedOutRequestsStillOccupyTheServer(t *testing.T) {
	// 1 worker, 100ms per request, callers give up after 50ms: every call
	// times out, yet the server works at full capacity.
	m := Model{
		Clients: 1, Arrival: Arrival{Kind: Periodic, Interval: 50 * time.Millisecond}, Duration: 10 * time.Second, Drain: time.Second,
		Tiers: []Tier{{Workers: 1, Queue: 10, Service: Const(100 * time.Millisecond), Timeout: 50 * time.Millisecond}},
	}
	x := mustRun(t, m, noRetry, 1).Metrics
	if x.Succeeded != 0 || x.PeakQueue != 10 {
		t.Fatalf("succeeded %v peak queue %v; want 0 and a full queue", x.Succeeded, x.PeakQueue)
	}
}

func TestSameSeedSameRunAndSameWorkloadForEveryPolicy(t *testing.T) {
	m := steadyModel()
	m.Faults = []Fault{{Kind: FaultErrors, Start: 5 * time.Second, End: 15 * time.Second, Prob: 0.5}}
	full, err := StandardPolicy(PolicyFull, PolicyParams{Base: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	a := mustRun(t, m, Single(full), 42)
	b := mustRun(t, m, Single(full), 42)
	if fmt.Sprint(a.Metrics) != fmt.Sprint(b.Metrics) || !slices.Equal(a.Series.Load, b.Series.Load) {
		t.Fatal("the same seed gave different runs")
	}
	c := mustRun(t, m, Single(full), 43)
	if c.Metrics == a.Metrics {
		t.Fatal("another seed gave the same run")
	}
	n := mustRun(t, m, noRetry, 42)
	if n.Metrics.Calls != a.Metrics.Calls || n.Metrics.Attempts >= a.Metrics.Attempts {
		t.Fatalf("calls %v vs %v (want the same workload), attempts %v vs %v",
			n.Metrics.Calls, a.Metrics.Calls, n.Metrics.Attempts, a.Metrics.Attempts)
	}
}

// Arrival.Stream gives each client its own calls, from the seed and its
// number alone, and Run starts exactly the calls the streams give.
func TestArrivalStreams(t *testing.T) {
	periodic := Arrival{Kind: Periodic, Interval: 250 * time.Millisecond}
	for i := range 50 {
		st := periodic.Stream(7, i)
		if first := st.First(); first < 0 || first >= periodic.Interval {
			t.Fatalf("client %d: periodic first call at %v, outside [0, %v)", i, first, periodic.Interval)
		}
		if next := st.Next(); next != periodic.Interval {
			t.Fatalf("client %d: periodic gap %v, want %v", i, next, periodic.Interval)
		}
	}
	poisson := Arrival{Kind: Poisson, Rate: 20}
	a, b := poisson.Stream(7, 3), poisson.Stream(7, 3)
	if a.First() != b.First() || a.Next() != b.Next() {
		t.Fatal("the same seed and client gave another stream")
	}
	if x, y := poisson.Stream(7, 3), poisson.Stream(7, 4); x.First() == y.First() {
		t.Fatal("two clients drew the same first call")
	}
	var sum time.Duration
	const n = 20_000
	for range n {
		sum += a.Next()
	}
	if mean := sum.Seconds() / n; math.Abs(mean-0.05) > 0.05*5/math.Sqrt(n) {
		t.Errorf("poisson mean gap %.4fs, want about 0.05s", mean)
	}

	m := steadyModel()
	want := 0
	for i := range m.Clients {
		st := m.Arrival.Stream(11, i)
		for at := st.First(); at < m.Duration; at += st.Next() {
			want++
		}
	}
	if got := mustRun(t, m, noRetry, 11).Metrics.Calls; got != float64(want) {
		t.Fatalf("the run started %v calls, the streams give %d", got, want)
	}
}

func TestMultiTierRetriesMultiply(t *testing.T) {
	// Every hop makes 4 attempts and the database always fails: 4·4·4 = 64
	// database attempts per call.
	m := Model{
		Clients: 1, Arrival: Arrival{Kind: Periodic, Interval: 10 * time.Second}, Duration: 10 * time.Second,
		Tiers: []Tier{{Name: "edge"}, {Name: "svc"}, {Name: "db", FailProb: 1}},
	}
	p := Policy{Name: "4", MaxAttempts: 4}
	x := mustRun(t, m, Variant{Name: "all", Policies: []Policy{p, p, p}}, 1).Metrics
	if x.Calls != 1 || x.Attempts != 64 || x.AttemptsPerCall != 64 {
		t.Fatalf("calls %v, database attempts %v; want 1 and 64", x.Calls, x.Attempts)
	}
	m.Measure = "edge"
	x = mustRun(t, m, Variant{Name: "all", Policies: []Policy{p, p, p}}, 1).Metrics
	if x.Attempts != 4 {
		t.Fatalf("edge attempts %v, want 4", x.Attempts)
	}
}

// logBudget and logBreaker record the calls made on them.
type logBudget struct {
	log      *[]string
	withdraw []bool
}

func (b *logBudget) Record(r bool, err error) {
	*b.log = append(*b.log, fmt.Sprintf("Record(%v,%v)", r, err != nil))
}
func (b *logBudget) Withdraw(error) bool {
	ok := len(b.withdraw) == 0 || b.withdraw[0]
	if len(b.withdraw) > 0 {
		b.withdraw = b.withdraw[1:]
	}
	*b.log = append(*b.log, fmt.Sprintf("Withdraw=%v", ok))
	return ok
}
func (b *logBudget) Start(r bool) { *b.log = append(*b.log, fmt.Sprintf("Start(%v)", r)) }
func (b *logBudget) Refund()      { *b.log = append(*b.log, "Refund") }

type logBreaker struct {
	log   *[]string
	allow []bool
	ready []bool
}

var errRefused = errors.New("refused")

func pop(xs *[]bool) bool {
	if len(*xs) == 0 {
		return true
	}
	v := (*xs)[0]
	*xs = (*xs)[1:]
	return v
}

func (b *logBreaker) Allow() (func(error), error) {
	ok := pop(&b.allow)
	*b.log = append(*b.log, fmt.Sprintf("Allow=%v", ok))
	if !ok {
		return nil, errRefused
	}
	return func(err error) { *b.log = append(*b.log, fmt.Sprintf("done(%v)", err != nil)) }, nil
}

func (b *logBreaker) Ready() error {
	ok := pop(&b.ready)
	*b.log = append(*b.log, fmt.Sprintf("Ready=%v", ok))
	if !ok {
		return errRefused
	}
	return nil
}

// The simulated caller makes the same calls on budget and breaker, in the
// same order, as retry.Do does for the same outcomes.
func TestCallerFollowsRetryDoOrder(t *testing.T) {
	scripts := []struct {
		name             string
		allow, ready, wd []bool
		failures         int // attempts that fail before one succeeds
	}{
		{name: "all fail", failures: 10},
		{name: "third succeeds", failures: 2},
		{name: "budget refuses", wd: []bool{true, false}, failures: 10},
		{name: "breaker refuses a retry", allow: []bool{true, false}, failures: 10},
		{name: "breaker not ready", ready: []bool{true, false}, failures: 10},
		{name: "breaker refuses the first", allow: []bool{false}},
	}
	for _, sc := range scripts {
		t.Run(sc.name, func(t *testing.T) {
			// retry.Do with an operation failing sc.failures times.
			var want []string
			bud := &logBudget{log: &want, withdraw: slices.Clone(sc.wd)}
			brk := &logBreaker{log: &want, allow: slices.Clone(sc.allow), ready: slices.Clone(sc.ready)}
			n := 0
			pol := retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}, Budget: bud, Breaker: brk,
				Classify: func(error) bool { return true }}
			_ = retry.Run(context.Background(), &pol, func(context.Context) error {
				n++
				if n <= sc.failures {
					return ErrServer
				}
				return nil
			})

			// The simulation: one call to a server failing the same way.
			// Attempts are 10ms apart; an errors window fails the first
			// sc.failures of them.
			var got []string
			sbud := &logBudget{log: &got, withdraw: slices.Clone(sc.wd)}
			sbrk := &logBreaker{log: &got, allow: slices.Clone(sc.allow), ready: slices.Clone(sc.ready)}
			m := Model{
				Clients: 1, Arrival: Arrival{Kind: Periodic, Interval: time.Second}, Duration: time.Second,
				Tiers: []Tier{{Name: "s"}},
			}
			if sc.failures > 0 {
				end := firstCallAt(1) + time.Duration(sc.failures)*10*time.Millisecond - time.Millisecond
				m.Faults = []Fault{{Kind: FaultErrors, Start: 0, End: end, Prob: 1}}
			}
			p := Policy{Name: "p", MaxAttempts: 4,
				Backoff: func(rand.Source) backoff.Strategy { return backoff.Constant{Interval: 10 * time.Millisecond} },
				Budget:  func(Env) retry.Budget { return sbud },
				Breaker: func(Env) retry.Breaker { return sbrk }}
			mustRun(t, m, Single(p), 1)
			if !slices.Equal(got, want) {
				t.Fatalf("simulated caller:\n  %v\nretry.Do:\n  %v", got, want)
			}
		})
	}
}

// firstCallAt returns when the single periodic client of a one-second
// period starts its call with the given seed.
func firstCallAt(seed uint64) time.Duration {
	r := newRunner(&Model{Clients: 1, Arrival: Arrival{Kind: Periodic, Interval: time.Second}, Duration: time.Second, Tiers: []Tier{{}}}, noRetry, seed)
	at, _ := r.s.NextAt()
	return at
}

// On a run whose numbers are known exactly, every metric has its defined
// value: 100 calls/s, 2s in which every attempt fails, two attempts per call.
func TestMetricDefinitionsOnAKnownRun(t *testing.T) {
	m := Model{
		Clients: 10, Arrival: Arrival{Kind: Periodic, Interval: 100 * time.Millisecond},
		Duration: 20 * time.Second, Drain: time.Second,
		Tiers:  []Tier{{Name: "s", Service: Const(time.Millisecond), Latency: Const(time.Millisecond)}},
		Faults: []Fault{{Kind: FaultErrors, Start: 10 * time.Second, End: 12 * time.Second, Prob: 1}},
	}
	x := mustRun(t, m, Single(Policy{Name: "retry once", MaxAttempts: 2}), 4).Metrics
	near := func(what string, got, want, tol float64) {
		t.Helper()
		if math.Abs(got-want) > tol {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	// A call at an edge of the window may fall either side of it (the
	// failure is decided when service ends, 2ms after sending): allow two.
	near("calls", x.Calls, 2000, 0)
	near("succeeded", x.Succeeded, 1800, 2)
	near("success rate", x.SuccessRate, x.Succeeded/2000, 0)
	near("goodput", x.Goodput, x.SuccessInRun*2000/20, 1e-12)
	near("goodput against all successes", x.Goodput, x.Succeeded/20, 0.1) // the last calls end after 20s
	near("attempts", x.Attempts, 2200, 2)
	near("retries", x.Retries, x.Attempts-2000, 0)
	near("attempts per call", x.AttemptsPerCall, x.Attempts/2000, 1e-12)
	near("baseline load", x.BaselineLoad, 100, 0)
	near("peak load", x.PeakLoad, 200, 0)
	near("amplification", x.Amplification, 2, 0)
	near("p50", x.P50ms, 3, 0)
	near("p99", x.P99ms, 6, 0)
	near("recovered", x.Recovered, 1, 0)
	near("recovery", x.RecoveryS, 0, 0.02)
	near("sync share", x.SyncShare, 0, 0)
	if x.PeakConcurrency < 1 || x.PeakQueue != 0 || x.PeakInFlight < 1 {
		t.Errorf("peaks: concurrency %v queue %v in flight %v", x.PeakConcurrency, x.PeakQueue, x.PeakInFlight)
	}
}
