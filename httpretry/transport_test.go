package httpretry_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// 503, 503, 200: one call, three attempts, the 200 returned, and the failed
// attempts' bodies drained so that one connection serves all three.
func TestRetriesUntilSuccessReusingTheConnection(t *testing.T) {
	srv := newServer(t, statuses(503, 503, 200))
	p, fc := fakePolicy(5)
	rt := httpretry.New(newBase(t), p)

	r := drive(t, fc, func() (*http.Response, error) { return rt.RoundTrip(get(t, srv.URL)) })
	if r.err != nil {
		t.Fatalf("RoundTrip: %v", r.err)
	}
	if r.resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200", r.resp.StatusCode)
	}
	if got := readAll(t, r.resp); got != "OK body" {
		t.Errorf("body %q", got)
	}
	if n := srv.hits.Load(); n != 3 {
		t.Errorf("server saw %d requests, want 3", n)
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("%d connections opened, want 1 (failed responses must be drained)", n)
	}
	if want := []time.Duration{100 * time.Millisecond, 100 * time.Millisecond}; !equalDurations(r.waits, want) {
		t.Errorf("waits %v, want %v", r.waits, want)
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// When the attempts run out on a retryable status, the last response comes
// back with a nil error and its body intact.
func TestLastResponseReturnedIntact(t *testing.T) {
	for _, size := range []int{10, 4 << 10, 4<<10 + 1, 64 << 10} {
		body := strings.Repeat("x", size)
		srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
			w.WriteHeader(503)
			io.WriteString(w, body)
		})
		rt := httpretry.New(newBase(t), noWait(3))
		resp, err := rt.RoundTrip(get(t, srv.URL))
		if err != nil {
			t.Fatalf("size %d: RoundTrip: %v", size, err)
		}
		if resp.StatusCode != 503 {
			t.Errorf("size %d: status %d", size, resp.StatusCode)
		}
		if got := readAll(t, resp); got != body {
			t.Errorf("size %d: body of %d bytes, want %d", size, len(got), size)
		}
		if n := srv.hits.Load(); n != 3 {
			t.Errorf("size %d: %d requests, want 3", size, n)
		}
		// Bodies up to 4 KiB are drained and the connection reused; a
		// much longer body costs its connection. (At 4 KiB + 1 net/http may
		// still reuse it, having seen the whole Content-Length.)
		wantConns := int64(1)
		if size > 8<<10 {
			wantConns = 3
		}
		if n := srv.conns.Load(); n != wantConns && size != 4<<10+1 {
			t.Errorf("size %d: %d connections, want %d", size, n, wantConns)
		}
	}
}

func TestPOSTWithoutKeyIsSentOnce(t *testing.T) {
	srv := newServer(t, statuses(503))
	rt := httpretry.New(newBase(t), noWait(5))
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("charge 10 EUR"))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("RoundTrip: %v", err)
	}
	if resp.StatusCode != 503 || readAll(t, resp) != "Service Unavailable body" {
		t.Errorf("want the 503 response intact, got %d", resp.StatusCode)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("server saw %d requests, want exactly 1", n)
	}
}

func TestPOSTWithKeyIsRetriedWithTheSameBody(t *testing.T) {
	const payload = `{"amount": 10, "currency": "EUR"}`
	bodies := []struct {
		name string
		body func() io.Reader
	}{
		{"GetBody", func() io.Reader { return strings.NewReader(payload) }},                         // http.NewRequest sets GetBody
		{"buffered", func() io.Reader { return io.LimitReader(strings.NewReader(payload), 1<<20) }}, // no GetBody
	}
	for _, tc := range bodies {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
				b, _ := io.ReadAll(r.Body)
				got = append(got, string(b)) // requests are sequential
				if hit < 3 {
					w.WriteHeader(503)
					return
				}
				w.WriteHeader(201)
			})
			rt := httpretry.New(newBase(t), noWait(5))
			req, _ := http.NewRequest(http.MethodPost, srv.URL, tc.body())
			req.Header.Set("Idempotency-Key", "8e03978e-40d5-43e8-bc93-6894a57f9324")
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			}
			readAll(t, resp)
			if resp.StatusCode != 201 {
				t.Errorf("status %d, want 201", resp.StatusCode)
			}
			if len(got) != 3 {
				t.Fatalf("server saw %d requests, want 3", len(got))
			}
			for i, b := range got {
				if b != payload {
					t.Errorf("attempt %d sent body %q, want %q", i+1, b, payload)
				}
			}
		})
	}
}

