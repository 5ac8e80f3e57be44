package retry_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// The first attempt of a call whose Breaker is a *breaker.Breaker and whose
// Budget is a *budget.Ratio is made by retry's fused path (internal/fastpath):
// these tests check that the breaker and the budget hear of it exactly as
// through Allow's done and Record.

// fusedPolicy returns a Policy with a consecutive-failures breaker tripping
// at trip failures and a ten-percent Ratio holding initial tokens.
func fusedPolicy(trip int, initial float64) (*retry.Policy, *breaker.Breaker, *budget.Ratio) {
	br := breaker.New(breaker.Config{ConsecutiveFailures: trip, OpenTimeout: time.Hour})
	bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: initial, Refill: 0.1, RetryCost: 1})
	return &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}, Breaker: br, Budget: bu}, br, bu
}

func TestFusedPolicyKinds(t *testing.T) {
	p, _, _ := fusedPolicy(5, 0)
	if !retry.Fusable(p) {
		t.Fatal("a *breaker.Breaker and a *budget.Ratio are not fused")
	}
	for _, q := range []*retry.Policy{
		{Breaker: p.Breaker},
		{Budget: p.Budget},
		{Breaker: (*breaker.Breaker)(nil), Budget: (*budget.Ratio)(nil)},
	} {
		if !retry.Fusable(q) {
			t.Errorf("%+v is not fused", q)
		}
	}
	for _, q := range []*retry.Policy{
		{Breaker: &stubBreaker{}, Budget: p.Budget},
		{Breaker: p.Breaker, Budget: budget.NewConcurrency(budget.ConcurrencyConfig{})},
		{Breaker: struct{ retry.Breaker }{p.Breaker}},
	} {
		if retry.Fusable(q) {
			t.Errorf("%+v is fused", q)
		}
	}
}

func TestFusedSuccessCountsInBreakerAndBudget(t *testing.T) {
	p, br, bu := fusedPolicy(5, 5) // a bucket that is not full: the success refills it
	for i := range 3 {
		if v, err := retry.Do(context.Background(), p, func(context.Context) (int, error) { return i, nil }); v != i || err != nil {
			t.Fatalf("Do = %d, %v", v, err)
		}
	}
	if c := br.Counts(); c.Successes != 3 || c.Requests != 3 || c.ConsecutiveSuccesses != 3 {
		t.Errorf("breaker counts %+v, want 3 successes", c)
	}
	if s := bu.Stats(); s.Requests != 3 || s.Deposits != 3 {
		t.Errorf("budget stats %+v, want 3 deposits", s)
	}
	if got := bu.Available(); got < 5.299 || got > 5.301 {
		t.Errorf("budget holds %v tokens, want 5.3 (three refills of 0.1)", got)
	}
}

func TestFusedSuccessEndsARunOfFailures(t *testing.T) {
	p, br, _ := fusedPolicy(3, 0)
	one := *p
	one.MaxAttempts = 1
	fail := func(context.Context) (int, error) { return 0, errFlaky }
	for range 2 {
		if _, err := retry.Do(context.Background(), &one, fail); err == nil {
			t.Fatal("a failing op succeeded")
		}
	}
	if c := br.Counts(); c.ConsecutiveFailures != 2 {
		t.Fatalf("breaker counts %+v, want 2 failures in a row", c)
	}
	if _, err := retry.Do(context.Background(), &one, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	// Two more failures must not trip a breaker whose run the success ended.
	for range 2 {
		retry.Do(context.Background(), &one, fail)
	}
	if s := br.State(); s != breaker.Closed {
		t.Fatalf("breaker %v after fail, fail, succeed, fail, fail with a threshold of 3", s)
	}
	if c := br.Counts(); c.ConsecutiveFailures != 2 || c.Successes != 1 || c.Failures != 4 {
		t.Fatalf("breaker counts %+v", c)
	}
}

func TestFusedHalfOpenProbeClosesTheBreaker(t *testing.T) {
	f := clocktest.NewFake()
	br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: f})
	bu := budget.NewRatio(budget.TenPercent())
	p := &retry.Policy{MaxAttempts: 1, Breaker: br, Budget: bu}
	retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errFlaky })
	if _, err := retry.Do(context.Background(), p, func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("open breaker: err = %v", err)
	}
	f.Advance(time.Second)
	if _, err := retry.Do(context.Background(), p, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatalf("half-open probe: %v", err)
	}
	if s := br.State(); s != breaker.Closed {
		t.Fatalf("breaker %v after a successful probe", s)
	}
	if s := bu.Stats(); s.Requests != 2 || s.Deposits != 1 {
		t.Fatalf("budget stats %+v: the refused call is not an attempt", s)
	}
}

func TestFusedPanicAndGoexitCountAsFailures(t *testing.T) {
	for _, goexit := range []bool{false, true} {
		p, br, bu := fusedPolicy(2, 0)
		op := func(context.Context) (int, error) {
			if goexit {
				runtime.Goexit()
			}
			panic("boom")
		}
		for range 2 {
			var wg sync.WaitGroup
			wg.Add(1)
			var got any
			go func() {
				defer wg.Done()
				defer func() { got = recover() }()
				retry.Do(context.Background(), p, op)
			}()
			wg.Wait()
			if want := any("boom"); !goexit && got != want {
				t.Fatalf("recovered %v, want the op's panic", got)
			}
		}
		if s := br.State(); s != breaker.Open {
			t.Errorf("goexit=%v: breaker %v after two attempts that did not return, threshold 2", goexit, s)
		}
		if s := bu.Stats(); s.Requests != 2 || s.Deposits != 0 {
			t.Errorf("goexit=%v: budget stats %+v, want 2 failed first attempts", goexit, s)
		}
	}
}

