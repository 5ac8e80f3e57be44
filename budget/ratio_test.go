package budget_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

var (
	errDown = errors.New("test: unavailable")
	errSlow = fmt.Errorf("test: read: %w", retry.ErrAttemptTimeout)
)

// netTimeout is a net.Error that reports a timeout, like a dial or read
// deadline.
type netTimeout struct{}

func (netTimeout) Error() string   { return "test: i/o timeout" }
func (netTimeout) Timeout() bool   { return true }
func (netTimeout) Temporary() bool { return true }

func withdrawN(b retry.Budget, n int, err error) (granted int) {
	for range n {
		if b.Withdraw(err) {
			granted++
		}
	}
	return granted
}

func checkTokens(t *testing.T, r *budget.Ratio, want float64) {
	t.Helper()
	if got := r.Available(); math.Abs(got-want) > 1e-9 {
		t.Fatalf("Available() = %v, want %v", got, want)
	}
}

func TestRatioZeroConfigIsTenPercent(t *testing.T) {
	for name, cfg := range map[string]budget.RatioConfig{"zero": {}, "TenPercent": budget.TenPercent()} {
		t.Run(name, func(t *testing.T) {
			r := budget.NewRatio(cfg)
			checkTokens(t, r, 10) // starts full
			if got := withdrawN(r, 11, errDown); got != 10 {
				t.Fatalf("granted %d retries from a full bucket, want 10", got)
			}
			// Ten successful first attempts pay for exactly one retry.
			for range 9 {
				r.Record(false, nil)
			}
			if r.Withdraw(errDown) {
				t.Fatal("retry granted after 9 successes (0.9 token)")
			}
			r.Record(false, nil)
			if !r.Withdraw(errDown) {
				t.Fatal("retry refused after 10 successes (1 token)")
			}
			// Failures, and successful retries, pay nothing in.
			r.Record(false, errDown)
			r.Record(true, nil)
			checkTokens(t, r, 0)
			want := budget.Stats{Requests: 11, Retries: 1, Deposits: 10, Granted: 11, Refused: 2}
			if got := r.Stats(); got != want {
				t.Fatalf("Stats() = %+v, want %+v", got, want)
			}
		})
	}
}

// gRPC A6: every failed attempt takes 1 token, every success adds 0.1, and
// retries stop while the bucket holds maxTokens/2 or fewer.
func TestRatioGRPC(t *testing.T) {
	r := budget.NewRatio(budget.GRPC())
	checkTokens(t, r, 10)
	// Do records the failure, then asks for the retry.
	for i := 1; i <= 4; i++ {
		r.Record(i > 1, errDown)
		if !r.Withdraw(errDown) {
			t.Fatalf("retry %d refused with %v tokens", i, r.Available())
		}
	}
	checkTokens(t, r, 6) // retries themselves cost nothing
	r.Record(true, errDown)
	checkTokens(t, r, 5)
	if r.Withdraw(errDown) {
		t.Fatal("retry granted at 5 tokens = maxTokens/2")
	}
	r.Record(false, nil) // 5.1
	if !r.Withdraw(errDown) {
		t.Fatal("retry refused at 5.1 tokens")
	}
	r.Record(true, nil) // a successful retry counts as a successful RPC
	checkTokens(t, r, 5.2)
	// Permanent errors and the caller's cancellation say nothing of the
	// downstream's health and cost nothing.
	r.Record(false, retry.Permanent(errDown))
	r.Record(false, fmt.Errorf("op: %w", context.Canceled))
	checkTokens(t, r, 5.2)
	for range 20 {
		r.Record(false, errDown)
	}
	checkTokens(t, r, 0) // never below zero
	for range 200 {
		r.Record(false, nil)
	}
	checkTokens(t, r, 10) // never above maxTokens
}

func TestRatioGRPCThrottling(t *testing.T) {
	c := budget.GRPCThrottling(100, 0.5)
	if c.MaxTokens != 100 || c.Threshold != 50 || c.Refill != 0.5 || c.RetryRefill != 0.5 || c.FailureCost != 1 {
		t.Fatalf("GRPCThrottling(100, 0.5) = %+v", c)
	}
	r := budget.NewRatio(c)
	granted := 0
	for range 100 {
		r.Record(false, errDown)
		if r.Withdraw(errDown) {
			granted++
		}
	}
	if granted != 49 { // 99 … 51 tokens
		t.Fatalf("granted %d retries, want 49", granted)
	}
}

