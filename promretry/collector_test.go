package promretry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

var errTransient = errors.New("transient")

func TestCollectorCountsAttemptsCallsAndDurations(t *testing.T) {
	clk := clocktest.NewFake()
	c := promretry.New(promretry.Config{})
	p := newPolicy("get", clk, c)
	ctx := context.Background()

	// Two failures, then success: 125ms + 125ms + 250ms.
	if _, err := retry.Do(ctx, p, scripted(clk,
		step{125 * time.Millisecond, errTransient},
		step{125 * time.Millisecond, errTransient},
		step{250 * time.Millisecond, nil})); err != nil {
		t.Fatalf("call 1: %v", err)
	}
	// A permanent error on the first attempt: 7.8125ms.
	if _, err := retry.Do(ctx, p, scripted(clk,
		step{7812500 * time.Nanosecond, retry.Permanent(errTransient)})); err == nil {
		t.Fatal("call 2 succeeded")
	}
	// Four failures: MaxAttempts reached, no time passes.
	if _, err := retry.Do(ctx, p, scripted(clk,
		step{0, errTransient}, step{0, errTransient}, step{0, errTransient}, step{0, errTransient})); !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Fatalf("call 3: %v", err)
	}

	const want = `
# HELP stormguard_attempts_total Attempts made by stormguard calls, by kind (first or retry) and outcome.
# TYPE stormguard_attempts_total counter
stormguard_attempts_total{attempt_kind="first",operation="get",outcome="canceled"} 0
stormguard_attempts_total{attempt_kind="first",operation="get",outcome="error"} 2
stormguard_attempts_total{attempt_kind="first",operation="get",outcome="permanent_error"} 1
stormguard_attempts_total{attempt_kind="first",operation="get",outcome="success"} 0
stormguard_attempts_total{attempt_kind="first",operation="get",outcome="timeout"} 0
stormguard_attempts_total{attempt_kind="retry",operation="get",outcome="canceled"} 0
stormguard_attempts_total{attempt_kind="retry",operation="get",outcome="error"} 4
stormguard_attempts_total{attempt_kind="retry",operation="get",outcome="permanent_error"} 0
stormguard_attempts_total{attempt_kind="retry",operation="get",outcome="success"} 1
stormguard_attempts_total{attempt_kind="retry",operation="get",outcome="timeout"} 0
# HELP stormguard_calls_total Calls that returned, by outcome: success or the reason the call gave up.
# TYPE stormguard_calls_total counter
stormguard_calls_total{operation="get",outcome="advice"} 0
stormguard_calls_total{operation="get",outcome="attempts"} 1
stormguard_calls_total{operation="get",outcome="breaker"} 0
stormguard_calls_total{operation="get",outcome="budget"} 0
stormguard_calls_total{operation="get",outcome="context"} 0
stormguard_calls_total{operation="get",outcome="deadline"} 0
stormguard_calls_total{operation="get",outcome="nested"} 0
stormguard_calls_total{operation="get",outcome="overloaded"} 0
stormguard_calls_total{operation="get",outcome="panic"} 0
stormguard_calls_total{operation="get",outcome="permanent"} 1
stormguard_calls_total{operation="get",outcome="success"} 1
stormguard_calls_total{operation="get",outcome="throttled"} 0
# HELP stormguard_call_duration_seconds Duration of whole calls, every attempt and wait included, in seconds.
# TYPE stormguard_call_duration_seconds histogram
stormguard_call_duration_seconds_bucket{operation="get",le="0.005"} 1
stormguard_call_duration_seconds_bucket{operation="get",le="0.01"} 2
stormguard_call_duration_seconds_bucket{operation="get",le="0.025"} 2
stormguard_call_duration_seconds_bucket{operation="get",le="0.05"} 2
stormguard_call_duration_seconds_bucket{operation="get",le="0.1"} 2
stormguard_call_duration_seconds_bucket{operation="get",le="0.25"} 2
stormguard_call_duration_seconds_bucket{operation="get",le="0.5"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="1"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="2.5"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="5"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="10"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="30"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="60"} 3
stormguard_call_duration_seconds_bucket{operation="get",le="+Inf"} 3
stormguard_call_duration_seconds_sum{operation="get"} 0.5078125
stormguard_call_duration_seconds_count{operation="get"} 3
# HELP stormguard_retries_active Calls whose first attempt ended and that have not returned: waiting for a retry, running one, deciding to give up, or (hedged) waiting for cancelled copies.
# TYPE stormguard_retries_active gauge
stormguard_retries_active{operation="get"} 0
# HELP stormguard_retry_budget_exhausted_total Calls that stopped because the retry budget refused a retry.
# TYPE stormguard_retry_budget_exhausted_total counter
stormguard_retry_budget_exhausted_total{operation="get"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"stormguard_attempts_total", "stormguard_calls_total", "stormguard_call_duration_seconds",
		"stormguard_retries_active", "stormguard_retry_budget_exhausted_total"); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorRetriesActive checks the gauge during a call's retries and
// after it returns, whatever way it returns.
func TestCollectorRetriesActive(t *testing.T) {
	clk := clocktest.NewFake()
	c := promretry.New(promretry.Config{Operations: []string{"op"}})
	reg := registry(t, c)
	active := func() float64 { return value(t, reg, "stormguard_retries_active", "operation", "op") }

	var during []float64
	p := newPolicy("op", clk, c)
	n := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		n++
		during = append(during, active())
		if n < 3 {
			return 0, errTransient
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []float64{0, 1, 1}; !equalFloats(during, want) {
		t.Errorf("retries_active during attempts = %v, want %v", during, want)
	}
	if got := active(); got != 0 {
		t.Errorf("retries_active after the call = %v, want 0", got)
	}

	// A call that is refused by its budget after one attempt never counted.
	p.Budget = refuseBudget{}
	if _, err := retry.Do(context.Background(), p, scripted(clk, step{0, errTransient})); !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("budget call: %v", err)
	}
	// A call canceled while waiting for its second attempt never counted.
	p.Budget = nil
	ctx, cancel := context.WithCancel(context.Background())
	p.Backoff = nil // default backoff: waits on the fake clock
	done := make(chan error)
	go func() {
		_, err := retry.Do(ctx, p, scripted(clk, step{0, errTransient}))
		done <- err
	}()
	clk.BlockUntil(1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled call: %v", err)
	}
	if got := active(); got != 0 {
		t.Errorf("retries_active after refused and canceled calls = %v, want 0", got)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// refuseBudget refuses every retry.
type refuseBudget struct{}

func (refuseBudget) Record(bool, error)           {}
func (refuseBudget) Withdraw(error) bool          { return false }
func (refuseBudget) Available() float64           { return 0 }
func (refuseBudget) String() string               { return "refuse" }
func (refuseBreaker) Ready() error                { return errOpen }
func (refuseBreaker) Allow() (func(error), error) { return nil, errOpen }

// refuseBreaker refuses every attempt.
type refuseBreaker struct{}

var errOpen = errors.New("test: breaker open")

// refuseLimiter refuses every attempt.
type refuseLimiter struct{}

var errThrottled = errors.New("test: throttled")

func (refuseLimiter) Acquire(context.Context, bool) (func(error), error) { return nil, errThrottled }

// allReasons returns the label of every retry.Reason the core defines: a
// reason added to the core and not to the Collector's table fails the
// tests that expect each one at zero.
func allReasons() []string {
	var out []string
	for r := retry.Reason(0); r.String() != "unknown"; r++ {
		out = append(out, r.String())
	}
	return out
}

// TestCollectorGiveUpReasons drives one call per way Do can give up and
// checks calls_total{outcome}, the attempt outcome and the budget counter.
func TestCollectorGiveUpReasons(t *testing.T) {
	tests := []struct {
		name        string
		setup       func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error))
		reason      string
		attemptKind string // of the last attempt ("" if none ran)
		outcome     string
		exhausted   float64
	}{
		{
			name: "success",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				return context.Background(), scripted(clk)
			},
			reason: "success", attemptKind: "first", outcome: "success",
		},
		{
			name: "attempts",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.MaxAttempts = 2
				return context.Background(), scripted(clk, step{0, errTransient}, step{0, errTransient})
			},
			reason: "attempts", attemptKind: "retry", outcome: "error",
		},
		{
			name: "budget",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.Budget = refuseBudget{}
				return context.Background(), scripted(clk, step{0, errTransient})
			},
			reason: "budget", attemptKind: "first", outcome: "error", exhausted: 1,
		},
		{
			name: "breaker",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.Breaker = refuseBreaker{}
				return context.Background(), scripted(clk)
			},
			reason: "breaker",
		},
		{
			name: "permanent",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				return context.Background(), scripted(clk, step{0, retry.Permanent(errTransient)})
			},
			reason: "permanent", attemptKind: "first", outcome: "permanent_error",
		},
		{
			name: "context",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				ctx, cancel := context.WithCancel(context.Background())
				return ctx, func(context.Context) (int, error) {
					cancel()
					return 0, context.Canceled
				}
			},
			reason: "context", attemptKind: "first", outcome: "canceled",
		},
		{
			name: "deadline",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.MaxElapsed = time.Second
				return context.Background(), scripted(clk, step{2 * time.Second, errTransient})
			},
			reason: "deadline", attemptKind: "first", outcome: "error",
		},
		{
			name: "advice",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.MaxRetryAfter = time.Second
				return context.Background(), scripted(clk, step{0, retry.After(errTransient, time.Minute)})
			},
			reason: "advice", attemptKind: "first", outcome: "error",
		},
		{
			name: "panic",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				return context.Background(), nil // driven through retry.Call below
			},
			reason: "panic", attemptKind: "first", outcome: "error",
		},
		{ // issue #25 item 6: the layer rule stops the retry
			name: "nested",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
				return ctx, scripted(clk, step{0, errTransient})
			},
			reason: "nested", attemptKind: "first", outcome: "error",
		},
		{ // the downstream said "overloaded; don't retry"
			name: "overloaded",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				return context.Background(), scripted(clk, step{0, retry.Overloaded(errTransient)})
			},
			reason: "overloaded", attemptKind: "first", outcome: "permanent_error",
		},
		{ // the client-side limiter refused the first attempt
			name: "throttled",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.Limiter = refuseLimiter{}
				return context.Background(), scripted(clk)
			},
			reason: "throttled",
		},
		{
			name: "timeout",
			setup: func(p *retry.Policy, clk *clocktest.Fake) (context.Context, func(context.Context) (int, error)) {
				p.MaxAttempts = 1
				p.AttemptTimeout = time.Second
				return context.Background(), scripted(clk, step{2 * time.Second, nil})
			},
			reason: "attempts", attemptKind: "first", outcome: "timeout",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktest.NewFake()
			c := promretry.New(promretry.Config{})
			reg := registry(t, c)
			p := newPolicy("op", clk, c)
			ctx, op := tt.setup(p, clk)
			if op == nil {
				panicInAttempt(t, ctx, p)
			} else {
				_, _ = retry.Do(ctx, p, op)
			}

			for _, reason := range allReasons() {
				want := 0.0
				if reason == tt.reason {
					want = 1
				}
				if got := value(t, reg, "stormguard_calls_total", "operation", "op", "outcome", reason); got != want {
					t.Errorf("calls_total{outcome=%q} = %v, want %v", reason, got, want)
				}
			}
			if tt.attemptKind != "" {
				if got := value(t, reg, "stormguard_attempts_total", "operation", "op",
					"attempt_kind", tt.attemptKind, "outcome", tt.outcome); got != 1 {
					t.Errorf("attempts_total{%s,%s} = %v, want 1", tt.attemptKind, tt.outcome, got)
				}
			}
			if got := value(t, reg, "stormguard_retry_budget_exhausted_total", "operation", "op"); got != tt.exhausted {
				t.Errorf("retry_budget_exhausted_total = %v, want %v", got, tt.exhausted)
			}
			if got := value(t, reg, "stormguard_call_duration_seconds", "operation", "op"); got != 1 {
				t.Errorf("call_duration_seconds count = %v, want 1", got)
			}
		})
	}
}

func TestCollectorBoundsOperations(t *testing.T) {
	c := promretry.New(promretry.Config{MaxOperations: 2})
	reg := registry(t, c)
	ctx := context.Background()
	for _, op := range []string{"a", "b", "c", "d", "a", "", "\xff"} {
		c.CallEnd(ctx, retry.CallEnd{Operation: op, Attempts: 1})
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "stormguard_calls_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "outcome") == "success" {
				got[labelValue(m, "operation")] = m.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{"a": 2, "b": 1, promretry.OverflowOperation: 4}
	if len(got) != len(want) {
		t.Fatalf("operations = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("calls_total{operation=%q} = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestCollectorOperationLabels(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	ctx := context.Background()
	c.CallEnd(ctx, retry.CallEnd{Operation: ""})
	c.CallEnd(ctx, retry.CallEnd{Operation: "bad\xffname"})
	if got := value(t, reg, "stormguard_calls_total", "operation", promretry.UnnamedOperation, "outcome", "success"); got != 1 {
		t.Errorf("unnamed operation count = %v, want 1", got)
	}
	if got := value(t, reg, "stormguard_calls_total", "operation", "bad\uFFFDname", "outcome", "success"); got != 1 {
		t.Errorf("invalid UTF-8 operation count = %v, want 1", got)
	}
}

func TestCollectorConfig(t *testing.T) {
	c := promretry.New(promretry.Config{
		Namespace:   "payments",
		ConstLabels: prometheus.Labels{"service": "checkout"},
		Buckets:     []float64{1, 2},
	})
	c.CallEnd(context.Background(), retry.CallEnd{Operation: "charge", Attempts: 1, Duration: 1500 * time.Millisecond})
	const want = `
