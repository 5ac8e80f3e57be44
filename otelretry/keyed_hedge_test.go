package otelretry_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/otelretry"
)

// keyedDelays returns a group of 10,000 hedge delays on a fake clock:
// key k%05d has 20 samples of (1+i%100) ms, key "slow" 20 of 5 s, key
// "quiet" none.
func keyedDelays(t *testing.T) (*keyed.Group[*hedge.Adaptive], hedge.AdaptiveConfig) {
	t.Helper()
	ac := hedge.AdaptiveConfig{Clock: clocktest.NewFake()}
	g, err := hedge.NewAdaptives(keyed.Config{MaxKeys: 20000}, ac)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		a := g.Get(fmt.Sprintf("k%05d", i))
		for range hedge.DefaultMinSamples {
			a.Observe(time.Duration(1+i%100) * time.Millisecond)
		}
	}
	a := g.Get("slow")
	for range hedge.DefaultMinSamples {
		a.Observe(5 * time.Second)
	}
	g.Get("quiet")
	return g, ac
}

// refDelay returns, in seconds, the delay an Adaptive of ac gives after
// samples of d.
func refDelay(ac hedge.AdaptiveConfig, d time.Duration) float64 {
	a := hedge.NewAdaptive(ac)
	for range hedge.DefaultMinSamples {
		a.Observe(d)
	}
	v, _ := a.Delay()
	return v.Seconds()
}

// countPoints returns the data points of a float64 gauge by key.
func countPoints(t *testing.T, h *harness, name string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	m, ok := h.metrics(t)[name]
	if !ok {
		return out
	}
	for _, p := range m.Data.(metricdata.Gauge[float64]).DataPoints {
		k, _ := p.Attributes.Value("key")
		out[k.AsString()] = p.Value
	}
	return out
}

// TestKeyedHedgeDelaysBoundedPoints (#37 item 5): a group of hedge delays
// per key watched with WatchKeyed reports, through the SDK's reader, the
// delay over all keys (min, median, max, the count of keys with one) and
// the top N keys' delays plus "other": at most N+1 points with 10,000
// keys; KeyedAllKeys reports every key only when asked for.
func TestKeyedHedgeDelaysBoundedPoints(t *testing.T) {
	g, ac := keyedDelays(t)
	h := newHarness(t, otelretry.Config{})
	unwatch := h.obs.WatchKeyed("webhooks", g)
	if v := h.value(t, "stormguard.hedges.group_delay_keys", op("webhooks")); v != 10001 {
		t.Fatalf("keys with a delay %v, want 10001", v)
	}
	for stat, want := range map[string]float64{
		"min":    refDelay(ac, time.Millisecond),
		"median": refDelay(ac, 51*time.Millisecond), // the 5,001st of 10,001
		"max":    refDelay(ac, 5*time.Second),
	} {
		if v := h.value(t, "stormguard.hedges.group_delay", op("webhooks"), attribute.String("stat", stat)); v != want {
			t.Errorf("%s %v, want %v", stat, v, want)
		}
	}
	keys := countPoints(t, h, "stormguard.hedges.key_delay")
	if len(keys) != otelretry.DefaultKeyedTopN+1 {
		t.Fatalf("%d key delay points, want top %d + other: %v", len(keys), otelretry.DefaultKeyedTopN, keys)
	}
	if keys["slow"] != refDelay(ac, 5*time.Second) || keys["other"] != refDelay(ac, 50*time.Millisecond) {
		t.Fatalf("points %v", keys)
	}
	if _, ok := keys["k00099"]; !ok {
		t.Fatalf("points %v", keys)
	}
	unwatch()
	if n := len(countPoints(t, h, "stormguard.hedges.key_delay")); n != 0 {
		t.Fatalf("%d points after unwatch", n)
	}

	// Per-key points need a MeterProvider whose cardinality limit (the
	// SDK's default is 2,000 points per instrument) holds every key.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader), sdkmetric.WithCardinalityLimit(0))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	all, err := otelretry.New(otelretry.Config{MeterProvider: mp, KeyedAllKeys: true})
	if err != nil {
		t.Fatal(err)
	}
	all.WatchKeyed("webhooks", g)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "stormguard.hedges.key_delay" {
				n = len(m.Data.(metricdata.Gauge[float64]).DataPoints)
			}
		}
	}
	if n != 10001 {
		t.Fatalf("KeyedAllKeys: %d points, want every key with a delay (10,001)", n)
	}
}
