package layer_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// seenFacts is what a handler behind Middleware found in its context.
type seenFacts struct {
	in       retry.Inbound
	ok       bool
	deadline time.Duration // until the context's deadline, on the fake clock; -1: none
}

func TestMiddlewareReadsAndCapsFacts(t *testing.T) {
	fc := clocktest.NewFake()
	none := time.Duration(-1)
	for _, c := range []struct {
		name string
		hdr  map[string]string
		opts []layer.Option
		want seenFacts
	}{
		{"none", nil, nil, seenFacts{deadline: none}},
		{"stormguard", map[string]string{"Stormguard-Attempt": "2", "Stormguard-Will-Retry": "1", "Stormguard-Deadline-Ms": "1500"}, nil,
			seenFacts{retry.Inbound{Attempt: 2, Retries: true, Deadline: fc.Now().Add(1500 * time.Millisecond)}, true, 1500 * time.Millisecond}},
		{"first and only attempt", map[string]string{"stormguard-attempt": "1", "stormguard-will-retry": "0"}, nil,
			seenFacts{retry.Inbound{Attempt: 1}, true, none}},
		{"last attempt of a caller that retried", map[string]string{"stormguard-attempt": "3", "stormguard-will-retry": "0"}, nil,
			seenFacts{retry.Inbound{Attempt: 3, Retries: true}, true, none}},
		{"envoy", map[string]string{"x-envoy-attempt-count": "2", "x-envoy-expected-rq-timeout-ms": "250"}, nil,
			seenFacts{retry.Inbound{Attempt: 2, Retries: true, Deadline: fc.Now().Add(250 * time.Millisecond)}, true, 250 * time.Millisecond}},
		{"envoy with our will-retry", map[string]string{"x-envoy-attempt-count": "1", "Stormguard-Will-Retry": "0"}, nil,
			seenFacts{retry.Inbound{Attempt: 1}, true, none}},
		// Issue #31 item 30: meshes send x-envoy-attempt-count whether or
		// not they retry; a count of 1 says nothing of retries unless the
		// operator declares that the mesh retries.
		{"envoy's first attempt says nothing", map[string]string{"x-envoy-attempt-count": "1"}, nil,
			seenFacts{retry.Inbound{Attempt: 1}, true, none}},
		{"envoy's first attempt, the mesh retries", map[string]string{"x-envoy-attempt-count": "1"}, []layer.Option{layer.WithMeshRetries(true)},
			seenFacts{retry.Inbound{Attempt: 1, Retries: true}, true, none}},
		{"the mesh retries whatever our caller says", map[string]string{"x-envoy-attempt-count": "1", "Stormguard-Attempt": "1", "Stormguard-Will-Retry": "0"}, []layer.Option{layer.WithMeshRetries(true)},
			seenFacts{retry.Inbound{Attempt: 1, Retries: true}, true, none}},
		{"the mesh retries, but the request did not come through it", map[string]string{"Stormguard-Attempt": "1", "Stormguard-Will-Retry": "0"}, []layer.Option{layer.WithMeshRetries(true)},
			seenFacts{retry.Inbound{Attempt: 1}, true, none}},
		{"declaration withdrawn", map[string]string{"x-envoy-attempt-count": "1"}, []layer.Option{layer.WithMeshRetries(true), layer.WithMeshRetries(false)},
			seenFacts{retry.Inbound{Attempt: 1}, true, none}},
		{"ours first", map[string]string{"Stormguard-Attempt": "1", "x-envoy-attempt-count": "5", "Stormguard-Deadline-Ms": "10", "x-envoy-expected-rq-timeout-ms": "9000"}, nil,
			seenFacts{retry.Inbound{Attempt: 1, Deadline: fc.Now().Add(10 * time.Millisecond)}, true, 10 * time.Millisecond}},
		{"capped by default", map[string]string{"Stormguard-Attempt": "1000000", "Stormguard-Deadline-Ms": "99999999999999999999"}, nil,
			seenFacts{retry.Inbound{Attempt: layer.DefaultMaxAttempt, Retries: true, Deadline: fc.Now().Add(layer.DefaultMaxDeadline)}, true, layer.DefaultMaxDeadline}},
		{"capped by options", map[string]string{"Stormguard-Attempt": "5", "Stormguard-Deadline-Ms": "60000"}, []layer.Option{layer.WithMaxAttempt(3), layer.WithMaxDeadline(2 * time.Second)},
			seenFacts{retry.Inbound{Attempt: 3, Retries: true, Deadline: fc.Now().Add(2 * time.Second)}, true, 2 * time.Second}},
		{"malformed", map[string]string{"Stormguard-Attempt": "-1", "Stormguard-Will-Retry": "yes", "Stormguard-Deadline-Ms": "1e3"}, nil,
			seenFacts{deadline: none}},
		{"zero attempt is unknown", map[string]string{"Stormguard-Attempt": "0", "Stormguard-Will-Retry": "1"}, nil,
			seenFacts{retry.Inbound{Retries: true}, true, none}},
		{"blanks", map[string]string{"Stormguard-Attempt": " 2 ", "Stormguard-Deadline-Ms": "\t7"}, nil,
			seenFacts{retry.Inbound{Attempt: 2, Retries: true, Deadline: fc.Now().Add(7 * time.Millisecond)}, true, 7 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got seenFacts
			h := layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				got.in, got.ok = retry.InboundOf(r.Context())
				got.deadline = none
				if dl, ok := r.Context().Deadline(); ok {
					got.deadline = dl.Sub(fc.Now())
				}
			}), append([]layer.Option{layer.WithClock(fc)}, c.opts...)...)
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			for k, v := range c.hdr {
				req.Header.Set(k, v)
			}
			h.ServeHTTP(httptest.NewRecorder(), req)
			if got != c.want {
				t.Errorf("handler saw %+v, want %+v", got, c.want)
			}
		})
	}
}

