package retry_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// bigBudget is a Budget of the user's own with memory that the fused path
// would write into if it took the value for a *budget.Ratio.
type bigBudget struct{ mem [8192]byte }

func (*bigBudget) Record(bool, error)  {}
func (*bigBudget) Withdraw(error) bool { return true }

// mutatingCtx is a context whose Err changes the Policy, as a context of
// the user's may: the last user code before the first attempt.
type mutatingCtx struct {
	context.Context
	f func()
}

func (c mutatingCtx) Err() error { c.f(); return c.Context.Err() }

// TestFusedPolicyChangedByOp: the fused first attempt (a *breaker.Breaker
// and a *budget.Ratio) uses the breaker and the budget it checked, even
// when op, or the context's Err just before it, changes the Policy
// (against the Policy's doc, but it must not corrupt memory or crash):
// another type is never taken for a *budget.Ratio or a *breaker.Breaker.
func TestFusedPolicyChangedByOp(t *testing.T) {
	t.Run("budget changed by op", func(t *testing.T) {
		bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 0.1})
		mine := &bigBudget{}
		p := &retry.Policy{Budget: bu}
		retry.Do(context.Background(), p, func(context.Context) (int, error) { p.Budget = mine; return 1, nil })
		for i, b := range mine.mem {
			if b != 0 {
				t.Fatalf("the user's budget was written at byte %d (%#x): it was taken for a *budget.Ratio", i, b)
			}
		}
		if s := bu.Stats(); s.Requests != 1 {
			t.Errorf("the Ratio checked heard %d requests, want 1", s.Requests)
		}
	})
	t.Run("breaker dropped by op", func(t *testing.T) {
		br := breaker.New(breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Hour})
		p := &retry.Policy{Breaker: br}
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Do panicked: %v", r)
			}
		}()
		retry.Do(context.Background(), p, func(context.Context) (int, error) { p.Breaker = nil; return 1, nil })
		if c := br.Counts(); c.Successes != 1 {
			t.Errorf("breaker counts %+v, want the success", c)
		}
	})
	t.Run("budget changed by the context's Err", func(t *testing.T) {
		bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 0.1})
		mine := &bigBudget{}
		p := &retry.Policy{Budget: bu}
		ctx := mutatingCtx{Context: context.Background(), f: func() { p.Budget = mine }}
		retry.Do(ctx, p, func(context.Context) (int, error) { return 1, nil })
		for i, b := range mine.mem {
			if b != 0 {
				t.Fatalf("the user's budget was written at byte %d (%#x)", i, b)
			}
		}
	})
}
