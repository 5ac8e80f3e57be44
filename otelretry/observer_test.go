package otelretry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

var errTransient = errors.New("transient")

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

func attemptSpans(h *harness) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.InstrumentationScope().Name == otelretry.ScopeName && strings.HasPrefix(s.Name(), "stormguard.attempt") {
			out = append(out, s)
		}
	}
	return out
}

// TestAttemptSpansUnderCallerSpan is the acceptance test: a call that
// fails twice (an HTTP 503, then a gRPC Unavailable) and succeeds makes
// three attempt spans under the caller's span, with their number, the
// delay before them, their outcome and status codes; the metrics count the
// same attempts and call.
func TestAttemptSpansUnderCallerSpan(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	delays := []time.Duration{100 * time.Millisecond, 250 * time.Millisecond}
	p := &retry.Policy{
		Operation:   "inventory.get",
		MaxAttempts: 3,
		Backoff:     backoff.Func(func(n int, _ time.Duration) time.Duration { return delays[n-1] }),
		Clock:       clk,
		Observer:    h.obs,
	}
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "handler")
	results := []error{
		&httpretry.StatusError{StatusCode: 503},
		status.Error(grpccodes.Unavailable, "downstream unavailable"),
		nil,
	}
	var seen []trace.SpanContext // the span each attempt ran under
	done := make(chan error, 1)
	go func() {
		n := 0
		_, err := retry.Do(ctx, p, func(actx context.Context) (int, error) {
			seen = append(seen, trace.SpanContextFromContext(actx))
			clk.Advance(10 * time.Millisecond)
			n++
			return n, results[n-1]
		})
		done <- err
	}()
	for _, d := range delays {
		clk.BlockUntil(1)
		clk.Advance(d)
	}
	if err := <-done; err != nil {
		t.Fatalf("Do: %v", err)
	}
	parent.End()

	spans := attemptSpans(h)
	if len(spans) != 3 {
		t.Fatalf("%d attempt spans, want 3", len(spans))
	}
	wantDelay := []float64{0, 100, 250}
	wantOutcome := []string{"error", "error", "success"}
	for i, s := range spans {
		if s.Name() != "stormguard.attempt inventory.get" {
			t.Errorf("span %d name %q", i, s.Name())
		}
		if s.SpanKind() != trace.SpanKindInternal {
			t.Errorf("span %d kind %v", i, s.SpanKind())
		}
		if s.Parent().SpanID() != parent.SpanContext().SpanID() || s.SpanContext().TraceID() != parent.SpanContext().TraceID() {
			t.Errorf("span %d is not a child of the caller's span", i)
		}
		if s.SpanContext().SpanID() != seen[i].SpanID() {
			t.Errorf("attempt %d did not run with its span in its context", i+1)
		}
		a := attrs(s)
		if got := a[otelretry.AttrAttempt].AsInt64(); got != int64(i+1) {
			t.Errorf("span %d attempt = %d", i, got)
		}
		if got := a[otelretry.AttrDelayMS].AsFloat64(); got != wantDelay[i] {
			t.Errorf("span %d delay_ms = %v, want %v", i, got, wantDelay[i])
		}
		if got := a[otelretry.AttrOutcome].AsString(); got != wantOutcome[i] {
			t.Errorf("span %d outcome = %q, want %q", i, got, wantOutcome[i])
		}
		if got := a[otelretry.AttrOperation].AsString(); got != "inventory.get" {
			t.Errorf("span %d operation = %q", i, got)
		}
		if i > 0 && s.StartTime().Before(spans[i-1].EndTime()) {
			t.Errorf("span %d starts before span %d ends", i, i-1)
		}
	}
	if got, ok := attrs(spans[0])[otelretry.AttrHTTPStatusCode]; !ok || got.AsInt64() != 503 {
		t.Errorf("first span http.response.status_code = %v", got)
	}
	if got, ok := attrs(spans[1])[otelretry.AttrRPCStatusCode]; !ok || got.AsString() != "UNAVAILABLE" {
		t.Errorf("second span rpc.response.status_code = %v", got)
	}
	for i, want := range []codes.Code{codes.Error, codes.Error, codes.Unset} {
		if got := spans[i].Status().Code; got != want {
			t.Errorf("span %d status %v, want %v", i, got, want)
		}
	}
	if _, ok := attrs(spans[2])[otelretry.AttrHTTPStatusCode]; ok {
		t.Error("the successful attempt has an HTTP status attribute")
	}

	// The caller's span has one event per scheduled retry.
	var events []sdktrace.Event
	for _, s := range h.spans.Ended() {
		if s.SpanContext().SpanID() == parent.SpanContext().SpanID() {
			events = s.Events()
		}
	}
	if len(events) != 2 {
		t.Fatalf("caller span has %d events, want 2 retry_scheduled", len(events))
	}
	for i, e := range events {
		a := map[attribute.Key]attribute.Value{}
		for _, kv := range e.Attributes {
			a[kv.Key] = kv.Value
		}
		if e.Name != "stormguard.retry_scheduled" || a[otelretry.AttrAttempt].AsInt64() != int64(i+2) ||
			a[otelretry.AttrDelayMS].AsFloat64() != wantDelay[i+1] {
			t.Errorf("event %d = %s %v", i, e.Name, e.Attributes)
		}
	}

	// Metrics: the same attempts and call.
	for _, c := range []struct {
		kind, outcome string
		want          float64
	}{{"first", "error", 1}, {"retry", "error", 1}, {"retry", "success", 1}} {
		if got := h.value(t, "stormguard.attempts", op("inventory.get"),
			attribute.String("attempt_kind", c.kind), attribute.String("outcome", c.outcome)); got != c.want {
			t.Errorf("attempts{%s,%s} = %v, want %v", c.kind, c.outcome, got, c.want)
		}
	}
	if _, ok := h.point(t, "stormguard.attempts", attribute.String("attempt_kind", "first"), attribute.String("outcome", "success")); ok {
		t.Error("a first-attempt success was counted")
	}
	if got := h.value(t, "stormguard.calls", op("inventory.get"), attribute.String("outcome", "success")); got != 1 {
		t.Errorf("calls{success} = %v, want 1", got)
	}
	if got := h.value(t, "stormguard.retries.active", op("inventory.get")); got != 0 {
		t.Errorf("retries.active = %v, want 0", got)
	}
	hist := h.metrics(t)["stormguard.call.duration"].Data.(metricdata.Histogram[float64])
	if len(hist.DataPoints) != 1 || hist.DataPoints[0].Count != 1 ||
		hist.DataPoints[0].Sum != (380*time.Millisecond).Seconds() {
		t.Errorf("call.duration = %+v, want one call of 0.38s", hist.DataPoints)
	}
}

