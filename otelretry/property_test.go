package otelretry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"pgregory.net/rapid"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

// TestSpansAndMetricsMatchAttempts: whatever the mix of outcomes, every
// attempt ends exactly one span under its call's parent span, the attempts
// metric counts each attempt once, every call is counted once, and
// retries.active returns to zero.
func TestSpansAndMetricsMatchAttempts(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		calls := rapid.SliceOfN(rapid.SliceOfN(rapid.IntRange(0, 2), 0, 5), 1, 12).Draw(rt, "calls")
		maxAttempts := rapid.IntRange(1, 4).Draw(rt, "maxAttempts")

		h := newHarness(t, otelretry.Config{})
		p := &retry.Policy{Operation: "op", MaxAttempts: maxAttempts, Backoff: backoff.Constant{}, Observer: h.obs}
		made := 0
		for i, results := range calls {
			ctx, parent := h.tp.Tracer("test").Start(context.Background(), "call")
			n := 0
			_, _ = retry.Do(ctx, p, func(context.Context) (int, error) {
				r := 0
				if n < len(results) {
					r = results[n]
				}
				n++
				switch r {
				case 1:
					return 0, errTransient
				case 2:
					return 0, retry.Permanent(errTransient)
				}
				return n, nil
			})
			parent.End()
			made += n
			var children int
			for _, s := range attemptSpans(h) {
				if s.Parent().SpanID() == parent.SpanContext().SpanID() {
					children++
				}
			}
			if children != n {
				rt.Fatalf("call %d made %d attempts but has %d attempt spans", i, n, children)
			}
		}
		if got := len(attemptSpans(h)); got != made {
			rt.Fatalf("%d attempt spans for %d attempts", got, made)
		}
		ms := h.metrics(t)
		var attempts, callsCounted int64
		for _, p := range ms["stormguard.attempts"].Data.(metricdata.Sum[int64]).DataPoints {
			attempts += p.Value
		}
		for _, p := range ms["stormguard.calls"].Data.(metricdata.Sum[int64]).DataPoints {
			callsCounted += p.Value
		}
		if attempts != int64(made) || callsCounted != int64(len(calls)) {
			rt.Fatalf("metrics count %d attempts and %d calls, want %d and %d", attempts, callsCounted, made, len(calls))
		}
		if v, ok := h.point(t, "stormguard.retries.active"); ok && v != 0 {
			rt.Fatalf("retries.active = %v", v)
		}
	})
}
