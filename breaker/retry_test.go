package breaker_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// countingBudget is a retry budget that counts how it is used. Withdraw
// grants retries only when grant is set, so that a Do that wrongly gets as
// far as the budget stops there instead of waiting.
type countingBudget struct {
	grant     bool
	records   atomic.Int64
	withdraws atomic.Int64
}

func (c *countingBudget) Record(bool, error) { c.records.Add(1) }
func (c *countingBudget) Withdraw(error) bool {
	c.withdraws.Add(1)
	return c.grant
}

var errUnavailable = errors.New("503 service unavailable")

type retryRig struct {
	fc     *clocktest.Fake
	b      *breaker.Breaker
	budget *countingBudget
	policy *retry.Policy
	calls  atomic.Int64
}

func newRetryRig(t *testing.T, cfg breaker.Config, grant bool) *retryRig {
	r := &retryRig{fc: clocktest.NewFake(), budget: &countingBudget{grant: grant}}
	cfg.Clock, cfg.OpenJitter = r.fc, -1
	r.b = breaker.New(cfg)
	t.Cleanup(r.b.Close)
	r.policy = &retry.Policy{
		MaxAttempts: 10,
		Backoff:     backoff.Constant{Interval: time.Second},
		Budget:      r.budget,
		Breaker:     r.b,
		Clock:       r.fc,
	}
	return r
}

func (r *retryRig) failing(context.Context) (int, error) {
	r.calls.Add(1)
	return 0, errUnavailable
}

// checkFailFast checks a Do that the breaker stopped: ErrOpen and the last
// attempt's error, no wait started, no budget withdrawn.
func (r *retryRig) checkFailFast(t *testing.T, err error, attempts int) {
	t.Helper()
	if !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Do error %v, want breaker.ErrOpen", err)
	}
	if attempts > 0 && !errors.Is(err, errUnavailable) {
		t.Fatalf("Do error %v does not wrap the last attempt's error", err)
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != attempts {
		t.Fatalf("Do error %#v, want a *retry.Error after %d attempts", err, attempts)
	}
	if got := r.calls.Load(); got != int64(attempts) {
		t.Fatalf("operation called %d times, want %d", got, attempts)
	}
	if n := r.budget.withdraws.Load(); n != 0 {
		t.Fatalf("Budget.Withdraw called %d times; an open breaker must not spend budget", n)
	}
	if n := r.fc.Pending(); n != 0 {
		t.Fatalf("%d timers pending: Do waited although the breaker is open", n)
	}
}

func TestRetryOpenBreakerFailsFast(t *testing.T) {
	ctx := context.Background()
	t.Run("open before the first attempt", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 1}, true)
		if done, err := r.b.Allow(); err == nil {
			done(errUnavailable)
		}
		start := r.fc.Now()
		_, err := retry.Do(ctx, r.policy, r.failing)
		r.checkFailFast(t, err, 0)
		if r.fc.Now() != start {
			t.Fatal("time passed")
		}
	})
	t.Run("tripped by the attempt", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 1}, true)
		_, err := retry.Do(ctx, r.policy, r.failing)
		r.checkFailFast(t, err, 1)
		if n := r.budget.records.Load(); n != 1 {
			t.Fatalf("Budget.Record called %d times, want 1", n)
		}
	})
	t.Run("tripped by a retry", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 2}, true)
		res := make(chan error, 1)
		go func() {
			_, err := retry.Do(ctx, r.policy, r.failing)
			res <- err
		}()
		r.fc.BlockUntil(1) // the wait before the retry
		r.fc.Advance(time.Second)
		err := <-res
		if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, errUnavailable) {
			t.Fatalf("Do error %v, want ErrOpen and the last error", err)
		}
		if n := r.budget.withdraws.Load(); n != 1 {
			t.Fatalf("Budget.Withdraw called %d times, want 1 (the first retry only)", n)
		}
		if r.calls.Load() != 2 || r.fc.Pending() != 0 {
			t.Fatalf("%d calls, %d timers pending", r.calls.Load(), r.fc.Pending())
		}
	})
	t.Run("failed half-open probe", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute}, false)
		if done, err := r.b.Allow(); err == nil {
			done(errUnavailable)
		}
		r.fc.Advance(time.Minute)
		if s := r.b.State(); s != breaker.HalfOpen {
			t.Fatalf("state %v", s)
		}
		_, err := retry.Do(ctx, r.policy, r.failing)
		r.checkFailFast(t, err, 1)
		if s := r.b.State(); s != breaker.Open {
			t.Fatalf("state %v after a failed probe", s)
		}
	})
}

func TestRetryThroughClosedBreaker(t *testing.T) {
	ctx := context.Background()
	t.Run("a retry that succeeds", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 3}, true)
		res := make(chan error, 1)
		go func() {
			_, err := retry.Do(ctx, r.policy, func(context.Context) (int, error) {
				if r.calls.Add(1) == 1 {
					return 0, errUnavailable
				}
				return 1, nil
			})
			res <- err
		}()
		r.fc.BlockUntil(1)
		r.fc.Advance(time.Second)
		if err := <-res; err != nil {
			t.Fatal(err)
		}
		c := r.b.Counts()
		if r.b.State() != breaker.Closed || c.Failures != 1 || c.Successes != 1 || c.Requests != 2 {
			t.Fatalf("state %v, counts %+v", r.b.State(), c)
		}
	})
	t.Run("the caller's cancellation does not count", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 1}, true)
		cctx, cancel := context.WithCancel(ctx)
		_, err := retry.Do(cctx, r.policy, func(ctx context.Context) (int, error) {
			cancel()
			return 0, ctx.Err()
		})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do error %v", err)
		}
		if s := r.b.State(); s != breaker.Closed {
			t.Fatalf("state %v: a cancellation counted against the downstream", s)
		}
	})
	t.Run("an attempt timeout counts", func(t *testing.T) {
		r := newRetryRig(t, breaker.Config{ConsecutiveFailures: 1}, true)
		r.policy.AttemptTimeout = time.Second
		res := make(chan error, 1)
		go func() {
			_, err := retry.Do(ctx, r.policy, func(ctx context.Context) (int, error) {
				r.calls.Add(1)
				<-ctx.Done()
				return 0, ctx.Err()
			})
			res <- err
		}()
		r.fc.BlockUntil(1) // the attempt's timeout
		r.fc.Advance(time.Second)
		err := <-res
		if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, retry.ErrAttemptTimeout) {
			t.Fatalf("Do error %v, want ErrOpen after an attempt timeout", err)
		}
	})
}

// A permanent error that reports a downstream fault (a crashing server's
// 500, a gRPC Internal) counts against the breaker though it is not
// retried; a plain permanent error (a caller's mistake) does not.
func TestPermanentFaultsOpenTheBreaker(t *testing.T) {
	b := breaker.New(breaker.Config{ConsecutiveFailures: 5})
	crash := retry.Fault(retry.Permanent(errors.New("500 internal")))
	for range 5 {
		if _, err := breaker.Do(context.Background(), b, func(context.Context) (int, error) { return 0, crash }); err == nil {
			t.Fatal("Do hid the error")
		}
	}
	if b.State() != breaker.Open {
		t.Fatalf("after 5 permanent faults the breaker is %v, want open", b.State())
	}
	c := breaker.New(breaker.Config{ConsecutiveFailures: 5})
	for range 5 {
		_, _ = breaker.Do(context.Background(), c, func(context.Context) (int, error) { return 0, retry.Permanent(errors.New("404")) })
	}
	if c.State() != breaker.Closed {
		t.Fatalf("after 5 caller errors the breaker is %v, want closed", c.State())
	}
}
