package layer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
)

// A service between a retrying client and a failing downstream. With
// Middleware installed, its own calls leave retrying to the client: the
// downstream sees one request per client attempt, not four.
func ExampleMiddleware() {
	var downstreamHits atomic.Int32
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		downstreamHits.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer downstream.Close()

	// Every policy here retries up to 4 attempts; the default layer rule,
	// retry.NestedOneLayer, applies.
	p := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	inner := &http.Transport{}
	defer inner.CloseIdleConnections()
	innerClient := &http.Client{Transport: httpretry.New(inner, p)}

	service := httptest.NewServer(layer.Middleware(layer.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		in, _ := retry.InboundOf(r.Context())
		req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, downstream.URL, nil)
		resp, err := innerClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		o, _ := httpretry.Result(resp)
		fmt.Printf("client attempt %d (retries: %v): the service made %d attempt(s)\n", in.Attempt, in.Retries, o.Attempts)
		w.WriteHeader(http.StatusBadGateway)
		return nil
	})))
	defer service.Close()

	outer := &http.Transport{}
	defer outer.CloseIdleConnections()
	resp, err := (&http.Client{Transport: httpretry.New(outer, p, httpretry.WithRetry500())}).Get(service.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println("the downstream saw", downstreamHits.Load(), "requests")
	// Output:
	// client attempt 1 (retries: true): the service made 1 attempt(s)
	// client attempt 2 (retries: true): the service made 1 attempt(s)
	// client attempt 3 (retries: true): the service made 1 attempt(s)
	// client attempt 4 (retries: true): the service made 1 attempt(s)
	// the downstream saw 4 requests
}

// Policy.Nested chooses what a call does when its inbound caller retries:
// one attempt (NestedOneLayer, the default), retries within a small
// separate budget (NestedBudget), or retries as if alone (NestedIgnore).
// Here retry.Do runs deep in a handler, with no plumbing but the context.
func ExampleMiddleware_nestedRule() {
	flaky := errors.New("flaky")
	for _, rule := range []retry.NestedRule{retry.NestedOneLayer, retry.NestedBudget, retry.NestedIgnore} {
		p := &retry.Policy{
			MaxAttempts: 3,
			Backoff:     backoff.Constant{},
			Nested:      rule,
			// Under NestedBudget: at most 1 retry in all until successes pay for more.
			NestedBudget: budget.NewRatio(budget.RatioConfig{MaxTokens: 1}),
		}
		h := layer.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			attempts := 0
			retry.Do(r.Context(), p, func(context.Context) (int, error) {
				attempts++
				return 0, flaky
			})
			fmt.Fprintf(w, "%s: %d attempt(s)", rule, attempts)
		}))
		for range 2 { // two requests from a caller that retries
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			req.Header.Set(layer.HeaderAttempt, "1")
			req.Header.Set(layer.HeaderWillRetry, "1")
			w := httptest.NewRecorder()
			h.ServeHTTP(w, req)
			body, _ := io.ReadAll(w.Body)
			fmt.Println(string(body))
		}
	}
	// Output:
	// one_layer: 1 attempt(s)
	// one_layer: 1 attempt(s)
	// budget: 2 attempt(s)
	// budget: 1 attempt(s)
	// ignore: 3 attempt(s)
	// ignore: 3 attempt(s)
}

// Limit sheds requests beyond a concurrency limit with the overload
// answer, which no client retries.
func ExampleLimit() {
	release := make(chan struct{})
	busy := make(chan struct{})
	srv := httptest.NewServer(layer.Limit(1, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(busy)
		<-release
	})))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: httpretry.New(tr, &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}})}

	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := client.Get(srv.URL); err == nil {
			resp.Body.Close()
		}
	}()
	<-busy
	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	o, _ := httpretry.Result(resp)
	fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get(layer.HeaderOverloaded), o.Reason, o.Attempts)
	close(release)
	<-done
	// Output: 503 1 1 overloaded 1
}