// TestRetriesActiveDuringRetry reads the gauge from inside the attempts.
func TestRetriesActiveDuringRetry(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	p := &retry.Policy{Operation: "op", MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: h.obs}
	var during []float64
	n := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		n++
		v, _ := h.point(t, "stormguard.retries.active", op("op"))
		during = append(during, v)
		if n < 3 {
			return 0, errTransient
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if during[0] != 0 || during[1] != 1 || during[2] != 1 {
		t.Errorf("retries.active during attempts = %v, want [0 1 1]", during)
	}
	if got := h.value(t, "stormguard.retries.active", op("op")); got != 0 {
		t.Errorf("retries.active after = %v", got)
	}
}

// TestBudgetAndBreaker drives an outage through a real budget and breaker:
// the budget's refusals and tokens, the breaker's state and transitions,
// and the caller's gave_up events show.
func TestBudgetAndBreaker(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	bud := budget.NewRatio(budget.RatioConfig{MaxTokens: 2})
	brk := breaker.New(breaker.Config{ConsecutiveFailures: 4, OpenTimeout: time.Second, OpenJitter: -1, Clock: clk})
	defer brk.Close()
	defer h.obs.WatchBudget("pay", bud)()
	defer h.obs.WatchBreaker("pay", brk)()
	p := &retry.Policy{Operation: "pay", MaxAttempts: 5, Backoff: backoff.Constant{}, Budget: bud, Breaker: brk, Clock: clk, Observer: h.obs}

	if got := h.value(t, "stormguard.retry_budget.tokens", op("pay")); got != 2 {
		t.Errorf("tokens = %v, want 2", got)
	}
	if got := h.breakerState(t, "pay"); got != "closed" {
		t.Errorf("breaker.state = %v, want closed", got)
	}
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "handler")
	reasons := map[string]float64{}
	for range 3 {
		_, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 0, errTransient })
		var rerr *retry.Error
		if !errors.As(err, &rerr) {
			t.Fatalf("Do: %v", err)
		}
		switch {
		case errors.Is(err, retry.ErrBudgetExhausted):
			reasons["budget"]++
		case errors.Is(err, breaker.ErrOpen):
			reasons["breaker"]++
		default:
			t.Fatalf("unexpected end: %v", err)
		}
	}
	parent.End()
	// Call 1: attempt, 2 retries (tokens 2 -> 0), 3 failures, refused:
	// budget. Call 2: 1 failure (4 in a row: open), Ready refuses: breaker.
	// Call 3: refused at once: breaker.
	if reasons["budget"] != 1 || reasons["breaker"] != 2 {
		t.Fatalf("reasons = %v, want 1 budget and 2 breaker", reasons)
	}
	for reason, want := range reasons {
		if got := h.value(t, "stormguard.calls", op("pay"), attribute.String("outcome", reason)); got != want {
			t.Errorf("calls{%s} = %v, want %v", reason, got, want)
		}
	}
	if got := h.value(t, "stormguard.retry_budget.exhausted", op("pay")); got != 1 {
		t.Errorf("retry_budget.exhausted = %v, want 1", got)
	}
	if got := h.value(t, "stormguard.retry_budget.tokens", op("pay")); got != bud.Available() || got != 0 {
		t.Errorf("tokens = %v, budget has %v", got, bud.Available())
	}
	if got := h.breakerState(t, "pay"); got != "open" {
		t.Errorf("breaker.state = %v, want open", got)
	}
	if got := h.value(t, "stormguard.breaker.transitions", op("pay"),
		attribute.String("from", "closed"), attribute.String("to", "open")); got != 1 {
		t.Errorf("transitions closed->open = %v, want 1", got)
	}
	clk.Advance(time.Second)
	if got := h.breakerState(t, "pay"); got != "half-open" {
		t.Errorf("breaker.state after the open period = %v, want half-open", got)
	}
	if got := h.value(t, "stormguard.breaker.transitions", op("pay"),
		attribute.String("from", "open"), attribute.String("to", "half-open")); got != 1 {
		t.Errorf("transitions open->half-open = %v, want 1", got)
	}

	var gaveUp []string
	for _, s := range h.spans.Ended() {
		if s.SpanContext().SpanID() != parent.SpanContext().SpanID() {
			continue
		}
		for _, e := range s.Events() {
			if e.Name == "stormguard.gave_up" {
				for _, kv := range e.Attributes {
					if kv.Key == otelretry.AttrOutcome {
						gaveUp = append(gaveUp, kv.Value.AsString())
					}
				}
			}
		}
	}
	if len(gaveUp) != 3 || gaveUp[0] != "budget" || gaveUp[1] != "breaker" || gaveUp[2] != "breaker" {
		t.Errorf("gave_up events = %v, want [budget breaker breaker]", gaveUp)
	}
}