# HELP payments_call_duration_seconds Duration of whole calls, every attempt and wait included, in seconds.
# TYPE payments_call_duration_seconds histogram
payments_call_duration_seconds_bucket{operation="charge",service="checkout",le="1"} 0
payments_call_duration_seconds_bucket{operation="charge",service="checkout",le="2"} 1
payments_call_duration_seconds_bucket{operation="charge",service="checkout",le="+Inf"} 1
payments_call_duration_seconds_sum{operation="charge",service="checkout"} 1.5
payments_call_duration_seconds_count{operation="charge",service="checkout"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "payments_call_duration_seconds"); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc, 256) // more than Describe sends: it must not block
	c.Describe(ch)
	close(ch)
	n := 0
	for d := range ch {
		n++
		if s := d.String(); !strings.Contains(s, `fqName: "payments_`) || !strings.Contains(s, `service="checkout"`) {
			t.Errorf("descriptor without namespace or const label: %s", s)
		}
	}
	if n != 37 {
		t.Errorf("Describe sent %d descriptors, want 37 (the ten of DESIGN.md, the two config metrics, queue_refused_total, the six limiter metrics, the two hedge metrics, the hedge delay gauge, limiter_info, breaker_info, the five keyed-group metrics, the three keyed hedge delay metrics and the five admission metrics)", n)
	}
}

