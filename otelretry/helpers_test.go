package otelretry_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"

	"github.com/stormguard/stormguard/otelretry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is an Observer on SDK providers whose spans and metrics the test
// reads: spans from a SpanRecorder, metrics from a ManualReader.
type harness struct {
	obs    *otelretry.Observer
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func newHarness(t *testing.T, cfg otelretry.Config) *harness {
	t.Helper()
	h := &harness{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	cfg.TracerProvider, cfg.MeterProvider = h.tp, mp
	obs, err := otelretry.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.obs = obs
	return h
}

// metrics collects and returns the metrics by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otelretry.ScopeName {
			t.Errorf("scope %q", sm.Scope.Name)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// point returns the value of the data point of metric name whose
// attributes include kv (a sum or gauge value, or a histogram's count),
// and whether it exists.
func (h *harness) point(t *testing.T, name string, kv ...attribute.KeyValue) (float64, bool) {
	t.Helper()
	m, ok := h.metrics(t)[name]
	if !ok {
		return 0, false
	}
	match := func(set attribute.Set) bool {
		for _, want := range kv {
			if got, ok := set.Value(want.Key); !ok || got != want.Value {
				return false
			}
		}
		return true
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		return pointValue(d.DataPoints, match)
	case metricdata.Sum[float64]:
		return pointValue(d.DataPoints, match)
	case metricdata.Gauge[int64]:
		return pointValue(d.DataPoints, match)
	case metricdata.Gauge[float64]:
		return pointValue(d.DataPoints, match)
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			if match(p.Attributes) {
				return float64(p.Count), true
			}
		}
	default:
		t.Fatalf("metric %s: unexpected data %T", name, m.Data)
	}
	return 0, false
}

// pointValue returns the value of the first data point that matches.
func pointValue[N int64 | float64](points []metricdata.DataPoint[N], match func(attribute.Set) bool) (float64, bool) {
	for _, p := range points {
		if match(p.Attributes) {
			return float64(p.Value), true
		}
	}
	return 0, false
}

// value is point that fails the test when the point is missing.
func (h *harness) value(t *testing.T, name string, kv ...attribute.KeyValue) float64 {
	t.Helper()
	v, ok := h.point(t, name, kv...)
	if !ok {
		t.Fatalf("no data point %s%v", name, kv)
	}
	return v
}

func op(name string) attribute.KeyValue { return attribute.String("operation", name) }

// breakerState returns the state the stormguard.breaker.state StateSet of
// operation reports, after checking that it has a point per state and
// exactly one at 1.
func (h *harness) breakerState(t *testing.T, operation string) string {
	t.Helper()
	cur := ""
	for _, s := range []string{"closed", "half-open", "open"} {
		v, ok := h.point(t, "stormguard.breaker.state", op(operation), attribute.String("state", s))
		switch {
		case !ok:
			t.Fatalf("breaker.state{%s} has no %s point", operation, s)
		case v == 1 && cur == "":
			cur = s
		case v != 0:
			t.Fatalf("breaker.state{%s,%s} = %v with %q at 1", operation, s, v, cur)
		}
	}
	if cur == "" {
		t.Fatalf("breaker.state{%s}: no state at 1", operation)
	}
	return cur
}
