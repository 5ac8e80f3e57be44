package otelretry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

// TestCallSpanWithoutCallerSpan is the test of issue 18 item 15 (call
// span): a call whose context has no span gets, through StartCall, one call
// span with every attempt under it in one trace, the retry_scheduled and
// gave_up events on it, ended by CallEnd with the call's outcome. Without
// StartCall each attempt is a root span of a trace of its own.
func TestCallSpanWithoutCallerSpan(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	p := &retry.Policy{Operation: "job.run", MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: h.obs}
	// A plain retry.Do from code with no span: the Observer, a
	// retry.CallStarter, gives the call one span of its own.
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errTransient })
	if err == nil {
		t.Fatal("Do succeeded")
	}

	var calls []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == "stormguard.call job.run" {
			calls = append(calls, s)
		}
	}
	if len(calls) != 1 {
		t.Fatalf("%d call spans ended, want 1", len(calls))
	}
	call := calls[0]
	if call.Parent().IsValid() {
		t.Error("the call span has a parent")
	}
	attempts := 0
	for _, s := range attemptSpans(h) {
		if s.Name() != "stormguard.attempt job.run" {
			continue
		}
		attempts++
		if s.Parent().SpanID() != call.SpanContext().SpanID() || s.SpanContext().TraceID() != call.SpanContext().TraceID() {
			t.Errorf("attempt %v is not under the call span", attrs(s)[otelretry.AttrAttempt].String())
		}
	}
	if attempts != 3 {
		t.Errorf("%d attempt spans, want 3", attempts)
	}
	var names []string
	for _, e := range call.Events() {
		names = append(names, e.Name)
	}
	if len(names) != 3 || names[0] != "stormguard.retry_scheduled" || names[2] != "stormguard.gave_up" {
		t.Errorf("call span events %v, want 2 retry_scheduled and gave_up", names)
	}
	a := attrs(call)
	if a[otelretry.AttrOutcome].AsString() != "attempts" || a[otelretry.AttrAttempts].AsInt64() != 3 || a[otelretry.AttrOperation].AsString() != "job.run" {
		t.Errorf("call span attributes %v", call.Attributes())
	}
	if call.Status().Code != codes.Error {
		t.Errorf("call span status %v, want Error", call.Status())
	}
}

// TestStartCallKeepsCallerSpan: with a span in the context StartCall adds
// none, and a successful call's span ends with status Unset.
func TestStartCallKeepsCallerSpan(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	parent, span := h.tp.Tracer("test").Start(context.Background(), "handler")
	if ctx := h.obs.StartCall(parent, "op"); trace.SpanFromContext(ctx) != span {
		t.Error("StartCall replaced the caller's span")
	}
	span.End()
	var nilObs *otelretry.Observer
	if ctx := nilObs.StartCall(context.Background(), "x"); ctx != context.Background() {
		t.Error("a nil Observer changed the context")
	}

	p := &retry.Policy{Operation: "op", MaxAttempts: 2, Observer: h.obs}
	ctx := h.obs.StartCall(context.Background(), "op")
	if _, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	for _, s := range h.spans.Ended() {
		if s.Name() == "stormguard.call op" {
			if s.Status().Code != codes.Unset || attrs(s)[otelretry.AttrOutcome].AsString() != "success" {
				t.Errorf("call span of a successful call: %v %v", s.Status(), s.Attributes())
			}
			return
		}
	}
	t.Error("no call span ended")
}
