package docs_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/failsafehttp"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/hashicorp/go-retryablehttp"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// flaky answers 503 twice, then 200, and counts the requests it saw.
func flaky() (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	return srv, &n
}

// The same client with go-retryablehttp: 3 retries, exponential backoff
// from 10 ms to 1 s.
func Example_retryablehttp() {
	srv, seen := flaky()
	defer srv.Close()

	c := retryablehttp.NewClient()
	c.RetryMax = 3 // retries: 4 attempts in all
	c.RetryWaitMin = 10 * time.Millisecond
	c.RetryWaitMax = time.Second
	c.Logger = nil
	resp, err := c.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "requests")
	// Output: 200 after 3 requests
}

// The same client with stormguard: MaxAttempts counts attempts, the first
// included; the budget and the breaker are shared by every client of
// this downstream.
func Example_retryablehttpStormguard() {
	srv, seen := flaky()
	defer srv.Close()

	p := &retry.Policy{
		MaxAttempts: 4, // attempts, the first included (RetryMax + 1)
		Backoff:     backoff.Exponential{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.Full},
		Budget:      budget.NewRatio(budget.TenPercent()), // retryablehttp has none
		Breaker:     breaker.New(breaker.Config{}),        // nor this
	}
	client := httpretry.NewClient(p) // an *http.Client; httpretry.New wraps any RoundTripper
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "requests")
	// Output: 200 after 3 requests
}

// The same call with failsafe-go: a retry policy and a circuit breaker
// around an HTTP round trip.
func Example_failsafe() {
	srv, seen := flaky()
	defer srv.Close()

	// failsafehttp's retry policy retries 429, 5xx and connection errors.
	rp := failsafehttp.NewRetryPolicyBuilder().WithMaxAttempts(4).WithBackoff(10*time.Millisecond, time.Second).WithJitterFactor(0.5).Build()
	cb := circuitbreaker.NewBuilder[*http.Response]().WithFailureThreshold(5).WithDelay(10 * time.Second).Build()
	client := &http.Client{Transport: failsafehttp.NewRoundTripper(http.DefaultTransport, rp, cb)}
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "requests")
	// Output: 200 after 3 requests
}

// The same call with stormguard: the breaker's and the budget's defaults
// are the safe ones; retry.Do is the generic form of failsafe.Get.
func Example_failsafeStormguard() {
	srv, seen := flaky()
	defer srv.Close()

	p := &retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Exponential{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.Full},
		Breaker:     breaker.New(breaker.Config{ConsecutiveFailures: 5, OpenTimeout: 10 * time.Second}),
		Budget:      budget.NewRatio(budget.TenPercent()),
	}
	client := httpretry.NewClient(p)
	resp, err := client.Get(srv.URL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, "after", seen.Load(), "requests")

	// Around any function, as failsafe.With(rp, cb).Get(fn):
	n, err := retry.Do(context.Background(), p, func(ctx context.Context) (int, error) { return 42, nil })
	fmt.Println(n, err)
	// Output:
	// 200 after 3 requests
	// 42 <nil>
}

// failsafe.With(...).Get for a plain function, for the side-by-side table.
func Example_failsafeFunction() {
	rp := retrypolicy.NewBuilder[int]().WithMaxAttempts(4).WithBackoff(10*time.Millisecond, time.Second).Build()
	n, err := failsafe.With[int](rp).Get(func() (int, error) { return 42, nil })
	fmt.Println(n, err)
	// Output: 42 <nil>
}
