package promretry_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// hedgeScript is an operation whose attempts wait for the test's answer
// or their context.
type hedgeScript struct {
	mu      sync.Mutex
	n       int
	started chan int
	answers [8]chan error
}

func newHedgeScript() *hedgeScript {
	s := &hedgeScript{started: make(chan int, 8)}
	for i := range s.answers {
		s.answers[i] = make(chan error, 1)
	}
	return s
}

func (s *hedgeScript) op(ctx context.Context) (int, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	s.mu.Unlock()
	s.started <- n
	select {
	case err := <-s.answers[n]:
		return n, err
	case <-ctx.Done():
		return n, ctx.Err()
	}
}

// wait waits for attempt n to start (bounded in real time; no clock).
func (s *hedgeScript) wait(t *testing.T, n int) {
	t.Helper()
	select {
	case got := <-s.started:
		if got != n {
			t.Fatalf("attempt %d started, want %d", got, n)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("attempt %d did not start", n)
	}
}

func (s *hedgeScript) noStart(t *testing.T) {
	t.Helper()
	select {
	case n := <-s.started:
		t.Fatalf("attempt %d started early", n)
	default:
	}
}

type doResult struct {
	v   int
	err error
}

func runHedged(h *hedge.Hedger, s *hedgeScript) chan doResult {
	out := make(chan doResult, 1)
	go func() {
		v, err := hedge.Do(context.Background(), h, s.op, nil)
		out <- doResult{v, err}
	}()
	return out
}

func awaitResult(t *testing.T, out chan doResult) doResult {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("hedge.Do did not return")
	}
	return doResult{}
}

// hedges returns stormguard_hedges_total{operation=op} by result:
// started, won, hedge_cancelled, first_cancelled.
func hedges(t *testing.T, g prometheus.Gatherer, op string) [4]float64 {
	t.Helper()
	var out [4]float64
	for i, r := range []string{"started", "won", "hedge_cancelled", "first_cancelled"} {
		out[i] = value(t, g, "stormguard_hedges_total", "operation", op, "result", r)
	}
	return out
}

func hedgePolicy(clk *clocktest.Fake, obs retry.Observer) *retry.Policy {
	return &retry.Policy{Operation: "search", MaxAttempts: 4, Backoff: backoff.Constant{}, Clock: clk, Observer: obs}
}

