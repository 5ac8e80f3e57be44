package httpretry_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

func ExampleNew() {
	// A server that is unavailable for its first two requests.
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) <= 2 {
			w.Header().Set("Retry-After", "0")
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "hello")
	}))
	defer srv.Close()

	// One policy per downstream, shared by every client of it.
	policy := &retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Exponential{Base: time.Millisecond, Max: 10 * time.Millisecond, Jitter: backoff.Full},
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: httpretry.New(base, policy, httpretry.WithAttemptHeader("X-Attempt"))}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", hits.Load(), "attempts")
	// Output: 200 hello after 3 attempts
}

// A POST is sent once; with an Idempotency-Key it may be retried.
func ExampleNew_idempotencyKey() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1)%2 == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: httpretry.New(base, &retry.Policy{
		MaxAttempts: 3,
		Backoff:     backoff.Constant{Interval: time.Millisecond},
	})}

	resp, _ := client.Post(srv.URL, "application/json", strings.NewReader(`{"amount":10}`))
	resp.Body.Close()
	fmt.Println("without key:", resp.StatusCode)

	hits.Store(0)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{"amount":10}`))
	req.Header.Set("Idempotency-Key", "order-1234")
	resp, _ = client.Do(req)
	resp.Body.Close()
	fmt.Println("with key:", resp.StatusCode)
	// Output:
	// without key: 502
	// with key: 201
}

func ExampleParseRetryAfter() {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, v := range []string{"120", "Tue, 01 Jan 2030 12:00:30 GMT", "99999999999", "soon"} {
		d, ok := httpretry.ParseRetryAfter(v, now)
		fmt.Println(d, ok)
	}
	// Output:
	// 2m0s true
	// 30s true
	// 2562047h47m16.854775807s true
	// 0s false
}

func ExampleWithRetryable() {
	// Retry what is idempotent except the payments endpoint, and also the
	// read-only searches a search API takes by POST.
	repeatable := func(r *http.Request) bool {
		if r.URL.Path == "/payments" {
			return false
		}
		return httpretry.Idempotent(r) || r.URL.Path == "/search"
	}
	rt := httpretry.New(nil, &retry.Policy{MaxAttempts: 3}, httpretry.WithRetryable(repeatable))
	_ = &http.Client{Transport: rt}

	for _, r := range []struct{ method, path string }{
		{"GET", "/orders"}, {"PUT", "/payments"}, {"POST", "/search"}, {"POST", "/orders"},
	} {
		req, _ := http.NewRequest(r.method, "http://api.example/"+r.path[1:], nil)
		fmt.Println(r.method, r.path, repeatable(req))
	}
	// Output:
	// GET /orders true
	// PUT /payments false
	// POST /search true
	// POST /orders false
}

func ExampleWithClassifier() {
	// Retry also a 200 whose body is not ready yet, as the server says in
	// a header, on top of the default rules.
	classify := func(resp *http.Response, err error) bool {
		if resp != nil && resp.Header.Get("X-Job-State") == "pending" {
			return true
		}
		return httpretry.DefaultClassifier(resp, err)
	}
	rt := httpretry.New(nil, nil, httpretry.WithClassifier(classify), httpretry.WithRetry500())
	_ = &http.Client{Transport: rt}
	fmt.Println(classify(&http.Response{StatusCode: 404}, nil), classify(&http.Response{StatusCode: 503}, nil))
	// Output: false true
}

// The policy gave up on a response: Result says why.
func ExampleResult() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "busy", http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	policy := &retry.Policy{
		MaxAttempts: 4,
		Budget:      budget.NewRatio(budget.RatioConfig{StartEmpty: true}), // grants no retry before successes paid for it
		Backoff:     backoff.Constant{},
	}
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: httpretry.New(base, policy)}

	resp, err := client.Get(srv.URL)
	if err == nil {
		defer resp.Body.Close()
		if o, ok := httpretry.Result(resp); ok {
			fmt.Println(resp.StatusCode, o.Reason, "after", o.Attempts, "attempt(s)")
			err = o.Err // nil unless the policy gave up on this response
		}
	}
	if errors.Is(err, retry.ErrBudgetExhausted) || errors.Is(err, breaker.ErrOpen) {
		fmt.Println("degrade:", err)
	}
	// Output:
	// 503 budget after 1 attempt(s)
	// degrade: retry: budget exhausted after 1 attempts: httpretry: 503 Service Unavailable
}