// The request body is closed exactly once, on every path.
func TestRequestBodyClosedOnce(t *testing.T) {
	srv := newServer(t, statuses(503, 503, 200))
	cases := []struct {
		name    string
		method  string
		size    int
		limit   int64
		breaker *stubBreaker
		hits    int64
	}{
		{"buffered and retried", http.MethodPut, 100, 0, nil, 3},
		{"too large, sent once", http.MethodPut, 100, 10, nil, 1},
		{"not repeatable", http.MethodPatch, 100, 0, nil, 1},
		{"breaker open, repeatable", http.MethodPut, 100, 0, &stubBreaker{open: true}, 0},
		{"breaker open, not repeatable", http.MethodPost, 100, 0, &stubBreaker{open: true}, 0},
		{"breaker open, too large", http.MethodPut, 100, 10, &stubBreaker{open: true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.hits.Store(0)
			p := noWait(3)
			if tc.breaker != nil {
				p.Breaker = tc.breaker
			}
			rt := httpretry.New(newBase(t), p, httpretry.WithBodyLimit(tc.limit))
			payload := bytes.Repeat([]byte("b"), tc.size)
			body := &countingBody{Reader: bytes.NewReader(payload)}
			req, _ := http.NewRequest(tc.method, srv.URL, body)
			resp, err := rt.RoundTrip(req)
			if tc.breaker != nil {
				if !errors.Is(err, errOpen) {
					t.Fatalf("err %v, want the breaker's", err)
				}
			} else if err != nil {
				t.Fatalf("RoundTrip: %v", err)
			} else {
				readAll(t, resp)
			}
			if n := srv.hits.Load(); n != tc.hits {
				t.Errorf("%d requests, want %d", n, tc.hits)
			}
			// The transport below may close the body just after RoundTrip
			// returns (its write loop); closing idle connections waits for
			// nothing, so poll the count, bounded.
			waitFor(t, func() bool { return body.closes.Load() >= 1 })
			if n := body.closes.Load(); n != 1 {
				t.Errorf("body closed %d times, want 1", n)
			}
		})
	}
}

// waitFor polls cond, for conditions that another goroutine makes true
// shortly (not a backoff wait); it fails the test after 5s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

// A body above the buffering limit is streamed whole, and the request is
// sent once even though the method is idempotent.
func TestLargeBodySentOnceIntact(t *testing.T) {
	var got []byte
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		got, _ = io.ReadAll(r.Body)
		w.WriteHeader(503)
	})
	rt := httpretry.New(newBase(t), noWait(3), httpretry.WithBodyLimit(1000))
	payload := bytes.Repeat([]byte("0123456789"), 1000)
	req, _ := http.NewRequest(http.MethodPut, srv.URL, io.NopCloser(bytes.NewReader(payload)))
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if !bytes.Equal(got, payload) {
		t.Errorf("server got %d bytes, want %d identical", len(got), len(payload))
	}
}

