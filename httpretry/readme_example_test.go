package httpretry_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// Example_readme is the README's snippets, compiled and run so that they
// cannot drift (TestREADMESnippetsAreCompiled): a budget that is already
// spent makes the call give up on the first 503, and Result says why.
func Example_readme() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()

	policy := &retry.Policy{ // one per downstream, shared by all its clients
		MaxAttempts:    4,
		Backoff:        backoff.Exponential{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.Full},
		AttemptTimeout: 2 * time.Second,
		Budget:         budget.NewRatio(budget.TenPercent()),
		Breaker:        breaker.New(breaker.Config{}),
	}
	client := &http.Client{Transport: httpretry.New(http.DefaultTransport, policy)}
	// or: client := httpretry.NewClient(policy)

	for policy.Budget.Withdraw(errors.New("503")) { // spend the budget, as a storm would
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	resp, err := client.Do(req)
	if err == nil {
		defer resp.Body.Close()
		if o, ok := httpretry.Result(resp); ok {
			err = o.Err // nil unless the policy gave up on this response
		}
	}
	if errors.Is(err, retry.ErrBudgetExhausted) || errors.Is(err, breaker.ErrOpen) {
		// the downstream is struggling: degrade instead of piling on
	}
	fmt.Println(resp.StatusCode, err)
	// Output: 503 retry: budget exhausted after 1 attempts: httpretry: 503 Service Unavailable
}