// AWS SDK standard mode: 500 tokens, a retry costs 5 (10 after a timeout),
// a successful first attempt adds 1, a successful retry refunds its cost.
func TestRatioAWSStandard(t *testing.T) {
	t.Run("errors", func(t *testing.T) {
		r := budget.NewRatio(awsretry.StandardLegacy())
		if got := withdrawN(r, 200, errDown); got != 100 {
			t.Fatalf("granted %d retries of cost 5 from 500 tokens, want 100", got)
		}
	})
	for _, err := range []error{errSlow, context.DeadlineExceeded, fmt.Errorf("get: %w", netTimeout{})} {
		t.Run("timeout "+err.Error(), func(t *testing.T) {
			r := budget.NewRatio(awsretry.StandardLegacy())
			if got := withdrawN(r, 200, err); got != 50 {
				t.Fatalf("granted %d retries of cost 10 from 500 tokens, want 50", got)
			}
		})
	}
	t.Run("refills", func(t *testing.T) {
		r := budget.NewRatio(awsretry.StandardLegacy())
		r.Record(false, nil)
		checkTokens(t, r, 500) // capped
		withdrawN(r, 99, errDown)
		checkTokens(t, r, 5)
		r.Record(false, errDown) // failures cost nothing more
		checkTokens(t, r, 5)
		if r.Withdraw(errSlow) {
			t.Fatal("a timeout retry (cost 10) granted with 5 tokens")
		}
		if !r.Withdraw(errDown) {
			t.Fatal("a retry (cost 5) refused with 5 tokens")
		}
		checkTokens(t, r, 0)
		r.Record(true, nil) // the retry succeeded: its cost comes back
		checkTokens(t, r, 5)
		r.Record(true, errDown) // a failed retry refunds nothing
		r.Record(false, nil)
		checkTokens(t, r, 6)
	})
}

func TestRatioStartingTokens(t *testing.T) {
	r := budget.NewRatio(budget.RatioConfig{StartEmpty: true})
	checkTokens(t, r, 0)
	if r.Withdraw(errDown) {
		t.Fatal("an empty bucket granted a retry")
	}
	r = budget.NewRatio(budget.RatioConfig{MaxTokens: 100, InitialTokens: 2.5})
	if got := withdrawN(r, 10, errDown); got != 2 {
		t.Fatalf("granted %d retries from 2.5 tokens, want 2", got)
	}
	checkTokens(t, r, 0.5)
}

func TestRatioThresholdWithRetryCost(t *testing.T) {
	// Both rules apply: the cost must be payable and the bucket above the
	// threshold before paying.
	r := budget.NewRatio(budget.RatioConfig{MaxTokens: 10, RetryCost: 2, Threshold: 3})
	if got := withdrawN(r, 10, errDown); got != 4 { // 10, 8, 6, 4 → 2
		t.Fatalf("granted %d, want 4", got)
	}
	checkTokens(t, r, 2)
}

func TestRatioFixedPointIsExact(t *testing.T) {
	// 0.1 is not exact in binary floating point; ten deposits of 0.1 must
	// still pay for exactly one retry of cost 1, a million times over.
	r := budget.NewRatio(budget.RatioConfig{MaxTokens: 1e6, StartEmpty: true})
	for range 1_000_000 {
		r.Record(false, nil)
	}
	checkTokens(t, r, 100_000)
	if got := withdrawN(r, 100_001, errDown); got != 100_000 {
		t.Fatalf("granted %d, want 100000", got)
	}
}

func TestRatioConfigValidate(t *testing.T) {
	valid := []budget.RatioConfig{{}, budget.GRPC(), awsretry.StandardLegacy(), budget.TenPercent(),
		budget.GRPCThrottling(1000, 0.001), {MaxTokens: budget.MaxRatioTokens, RetryCost: 1e-6}, {StartEmpty: true}}
	for _, c := range valid {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", c, err)
		}
	}
	nan := math.NaN()
	for name, c := range map[string]budget.RatioConfig{
		"negative max":            {MaxTokens: -1},
		"NaN refill":              {Refill: nan},
		"infinite cost":           {RetryCost: math.Inf(1)},
		"negative failure cost":   {FailureCost: -1},
		"too many tokens":         {MaxTokens: 2e9},
		"below resolution":        {Refill: 1e-9},
		"initial above max":       {MaxTokens: 5, InitialTokens: 6},
		"start empty and initial": {StartEmpty: true, InitialTokens: 1},
		"threshold at max":        {MaxTokens: 10, Threshold: 10},
		"retry cost above max":    {MaxTokens: 10, RetryCost: 11},
		"timeout cost above max":  {MaxTokens: 10, TimeoutCost: 11},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.Validate()
			if !errors.Is(err, budget.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "budget: ") {
				t.Fatalf("Validate(%+v) = %v, want a budget: ErrInvalidConfig", c, err)
			}
			checkPanics(t, err, func() { budget.NewRatio(c) })
		})
	}
}

