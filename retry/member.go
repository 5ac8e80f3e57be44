package retry

import (
	"context"
	"sync"
)

// BreakerGroup is a Breaker that stands for a group of breakers, one per
// key (keyed.Breakers). At the start of each call, Do, NewCall, Reset and
// the adapters (ResolveGroups) ask it once for the call's breaker with the
// caller's context, and use that breaker for every attempt of the call.
// Used without that (Allow, Ready), it is its default member.
type BreakerGroup interface {
	Breaker
	// BreakerFor returns the breaker of the call made with ctx. It must
	// not return a BreakerGroup.
	BreakerFor(ctx context.Context) Breaker
}

// BudgetGroup is a Budget that stands for a group of budgets, one per key
// (keyed.Budgets), as BreakerGroup does for breakers: BudgetFor is asked
// once per call, and the call's budget is what it returns, a BudgetTracker
// or PricedBudget included.
type BudgetGroup interface {
	Budget
	// BudgetFor returns the budget of the call made with ctx. It must
	// not return a BudgetGroup.
	BudgetFor(ctx context.Context) Budget
}

// LimiterGroup is a Limiter that stands for a group of limiters, one per
// key (keyed.Limiters), as BreakerGroup does for breakers.
type LimiterGroup interface {
	Limiter
	// LimiterFor returns the limiter of the call made with ctx. It must
	// not return a LimiterGroup.
	LimiterFor(ctx context.Context) Limiter
}

// HasGroups reports whether p's Breaker, Budget, NestedBudget or Limiter is
// a group (BreakerGroup, BudgetGroup, LimiterGroup) that ResolveGroups
// would replace. A nil p has none.
func HasGroups(p *Policy) bool {
	if p == nil {
		return false
	}
	if _, ok := p.Breaker.(BreakerGroup); ok {
		return true
	}
	if _, ok := p.Budget.(BudgetGroup); ok {
		return true
	}
	if _, ok := p.NestedBudget.(BudgetGroup); ok {
		return true
	}
	_, ok := p.Limiter.(LimiterGroup)
	return ok
}

// ResolveGroups replaces, in *p, each part that is a group by its member
// for a call made with ctx. Do, NewCall and Reset do this on a copy of
// their Policy; an adapter that keeps its own copy of the Policy per call
// (httpretry, hedge) does it on that copy. A group's member function may
// panic; p is then partly resolved.
func ResolveGroups(ctx context.Context, p *Policy) {
	if g, ok := p.Breaker.(BreakerGroup); ok {
		p.Breaker = g.BreakerFor(ctx)
	}
	if g, ok := p.Budget.(BudgetGroup); ok {
		p.Budget = g.BudgetFor(ctx)
	}
	if g, ok := p.NestedBudget.(BudgetGroup); ok {
		p.NestedBudget = g.BudgetFor(ctx)
	}
	if g, ok := p.Limiter.(LimiterGroup); ok {
		p.Limiter = g.LimiterFor(ctx)
	}
}

// groupPolicies recycles the copies runGroups resolves.
var groupPolicies = sync.Pool{New: func() any { return new(Policy) }}

// runGroups is run for a Policy with groups: on a copy whose groups are
// resolved for ctx, recycled when the call returns (nothing keeps the
// Policy after Do returns).
func runGroups[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (T, error) {
	own := groupPolicies.Get().(*Policy)
	defer func() {
		*own = Policy{}
		groupPolicies.Put(own)
	}()
	*own = *p
	ResolveGroups(ctx, own)
	return run(ctx, own, op)
}

// resolved returns a copy of p with its groups resolved for ctx, for a
// Call (one allocation: an adapter that keeps its own copy of the Policy
// resolves it with ResolveGroups before NewCall or Reset, and Do recycles
// its copies).
func resolved(ctx context.Context, p *Policy) *Policy {
	own := new(Policy)
	*own = *p
	ResolveGroups(ctx, own)
	return own
}
