package keyed_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

var errDown = errors.New("down")

// TestOneDeadHostOpensOnlyItsBreaker: with a shared breaker, host a's
// failures refuse host b's calls; with keyed.Breakers, only a's.
func TestOneDeadHostOpensOnlyItsBreaker(t *testing.T) {
	clk := clocktest.NewFake()
	bs, err := keyed.NewBreakers(keyed.Config{Clock: clk}, breaker.Config{ConsecutiveFailures: 2, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	p := &retry.Policy{MaxAttempts: 1, Breaker: bs, Clock: clk}
	a := keyed.WithKey(context.Background(), "a")
	b := keyed.WithKey(context.Background(), "b")
	for range 3 {
		retry.Run(a, p, func(context.Context) error { return errDown })
	}
	if err := retry.Run(a, p, func(context.Context) error { return nil }); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("host a: %v, want its breaker open", err)
	}
	if err := retry.Run(b, p, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("host b refused by host a's breaker: %v", err)
	}
	if err := retry.Run(context.Background(), p, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("no key (the default member): %v", err)
	}
	// The same through a Call (an adapter's loop).
	c := retry.NewCall(a, p)
	if _, err := c.Begin(); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("Call for host a: %v", err)
	}
	c = retry.NewCall(b, p)
	at, err := c.Begin()
	if err != nil {
		t.Fatalf("Call for host b: %v", err)
	}
	if c.End(&at, nil) == nil {
		c.Succeed()
	}
}

// TestOneHostDoesNotSpendAnothersBudget: host a's retries empty a's
// budget only.
func TestOneHostDoesNotSpendAnothersBudget(t *testing.T) {
	clk := clocktest.NewFake()
	bg, err := keyed.NewBudgets(keyed.Config{Clock: clk}, func() retry.Budget {
		return budget.NewRatio(budget.RatioConfig{MaxTokens: 2})
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &retry.Policy{MaxAttempts: 10, Budget: bg, Clock: clk, Backoff: backoff.Constant{}}
	a := keyed.WithKey(context.Background(), "a")
	b := keyed.WithKey(context.Background(), "b")
	for range 5 {
		retry.Run(a, p, func(context.Context) error { return retry.Fault(errDown) })
	}
	if err := retry.Run(a, p, func(context.Context) error { return retry.Fault(errDown) }); !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("host a: %v, want its budget exhausted", err)
	}
	tries := 0
	retry.Run(b, p, func(context.Context) error {
		if tries++; tries < 2 {
			return retry.Fault(errDown)
		}
		return nil
	})
	if tries != 2 {
		t.Fatalf("host b made %d attempts: a's failures spent b's budget", tries)
	}
}