// TestObserverEndsOnlyItsOwnSpans: two observers combined with Multi each
// end their own attempt spans, and neither ends the caller's span.
func TestObserverEndsOnlyItsOwnSpans(t *testing.T) {
	h1 := newHarness(t, otelretry.Config{})
	h2 := newHarness(t, otelretry.Config{})
	p := &retry.Policy{Operation: "op", MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: retry.Multi(h1.obs, h2.obs)}
	ctx, parent := h1.tp.Tracer("test").Start(context.Background(), "handler")
	_, _ = retry.Do(ctx, p, func(context.Context) (int, error) { return 0, errTransient })
	if n := len(attemptSpans(h1)); n != 2 {
		t.Errorf("first observer ended %d spans, want 2", n)
	}
	if n := len(attemptSpans(h2)); n != 2 {
		t.Errorf("second observer ended %d spans, want 2", n)
	}
	for _, s := range h1.spans.Ended() {
		if s.SpanContext().SpanID() == parent.SpanContext().SpanID() {
			t.Error("the caller's span was ended by the observer")
		}
	}
	parent.End()
	// The second observer's spans are children of the first's.
	first := attemptSpans(h1)
	for i, s := range attemptSpans(h2) {
		if s.Parent().SpanID() != first[i].SpanContext().SpanID() {
			t.Errorf("span %d of the second observer is not under the first's", i)
		}
	}
}

