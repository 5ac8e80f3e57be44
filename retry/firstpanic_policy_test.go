package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

type panicCallStart struct{}

func (panicCallStart) AttemptStart(ctx context.Context, _ retry.AttemptStart) context.Context {
	return ctx
}
func (panicCallStart) AttemptEnd(context.Context, retry.AttemptEnd)         {}
func (panicCallStart) RetryScheduled(context.Context, retry.RetryScheduled) {}
func (panicCallStart) CallEnd(context.Context, retry.CallEnd)               {}
func (panicCallStart) CallStart(context.Context, retry.CallStart) context.Context {
	panic("boom in CallStart")
}

// TestFirstPanicTellsBreakerBeforeChangedPolicy: op changes the Policy
// (an Observer whose CallStart panics) and then panics. The half-open
// breaker's probe is told the attempt failed before anything is set up
// from the changed Policy, so the breaker is not left refusing every
// call, and op's panic is the one that goes on.
func TestFirstPanicTellsBreakerBeforeChangedPolicy(t *testing.T) {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, MaxProbes: 1, SuccessThreshold: 1, Clock: clk})
	d, _ := b.Allow()
	d(errors.New("down")) // open
	clk.Advance(2 * time.Second)
	p := &retry.Policy{Breaker: b, MaxAttempts: 2}
	var r any
	func() {
		defer func() { r = recover() }()
		retry.Do(context.Background(), p, func(context.Context) (int, error) {
			p.Observer = panicCallStart{}
			panic("op")
		})
	}()
	p.Observer = nil
	if r != "op" {
		t.Errorf("Do panicked with %v, want op's panic", r)
	}
	clk.Advance(24 * time.Hour)
	if _, err := b.Allow(); err != nil {
		t.Fatalf("after the probe's op panicked, the breaker (state %v) refuses every call: %v", b.State(), err)
	}
}

// TestFirstPanicSetupPanicStillTellsBudget (third outside review): when
// the Call set up from the changed Policy panics, the budget still hears
// the attempt fail: a BudgetTracker's Start is not left open (before, a
// budget.Concurrency kept a phantom active request, loosening its cap).
func TestFirstPanicSetupPanicStillTellsBudget(t *testing.T) {
	bud := budget.NewConcurrency(budget.ConcurrencyConfig{})
	p := &retry.Policy{Budget: bud, MaxAttempts: 2}
	func() {
		defer func() { _ = recover() }()
		retry.Do(context.Background(), p, func(context.Context) (int, error) {
			p.Observer = panicCallStart{}
			panic("op")
		})
	}()
	p.Observer = nil
	if req, _ := bud.Active(); req != 0 {
		t.Fatalf("after op panicked, the budget still counts %d active request(s): Start without Record", req)
	}
}
