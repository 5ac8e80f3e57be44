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

// panicCallStart is an Observer whose CallStart panics.
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

// TestInlinePanicAfterPolicyChange: op changes the caller's Policy (an
// Observer whose CallStart panics, read when the call is set up to report
// the attempt) and then panics. The half-open breaker's probe hears the
// attempt failed, the call's mutex is left unlocked (its hedge timer is
// disarmed, and no callback blocks on it), and op's panic is the one that
// goes on. Before, the setup's panic unwound inlinePanic holding the
// mutex: the probe was never told (the breaker refused every call for
// good), the timer's callback blocked for ever, and Do raised CallStart's
// panic.
func TestInlinePanicAfterPolicyChange(t *testing.T) {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, MaxProbes: 1, SuccessThreshold: 1, Clock: clk})
	d, _ := b.Allow()
	d(errors.New("down"))        // open
	clk.Advance(2 * time.Second) // half-open on the next Allow
	p := &retry.Policy{Breaker: b, MaxAttempts: 3, Clock: clk}
	h := &hedge.Hedger{Policy: p, Delay: time.Second}
	var r any
	func() {
		defer func() { r = recover() }()
		hedge.Do(context.Background(), h, func(context.Context) (int, error) {
			p.Observer = panicCallStart{}
			panic("op")
		}, nil)
	}()
	p.Observer = nil
	if r != "op" {
		t.Errorf("Do panicked with %v, want op's panic", r)
	}
	advanced := make(chan struct{})
	go func() {
		clk.Advance(24 * time.Hour) // past the hedge delay: an armed timer would fire
		close(advanced)
	}()
	select {
	case <-advanced:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("a timer callback is blocked on the call's mutex")
	}
	if _, err := b.Allow(); err != nil {
		t.Fatalf("after the probe's op panicked, the breaker (state %v) refuses every call: %v", b.State(), err)
	}
}

// TestInlinePanicSetupPanicStillTellsBudget (third outside review): when
// the call set up from the changed Policy panics, the budget still hears
// the inline attempt fail: a BudgetTracker's Start is not left open.
func TestInlinePanicSetupPanicStillTellsBudget(t *testing.T) {
	clk := clocktest.NewFake()
	bud := budget.NewConcurrency(budget.ConcurrencyConfig{})
	p := &retry.Policy{Budget: bud, MaxAttempts: 3, Clock: clk}
	h := &hedge.Hedger{Policy: p, Delay: time.Second}
	func() {
		defer func() { _ = recover() }()
		hedge.Do(context.Background(), h, func(context.Context) (int, error) {
			p.Observer = panicCallStart{}
			panic("op")
		}, nil)
	}()
	p.Observer = nil
	if req, _ := bud.Active(); req != 0 {
		t.Fatalf("after op panicked, the budget still counts %d active request(s): Start without Record", req)
	}
}
