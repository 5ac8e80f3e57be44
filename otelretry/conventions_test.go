package otelretry_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

func eventAttrs(e sdktrace.Event) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range e.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// TestSemanticConventions is the regression test of issue 18 item 15
// (conventions): failed attempts carry rpc.response.status_code (the gRPC
// code by name, not the removed rpc.grpc.status_code) or
// http.response.status_code, and error.type; successful ones carry
// neither; the keys are the semconv package's.
func TestSemanticConventions(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	clk := clocktest.NewFake()
	p := &retry.Policy{Operation: "inventory.get", MaxAttempts: 5, AttemptTimeout: time.Second,
		Backoff: backoff.Constant{}, Clock: clk, Observer: h.obs}
	results := []func() error{
		func() error { return status.Error(grpccodes.Unavailable, "down") },
		func() error { return &httpretry.StatusError{StatusCode: 503} },
		func() error { clk.Advance(2 * time.Second); return errors.New("slow") }, // cut by AttemptTimeout
		func() error { return fmt.Errorf("dial: %w", &customError{}) },
		func() error { return nil },
	}
	n := 0
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "handler")
	if _, err := retry.Do(ctx, p, func(actx context.Context) (int, error) {
		n++
		err := results[n-1]()
		if n == 3 {
			<-actx.Done()
		}
		return n, err
	}); err != nil {
		t.Fatalf("Do: %v", err)
	}
	parent.End()
	spans := attemptSpans(h)
	if len(spans) != 5 {
		t.Fatalf("%d attempt spans, want 5", len(spans))
	}
	want := []struct {
		rpc, errType string
		http         int64
	}{
		{rpc: "UNAVAILABLE", errType: "UNAVAILABLE"},
		{http: 503, errType: "503"},
		{errType: "timeout"},
		{errType: "custom_failure"},
		{},
	}
	for i, s := range spans {
		a := attrs(s)
		if _, ok := a["rpc.grpc.status_code"]; ok {
			t.Errorf("span %d has the removed rpc.grpc.status_code", i+1)
		}
		if got := a[semconv.RPCResponseStatusCodeKey].AsString(); got != want[i].rpc {
			t.Errorf("span %d rpc.response.status_code = %q, want %q", i+1, got, want[i].rpc)
		}
		if got := a[semconv.HTTPResponseStatusCodeKey].AsInt64(); got != want[i].http {
			t.Errorf("span %d http.response.status_code = %d, want %d", i+1, got, want[i].http)
		}
		if got := a[semconv.ErrorTypeKey].AsString(); got != want[i].errType {
			t.Errorf("span %d error.type = %q, want %q", i+1, got, want[i].errType)
		}
	}
}

// TestSpanAndMetricAttributesAgree is the regression test of issue 18 item
// 15 (consistent names) and of the raw operation name on events: every
// metric attribute an attempt span or event says the same thing as is the
// metric's key with the "stormguard." prefix, with the same value; the
// retry_scheduled and gave_up events carry the cleaned operation name the
// attempt spans carry.
func TestSpanAndMetricAttributesAgree(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	const raw = "inventory\xff.get" // cleaned to "inventory\uFFFD.get"
	p := &retry.Policy{Operation: raw, MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: h.obs}
	ctx, parent := h.tp.Tracer("test").Start(context.Background(), "handler")
	_, _ = retry.Do(ctx, p, func(context.Context) (int, error) { return 0, errTransient })
	parent.End()

	spans := attemptSpans(h)
	if len(spans) != 2 {
		t.Fatalf("%d attempt spans, want 2", len(spans))
	}
	clean := attrs(spans[0])[otelretry.AttrOperation].AsString()
	if clean != "inventory\uFFFD.get" {
		t.Fatalf("attempt span operation %q", clean)
	}
	// Metric points of the attempts, by attempt_kind.
	points := map[string]attribute.Set{}
	for _, p := range h.metrics(t)["stormguard.attempts"].Data.(metricdata.Sum[int64]).DataPoints {
		kind, _ := p.Attributes.Value("attempt_kind")
		points[kind.AsString()] = p.Attributes
	}
	for i, s := range spans {
		a := attrs(s)
		kind := a[attribute.Key("stormguard.attempt_kind")].AsString()
		set, ok := points[kind]
		if !ok {
			t.Errorf("span %d attempt_kind %q has no metric point (points %v)", i+1, kind, points)
			continue
		}
		for _, kv := range set.ToSlice() {
			spanKey := attribute.Key("stormguard." + string(kv.Key))
			if got, ok := a[spanKey]; !ok || got != kv.Value {
				t.Errorf("span %d: %s = %v, metric %s = %v", i+1, spanKey, got.String(), kv.Key, kv.Value.String())
			}
		}
	}
	var events []sdktrace.Event
	for _, s := range h.spans.Ended() {
		if s.SpanContext().SpanID() == parent.SpanContext().SpanID() {
			events = s.Events()
		}
	}
	if len(events) != 2 {
		t.Fatalf("caller span events %v, want retry_scheduled and gave_up", events)
	}
	for _, e := range events {
		a := eventAttrs(e)
		if got := a[otelretry.AttrOperation].AsString(); got != clean {
			t.Errorf("%s operation %q, want the attempt spans' %q", e.Name, got, clean)
		}
		if got := a[semconv.ErrorTypeKey].AsString(); got != "*errors.errorString" {
			t.Errorf("%s error.type %q", e.Name, got)
		}
		for k := range a {
			if !strings.HasPrefix(string(k), "stormguard.") && k != semconv.ErrorTypeKey {
				t.Errorf("%s has attribute %s outside the stormguard namespace and semconv", e.Name, k)
			}
		}
	}
	// gave_up's outcome is the calls metric's outcome.
	gaveUp := eventAttrs(events[1])
	callPoint := h.metrics(t)["stormguard.calls"].Data.(metricdata.Sum[int64]).DataPoints
	var callOutcome string
	for _, p := range callPoint {
		if p.Value == 1 {
			v, _ := p.Attributes.Value("outcome")
			callOutcome = v.AsString()
		}
	}
	if events[1].Name != "stormguard.gave_up" || gaveUp[otelretry.AttrOutcome].AsString() != callOutcome || callOutcome != "attempts" {
		t.Errorf("gave_up %s outcome %q, calls outcome %q", events[1].Name, gaveUp[otelretry.AttrOutcome].AsString(), callOutcome)
	}
	if gaveUp[attribute.Key("stormguard.attempts")].AsInt64() != 2 {
		t.Errorf("gave_up attempts = %v", gaveUp[attribute.Key("stormguard.attempts")].String())
	}
}

// customError has an ErrorType method, which error.type uses.
type customError struct{}

func (*customError) Error() string     { return "custom" }
func (*customError) ErrorType() string { return "custom_failure" }
