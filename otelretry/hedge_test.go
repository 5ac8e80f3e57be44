package otelretry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/otelretry"
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

func runHedged(ctx context.Context, h *hedge.Hedger, s *hedgeScript) chan doResult {
	out := make(chan doResult, 1)
	go func() {
		v, err := hedge.Do(ctx, h, s.op, nil)
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

func eventNames(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		out = append(out, e.Name)
	}
	return out
}

// TestHedgeSpansAndMetrics: a real hedge.Do on a fake clock starts a hedge
// exactly at the delay, under the caller's span like every attempt; the
// hedge's span is marked stormguard.hedge=true with hedge.started (the
// delay) and hedge.won, the first attempt's span has hedge.cancelled and
// no Error status, and the counters say started, won, first_cancelled.
func TestHedgeSpansAndMetrics(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	p := &retry.Policy{Operation: "search", MaxAttempts: 4, Backoff: backoff.Constant{}, Clock: clk, Observer: h.obs}
	hd := &hedge.Hedger{Policy: p, Delay: 50 * time.Millisecond}
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "handler")
	s := newHedgeScript()
	out := runHedged(ctx, hd, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(50*time.Millisecond - time.Nanosecond)
	s.noStart(t)
	if _, ok := h.point(t, "stormguard.hedges", op("search"), attribute.String("result", "started")); ok {
		t.Fatal("a hedge counted before the delay")
	}
	clk.Advance(time.Nanosecond)
	s.wait(t, 2)
	if v := h.value(t, "stormguard.hedges", op("search"), attribute.String("result", "started")); v != 1 {
		t.Fatalf("hedges{started} = %v at the delay, want 1", v)
	}
	s.answers[2] <- nil
	if r := awaitResult(t, out); r.err != nil || r.v != 2 {
		t.Fatalf("Do = %d, %v; want the hedge's 2", r.v, r.err)
	}
	parent.End()

	for _, r := range []string{"started", "won", "first_cancelled"} {
		if v := h.value(t, "stormguard.hedges", op("search"), attribute.String("result", r)); v != 1 {
			t.Errorf("hedges{%s} = %v, want 1", r, v)
		}
	}
	if v, ok := h.point(t, "stormguard.hedges", op("search"), attribute.String("result", "hedge_cancelled")); ok && v != 0 {
		t.Errorf("hedges{hedge_cancelled} = %v, want 0", v)
	}
	spans := attemptSpans(h)
	if len(spans) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(spans))
	}
	byAttempt := map[int64]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		if sp.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("span %s is not under the caller's span", sp.Name())
		}
		byAttempt[attrs(sp)[otelretry.AttrAttempt].AsInt64()] = sp
	}
	first, hedged := byAttempt[1], byAttempt[2]
	if first == nil || hedged == nil {
		t.Fatalf("attempt spans %v", byAttempt)
	}
	if a := attrs(hedged); !a[otelretry.AttrHedge].AsBool() || a[otelretry.AttrOutcome].AsString() != "success" {
		t.Errorf("hedge span attributes %v", a)
	}
	if got := eventNames(hedged); len(got) != 2 || got[0] != otelretry.EventHedgeStarted || got[1] != otelretry.EventHedgeWon {
		t.Errorf("hedge span events %v, want [hedge.started hedge.won]", got)
	} else if d := eventAttrs(hedged.Events()[0])[otelretry.AttrDelayMS].AsFloat64(); d != 50 {
		t.Errorf("hedge.started delay_ms = %v, want 50", d)
	}
	if _, ok := attrs(first)[otelretry.AttrHedge]; ok {
		t.Error("the first attempt's span is marked a hedge")
	}
	if got := eventNames(first); len(got) != 1 || got[0] != otelretry.EventHedgeCancelled {
		t.Errorf("first attempt's span events %v, want [hedge.cancelled]", got)
	}
	if a := attrs(first); a[otelretry.AttrOutcome].AsString() != "canceled" {
		t.Errorf("first attempt's outcome %v, want canceled", a[otelretry.AttrOutcome])
	}
	if st := first.Status(); st.Code.String() == "Error" {
		t.Errorf("a cancelled loser has status %v, want no error", st)
	}
}