// TestHedgeMetricsFromDo: a real hedge.Do on a fake clock starts a hedge
// exactly at the delay; the scrape counts it started, the hedge won, and
// the first attempt cancelled; every series exists at zero before.
func TestHedgeMetricsFromDo(t *testing.T) {
	c := promretry.New(promretry.Config{Operations: []string{"search"}})
	reg := registry(t, c)
	if got := hedges(t, reg, "search"); got != [4]float64{} {
		t.Fatalf("before any call: %v", got)
	}
	for _, r := range []string{"budget", "breaker", "attempts", "deadline", "nested", "throttled"} {
		if v := value(t, reg, "stormguard_hedges_refused_total", "operation", "search", "reason", r); v != 0 {
			t.Fatalf("refused{%s} = %v before any call", r, v)
		}
	}
	clk := clocktest.NewFake()
	h := &hedge.Hedger{Policy: hedgePolicy(clk, c), Delay: 50 * time.Millisecond}
	s := newHedgeScript()
	out := runHedged(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(50*time.Millisecond - time.Nanosecond)
	s.noStart(t)
	if got := hedges(t, reg, "search"); got != [4]float64{} {
		t.Fatalf("before the delay: %v", got)
	}
	clk.Advance(time.Nanosecond)
	s.wait(t, 2)
	if got := hedges(t, reg, "search"); got != [4]float64{1, 0, 0, 0} {
		t.Fatalf("at the delay: started, won, hedge_cancelled, first_cancelled = %v, want [1 0 0 0]", got)
	}
	s.answers[2] <- nil
	if r := awaitResult(t, out); r.err != nil || r.v != 2 {
		t.Fatalf("Do = %d, %v; want the hedge's 2", r.v, r.err)
	}
	if got := hedges(t, reg, "search"); got != [4]float64{1, 1, 0, 1} {
		t.Fatalf("after the hedge won: started, won, hedge_cancelled, first_cancelled = %v, want [1 1 0 1]", got)
	}
	// The attempts themselves: two, the hedge counted as a retry; the
	// cancelled first attempt as canceled.
	if v := value(t, reg, "stormguard_attempts_total", "operation", "search", "attempt_kind", "retry", "outcome", "success"); v != 1 {
		t.Errorf("retry successes = %v, want 1", v)
	}
	if v := value(t, reg, "stormguard_attempts_total", "operation", "search", "attempt_kind", "first", "outcome", "canceled"); v != 1 {
		t.Errorf("first attempts canceled = %v, want 1", v)
	}
}

// TestHedgeRefusedByBudget: a budget that refuses stops the hedge, which
// counts under reason="budget"; the first attempt goes on and answers.
func TestHedgeRefusedByBudget(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	clk := clocktest.NewFake()
	p := hedgePolicy(clk, c)
	p.Budget = refuseBudget{}
	h := &hedge.Hedger{Policy: p, Delay: 50 * time.Millisecond}
	s := newHedgeScript()
	out := runHedged(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(50 * time.Millisecond)
	// The refusal runs on the clock's timer, in Advance.
	if v := value(t, reg, "stormguard_hedges_refused_total", "operation", "search", "reason", "budget"); v != 1 {
		t.Fatalf("refused{budget} = %v, want 1", v)
	}
	s.noStart(t)
	s.answers[1] <- nil
	if r := awaitResult(t, out); r.err != nil || r.v != 1 {
		t.Fatalf("Do = %d, %v; want 1", r.v, r.err)
	}
	if got := hedges(t, reg, "search"); got != [4]float64{} {
		t.Fatalf("started, won, hedge_cancelled, first_cancelled = %v, want none", got)
	}
}

// TestHedgeRefusedUnknownReason: a reason this package does not know
// (from a newer core) counts under "unknown", which is exported only once
// it counted something.
func TestHedgeRefusedUnknownReason(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	c.HedgeRefused(t.Context(), hedge.Event{Operation: "op", Reason: retry.ReasonBudget})
	if m := find(t, reg, "stormguard_hedges_refused_total", "operation", "op", "reason", "unknown"); m != nil {
		t.Fatal("unknown reason exported before it counted")
	}
	c.HedgeRefused(t.Context(), hedge.Event{Operation: "op", Reason: retry.Reason(200)})
	c.HedgeRefused(t.Context(), hedge.Event{Operation: "op", Reason: retry.ReasonOverloaded})
	if v := value(t, reg, "stormguard_hedges_refused_total", "operation", "op", "reason", "unknown"); v != 1 {
		t.Fatalf("refused{unknown} = %v, want 1", v)
	}
	if v := value(t, reg, "stormguard_hedges_refused_total", "operation", "op", "reason", "overloaded"); v != 1 {
		t.Fatalf("refused{overloaded} = %v, want 1", v)
	}
	var nilC *promretry.Collector
	nilC.HedgeStarted(t.Context(), hedge.Event{})
	nilC.HedgeWon(t.Context(), hedge.Event{})
	nilC.HedgeCancelled(t.Context(), hedge.Event{})
	nilC.HedgeRefused(t.Context(), hedge.Event{})
}

// TestHedgeEventsAllocs: the hedge events do not allocate once the
// operation has been seen.
func TestHedgeEventsAllocs(t *testing.T) {
	c := promretry.New(promretry.Config{})
	ctx := context.Background()
	events := func() { hedgeEvents(ctx, c) }
	events()
	if n := testing.AllocsPerRun(1000, events); n != 0 {
		t.Errorf("hedge events allocate %v times, want 0", n)
	}
}

func hedgeEvents(ctx context.Context, c *promretry.Collector) {
	e := hedge.Event{Operation: "bench", Attempt: 2, Hedge: true, Delay: time.Millisecond}
	c.HedgeStarted(ctx, e)
	c.HedgeWon(ctx, e)
	e.Attempt, e.Hedge = 1, false
	c.HedgeCancelled(ctx, e)
	e.Reason = retry.ReasonBudget
	c.HedgeRefused(ctx, e)
}

// BenchmarkCollectorHedgeEvents is the Collector's work for one hedge's
// four events (started, won, cancelled, refused).
func BenchmarkCollectorHedgeEvents(b *testing.B) {
	c := promretry.New(promretry.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		hedgeEvents(ctx, c)
	}
}

// TestHedgeCancelledSplitsHedgesAndFirstAttempts: a cancelled hedge and a
// cancelled first attempt (the attempt a hedge hedged) count apart.
func TestHedgeCancelledSplitsHedgesAndFirstAttempts(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	c.HedgeCancelled(t.Context(), hedge.Event{Operation: "op", Attempt: 2, Hedge: true})
	c.HedgeCancelled(t.Context(), hedge.Event{Operation: "op", Attempt: 1})
	c.HedgeCancelled(t.Context(), hedge.Event{Operation: "op", Attempt: 3})
	if got := hedges(t, reg, "op"); got != [4]float64{0, 0, 1, 2} {
		t.Fatalf("started, won, hedge_cancelled, first_cancelled = %v, want [0 0 1 2]", got)
	}
	if m := find(t, reg, "stormguard_hedges_total", "operation", "op", "result", "cancelled"); m != nil {
		t.Fatal(`result="cancelled" still exported`)
	}
}

// TestHedgeDelayGauge: WatchAdaptive exports the Adaptive's current delay
// as stormguard_hedges_delay_seconds{operation}, once it has one; unwatch
// removes it. The exposition passes promtool check metrics.
func TestHedgeDelayGauge(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	clk := clocktest.NewFake()
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: clk})
	unwatch := c.WatchAdaptive("search", a)
	if m := find(t, reg, "stormguard_hedges_delay_seconds", "operation", "search"); m != nil {
		t.Fatal("a delay exported before the Adaptive has one")
	}
	for range 100 {
		a.Observe(40 * time.Millisecond)
	}
	clk.Advance(time.Second)
	d, ok := a.Delay()
	if !ok {
		t.Fatal("no adaptive delay")
	}
	if v := value(t, reg, "stormguard_hedges_delay_seconds", "operation", "search"); v != d.Seconds() {
		t.Fatalf("stormguard_hedges_delay_seconds = %v, want %v", v, d.Seconds())
	}
	promtoolCheckMetrics(t, reg)
	unwatch()
	unwatch()
	if m := find(t, reg, "stormguard_hedges_delay_seconds", "operation", "search"); m != nil {
		t.Fatal("exported after unwatch")
	}
	var nilC *promretry.Collector
	nilC.WatchAdaptive("x", a)()
	c.WatchAdaptive("x", nil)()
}

// promtoolCheckMetrics lints every stormguard_ family of g with promtool check metrics
// (skipped without promtool, except under CI=true).
func promtoolCheckMetrics(t *testing.T, g prometheus.Gatherer) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not installed; CI=true requires it")
		}
		t.Skip("promtool not installed")
	}
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "stormguard_") {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&buf, mf); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = &buf
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}