func TestStatusClassification(t *testing.T) {
	cases := []struct {
		code  int
		hits  int64
		opts  []httpretry.Option
		label string
	}{
		{code: 408, hits: 3}, {code: 429, hits: 3}, {code: 502, hits: 3}, {code: 503, hits: 3}, {code: 504, hits: 3},
		{code: 400, hits: 1}, {code: 401, hits: 1}, {code: 403, hits: 1}, {code: 404, hits: 1},
		{code: 409, hits: 1}, {code: 422, hits: 1}, {code: 501, hits: 1}, {code: 500, hits: 1},
		{code: 200, hits: 1}, {code: 204, hits: 1}, {code: 304, hits: 1},
		{code: 500, hits: 3, opts: []httpretry.Option{httpretry.WithRetry500()}, label: "WithRetry500"},
		{code: 501, hits: 1, opts: []httpretry.Option{httpretry.WithRetry500()}, label: "WithRetry500"},
		{code: 404, hits: 3, label: "custom classifier", opts: []httpretry.Option{httpretry.WithClassifier(
			func(resp *http.Response, err error) bool { return resp != nil && resp.StatusCode == 404 })}},
		{code: 503, hits: 1, label: "custom classifier", opts: []httpretry.Option{httpretry.WithClassifier(
			func(resp *http.Response, err error) bool { return resp != nil && resp.StatusCode == 404 })}},
	}
	for _, tc := range cases {
		srv := newServer(t, statuses(tc.code))
		rt := httpretry.New(newBase(t), noWait(3), tc.opts...)
		resp, err := rt.RoundTrip(get(t, srv.URL))
		if err != nil {
			t.Fatalf("%d %s: %v", tc.code, tc.label, err)
		}
		readAll(t, resp)
		if resp.StatusCode != tc.code {
			t.Errorf("%d %s: status %d returned", tc.code, tc.label, resp.StatusCode)
		}
		if n := srv.hits.Load(); n != tc.hits {
			t.Errorf("%d %s: %d requests, want %d", tc.code, tc.label, n, tc.hits)
		}
	}
}

