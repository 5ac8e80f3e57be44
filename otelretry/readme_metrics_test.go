package otelretry_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/stormguard/stormguard/otelretry"
)

// TestReadmeNamesEveryMetric: the README names every instrument New
// creates, and every Prometheus name of the exporter contract
// (TestPrometheusExporterNames), so a new metric cannot ship
// undocumented.
func TestReadmeNamesEveryMetric(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	var mu sync.Mutex
	var names []string
	record := func(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
		mu.Lock()
		names = append(names, i.Name)
		mu.Unlock()
		return sdkmetric.Stream{}, false
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()), sdkmetric.WithView(record))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	if _, err := otelretry.New(otelretry.Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider()}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(names) < 30 {
		t.Fatalf("only %d instruments seen: %v", len(names), names)
	}
	for _, n := range names {
		if !strings.Contains(readme, "`"+n+"`") {
			t.Errorf("README.md does not name the instrument %s", n)
		}
	}
	for n := range contract {
		if !strings.Contains(readme, "`"+n+"`") && !strings.Contains(readme, "`"+n+"{") {
			t.Errorf("README.md does not give the Prometheus name %s", n)
		}
	}
}
