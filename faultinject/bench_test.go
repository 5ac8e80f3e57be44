package faultinject_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stormguard/stormguard/faultinject"
)

// discardWriter is a ResponseWriter that keeps nothing, so benchmarks
// measure the Injector and not a recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

var noop = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})

// passRules draw a fault for every request (and pass 99% of them) and take
// a limiter slot.
var passRules = faultinject.Rules{
	Abort: faultinject.AbortRule{Percent: 1},
	Limit: faultinject.Limit{Concurrency: 1 << 20, Queue: 16},
}

// TestPassThroughDoesNotAllocate: a request the Injector lets through costs
// no allocation: with no rules, with a limit, and with a fault draw.
func TestPassThroughDoesNotAllocate(t *testing.T) {
	for name, rules := range map[string]faultinject.Rules{"zero": {}, "limit": {Limit: passRules.Limit}} {
		in := faultinject.New(faultinject.Config{Rules: rules})
		h := in.Handler(noop)
		w := &discardWriter{h: http.Header{}}
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
		if n := testing.AllocsPerRun(200, func() { h.ServeHTTP(w, req) }); n != 0 {
			t.Errorf("%s: %v allocations per passed request, want 0", name, n)
		}
	}
	// With a fault draw (at 0.0001% no request of the run is aborted, as
	// the check of Aborted confirms) passed requests allocate nothing either.
	in := faultinject.New(faultinject.Config{Rules: faultinject.Rules{Abort: faultinject.AbortRule{Percent: 0.0001}}, Seed: 1})
	h := in.Handler(noop)
	w := &discardWriter{h: http.Header{}}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	if n := testing.AllocsPerRun(50, func() { h.ServeHTTP(w, req) }); n != 0 || in.Snapshot().Aborted != 0 {
		t.Errorf("fault draw: %v allocations per passed request, want 0", n)
	}
}

func benchHandler(b *testing.B, rules faultinject.Rules) {
	in := faultinject.New(faultinject.Config{Rules: rules, Seed: 1})
	h := in.Handler(noop)
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

func BenchmarkHandlerPassZeroRules(b *testing.B) { benchHandler(b, faultinject.Rules{}) }
func BenchmarkHandlerPassDrawAndLimit(b *testing.B) {
	benchHandler(b, passRules)
}
func BenchmarkHandlerAbort(b *testing.B) {
	benchHandler(b, faultinject.Rules{Abort: faultinject.AbortRule{Percent: 100, RetryAfter: time.Second}})
}
func BenchmarkHandlerOutageCheck(b *testing.B) {
	benchHandler(b, faultinject.Rules{Outages: []faultinject.Window{{Start: time.Hour, End: 2 * time.Hour}}})
}

func BenchmarkHandlerPassParallel(b *testing.B) {
	in := faultinject.New(faultinject.Config{Rules: passRules, Seed: 1})
	h := in.Handler(noop)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
		w := &discardWriter{h: http.Header{}}
		for pb.Next() {
			h.ServeHTTP(w, req)
		}
	})
}

func BenchmarkTransportPass(b *testing.B) {
	resp := &http.Response{StatusCode: 200, Body: http.NoBody}
	in := faultinject.New(faultinject.Config{Rules: passRules, Seed: 1})
	rt := in.Transport(roundTripFunc(func(*http.Request) (*http.Response, error) { return resp, nil }))
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/", nil)
	b.ReportAllocs()
	for b.Loop() {
		_, _ = rt.RoundTrip(req)
	}
}