// The custom classifier sees the response: here it retries a 200 whose
// header says the result is not ready.
func TestClassifierSeesResponse(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		if hit < 2 {
			w.Header().Set("X-Status", "pending")
		}
		io.WriteString(w, "done")
	})
	rt := httpretry.New(newBase(t), noWait(5), httpretry.WithClassifier(func(resp *http.Response, err error) bool {
		if resp != nil && resp.Header.Get("X-Status") == "pending" {
			return true
		}
		return httpretry.DefaultClassifier(resp, err)
	}))
	resp, err := rt.RoundTrip(get(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if n := srv.hits.Load(); n != 2 || resp.Header.Get("X-Status") != "" {
		t.Errorf("%d requests, want 2 ending with the ready response", n)
	}
}

// WithRetryable widens and narrows the set of repeatable requests.
func TestWithRetryable(t *testing.T) {
	srv := newServer(t, statuses(503))
	never := httpretry.WithRetryable(func(*http.Request) bool { return false })
	always := httpretry.WithRetryable(func(*http.Request) bool { return true })
	cases := []struct {
		method string
		opt    httpretry.Option
		hits   int64
	}{
		{http.MethodGet, never, 1},
		{http.MethodPost, always, 3},
		{http.MethodPatch, nil, 1},
		{http.MethodDelete, nil, 3},
	}
	for _, tc := range cases {
		srv.hits.Store(0)
		rt := httpretry.New(newBase(t), noWait(3), tc.opt)
		req, _ := http.NewRequest(tc.method, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
		if n := srv.hits.Load(); n != tc.hits {
			t.Errorf("%s: %d requests, want %d", tc.method, n, tc.hits)
		}
	}
}

func TestIdempotent(t *testing.T) {
	cases := []struct {
		method string
		header string
		want   bool
	}{
		{"", "", true}, {"GET", "", true}, {"HEAD", "", true}, {"OPTIONS", "", true}, {"TRACE", "", true},
		{"PUT", "", true}, {"DELETE", "", true},
		{"POST", "", false}, {"PATCH", "", false}, {"CONNECT", "", false}, {"get", "", false},
		{"POST", "Idempotency-Key", true}, {"PATCH", "X-Idempotency-Key", true},
	}
	for _, tc := range cases {
		req := &http.Request{Method: tc.method, Header: http.Header{}}
		if tc.header != "" {
			req.Header.Set(tc.header, "k1")
		}
		if got := httpretry.Idempotent(req); got != tc.want {
			t.Errorf("Idempotent(%q, %q) = %v, want %v", tc.method, tc.header, got, tc.want)
		}
	}
}

// Every attempt carries the original headers; WithAttemptHeader adds the
// attempt number; the caller's request is left exactly as it was.
func TestHeadersOnEveryAttemptAndRequestUntouched(t *testing.T) {
	type seen struct{ traceparent, tracestate, auth, attempt, custom string }
	var got []seen
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		got = append(got, seen{r.Header.Get("traceparent"), r.Header.Get("tracestate"),
			r.Header.Get("Authorization"), r.Header.Get("X-Attempt"), r.Header.Get("X-Custom")})
		if hit < 3 {
			w.WriteHeader(502)
		}
	})
	rt := httpretry.New(newBase(t), noWait(3), httpretry.WithAttemptHeader("x-attempt"))
	ctx := context.WithValue(context.Background(), ctxKey{}, "v")
	req, _ := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, strings.NewReader("doc"))
	req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	req.Header.Set("tracestate", "congo=t61rcWkgMzE")
	req.Header.Set("Authorization", "Bearer s3cr3t")
	req.Header["X-Custom"] = []string{"a"}
	before := snapshot(req)

	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if len(got) != 3 {
		t.Fatalf("%d attempts, want 3", len(got))
	}
	for i, s := range got {
		want := seen{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "congo=t61rcWkgMzE",
			"Bearer s3cr3t", string(rune('1' + i)), "a"}
		if s != want {
			t.Errorf("attempt %d headers %+v, want %+v", i+1, s, want)
		}
	}
	if after := snapshot(req); after != before {
		t.Errorf("request modified:\nbefore %s\nafter  %s", before, after)
	}
	// After retries resp.Request is the caller's request carrying the
	// call's Outcome (see Result): a shallow copy whose fields, header map
	// included, are the caller's, not an attempt's.
	if r := resp.Request; r.Method != req.Method || r.URL != req.URL || reflect.ValueOf(r.Header).Pointer() != reflect.ValueOf(req.Header).Pointer() ||
		r.Context().Value(ctxKey{}) != "v" {
		t.Error("resp.Request is not the caller's request")
	}
	if o, ok := httpretry.Result(resp); !ok || o.Attempts != 3 {
		t.Errorf("Result = %+v, %v; want success after 3 attempts", o, ok)
	}
}

type ctxKey struct{}

// snapshot describes the fields of a request a RoundTripper must not change.
func snapshot(r *http.Request) string {
	var b strings.Builder
	b.WriteString(r.Method + " " + r.URL.String() + " ")
	for _, k := range []string{"Traceparent", "Tracestate", "Authorization", "X-Custom", "X-Attempt"} {
		b.WriteString(k + "=" + strings.Join(r.Header[k], ",") + " ")
	}
	b.WriteString(strings.Repeat("h", len(r.Header)))
	if r.Context().Value(ctxKey{}) != "v" {
		b.WriteString(" ctx-changed")
	}
	if r.GetBody == nil {
		b.WriteString(" no-getbody")
	}
	return b.String()
}

