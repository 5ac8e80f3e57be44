package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// These tests drive the budgets through retry.Do, as users do.

// calls runs n calls of op through Do with p and returns the attempts made
// and the calls that ended because the budget refused.
func calls(t *testing.T, p *retry.Policy, n int, op func(ctx context.Context) error) (attempts, refused int) {
	t.Helper()
	for range n {
		err := retry.Run(context.Background(), p, func(ctx context.Context) error {
			attempts++
			return op(ctx)
		})
		if errors.Is(err, retry.ErrBudgetExhausted) {
			refused++
		}
	}
	return attempts, refused
}

// A downstream that fails every call: with 4 attempts per call and no
// budget, 10,000 calls make 40,000 attempts; with the 10% budget, the calls
// make their 10,000 first attempts and the bucket's 10 starting retries, and
// nothing more, since no call succeeds to pay for retries.
func TestDoTenPercentBudgetStopsAStorm(t *testing.T) {
	down := func(context.Context) error { return errDown }
	p := retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	if attempts, _ := calls(t, &p, 10_000, down); attempts != 40_000 {
		t.Fatalf("without a budget: %d attempts, want 40000", attempts)
	}

	p.Budget = budget.NewRatio(budget.TenPercent())
	attempts, refused := calls(t, &p, 10_000, down)
	t.Logf("with the 10%% budget: %d attempts, %d calls stopped by the budget", attempts, refused)
	if attempts > 11_000 {
		t.Fatalf("with the 10%% budget: %d attempts for 10000 calls, want at most 11000", attempts)
	}
	if attempts != 10_010 || refused != 10_000-3 { // 10 retries: 3 calls of 4 attempts, 1 of 2
		t.Fatalf("with the 10%% budget: %d attempts, %d refused; want 10010 and 9997", attempts, refused)
	}
}

// A downstream that fails half the attempts, at random: the budget keeps
// retries at a tenth of the successful first attempts (plus the 10 starting
// tokens), where unbudgeted retries nearly double the load.
func TestDoTenPercentBudgetFlakyDownstream(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var firstOK int
	flaky := func(ctx context.Context) error {
		if rng.IntN(2) == 0 {
			return errDown
		}
		return nil
	}
	p := retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	unbudgeted, _ := calls(t, &p, 10_000, flaky)

	p.Budget = budget.NewRatio(budget.TenPercent())
	p.Observer = firstAttempts{ok: &firstOK}
	attempts, _ := calls(t, &p, 10_000, flaky)
	t.Logf("flaky downstream: %d attempts without a budget, %d with (%d first attempts succeeded)", unbudgeted, attempts, firstOK)
	if unbudgeted < 18_000 {
		t.Fatalf("without a budget: %d attempts, want about 18750", unbudgeted)
	}
	if bound := 10_000 + firstOK/10 + 10; attempts > bound {
		t.Fatalf("with the budget: %d attempts, want at most %d", attempts, bound)
	}
}

type firstAttempts struct {
	retry.NopObserver
	ok *int
}

func (f firstAttempts) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	if e.Attempt == 1 && e.Err == nil {
		*f.ok++
	}
}

// timerClock is a fake clock that counts the timers made on it. A timer
// fires at once (the clock jumps to it), so a wait that should not happen
// fails the test instead of hanging it.
type timerClock struct {
	*clocktest.Fake
	timers atomic.Int32
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	c.timers.Add(1)
	t := c.Fake.NewTimer(d)
	c.Fake.Advance(d)
	return t
}

