package otelretry_test

import (
	"context"
	"errors"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

// An Observer on SDK providers: the call that needed a retry makes two
// attempt spans under the handler's span, and the attempts metric counts
// them by kind and outcome.
func Example() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	}()

	obs, err := otelretry.New(otelretry.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		panic(err)
	}
	policy := &retry.Policy{
		Operation:   "inventory.get",
		MaxAttempts: 3,
		Backoff:     backoff.Constant{}, // no wait, for the example
		Observer:    obs,
	}

	ctx, handler := tp.Tracer("app").Start(context.Background(), "GET /stock")
	failures := 1
	_, err = retry.Do(ctx, policy, func(context.Context) (string, error) {
		if failures > 0 {
			failures--
			return "", errors.New("connection reset")
		}
		return "ok", nil
	})
	handler.End()
	fmt.Println("call error:", err)

	for _, s := range spans.Ended() {
		if s.Parent().SpanID() == handler.SpanContext().SpanID() {
			fmt.Println(s.Name(), "status:", s.Status().Code)
		}
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "stormguard.attempts" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				kind, _ := p.Attributes.Value("attempt_kind")
				outcome, _ := p.Attributes.Value("outcome")
				fmt.Println(m.Name, kind.AsString(), outcome.AsString(), p.Value)
			}
		}
	}
	// Unordered output:
	// call error: <nil>
	// stormguard.attempt inventory.get status: Error
	// stormguard.attempt inventory.get status: Unset
	// stormguard.attempts first error 1
	// stormguard.attempts retry success 1
}

// A background job has no span of its own: StartCall gives its call one,
// with both attempts under it in one trace.
func ExampleObserver_StartCall() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	obs, err := otelretry.New(otelretry.Config{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	policy := &retry.Policy{Operation: "report.build", MaxAttempts: 2, Backoff: backoff.Constant{}, Observer: obs}

	ctx := obs.StartCall(context.Background(), "report.build")
	failures := 1
	err = retry.Run(ctx, policy, func(context.Context) error {
		if failures > 0 {
			failures--
			return errors.New("connection reset")
		}
		return nil
	})
	fmt.Println("call error:", err)

	ended := spans.Ended()
	call := ended[len(ended)-1] // CallEnd ends it after the attempts
	fmt.Println(call.Name(), "root:", !call.Parent().IsValid())
	for _, s := range ended[:len(ended)-1] {
		fmt.Println(s.Name(), "under the call span:", s.Parent().SpanID() == call.SpanContext().SpanID())
	}
	// Output:
	// call error: <nil>
	// stormguard.call report.build root: true
	// stormguard.attempt report.build under the call span: true
	// stormguard.attempt report.build under the call span: true
}