func TestNoParentSpan(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	p := &retry.Policy{Operation: "op", MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: h.obs}
	_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errTransient })
	spans := attemptSpans(h)
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	// Without a caller span the call gets one (retry.CallStarter): both
	// attempts are its children, in one trace, and it is a root.
	var call sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == "stormguard.call op" {
			call = s
		}
	}
	if call == nil || call.Parent().IsValid() {
		t.Fatalf("call span %v, want one root call span", call)
	}
	for _, s := range spans {
		if s.Parent().SpanID() != call.SpanContext().SpanID() {
			t.Error("attempt span is not under the call span")
		}
	}
}

func TestErrorAttributesHook(t *testing.T) {
	h := newHarness(t, otelretry.Config{ErrorAttributes: func(err error) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("app.error", err.Error())}
	}})
	p := &retry.Policy{Operation: "op", MaxAttempts: 1, Observer: h.obs}
	_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errTransient })
	spans := attemptSpans(h)
	if len(spans) != 1 || attrs(spans[0])["app.error"].AsString() != "transient" {
		t.Errorf("hook attribute missing: %v", spans)
	}
}

func TestOperationBounds(t *testing.T) {
	h := newHarness(t, otelretry.Config{MaxOperations: 1})
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c", ""} {
		h.obs.CallEnd(ctx, retry.CallEnd{Operation: name, Attempts: 1})
	}
	if got := h.value(t, "stormguard.calls", op("a")); got != 1 {
		t.Errorf("calls{a} = %v", got)
	}
	if got := h.value(t, "stormguard.calls", op(otelretry.OverflowOperation)); got != 3 {
		t.Errorf("calls{_other} = %v, want 3", got)
	}
	// Spans keep the real name even past the bound.
	ctx = h.obs.AttemptStart(ctx, retry.AttemptStart{Operation: "b", Attempt: 1})
	h.obs.AttemptEnd(ctx, retry.AttemptEnd{Operation: "b", Attempt: 1})
	ctx = h.obs.AttemptStart(context.Background(), retry.AttemptStart{Operation: "", Attempt: 1})
	h.obs.AttemptEnd(ctx, retry.AttemptEnd{Operation: "", Attempt: 1})
	spans := attemptSpans(h)
	if len(spans) != 2 || spans[0].Name() != "stormguard.attempt b" || attrs(spans[0])[otelretry.AttrOperation].AsString() != "b" {
		t.Errorf("span of an overflowed operation: %v", spans)
	}
	if len(spans) == 2 && spans[1].Name() != "stormguard.attempt "+otelretry.UnnamedOperation {
		t.Errorf("span of an unnamed operation: %q", spans[1].Name())
	}
}

func TestNilObserver(t *testing.T) {
	var o *otelretry.Observer
	p := &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: o}
	if _, err := retry.Do(context.Background(), p, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	o.WatchBudget("x", budget.NewRatio(budget.RatioConfig{}))()
	o.WatchBreaker("x", nil)()
	o.QueueDropped("q", "full", 1)
	o.QueueDepth("q", 1)
	o.RetryScheduled(context.Background(), retry.RetryScheduled{})
}

func TestQueueMetrics(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	h.obs.QueueDropped("events", "full", 3)
	h.obs.QueueDropped("events", "closed", 2)
	h.obs.QueueDropped("events", "full", 0)
	h.obs.QueueDepth("events", 7)
	q := attribute.String("queue", "events")
	if got := h.value(t, "stormguard.queue.dropped_records", q); got != 5 {
		t.Errorf("dropped = %v, want 5", got)
	}
	if got := h.value(t, "stormguard.queue.depth", q); got != 7 {
		t.Errorf("depth = %v, want 7", got)
	}
}