// When the budget refuses, Do returns at once: no wait, no further attempt,
// an error matching both ErrBudgetExhausted and the last attempt's error,
// and a CallEnd with ReasonBudget.
func TestDoBudgetRefusalReturnsAtOnce(t *testing.T) {
	clk := &timerClock{Fake: clocktest.NewFake()}
	obs := new(retrytest.Recorder)
	b := budget.NewRatio(budget.RatioConfig{MaxTokens: 2}) // two retries
	p := retry.Policy{
		Operation: "get",
		Backoff:   backoff.Constant{Interval: time.Second},
		Budget:    b,
		Clock:     clk,
		Observer:  obs,
		// No count limit: only the budget can stop this call.
		MaxAttempts: retry.Unlimited,
	}
	var attemptErrs []error
	t0 := clk.Now()
	err := retry.Run(context.Background(), &p, func(context.Context) error {
		e := fmt.Errorf("attempt %d: %w", len(attemptErrs)+1, errDown)
		attemptErrs = append(attemptErrs, e)
		return e
	})
	if len(attemptErrs) != 3 {
		t.Fatalf("%d attempts, want 3 (two retries granted)", len(attemptErrs))
	}
	last := attemptErrs[2]
	if !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, last) {
		t.Fatalf("Do returned %v; want ErrBudgetExhausted wrapping %v", err, last)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 3 || re.Last != last {
		t.Fatalf("Do returned %#v", err)
	}
	// Two waits of 1s for the two granted retries, none after the refusal.
	if n := clk.timers.Load(); n != 2 {
		t.Fatalf("%d timers made, want 2", n)
	}
	if d := clk.Since(t0); d != 2*time.Second {
		t.Fatalf("Do took %v of fake time, want 2s", d)
	}
	if clk.Pending() != 0 {
		t.Fatalf("%d timers pending", clk.Pending())
	}
	if len(obs.Retries()) != 2 {
		t.Fatalf("%d RetryScheduled events, want 2", len(obs.Retries()))
	}
	if ends := obs.Calls(); len(ends) != 1 || ends[0].Reason != retry.ReasonBudget || ends[0].Attempts != 3 || !errors.Is(ends[0].Err, retry.ErrBudgetExhausted) {
		t.Fatalf("CallEnd events %+v, want one with ReasonBudget after 3 attempts", ends)
	}
	if s := b.Stats(); s.Granted != 2 || s.Refused != 1 {
		t.Fatalf("Stats() = %+v", s)
	}

	// The bucket is empty: the next failing call makes one attempt, starts
	// no timer and returns.
	obs.Reset()
	calls := 0
	err = retry.Run(context.Background(), &p, func(context.Context) error { calls++; return errDown })
	if calls != 1 || !errors.Is(err, retry.ErrBudgetExhausted) || !errors.Is(err, errDown) {
		t.Fatalf("%d attempts, err %v", calls, err)
	}
	if n := clk.timers.Load(); n != 2 {
		t.Fatalf("a timer was made after the refusal (%d in all)", n)
	}
	if ends := obs.Calls(); len(ends) != 1 || ends[0].Reason != retry.ReasonBudget || ends[0].Attempts != 1 {
		t.Fatalf("CallEnd events %+v", ends)
	}
}

// Every budget works behind Do, shared by concurrent callers.
func TestDoSharedBudgets(t *testing.T) {
	clk := clocktest.NewFake()
	for _, tc := range []struct {
		name string
		b    interface {
			retry.Budget
			Stats() budget.Stats
		}
		maxRetries uint64
	}{
		{"Ratio", budget.NewRatio(awsretry.StandardLegacy()), 100},               // 500 tokens / 5
		{"Window", budget.NewWindow(budget.WindowConfig{Clock: clk}), 300},       // 20% of 1000 + 100
		{"Concurrency", budget.NewConcurrency(budget.ConcurrencyConfig{}), 3000}, // 3 active at most
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}, Budget: tc.b}
			var attempts atomic.Int64
			var wg sync.WaitGroup
			for range 10 {
				wg.Go(func() {
					for range 100 {
						_ = retry.Run(context.Background(), &p, func(context.Context) error {
							attempts.Add(1)
							return errDown
						})
					}
				})
			}
			wg.Wait()
			s := tc.b.Stats()
			if s.Requests != 1000 || s.Granted > tc.maxRetries || uint64(attempts.Load()) != 1000+s.Granted {
				t.Fatalf("%d attempts; Stats() = %+v", attempts.Load(), s)
			}
			if tc.name != "Concurrency" && s.Granted != tc.maxRetries {
				t.Fatalf("granted %d retries, want the whole budget, %d", s.Granted, tc.maxRetries)
			}
		})
	}
}

// A retry abandoned during its wait gives its concurrency back (Do calls
// Refund), and an attempt in flight counts as active.
func TestDoConcurrencyRefund(t *testing.T) {
	clk := clocktest.NewFake()
	c := budget.NewConcurrency(budget.ConcurrencyConfig{})
	p := retry.Policy{Backoff: backoff.Constant{Interval: time.Second}, Budget: c, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inFlight := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	attempt := 0
	go func() {
		done <- retry.Run(ctx, &p, func(context.Context) error {
			attempt++
			if attempt == 2 {
				inFlight <- struct{}{}
				<-release
			}
			return errDown
		})
	}()
	clk.BlockUntil(1) // the first retry's wait
	checkActive(t, c, 0, 1)
	clk.Advance(time.Second)
	<-inFlight // the retry runs
	checkActive(t, c, 1, 1)
	close(release)
	clk.BlockUntil(1) // the second retry's wait
	checkActive(t, c, 0, 1)
	cancel()
	err := <-done
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errDown) {
		t.Fatalf("Do returned %v", err)
	}
	checkActive(t, c, 0, 0)
	if s := c.Stats(); s.Granted != 2 || s.Refunded != 1 || s.Retries != 1 || s.Requests != 1 {
		t.Fatalf("Stats() = %+v", s)
	}
}