func TestNilCollector(t *testing.T) {
	var c *promretry.Collector
	p := &retry.Policy{MaxAttempts: 2, Observer: c}
	if _, err := retry.Do(context.Background(), p, scripted(clocktest.NewFake(), step{0, errTransient})); err != nil {
		t.Fatal(err)
	}
	c.QueueDropped("q", "full", 1)
	c.QueueDepth("q", 1)
	c.WatchBudget("op", refuseBudget{})()
}

func TestCollectorQueues(t *testing.T) {
	c := promretry.New(promretry.Config{})
	c.QueueDropped("events", "full", 3)
	c.QueueDropped("events", "expired", 2)
	c.QueueDropped("events", "full", 0)
	c.QueueDepth("events", 7)
	c.QueueDepth("audit", 1)
	c.QueueDepth("audit", 0)
	const want = `
# HELP stormguard_queue_depth Records waiting in a background retry queue.
# TYPE stormguard_queue_depth gauge
stormguard_queue_depth{queue="audit"} 0
stormguard_queue_depth{queue="events"} 7
# HELP stormguard_queue_dropped_records_total Records a background retry queue dropped.
# TYPE stormguard_queue_dropped_records_total counter
stormguard_queue_dropped_records_total{queue="audit"} 0
stormguard_queue_dropped_records_total{queue="events"} 5
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"stormguard_queue_depth", "stormguard_queue_dropped_records_total"); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorBoundsQueues: queue names are bounded by MaxOperations too,
// apart from operation names.
func TestCollectorBoundsQueues(t *testing.T) {
	c := promretry.New(promretry.Config{MaxOperations: 2, Operations: []string{"x", "y"}})
	c.QueueDepth("events", 1)
	c.QueueDepth("", 2)
	c.QueueDropped("audit", "full", 3)
	c.QueueDropped("events", "full", 1)
	const want = `
# HELP stormguard_queue_depth Records waiting in a background retry queue.
# TYPE stormguard_queue_depth gauge
stormguard_queue_depth{queue="_other"} 0
stormguard_queue_depth{queue="events"} 1
stormguard_queue_depth{queue="unnamed"} 2
# HELP stormguard_queue_dropped_records_total Records a background retry queue dropped.
# TYPE stormguard_queue_dropped_records_total counter
stormguard_queue_dropped_records_total{queue="_other"} 3
stormguard_queue_dropped_records_total{queue="events"} 1
stormguard_queue_dropped_records_total{queue="unnamed"} 0
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want),
		"stormguard_queue_depth", "stormguard_queue_dropped_records_total"); err != nil {
		t.Fatal(err)
	}
}

