package hedge_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// bigBudget is a Budget of the user's own with memory that the fused
// first attempt would write into if it took the value for a
// *budget.Ratio.
type bigBudget struct{ mem [8192]byte }

func (*bigBudget) Record(bool, error)  {}
func (*bigBudget) Withdraw(error) bool { return true }

// errCtx is a context whose Err runs f, as a context of the user's may:
// the last user code before the first attempt.
type errCtx struct {
	context.Context
	f func()
}

func (c errCtx) Err() error { c.f(); return c.Context.Err() }

// TestFusedPolicyChangedByOp: hedge.Do's first attempt under a
// *breaker.Breaker and a *budget.Ratio, answered before the delay, is
// counted by the breaker and the budget checked before it, as retry.Do's
// fused first attempt is, even when op, or the context's Err just before
// it, changes the Policy: another type is never taken for a *budget.Ratio
// or a *breaker.Breaker.
func TestFusedPolicyChangedByOp(t *testing.T) {
	t.Run("budget changed by op", func(t *testing.T) {
		bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 0.1})
		mine := &bigBudget{}
		p := &retry.Policy{Budget: bu}
		h := &hedge.Hedger{Policy: p, Delay: time.Hour}
		v, err := hedge.Do(context.Background(), h, func(context.Context) (int, error) { p.Budget = mine; return 1, nil }, nil)
		if v != 1 || err != nil {
			t.Fatalf("Do = %v, %v", v, err)
		}
		for i, b := range mine.mem {
			if b != 0 {
				t.Fatalf("the user's budget was written at byte %d (%#x): it was taken for a *budget.Ratio", i, b)
			}
		}
		if s := bu.Stats(); s.Requests != 1 || s.Deposits != 1 {
			t.Errorf("the Ratio checked heard %d requests, %d deposits, want 1, 1", s.Requests, s.Deposits)
		}
	})
	t.Run("breaker dropped by op", func(t *testing.T) {
		br := breaker.New(breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Hour})
		bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 0.1})
		p := &retry.Policy{Breaker: br, Budget: bu}
		h := &hedge.Hedger{Policy: p, Delay: time.Hour}
		hedge.Do(context.Background(), h, func(context.Context) (int, error) { p.Breaker, p.Budget = nil, nil; return 1, nil }, nil)
		if c := br.Counts(); c.Successes != 1 {
			t.Errorf("breaker counts %+v, want the success", c)
		}
		if s := bu.Stats(); s.Requests != 1 {
			t.Errorf("the Ratio checked heard %d requests, want 1", s.Requests)
		}
	})
	t.Run("budget changed by the context's Err", func(t *testing.T) {
		bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 0.1})
		mine := &recordingBudget{}
		p := &retry.Policy{Budget: bu}
		h := &hedge.Hedger{Policy: p, Delay: time.Hour}
		ctx := errCtx{Context: context.Background(), f: func() { p.Budget = mine }}
		if _, err := hedge.Do(ctx, h, func(context.Context) (int, error) { return 1, nil }, nil); err != nil {
			t.Fatal(err)
		}
		if len(mine.records) != 1 || mine.records[0] != nil {
			t.Errorf("the budget set by Err heard %v, want one success", mine.records)
		}
		if s := bu.Stats(); s.Requests != 0 {
			t.Errorf("the Ratio replaced heard %d requests, want 0", s.Requests)
		}
	})
}

// TestFusedBreakerStates: the first attempt under a *breaker.Breaker
// answered before the delay is counted in every state: a success ends a
// run of consecutive failures, an open breaker refuses with its prebuilt
// *retry.Error (the one retry.Do returns), and a half-open breaker's probe
// that succeeds closes it.
func TestFusedBreakerStates(t *testing.T) {
	clk := clocktest.NewFake()
	br := breaker.New(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Second, Clock: clk})
	bu := budget.NewRatio(budget.TenPercent())
	p := &retry.Policy{Breaker: br, Budget: bu}
	h := &hedge.Hedger{Policy: p, Delay: time.Hour}
	ctx := context.Background()
	ok := func(context.Context) (int, error) { return 1, nil }
	fail := func() {
		done, err := br.Allow()
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		done(errors.New("down"))
	}

	fail()
	if v, err := hedge.Do(ctx, h, ok, nil); v != 1 || err != nil {
		t.Fatalf("Do = %v, %v", v, err)
	}
	fail() // a new run of failures: one, not two
	if st := br.State(); st != breaker.Closed {
		t.Fatalf("state %v after fail, success, fail: the success did not end the run", st)
	}
	fail()
	if st := br.State(); st != breaker.Open {
		t.Fatalf("state %v after two failures, want open", st)
	}
	_, want := retry.Do(ctx, p, ok)
	if _, err := hedge.Do(ctx, h, ok, nil); err == nil || err != want || !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Do on an open breaker = %v, want retry.Do's refusal %v", err, want)
	}
	clk.Advance(2 * time.Second)
	if v, err := hedge.Do(ctx, h, ok, nil); v != 1 || err != nil {
		t.Fatalf("the probe: Do = %v, %v", v, err)
	}
	if st := br.State(); st != breaker.Closed {
		t.Fatalf("state %v after a successful probe, want closed", st)
	}
	if s := bu.Stats(); s.Requests != 2 || s.Deposits != 2 {
		t.Errorf("budget heard %d requests, %d deposits, want 2, 2 (a refused call is none)", s.Requests, s.Deposits)
	}
}
