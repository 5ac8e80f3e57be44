package awssdk_test

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// TestBudgetTrackerWithoutMiddlewareFailSafe (s4 aws 4): without the
// Retryer's middleware the SDK gives a retryer no way to learn that a
// granted retry never ran (its token's release is dropped) nor that an
// attempt panicked while sent, so a retry.BudgetTracker's grant would
// hold its slot for good: a Policy whose Budget, or NestedBudget under
// NestedBudget, is a BudgetTracker fails every operation at once with
// ErrMiddlewareMissing, before any request and before the tracker counts
// anything. Before, the grant of a retry the Limiter refused leaked.
func TestBudgetTrackerWithoutMiddlewareFailSafe(t *testing.T) {
	for _, nested := range []bool{false, true} {
		e := newEndpoint(t)
		conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
		policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
		policy.Limiter = retryRefuser{}
		ctx := context.Background()
		if nested {
			policy.Nested, policy.NestedBudget = retry.NestedBudget, conc
			ctx = retry.WithInbound(ctx, retry.Inbound{Attempt: 1, Retries: true})
		} else {
			policy.Budget = conc
		}
		c := e.client(t, config.WithRetryer(awssdk.Provider(policy)))
		var err error
		if n := e.play([]reply{internal, ok200}, func() { err = getItemCtx(ctx, c) }); n != 0 {
			t.Errorf("nested %v: %d requests without the middleware, want 0", nested, n)
		}
		if !errors.Is(err, awssdk.ErrMiddlewareMissing) {
			t.Errorf("nested %v: error %v, want ErrMiddlewareMissing", nested, err)
		}
		if got := conc.Available(); got != 1 {
			t.Errorf("nested %v: Available() = %v after the operation, want 1", nested, got)
		}
		if req, ret := conc.Active(); req != 0 || ret != 0 {
			t.Errorf("nested %v: Active() = %d requests, %d retries, want 0, 0", nested, req, ret)
		}
	}
}