// tokens is a budget whose level the test sets.
type tokens struct{ v float64 }

func (t *tokens) Available() float64  { return t.v }
func (t *tokens) Record(bool, error)  {}
func (t *tokens) Withdraw(error) bool { return true }

func TestCollectorWatchBudget(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	b := &tokens{v: 10}
	unwatch := c.WatchBudget("get", b)
	if got := value(t, reg, "stormguard_retry_budget_tokens", "operation", "get"); got != 10 {
		t.Errorf("tokens = %v, want 10", got)
	}
	b.v = 2.5
	if got := value(t, reg, "stormguard_retry_budget_tokens", "operation", "get"); got != 2.5 {
		t.Errorf("tokens after spending = %v, want 2.5", got)
	}
	// Watching another budget under the same name replaces the first, and
	// the first watch's unwatch no longer removes it.
	b2 := &tokens{v: 4}
	unwatch2 := c.WatchBudget("get", b2)
	unwatch()
	if got := value(t, reg, "stormguard_retry_budget_tokens", "operation", "get"); got != 4 {
		t.Errorf("tokens after replacing = %v, want 4", got)
	}
	unwatch2()
	unwatch2()
	if m := find(t, reg, "stormguard_retry_budget_tokens"); m != nil {
		t.Errorf("series left after unwatch: %v", m)
	}
	// The operation's other series exist from the watch on.
	if got := value(t, reg, "stormguard_calls_total", "operation", "get", "outcome", "budget"); got != 0 {
		t.Errorf("calls_total{budget} = %v, want 0", got)
	}
}

