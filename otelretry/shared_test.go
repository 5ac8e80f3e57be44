package otelretry_test

import (
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/throttle"
)

// countingThrottle is an SRE-like limiter whose counts the test sets.
type countingThrottle struct {
	plainLimiter
	mu  sync.Mutex
	rej uint64
}

func (l *countingThrottle) Stats() throttle.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return throttle.Stats{Probability: 0.5, Rejected: l.rej}
}

func (l *countingThrottle) set(n uint64) {
	l.mu.Lock()
	l.rej = n
	l.mu.Unlock()
}

// points returns the data points of metric name as "k=v,..." → value.
func (h *harness) points(t *testing.T, name string) map[string]float64 {
	t.Helper()
	m, ok := h.metrics(t)[name]
	out := map[string]float64{}
	if !ok {
		return out
	}
	key := func(s attribute.Set) string {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		sort.Strings(kv)
		return strings.Join(kv, ",")
	}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = float64(p.Value)
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out[key(p.Attributes)] = p.Value
		}
	default:
		t.Fatalf("metric %s: unexpected data %T", name, m.Data)
	}
	return out
}

func equalPoints(a, b map[string]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestSharedLimiterReportedOnce is the regression test of issue 32 item 7
// (limiters, OpenTelemetry): a limiter two operations share is reported
// once, under an operation value of its own, and stormguard.limiter.info
// joins each operation to it.
func TestSharedLimiterReportedOnce(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	shared, own := &countingThrottle{}, &countingThrottle{}
	defer h.obs.WatchLimiter("search", shared)()
	defer h.obs.WatchLimiter("checkout", shared)()
	defer h.obs.WatchLimiter("login", own)()
	shared.set(30)
	own.set(4)
	got := h.points(t, "stormguard.throttle.local_rejections")
	want := map[string]float64{"operation=_shared:checkout,search": 30, "operation=login": 4}
	if !equalPoints(got, want) {
		t.Errorf("local_rejections %v, want %v", got, want)
	}
	info := h.points(t, "stormguard.limiter.info")
	wantInfo := map[string]float64{
		"limiter=_shared:checkout,search,operation=checkout": 1,
		"limiter=_shared:checkout,search,operation=search":   1,
		"limiter=login,operation=login":                      1,
	}
	if !equalPoints(info, wantInfo) {
		t.Errorf("limiter.info %v, want %v", info, wantInfo)
	}
}

// TestSharedBreakerTransitionsOnceOTel: a shared breaker's transition is
// counted once, under its own operation value.
func TestSharedBreakerTransitionsOnceOTel(t *testing.T) {
	clk := clocktest.NewFake()
	h := newHarness(t, otelretry.Config{})
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: clk})
	defer h.obs.WatchBreaker("search", b)()
	defer h.obs.WatchBreaker("checkout", b)()
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errTransient)
	got := h.points(t, "stormguard.breaker.transitions")
	want := map[string]float64{"from=closed,operation=_shared:checkout,search,to=open": 1}
	if !equalPoints(got, want) {
		t.Errorf("breaker.transitions %v, want %v", got, want)
	}
	info := h.points(t, "stormguard.breaker.info")
	if len(info) != 2 || info["breaker=_shared:checkout,search,operation=checkout"] != 1 {
		t.Errorf("breaker.info %v, want both operations joined to the shared breaker", info)
	}
}

// TestOverflowLimitersFoldedInOTel: limiters past MaxOperations are all
// counted under _other.
func TestOverflowLimitersFoldedInOTel(t *testing.T) {
	h := newHarness(t, otelretry.Config{MaxOperations: 1})
	first, second := &countingThrottle{}, &countingThrottle{}
	h.obs.WatchLimiter("kept", &countingThrottle{})
	defer h.obs.WatchLimiter("past-1", first)()
	first.set(5)
	defer h.obs.WatchLimiter("past-2", second)()
	second.set(7)
	first.set(10)
	if got := h.points(t, "stormguard.throttle.local_rejections")["operation="+otelretry.OverflowOperation]; got != 17 {
		t.Errorf("local_rejections{operation=_other} = %v, want 17 (10 + 7)", got)
	}
}
