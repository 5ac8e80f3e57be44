package otelretry_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

// flakyServer answers 503 to its first two requests and 200 after, and
// records each request's traceparent.
type flakyServer struct {
	mu      sync.Mutex
	parents []string
}

func (s *flakyServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.parents = append(s.parents, r.Header.Get("traceparent"))
	n := len(s.parents)
	s.mu.Unlock()
	if n <= 2 {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// injecting injects the trace context of each request's own context into
// its headers, as otelhttp's transport does.
type injecting struct{ next http.RoundTripper }

func (t injecting) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	propagation.TraceContext{}.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.next.RoundTrip(r)
}

// traceparent parses a W3C traceparent header.
func traceparent(t *testing.T, h string) trace.SpanContext {
	t.Helper()
	hdr := http.Header{}
	hdr.Set("traceparent", h)
	sc := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.HeaderCarrier(hdr)))
	if !sc.IsValid() {
		t.Fatalf("invalid traceparent %q", h)
	}
	return sc
}

// TestTraceContextOnEveryAttempt: through httpretry, every attempt of a
// call reaches the server in the caller's trace. With a transport that
// injects the request context (otelhttp's way), each attempt's traceparent
// names that attempt's span; with a traceparent the caller set on the
// request itself, every attempt carries it unchanged.
func TestTraceContextOnEveryAttempt(t *testing.T) {
	for _, mode := range []string{"injecting transport", "caller's header"} {
		t.Run(mode, func(t *testing.T) {
			h := newHarness(t, otelretry.Config{})
			srv := &flakyServer{}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			base := &http.Transport{}
			defer base.CloseIdleConnections()
			var next http.RoundTripper = base
			if mode == "injecting transport" {
				next = injecting{base}
			}
			p := &retry.Policy{Operation: "api.get", MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: h.obs}
			client := &http.Client{Transport: httpretry.New(next, p)}

			ctx, parent := h.tp.Tracer("test").Start(context.Background(), "handler")
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL, nil)
			if err != nil {
				t.Fatal(err)
			}
			if mode == "caller's header" {
				propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			parent.End()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d", resp.StatusCode)
			}

			spans := attemptSpans(h)
			if len(srv.parents) != 3 || len(spans) != 3 {
				t.Fatalf("%d requests and %d attempt spans, want 3 and 3", len(srv.parents), len(spans))
			}
			traceID := parent.SpanContext().TraceID()
			for i, hdr := range srv.parents {
				sc := traceparent(t, hdr)
				if sc.TraceID() != traceID {
					t.Errorf("attempt %d reached the server in trace %s, want %s", i+1, sc.TraceID(), traceID)
				}
				want := parent.SpanContext().SpanID()
				if mode == "injecting transport" {
					want = spans[i].SpanContext().SpanID()
				}
				if sc.SpanID() != want {
					t.Errorf("attempt %d traceparent parent-id %s, want %s", i+1, sc.SpanID(), want)
				}
			}
			for i, s := range spans[:2] {
				if code, ok := attrs(s)[otelretry.AttrHTTPStatusCode]; !ok || code.AsInt64() != 503 {
					t.Errorf("attempt %d span has http.response.status_code %v, want 503", i+1, code)
				}
			}
		})
	}
}
