package retry_test

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/retry"
)

// startPanicBudget is a BudgetTracker whose Start panics.
type startPanicBudget struct{}

func (startPanicBudget) Withdraw(error) bool { return true }
func (startPanicBudget) Record(bool, error)  {}
func (startPanicBudget) Start(retry bool)    { panic("start") }
func (startPanicBudget) Refund()             {}

type permitBreaker struct{ allows, dones int }

func (b *permitBreaker) Allow() (func(error), error) {
	b.allows++
	return func(error) { b.dones++ }, nil
}
func (b *permitBreaker) Ready() error { return nil }

// TestTrackerStartPanicReturnsBreakerPermit: BeginInline (hedge.Do's
// first attempt) took the breaker's permit, then told the budget
// tracker; a Start that panicked left the permit out (a half-open
// breaker's probe slot held for good). The permit now ends as failed and
// the panic goes on. Do's own first attempt already did so.
func TestTrackerStartPanicReturnsBreakerPermit(t *testing.T) {
	br := &permitBreaker{}
	p := &retry.Policy{MaxAttempts: 3, Breaker: br, Budget: startPanicBudget{}}
	func() {
		defer func() {
			if r := recover(); r != "start" {
				t.Fatalf("recovered %v, want the tracker's panic", r)
			}
		}()
		retry.BeginInline(context.Background(), p)
	}()
	if br.allows != 1 || br.dones != 1 {
		t.Fatalf("breaker: %d allowed, %d done; want the permit ended", br.allows, br.dones)
	}
}

// TestTrackerStartPanicThroughDo: the same through Do.
func TestTrackerStartPanicThroughDo(t *testing.T) {
	br := &permitBreaker{}
	p := &retry.Policy{MaxAttempts: 3, Breaker: br, Budget: startPanicBudget{}}
	func() {
		defer func() { _ = recover() }()
		retry.Do(context.Background(), p, func(context.Context) (int, error) { return 1, nil })
	}()
	if br.allows != br.dones {
		t.Fatalf("breaker: %d allowed, %d done", br.allows, br.dones)
	}
}