// The caller's deadline ends the request's context on a real loopback
// server, with cause ErrInboundDeadline, so a handler stops working for a
// caller that gave up.
func TestMiddlewareDeadlineEndsContext(t *testing.T) {
	fc := clocktest.NewFake()
	cause := make(chan error, 1)
	started := make(chan struct{})
	srv := httptest.NewServer(layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	}), layer.WithClock(fc)))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set(layer.HeaderDeadline, "300")
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := srv.Client().Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	<-started
	fc.BlockUntil(1)
	fc.Advance(300 * time.Millisecond)
	select {
	case err := <-cause:
		if !errors.Is(err, layer.ErrInboundDeadline) {
			t.Errorf("context cause %v, want ErrInboundDeadline", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the request's context did not end at the caller's deadline")
	}
	<-done
	srv.Client().CloseIdleConnections()
}

// Reading the facts costs no allocation when there are none; with facts
// it costs the context and request copies.
func TestMiddlewareAllocations(t *testing.T) {
	h := layer.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	bare := httptest.NewRequest(http.MethodGet, "/", nil)
	bare.Header.Set("Authorization", "x")
	if n := testing.AllocsPerRun(1000, func() { h.ServeHTTP(w, bare) }); n != 0 {
		t.Errorf("%v allocations per request without facts, want 0", n)
	}
}

func BenchmarkMiddleware(b *testing.B) {
	h := layer.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	w := httptest.NewRecorder()
	for _, c := range []struct {
		name string
		hdr  map[string]string
	}{
		{"none", nil},
		{"attempt+will-retry", map[string]string{layer.HeaderAttempt: "2", layer.HeaderWillRetry: "1"}},
		{"all", map[string]string{layer.HeaderAttempt: "2", layer.HeaderWillRetry: "1", layer.HeaderDeadline: "1500"}},
	} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		for k, v := range c.hdr {
			req.Header.Set(k, v)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{"1", "2", " 3 ", "0", "-1", "+1", "", "99999999999999999999999", "1e3", "0x10", "１"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := layer.ParseAttempt(s)
		ref, err := strconv.ParseUint(trimBlanks(s), 10, 64)
		switch {
		case !allDigits(trimBlanks(s)):
			if ok {
				t.Fatalf("ParseAttempt(%q) = %d, true; want false", s, n)
			}
		case err == nil && ref == 0:
			if ok {
				t.Fatalf("ParseAttempt(%q) accepted attempt 0", s)
			}
		case err == nil && ref <= uint64(1<<62):
			if !ok || uint64(n) != ref {
				t.Fatalf("ParseAttempt(%q) = %d, %v; want %d", s, n, ok, ref)
			}
		default:
			if !ok || n < 1<<62 {
				t.Fatalf("ParseAttempt(%q) = %d, %v; want a saturated number", s, n, ok)
			}
		}
	})
}

func FuzzParseMillis(f *testing.F) {
	for _, s := range []string{"0", "1500", " 7\t", "-5", "", "9223372036854775807", "99999999999999999999", "1.5", "15s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := layer.ParseMillis(s)
		ref, err := strconv.ParseUint(trimBlanks(s), 10, 64)
		switch {
		case !allDigits(trimBlanks(s)):
			if ok {
				t.Fatalf("ParseMillis(%q) = %v, true; want false", s, d)
			}
		case d < 0:
			t.Fatalf("ParseMillis(%q) = %v: negative", s, d)
		case err == nil && ref <= uint64(1<<62)/uint64(time.Millisecond):
			if !ok || d != time.Duration(ref)*time.Millisecond {
				t.Fatalf("ParseMillis(%q) = %v, %v; want %dms", s, d, ok, ref)
			}
		case !ok:
			t.Fatalf("ParseMillis(%q) refused a large number", s)
		}
	})
}