// TestQueueBounds: queue names are bounded by MaxOperations too, apart
// from operation names.
func TestQueueBounds(t *testing.T) {
	h := newHarness(t, otelretry.Config{MaxOperations: 1})
	h.obs.CallEnd(context.Background(), retry.CallEnd{Operation: "op", Attempts: 1})
	h.obs.QueueDepth("events", 1)
	h.obs.QueueDepth("audit", 2)
	h.obs.QueueDropped("", "full", 3)
	q := func(name string) attribute.KeyValue { return attribute.String("queue", name) }
	if got := h.value(t, "stormguard.queue.depth", q("events")); got != 1 {
		t.Errorf("depth{events} = %v, want 1", got)
	}
	if got := h.value(t, "stormguard.queue.depth", q(otelretry.OverflowOperation)); got != 2 {
		t.Errorf("depth{_other} = %v, want 2", got)
	}
	if got := h.value(t, "stormguard.queue.dropped_records", q(otelretry.OverflowOperation)); got != 3 {
		t.Errorf("dropped{_other} = %v, want 3", got)
	}
}

// TestUnknownOutcomeAndReason: outcomes and reasons from a newer core are
// counted as "unknown".
func TestUnknownOutcomeAndReason(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	ctx := context.Background()
	h.obs.AttemptEnd(ctx, retry.AttemptEnd{Operation: "op", Attempt: 2, Outcome: retry.Outcome(200)})
	h.obs.CallEnd(ctx, retry.CallEnd{Operation: "op", Attempts: 2, Reason: retry.Reason(200)})
	if got := h.value(t, "stormguard.attempts", op("op"), attribute.String("attempt_kind", "retry"),
		attribute.String("outcome", "unknown")); got != 1 {
		t.Errorf("attempts{retry,unknown} = %v, want 1", got)
	}
	if got := h.value(t, "stormguard.calls", op("op"), attribute.String("outcome", "unknown")); got != 1 {
		t.Errorf("calls{unknown} = %v, want 1", got)
	}
}

type tokens struct{ v float64 }

func (t *tokens) Available() float64  { return t.v }
func (t *tokens) Record(bool, error)  {}
func (t *tokens) Withdraw(error) bool { return true }

// bareBudget is a retry.Budget that exposes nothing more (a Redis-backed
// or user budget without Available).
type bareBudget struct{}

func (bareBudget) Record(bool, error)  {}
func (bareBudget) Withdraw(error) bool { return false }

// stateOnly is a breaker that reports its state but no state changes.
type stateOnly struct{ st breaker.State }

func (s stateOnly) Allow() (func(error), error) { return func(error) {}, nil }
func (s stateOnly) Ready() error                { return nil }
func (s stateOnly) State() breaker.State        { return s.st }

// bareBreaker is a retry.Breaker that exposes nothing more.
type bareBreaker struct{}

func (bareBreaker) Allow() (func(error), error) { return func(error) {}, nil }
func (bareBreaker) Ready() error                { return nil }

// TestWatchDegradesGracefully (issue #25 papercut 6): WatchBudget and
// WatchBreaker take the retry interfaces and report what each budget or
// breaker can tell, without a type assertion that could panic.
func TestWatchDegradesGracefully(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	defer h.obs.WatchBudget("bare", bareBudget{})()
	defer h.obs.WatchBreaker("state-only", stateOnly{breaker.Open})()
	defer h.obs.WatchBreaker("bare", bareBreaker{})()
	if _, ok := h.point(t, "stormguard.retry_budget.tokens", op("bare")); ok {
		t.Error("tokens reported for a budget without Available")
	}
	if got := h.value(t, "stormguard.breaker.state", op("state-only"), attribute.String("state", "open")); got != 1 {
		t.Errorf("state-only breaker: open = %v, want 1", got)
	}
	if _, ok := h.point(t, "stormguard.breaker.state", op("bare")); ok {
		t.Error("state reported for a breaker without State")
	}
}