// TestHedgeRefusedMetric: a budget that refuses stops the hedge, counted
// under reason="budget"; the first attempt answers.
func TestHedgeRefusedMetric(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	p := &retry.Policy{Operation: "search", MaxAttempts: 4, Clock: clk, Observer: h.obs, Budget: budgetRefusing{}}
	s := newHedgeScript()
	out := runHedged(context.Background(), &hedge.Hedger{Policy: p, Delay: 50 * time.Millisecond}, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(50 * time.Millisecond)
	if v := h.value(t, "stormguard.hedges.refused", op("search"), attribute.String("reason", "budget")); v != 1 {
		t.Fatalf("hedges.refused{budget} = %v, want 1", v)
	}
	s.noStart(t)
	s.answers[1] <- nil
	if r := awaitResult(t, out); r.err != nil || r.v != 1 {
		t.Fatalf("Do = %d, %v; want 1", r.v, r.err)
	}
	if _, ok := h.point(t, "stormguard.hedges", op("search")); ok {
		t.Error("a refused hedge counted in stormguard.hedges")
	}
	for _, sp := range attemptSpans(h) {
		if _, ok := attrs(sp)[otelretry.AttrHedge]; ok || len(sp.Events()) != 0 {
			t.Errorf("span %s: %v %v", sp.Name(), attrs(sp), eventNames(sp))
		}
	}
}

// TestHedgeEventsNil: a nil Observer does nothing, and hedge events with
// a context that carries no span of this Observer only count.
func TestHedgeEventsNil(t *testing.T) {
	var o *otelretry.Observer
	o.HedgeStarted(t.Context(), hedge.Event{})
	o.HedgeWon(t.Context(), hedge.Event{})
	o.HedgeCancelled(t.Context(), hedge.Event{})
	o.HedgeRefused(t.Context(), hedge.Event{})
	h := newHarness(t, otelretry.Config{})
	ctx := trace.ContextWithSpan(t.Context(), trace.SpanFromContext(t.Context()))
	h.obs.HedgeStarted(ctx, hedge.Event{Operation: "x", Attempt: 2, Hedge: true})
	h.obs.HedgeRefused(ctx, hedge.Event{Operation: "x", Reason: retry.Reason(200)})
	if v := h.value(t, "stormguard.hedges.refused", op("x"), attribute.String("reason", "unknown")); v != 1 {
		t.Errorf("refused{unknown} = %v, want 1", v)
	}
}

func otelHedgeEvents(ctx context.Context, o *otelretry.Observer) {
	e := hedge.Event{Operation: "bench", Attempt: 2, Hedge: true, Delay: time.Millisecond}
	o.HedgeStarted(ctx, e)
	o.HedgeWon(ctx, e)
	e.Attempt, e.Hedge = 1, false
	o.HedgeCancelled(ctx, e)
	e.Reason = retry.ReasonBudget
	o.HedgeRefused(ctx, e)
}

// TestHedgeMetricsAllocs: with SDK metrics and no span in the context,
// the hedge events do not allocate once the operation has been seen.
func TestHedgeMetricsAllocs(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	ctx := context.Background()
	otelHedgeEvents(ctx, h.obs)
	if n := testing.AllocsPerRun(1000, func() { otelHedgeEvents(ctx, h.obs) }); n != 0 {
		t.Errorf("hedge events allocate %v times, want 0", n)
	}
}

// BenchmarkHedgeEventsMetrics is the Observer's work for one hedge's four
// events (started, won, cancelled, refused) with SDK metrics, no span.
func BenchmarkHedgeEventsMetrics(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	o, err := otelretry.New(otelretry.Config{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		otelHedgeEvents(ctx, o)
	}
}

// TestHedgeCancelledSplitsHedgesAndFirstAttempts: a cancelled hedge and a
// cancelled first attempt (the attempt a hedge hedged) count apart.
func TestHedgeCancelledSplitsHedgesAndFirstAttempts(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	ctx := context.Background()
	h.obs.HedgeCancelled(ctx, hedge.Event{Operation: "op", Attempt: 2, Hedge: true})
	h.obs.HedgeCancelled(ctx, hedge.Event{Operation: "op", Attempt: 1})
	h.obs.HedgeCancelled(ctx, hedge.Event{Operation: "op", Attempt: 3})
	if v := h.value(t, "stormguard.hedges", op("op"), attribute.String("result", "hedge_cancelled")); v != 1 {
		t.Errorf("hedges{hedge_cancelled} = %v, want 1", v)
	}
	if v := h.value(t, "stormguard.hedges", op("op"), attribute.String("result", "first_cancelled")); v != 2 {
		t.Errorf("hedges{first_cancelled} = %v, want 2", v)
	}
	if _, ok := h.point(t, "stormguard.hedges", op("op"), attribute.String("result", "cancelled")); ok {
		t.Error(`result="cancelled" still reported`)
	}
}

// TestHedgeDelayGauge: WatchAdaptive reports the Adaptive's current delay
// as stormguard.hedges.delay{operation} in seconds, once it has one;
// unwatch removes it.
func TestHedgeDelayGauge(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: clk})
	unwatch := h.obs.WatchAdaptive("search", a)
	if _, ok := h.point(t, "stormguard.hedges.delay", op("search")); ok {
		t.Fatal("a delay reported before the Adaptive has one")
	}
	for range 100 {
		a.Observe(40 * time.Millisecond)
	}
	clk.Advance(time.Second)
	d, ok := a.Delay()
	if !ok {
		t.Fatal("no adaptive delay")
	}
	if v := h.value(t, "stormguard.hedges.delay", op("search")); v != d.Seconds() {
		t.Fatalf("stormguard.hedges.delay = %v, want %v", v, d.Seconds())
	}
	unwatch()
	unwatch()
	if _, ok := h.point(t, "stormguard.hedges.delay", op("search")); ok {
		t.Fatal("reported after unwatch")
	}
	var nilO *otelretry.Observer
	nilO.WatchAdaptive("x", a)()
	h.obs.WatchAdaptive("x", nil)()
}