func TestCollectorDeclaredOperationsAndUnknownValues(t *testing.T) {
	c := promretry.New(promretry.Config{Operations: []string{"declared"}})
	reg := registry(t, c)
	// Declared operations are exported at zero before any call.
	if got := value(t, reg, "stormguard_calls_total", "operation", "declared", "outcome", "breaker"); got != 0 {
		t.Errorf("declared calls_total = %v", got)
	}
	if got := value(t, reg, "stormguard_call_duration_seconds", "operation", "declared"); got != 0 {
		t.Errorf("declared histogram count = %v", got)
	}
	if m := find(t, reg, "stormguard_calls_total", "outcome", "unknown"); m != nil {
		t.Errorf("unknown outcome exported before it was seen: %v", m)
	}
	// Outcomes and reasons from a newer core are counted as "unknown".
	ctx := context.Background()
	c.AttemptEnd(ctx, retry.AttemptEnd{Operation: "declared", Attempt: 2, Outcome: retry.Outcome(200)})
	c.CallEnd(ctx, retry.CallEnd{Operation: "declared", Attempts: 2, Reason: retry.Reason(200)})
	if got := value(t, reg, "stormguard_attempts_total", "operation", "declared", "attempt_kind", "retry", "outcome", "unknown"); got != 1 {
		t.Errorf("unknown attempt outcome = %v, want 1", got)
	}
	if got := value(t, reg, "stormguard_calls_total", "operation", "declared", "outcome", "unknown"); got != 1 {
		t.Errorf("unknown call reason = %v, want 1", got)
	}
}

// The Collector is a queue.Observer.
var _ queue.Observer = (*promretry.Collector)(nil)

// panicInAttempt runs one call under p whose first attempt panics, as an
// adapter reports it (retry.Call.Panic, then the panic goes on), and
// recovers the panic.
func panicInAttempt(t *testing.T, ctx context.Context, p *retry.Policy) {
	t.Helper()
	call := retry.NewCall(ctx, p)
	a, err := call.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if v := recover(); v != "boom" {
			t.Errorf("recovered %v, want boom", v)
		}
	}()
	defer func() {
		if v := recover(); v != nil {
			call.Panic(&a, v)
			panic(v)
		}
	}()
	panic("boom")
}
