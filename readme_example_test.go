package stormguard_test

import (
	"context"
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

type User struct{ Name string }

// Example_quickStart is the README's quick start, compiled and run so that
// it cannot drift (TestREADMESnippetsAreCompiled). The user service
// answers at once; the HTTP server is down, and the budget shared with the
// first call refuses the retries it would take.
func Example_quickStart() {
	ctx, id := context.Background(), 7
	fetchUser := func(ctx context.Context, id int) (User, error) { return User{Name: "ada"}, nil }
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer down.Close()
	url := down.URL

	p := &retry.Policy{
		Operation:      "get-user",
		MaxAttempts:    4,
		Backoff:        backoff.Exponential{Base: 100 * time.Millisecond, Max: 5 * time.Second, Jitter: backoff.Full},
		AttemptTimeout: 2 * time.Second,
		Budget:         budget.NewRatio(budget.TenPercent()), // share one per downstream
		Breaker:        breaker.New(breaker.Config{}),        // likewise
	}
	user, err := retry.Do(ctx, p, func(ctx context.Context) (User, error) {
		return fetchUser(ctx, id)
	})
	if errors.Is(err, retry.ErrBudgetExhausted) || errors.Is(err, breaker.ErrOpen) {
		// the downstream is struggling: degrade instead of piling on
	}
	fmt.Println(user.Name, err)

	for p.Budget.Withdraw(errors.New("503")) { // a storm has spent the budget
	}
	client := httpretry.NewClient(p) // or &http.Client{Transport: httpretry.New(http.DefaultTransport, p)}
	resp, err := client.Get(url)
	if err == nil {
		defer resp.Body.Close()
		if o, ok := httpretry.Result(resp); ok {
			err = o.Err // nil unless the policy gave up on this response (budget, breaker, …)
		}
	}
	if errors.Is(err, retry.ErrBudgetExhausted) || errors.Is(err, breaker.ErrOpen) {
		// the same check holds over HTTP: degrade
	}
	fmt.Println(resp.StatusCode, errors.Is(err, retry.ErrBudgetExhausted))
	// Output:
	// ada <nil>
	// 503 true
}
