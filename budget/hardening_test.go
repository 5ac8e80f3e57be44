package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

// Regression tests for issue #17 (core hardening) in package budget.

// Shares are fractions capped at MaxRatio (1): a percentage written where
// a fraction belongs is rejected with a message naming the field and the
// unit, instead of allowing 20 retries per request.
func TestRatioFieldsAreFractions(t *testing.T) {
	if budget.MaxRatio != 1 {
		t.Fatalf("MaxRatio = %v, want 1", budget.MaxRatio)
	}
	cases := []struct {
		name     string
		validate func(float64) error
	}{
		{"WindowConfig.Ratio", func(r float64) error { return budget.WindowConfig{Ratio: r}.Validate() }},
		{"ConcurrencyConfig.Ratio", func(r float64) error { return budget.ConcurrencyConfig{Ratio: r}.Validate() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, r := range []float64{20, 1.000001, 100, 1000, math.Inf(1), math.NaN()} {
				err := tc.validate(r)
				want := fmt.Sprintf("budget: invalid config: %s is %v, want a fraction from 0 to 1 (0.2 is 20%%; negative: none)", tc.name, r)
				if !errors.Is(err, budget.ErrInvalidConfig) || err.Error() != want {
					t.Errorf("Ratio %v: Validate = %v, want %q", r, err, want)
				}
			}
			for _, r := range []float64{-1, 0, 1e-6, 0.2, 0.999, 1} {
				if err := tc.validate(r); err != nil {
					t.Errorf("Ratio %v: Validate = %v, want nil", r, err)
				}
			}
		})
	}
	checkPanics(t, budget.WindowConfig{Ratio: 20}.Validate(), func() { budget.NewWindow(budget.WindowConfig{Ratio: 20}) })
	checkPanics(t, budget.ConcurrencyConfig{Ratio: 20}.Validate(), func() { budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: 20}) })
}

// Any finite share above 1 is rejected, any from 0 to 1 accepted.
func TestRatioRangeProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := rapid.Float64Range(-10, 1e6).Draw(t, "Ratio")
		wantOK := r <= 1
		if err := (budget.WindowConfig{Ratio: r}).Validate(); (err == nil) != wantOK {
			t.Fatalf("WindowConfig{Ratio: %v}.Validate() = %v", r, err)
		}
		if err := (budget.ConcurrencyConfig{Ratio: r}).Validate(); (err == nil) != wantOK {
			t.Fatalf("ConcurrencyConfig{Ratio: %v}.Validate() = %v", r, err)
		}
	})
}

// retry hands Record an error marked retry.Permanent when the Policy would
// not retry it (D5). Such a failure says the downstream answered: a token
// bucket neither charges nor pays for it (gRPC A6 changes the token count
// only on retryable failures and on successes), Window counts the request
// (it budgets on traffic), Concurrency ends the active request.
func TestPermanentFailures(t *testing.T) {
	perm := retry.Permanent(errDown)
	permTimeout := retry.Permanent(fmt.Errorf("read: %w", context.DeadlineExceeded))

	ratio := []struct {
		name string
		cfg  budget.RatioConfig
	}{
		{"GRPC", budget.GRPC()},
		{"GRPCThrottling", budget.GRPCThrottling(100, 0.5)},
		{"AWSStandard", awsretry.StandardLegacy()},
		{"TenPercent", budget.TenPercent()},
		{"zero", budget.RatioConfig{}},
		{"StartEmpty", budget.RatioConfig{StartEmpty: true, FailureCost: 1, RetryRefill: 0.2}},
	}
	for _, tc := range ratio {
		t.Run("Ratio/"+tc.name, func(t *testing.T) {
			r := budget.NewRatio(tc.cfg)
			// Move off the cap, so that a deposit would show.
			r.Withdraw(errDown)
			r.Record(false, errDown)
			before, stats := r.Available(), r.Stats()
			for range 3 {
				r.Record(false, perm)
				r.Record(true, perm)
				r.Record(false, permTimeout)
				r.Record(true, permTimeout)
			}
			if got := r.Available(); got != before {
				t.Fatalf("tokens %v after permanent failures, want %v unchanged", got, before)
			}
			s := r.Stats()
			want := stats
			want.Requests += 6
			want.Retries += 6
			if s != want {
				t.Fatalf("stats %+v, want %+v (counted, no deposit)", s, want)
			}
			// The same on a balance lent out to per-P cells.
			budget.Lend(r)
			for i := range budget.RatioCells {
				budget.RecordAt(r, i, false, perm)
				budget.RecordAt(r, i, true, perm)
			}
			budget.Collect(r)
			if got := r.Available(); got != before {
				t.Fatalf("tokens %v after permanent failures while lent, want %v", got, before)
			}
		})
	}

	t.Run("Ratio/GRPC retryable failures still cost", func(t *testing.T) {
		r := budget.NewRatio(budget.GRPC())
		r.Record(false, errDown)
		r.Record(false, perm)
		r.Record(true, errDown)
		checkTokens(t, r, 8)
		r.Record(false, nil)
		checkTokens(t, r, 8.1)
	})

	t.Run("Window", func(t *testing.T) {
		fc := clocktest.NewFake()
		w := budget.NewWindow(budget.WindowConfig{Ratio: 0.5, MinRetriesPerSecond: -1, Clock: fc})
		for range 4 {
			w.Record(false, perm)
		}
		w.Record(true, perm)
		if s := w.Stats(); s.Requests != 4 || s.Deposits != 4 || s.Retries != 1 {
			t.Fatalf("stats %+v, want 4 requests and deposits, 1 retry", s)
		}
		if got := withdrawN(w, 5, errDown); got != 2 {
			t.Fatalf("granted %d, want 2 (half of 4 requests)", got)
		}
	})

	t.Run("Concurrency", func(t *testing.T) {
		c := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: 0.5, MinConcurrency: -1})
		for range 4 {
			c.Start(false)
		}
		if !c.Withdraw(errDown) {
			t.Fatal("no retry granted with 4 requests in flight")
		}
		c.Start(true)
		c.Record(true, perm)
		for range 4 {
			c.Record(false, perm)
		}
		if req, ret := c.Active(); req != 0 || ret != 0 {
			t.Fatalf("active %d requests, %d retries after permanent failures, want 0, 0", req, ret)
		}
		if s := c.Stats(); s.Requests != 4 || s.Retries != 1 || s.Granted != 1 {
			t.Fatalf("stats %+v", s)
		}
	})
}

// The Window's rate stays a share of the requests: with the largest Ratio,
// 1, no more retries than requests are granted (MaxRatio used to be 1000).
func TestWindowMaxRatioBound(t *testing.T) {
	w := budget.NewWindow(budget.WindowConfig{Ratio: budget.MaxRatio, MinRetriesPerSecond: -1, Clock: clocktest.NewFake()})
	for range 10 {
		w.Record(false, errDown)
	}
	if got := withdrawN(w, 100, errDown); got != 10 {
		t.Fatalf("granted %d retries for 10 requests at MaxRatio, want 10", got)
	}
	if !strings.Contains(budget.WindowConfig{Ratio: 2}.Validate().Error(), "WindowConfig.Ratio is 2") {
		t.Fatal("Ratio 2 accepted")
	}
}