func TestFusedListenerPanicOnTripReachesTheBudget(t *testing.T) {
	br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour,
		OnStateChange: func(from, to breaker.State) { panic("listener") }})
	bu := budget.NewRatio(budget.TenPercent())
	p := &retry.Policy{Breaker: br, Budget: bu, Backoff: backoff.Constant{}}
	func() {
		defer func() {
			if r := recover(); r != "listener" {
				t.Fatalf("recovered %v, want the listener's panic", r)
			}
		}()
		retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errFlaky })
	}()
	if s := bu.Stats(); s.Requests != 1 || s.Deposits != 0 || s.Granted != 0 {
		t.Fatalf("budget stats %+v: the attempt must be recorded once, as failed", s)
	}
	if s := br.State(); s != breaker.Open {
		t.Fatalf("breaker %v", s)
	}
}

func TestFusedNilBreakerAndBudget(t *testing.T) {
	p := &retry.Policy{Breaker: (*breaker.Breaker)(nil), Budget: (*budget.Ratio)(nil), Backoff: backoff.Constant{}}
	op, n := script(errFlaky)
	if v, err := retry.Do(context.Background(), p, op); err != nil || v != 2 || n.Load() != 2 {
		t.Fatalf("Do = %d, %v after %d calls", v, err, n.Load())
	}
}

// TestFusedNilBreakerTellsTheBudget: a nil *breaker.Breaker admits every
// attempt and hears nothing, and the Ratio beside it hears each first
// attempt as without a breaker: a success, a failure, a panic.
func TestFusedNilBreakerTellsTheBudget(t *testing.T) {
	bu := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, InitialTokens: 5, Refill: 0.1, FailureCost: 1})
	p := &retry.Policy{MaxAttempts: 1, Breaker: (*breaker.Breaker)(nil), Budget: bu}
	ctx := context.Background()
	if v, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 7, nil }); v != 7 || err != nil {
		t.Fatalf("Do = %d, %v", v, err)
	}
	if s := bu.Stats(); s.Requests != 1 || s.Deposits != 1 {
		t.Fatalf("after a success: budget stats %+v, want 1 request, 1 deposit", s)
	}
	if _, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 0, errFlaky }); !errors.Is(err, errFlaky) {
		t.Fatalf("Do = %v, want %v", err, errFlaky)
	}
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v, want the op's panic", r)
			}
		}()
		retry.Do(ctx, p, func(context.Context) (int, error) { panic("boom") })
	}()
	if s := bu.Stats(); s.Requests != 3 || s.Deposits != 1 {
		t.Fatalf("after a failure and a panic: budget stats %+v, want 3 requests, 1 deposit", s)
	}
	if got := bu.Available(); got < 3.099 || got > 3.101 {
		t.Errorf("budget holds %v tokens, want 3.1 (5 + 0.1 - 1 - 1)", got)
	}
}

// TestFusedParallelCounts runs the fused path from many goroutines and
// checks that no success or failure is lost by the breaker's and the
// budget's striped counters.
func TestFusedParallelCounts(t *testing.T) {
	p, br, bu := fusedPolicy(1<<30, 10)
	p.MaxAttempts = 1
	const goroutines, calls = 8, 500
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				retry.Do(context.Background(), p, func(context.Context) (int, error) {
					if (g+i)%4 == 0 {
						return 0, errFlaky
					}
					return 1, nil
				})
			}
		}()
	}
	wg.Wait()
	const failures = goroutines * calls / 4
	if c := br.Counts(); c.Successes != goroutines*calls-failures || c.Failures != failures {
		t.Errorf("breaker counts %+v, want %d successes and %d failures", c, goroutines*calls-failures, failures)
	}
	if s := bu.Stats(); s.Requests != goroutines*calls || s.Deposits != goroutines*calls-failures {
		t.Errorf("budget stats %+v", s)
	}
}

func TestFusedAllocs(t *testing.T) {
	p, _, _ := fusedPolicy(1<<30, 5)
	ok := func(context.Context) (int, error) { return 1, nil }
	if a := testing.AllocsPerRun(200, func() { retry.Do(context.Background(), p, ok) }); a != 0 {
		t.Errorf("fused first try: %v allocs, want 0", a)
	}
}

func TestFusedClassifyPanicReachesTheBudgetOnce(t *testing.T) {
	p, br, bu := fusedPolicy(1, 0)
	p.Classify = func(error) bool { panic("classify") }
	func() {
		defer func() {
			if r := recover(); r != "classify" {
				t.Fatalf("recovered %v, want Classify's panic", r)
			}
		}()
		retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, errFlaky })
	}()
	if s := bu.Stats(); s.Requests != 1 || s.Deposits != 0 {
		t.Fatalf("budget stats %+v: the attempt must be recorded once, as failed", s)
	}
	if c := br.State(); c != breaker.Open {
		t.Fatalf("breaker %v: it heard the failure before Classify ran", c)
	}
}
