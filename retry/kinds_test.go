package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type plainBreakerA struct{}

func (plainBreakerA) Allow() (func(error), error) { return func(error) {}, nil }
func (plainBreakerA) Ready() error                { return nil }

type plainBreakerB struct{ plainBreakerA }

type groupBreaker struct{ plainBreakerA }

func (groupBreaker) BreakerFor(context.Context) Breaker { return plainBreakerA{} }

type plainBudgetA struct{}

func (plainBudgetA) Withdraw(error) bool { return true }
func (plainBudgetA) Record(bool, error)  {}

type plainBudgetB struct{ plainBudgetA }

type trackerBudget struct{ plainBudgetA }

func (trackerBudget) Start(bool) {}
func (trackerBudget) Refund()    {}

type groupBudget struct{ plainBudgetA }

func (groupBudget) BudgetFor(context.Context) Budget { return plainBudgetA{} }

// TestKindsCacheAnswersAsTypeAssertions: breakerIsGroup and budgetKind,
// which remember the first plain type they meet, answer as the type
// assertions they stand for, for each kind in every order (a group or a
// tracker met after the remembered plain type included) and for nil.
func TestKindsCacheAnswersAsTypeAssertions(t *testing.T) {
	breakers := []Breaker{nil, plainBreakerA{}, &plainBreakerA{}, groupBreaker{}, plainBreakerB{}, &groupBreaker{}}
	budgets := []Budget{nil, plainBudgetA{}, trackerBudget{}, groupBudget{}, &plainBudgetB{}, &trackerBudget{}, &groupBudget{}}
	for round := range 3 { // the cache is set by the first round
		for i := range breakers {
			for _, b := range append(breakers[i:], breakers[:i]...) {
				_, want := b.(BreakerGroup)
				if got := breakerIsGroup(&b); got != want {
					t.Fatalf("round %d: breakerIsGroup(%T) = %v, want %v", round, b, got, want)
				}
			}
		}
		for i := range budgets {
			for _, b := range append(budgets[i:], budgets[:i]...) {
				_, wantGroup := b.(BudgetGroup)
				var wantTracker BudgetTracker
				if !wantGroup {
					wantTracker, _ = b.(BudgetTracker)
				}
				group, tracker := budgetKind(&b)
				if group != wantGroup || tracker != wantTracker {
					t.Fatalf("round %d: budgetKind(%T) = %v, %v; want %v, %v", round, b, group, tracker, wantGroup, wantTracker)
				}
			}
		}
	}
}

// TestIsCanceledMatchesEquality: isCanceled compares words where the
// runtime compares interfaces; it must agree with == on the sentinel
// itself, a copy of it, a wrapped one and other errors of the same type.
func TestIsCanceledMatchesEquality(t *testing.T) {
	if !canceledIsPointer {
		t.Fatalf("context.Canceled is a %T: isCanceled falls back to ==", context.Canceled)
	}
	copied := context.Canceled
	for _, e := range []error{nil, context.Canceled, copied, errors.New("context canceled"), fmt.Errorf("w: %w", context.Canceled), context.DeadlineExceeded, ErrAttemptTimeout} {
		if got, want := isCanceled(e), e == context.Canceled; got != want {
			t.Errorf("isCanceled(%#v) = %v, want %v", e, got, want)
		}
	}
}

// BenchmarkKindsNil asks breakerIsGroup and budgetKind about a nil Breaker
// and a nil Budget once a plain type of each is remembered (the case of a
// Policy with a budget but no breaker, or the reverse): both answer with
// one comparison, not the slow path's.
func BenchmarkKindsNil(b *testing.B) {
	var pb Breaker = plainBreakerA{}
	var pbud Budget = plainBudgetA{}
	breakerIsGroup(&pb)
	budgetKind(&pbud)
	var nb Breaker
	var nbud Budget
	for b.Loop() {
		if breakerIsGroup(&nb) {
			b.Fatal("nil Breaker is a group")
		}
		if g, tr := budgetKind(&nbud); g || tr != nil {
			b.Fatal("nil Budget is a group or a tracker")
		}
	}
}