func trimBlanks(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// allDigits reports whether s is one or more ASCII digits (strconv stops
// at an overflow before it looks at the rest).
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// meshFlag is a layer.MeshSource an operator can flip (a reloaded policy
// file, in config).
type meshFlag struct{ on atomic.Bool }

func (f *meshFlag) MeshRetries() bool { return f.on.Load() }

// Issue #31 item 30: WithMeshRetriesFrom asks its source at every request
// that came through the mesh, so a reloaded declaration holds from the
// next request; a request without x-envoy-attempt-count does not ask.
func TestMiddlewareMeshRetriesFollowsSource(t *testing.T) {
	src := &meshFlag{}
	var got retry.Inbound
	h := layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = retry.InboundOf(r.Context())
	}), layer.WithMeshRetriesFrom(src))
	serve := func() retry.Inbound {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header.Set(layer.EnvoyAttemptCount, "1")
		h.ServeHTTP(httptest.NewRecorder(), req)
		return got
	}
	if in := serve(); in.Retries {
		t.Errorf("undeclared mesh: %+v, want no retries", in)
	}
	src.on.Store(true)
	if in := serve(); !in.Retries {
		t.Errorf("declared mesh: %+v, want retries", in)
	}
	src.on.Store(false)
	if in := serve(); in.Retries {
		t.Errorf("declaration withdrawn: %+v, want no retries", in)
	}
	w, bare := httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil)
	if n := testing.AllocsPerRun(100, func() { h.ServeHTTP(w, bare) }); n != 0 {
		t.Errorf("%v allocations per request without facts, want 0", n)
	}
}

// panicMesh is a MeshSource that panics.
type panicMesh struct{}

func (panicMesh) MeshRetries() bool { panic("mesh source") }

// Sweep (every user callback under a panic test): a handler that panics
// behind Middleware, with the caller's deadline in force, leaves no timer
// behind on the clock, and the panic goes on; so does a MeshSource that
// panics, before the handler runs.
func TestMiddlewarePanicsReleaseDeadline(t *testing.T) {
	fc := clocktest.NewFake()
	h := layer.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler") }), layer.WithClock(fc))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(layer.HeaderDeadline, "5000")
	v := func() (v any) {
		defer func() { v = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), req)
		return nil
	}()
	if v != "handler" {
		t.Fatalf("recovered %v, want the handler's panic", v)
	}
	if n := fc.Pending(); n != 0 {
		t.Errorf("%d timers left on the clock after the panic, want 0", n)
	}

	served := false
	h = layer.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }),
		layer.WithClock(fc), layer.WithMeshRetriesFrom(panicMesh{}))
	req = httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(layer.EnvoyAttemptCount, "1")
	req.Header.Set(layer.HeaderDeadline, "5000")
	v = func() (v any) {
		defer func() { v = recover() }()
		h.ServeHTTP(httptest.NewRecorder(), req)
		return nil
	}()
	if v != "mesh source" || served || fc.Pending() != 0 {
		t.Errorf("recovered %v, served %v, %d timers; want the source's panic, before anything", v, served, fc.Pending())
	}
}

// Sweep (arithmetic at the extremes): with the cap lifted to the largest
// Duration, a caller's deadline beyond what a Duration holds saturates on
// the real clock: the request's context gets a deadline in the far
// future, not one in the past that would end it at once.
func TestMiddlewareHugeDeadlineSaturates(t *testing.T) {
	var err error
	var dl time.Time
	var ok bool
	h := layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err = r.Context().Err()
		dl, ok = r.Context().Deadline()
	}), layer.WithMaxDeadline(math.MaxInt64))
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set(layer.HeaderDeadline, "99999999999999999999")
	h.ServeHTTP(httptest.NewRecorder(), req)
	if err != nil || !ok || time.Until(dl) < 100*365*24*time.Hour {
		t.Errorf("context err %v, deadline %v (%v); want a live context with a deadline centuries away", err, dl, ok)
	}
}