func TestWatchReplaceAndUnwatch(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	b1, b2 := &tokens{1}, &tokens{2}
	unwatch1 := h.obs.WatchBudget("op", b1)
	unwatch2 := h.obs.WatchBudget("op", b2)
	unwatch1() // no longer the watched one: leaves b2 alone
	if got := h.value(t, "stormguard.retry_budget.tokens", op("op")); got != 2 {
		t.Errorf("tokens = %v, want the replacing budget's 2", got)
	}
	unwatch2()
	unwatch2()
	if _, ok := h.point(t, "stormguard.retry_budget.tokens", op("op")); ok {
		t.Error("tokens still reported after unwatch")
	}

	brk := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: clk})
	defer brk.Close()
	unwatch := h.obs.WatchBreaker("op", brk)
	done, err := brk.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errTransient) // closed -> open
	unwatch()
	unwatch()
	clk.Advance(time.Second)
	_ = brk.State() // open -> half-open, after unwatch: not counted
	if got := h.value(t, "stormguard.breaker.transitions", op("op"), attribute.String("to", "open")); got != 1 {
		t.Errorf("closed->open = %v, want 1", got)
	}
	if _, ok := h.point(t, "stormguard.breaker.transitions", op("op"), attribute.String("to", "half-open")); ok {
		t.Error("a transition after unwatch was counted")
	}
	if _, ok := h.point(t, "stormguard.breaker.state", op("op")); ok {
		t.Error("breaker state still reported after unwatch")
	}
}

// The Observer is a queue.Observer.
var _ queue.Observer = (*otelretry.Observer)(nil)

// TestCallOutcomeValues: every reason of the core, panic and advice
// included, is counted under its own outcome value.
func TestCallOutcomeValues(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	ctx := context.Background()
	names := []string{"success", "attempts", "budget", "breaker", "permanent", "context", "deadline", "panic", "advice",
		"nested", "overloaded", "throttled"}
	if got := retry.Reason(len(names)).String(); got != "unknown" {
		t.Fatalf("the core defines a reason past this list (%q): add it here and to the Observer", got)
	}
	for r := range names {
		h.obs.CallEnd(ctx, retry.CallEnd{Operation: "op", Attempts: 1, Reason: retry.Reason(r)})
	}
	for _, name := range names {
		if got := h.value(t, "stormguard.calls", op("op"), attribute.String("outcome", name)); got != 1 {
			t.Errorf("calls{outcome=%q} = %v, want 1", name, got)
		}
	}
	if _, ok := h.point(t, "stormguard.calls", attribute.String("outcome", "unknown")); ok {
		t.Error("a known reason was counted as unknown")
	}
}

// refuseLimiter refuses every attempt.
type refuseLimiter struct{}

func (refuseLimiter) Acquire(context.Context, bool) (func(error), error) {
	return nil, errors.New("test: throttled")
}

// TestLayerReasonsCounted (issue #25 item 6): real calls stopped by the
// layer rule, an "overloaded; don't retry" answer and the client-side
// limiter are counted as calls{outcome="nested"|"overloaded"|"throttled"},
// and the gave_up event names the same reason.
func TestLayerReasonsCounted(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	fail := errors.New("connection reset")
	p := &retry.Policy{Operation: "op", MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: h.obs}
	nested := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	if err := retry.Run(nested, p, func(context.Context) error { return fail }); !errors.Is(err, retry.ErrNestedRetry) {
		t.Fatalf("nested: %v", err)
	}
	if err := retry.Run(context.Background(), p, func(context.Context) error { return retry.Overloaded(fail) }); !errors.Is(err, retry.ErrOverloaded) {
		t.Fatalf("overloaded: %v", err)
	}
	p.Limiter = refuseLimiter{}
	if err := retry.Run(context.Background(), p, func(context.Context) error { return nil }); err == nil {
		t.Fatal("throttled: the limiter's refusal was not returned")
	}
	for _, name := range []string{"nested", "overloaded", "throttled"} {
		if got := h.value(t, "stormguard.calls", op("op"), attribute.String("outcome", name)); got != 1 {
			t.Errorf("calls{outcome=%q} = %v, want 1", name, got)
		}
	}
	if _, ok := h.point(t, "stormguard.calls", attribute.String("outcome", "unknown")); ok {
		t.Error("a layer reason was counted as unknown")
	}
}