// Non-idempotent requests still pass through the breaker, as one attempt,
// and what the breaker is told distinguishes downstream failures from
// client errors.
func TestBreakerSeesEveryAttempt(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request, hit int) {
		switch r.URL.Path {
		case "/404":
			w.WriteHeader(404)
		case "/500":
			w.WriteHeader(500)
		default:
			w.WriteHeader(503)
		}
	})
	br := &stubBreaker{}
	p := noWait(2)
	p.Breaker = br
	rt := httpretry.New(newBase(t), p)
	for _, path := range []string{"/503", "/404", "/500"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("x"))
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		readAll(t, resp)
	}
	errs := br.results()
	if len(errs) != 3 {
		t.Fatalf("breaker saw %d attempts, want 3 (one per POST)", len(errs))
	}
	var se *httpretry.StatusError
	if !errors.As(errs[0], &se) || se.StatusCode != 503 || retry.IsPermanent(errs[0]) {
		t.Errorf("503: breaker told %v, want a non-permanent *StatusError", errs[0])
	}
	if !errors.As(errs[1], &se) || se.StatusCode != 404 || !retry.IsPermanent(errs[1]) {
		t.Errorf("404: breaker told %v, want a permanent *StatusError", errs[1])
	}
	if !errors.As(errs[2], &se) || se.StatusCode != 500 || retry.IsPermanent(errs[2]) {
		t.Errorf("500: breaker told %v, want a non-permanent *StatusError", errs[2])
	}
	if got := errs[0].Error(); got != "httpretry: 503 Service Unavailable" {
		t.Errorf("message %q", got)
	}

	br.open = true
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
	if _, err := rt.RoundTrip(req); !errors.Is(err, errOpen) {
		t.Errorf("open breaker: err %v, want it to fail fast with the breaker's error", err)
	}
	if n := srv.hits.Load(); n != 3 {
		t.Errorf("%d requests reached the server, want 3", n)
	}
}

// When the budget refuses a retry, the response that would have been
// retried is returned, intact.
func TestBudgetRefusalReturnsLastResponse(t *testing.T) {
	srv := newServer(t, statuses(503, 200))
	b := &refusingBudget{}
	p := noWait(3)
	p.Budget = b
	rt := httpretry.New(newBase(t), p)
	resp, err := rt.RoundTrip(get(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || readAll(t, resp) != "Service Unavailable body" {
		t.Errorf("want the 503 intact, got %d", resp.StatusCode)
	}
	if srv.hits.Load() != 1 || b.withdrawals.Load() != 1 || b.records.Load() != 1 {
		t.Errorf("hits %d withdrawals %d records %d, want 1 1 1", srv.hits.Load(), b.withdrawals.Load(), b.records.Load())
	}
}

// A GetBody that fails on a retry ends the call with the previous
// response, intact.
func TestGetBodyFailureReturnsPreviousResponse(t *testing.T) {
	srv := newServer(t, statuses(503, 200))
	rt := httpretry.New(newBase(t), noWait(3))
	req, _ := http.NewRequest(http.MethodPut, srv.URL, strings.NewReader("x"))
	req.GetBody = func() (io.ReadCloser, error) { return nil, errors.New("gone") }
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 503 || readAll(t, resp) != "Service Unavailable body" {
		t.Errorf("want the 503 intact, got %d", resp.StatusCode)
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestNewClientAndCloseIdleConnections(t *testing.T) {
	srv := newServer(t, statuses(502, 200))
	c := httpretry.NewClient(noWait(3))
	defer c.CloseIdleConnections() // reaches http.DefaultTransport through Transport
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, resp)
	if resp.StatusCode != 200 || srv.hits.Load() != 2 {
		t.Errorf("status %d after %d requests, want 200 after 2", resp.StatusCode, srv.hits.Load())
	}
	if _, ok := c.Transport.(*httpretry.Transport); !ok {
		t.Errorf("transport %T", c.Transport)
	}
}

// A nil policy is the zero policy, a nil next is http.DefaultTransport.
func TestNilPolicyAndNext(t *testing.T) {
	srv := newServer(t, statuses(200))
	rt := httpretry.New(nil, nil)
	defer rt.(*httpretry.Transport).CloseIdleConnections()
	resp, err := rt.RoundTrip(get(t, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if readAll(t, resp); resp.StatusCode != 200 {
		t.Errorf("status %d", resp.StatusCode)
	}
}
