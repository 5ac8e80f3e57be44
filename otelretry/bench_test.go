package otelretry_test

import (
	"context"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

func succeed(context.Context) (int, error) { return 1, nil }

func benchDo(b *testing.B, cfg otelretry.Config) {
	obs, err := otelretry.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	p := &retry.Policy{Operation: "bench", MaxAttempts: 3, Observer: obs}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := retry.Do(ctx, p, succeed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoWithOTelMetrics: the success path with SDK metrics and no
// tracing (a no-op tracer provider).
func BenchmarkDoWithOTelMetrics(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	benchDo(b, otelretry.Config{MeterProvider: mp, TracerProvider: tracenoop.NewTracerProvider()})
}

// BenchmarkDoWithOTelSpans: the success path with SDK metrics and a
// sampled span per attempt (no exporter).
func BenchmarkDoWithOTelSpans(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	}()
	benchDo(b, otelretry.Config{MeterProvider: mp, TracerProvider: tp})
}

// BenchmarkDoWithOTelNoop: both providers no-op, the cost of the Observer
// itself.
func BenchmarkDoWithOTelNoop(b *testing.B) {
	benchDo(b, otelretry.Config{MeterProvider: metricnoop.NewMeterProvider(), TracerProvider: tracenoop.NewTracerProvider()})
}