// checkPanics checks that f panics with an error equal to want.
func checkPanics(t *testing.T, want error, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		p := recover()
		err, ok := p.(error)
		if !ok || !errors.Is(err, budget.ErrInvalidConfig) || err.Error() != want.Error() {
			t.Fatalf("panic(%v), want panic(%v)", p, want)
		}
	}()
	f()
	t.Fatal("no panic")
}

func TestNilBudgets(t *testing.T) {
	var (
		r *budget.Ratio
		w *budget.Window
		c *budget.Concurrency
	)
	for _, b := range []interface {
		retry.Budget
		Available() float64
		Stats() budget.Stats
	}{r, w, c} {
		b.Record(false, nil)
		b.Record(true, errDown)
		if !b.Withdraw(errDown) {
			t.Errorf("%T(nil).Withdraw = false, want true", b)
		}
		if !math.IsInf(b.Available(), 1) {
			t.Errorf("%T(nil).Available = %v, want +Inf", b, b.Available())
		}
		if b.Stats() != (budget.Stats{}) {
			t.Errorf("%T(nil).Stats = %+v", b, b.Stats())
		}
	}
	c.Start(true)
	c.Refund()
	if a, b := c.Active(); a != 0 || b != 0 {
		t.Errorf("nil Active = %d, %d", a, b)
	}
}

func TestIsTimeout(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errDown, false},
		{context.Canceled, false},
		{retry.ErrAttemptTimeout, true},
		{errSlow, true},
		{context.DeadlineExceeded, true},
		{fmt.Errorf("dial: %w", netTimeout{}), true},
		{&net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, true},
		{&net.OpError{Op: "dial", Err: errDown}, false},
	} {
		if got := budget.IsTimeout(tc.err); got != tc.want {
			t.Errorf("IsTimeout(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRatioConfigWithDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   budget.RatioConfig
		want budget.RatioConfig
	}{
		{"zero", budget.RatioConfig{}, budget.RatioConfig{MaxTokens: 10, InitialTokens: 10, Refill: 0.1, RetryCost: 1, TimeoutCost: 1, ThrottleCost: 1}},
		{"gRPC", budget.GRPC(), budget.RatioConfig{MaxTokens: 10, InitialTokens: 10, Refill: 0.1, RetryRefill: 0.1, FailureCost: 1, Threshold: 5}},
		{"AWS", awsretry.StandardLegacy(), budget.RatioConfig{MaxTokens: 500, InitialTokens: 500, Refill: 1, RetryCost: 5, TimeoutCost: 10, ThrottleCost: 5, RefundRetrySuccess: true, Throttles: awsretry.Throttles{}}},
		{"AWS 2026", awsretry.Standard2026(), budget.RatioConfig{MaxTokens: 500, InitialTokens: 500, Refill: 1, RetryCost: 14, TimeoutCost: 14, ThrottleCost: 5, RefundRetrySuccess: true, Throttles: awsretry.Throttles{}}},
		{"start empty", budget.RatioConfig{MaxTokens: 20, StartEmpty: true}, budget.RatioConfig{MaxTokens: 20, StartEmpty: true, Refill: 0.1, RetryCost: 1, TimeoutCost: 1, ThrottleCost: 1}},
	} {
		got, err := tc.in.WithDefaults()
		if err != nil || got != tc.want {
			t.Errorf("%s: WithDefaults() = %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
		// The result makes the same bucket, and is its own defaults.
		if again, _ := got.WithDefaults(); again != got {
			t.Errorf("%s: WithDefaults twice = %+v", tc.name, again)
		}
		if a, b := budget.NewRatio(tc.in).Available(), budget.NewRatio(got).Available(); a != b {
			t.Errorf("%s: Available %v from the config, %v from its defaults", tc.name, a, b)
		}
	}
	if _, err := (budget.RatioConfig{Threshold: 10}).WithDefaults(); !errors.Is(err, budget.ErrInvalidConfig) {
		t.Errorf("WithDefaults of an invalid config: %v", err)
	}
}

func TestCountsAsFailure(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errDown, true},
		{netTimeout{}, true},
		{context.DeadlineExceeded, true},
		{retry.Permanent(errDown), false},
		{fmt.Errorf("op: %w", context.Canceled), false},
	} {
		if got := budget.CountsAsFailure(tc.err); got != tc.want {
			t.Errorf("CountsAsFailure(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
