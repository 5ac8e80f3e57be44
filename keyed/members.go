package keyed

import (
	"context"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// Breakers is a group of circuit breakers, one per key, each built by
// breaker.New from one breaker.Config. It is a retry.BreakerGroup: as a
// Policy's Breaker, each call uses the breaker of its key (KeyFrom of the
// call's context). A breaker that is open, or half-open, is kept (never
// removed) while it refuses calls; a half-open breaker that admits probes
// is removed only after Config.Idle unused. A breaker the group lets go
// (removed, or at Close) is closed (breaker.Breaker.Close: its active
// probing stops). Listeners of the breakers may use the group: under its
// lock the group reads breakers with Peek, which runs no listener, and it
// closes the ones it lets go after releasing the lock.
type Breakers struct {
	*Group[*breaker.Breaker]
}

var _ retry.BreakerGroup = (*Breakers)(nil)

// NewBreakers returns a group of breakers built from bc, bounded by kc.
// kc.Clock nil: bc.Clock. It refuses a kc that Config.Validate refuses and
// a bc that breaker.Config.Validate refuses.
func NewBreakers(kc Config, bc breaker.Config) (*Breakers, error) {
	if err := bc.Validate(); err != nil {
		return nil, err
	}
	if kc.Clock == nil {
		kc.Clock = bc.Clock
	}
	g, err := NewWithRelease(kc, func(string) *breaker.Breaker { return breaker.New(bc) }, keepBreaker,
		func(_ string, b *breaker.Breaker) { b.Close() }) // stops active probing (bc.Probe)
	if err != nil {
		return nil, err
	}
	return &Breakers{g}, nil
}

// Peeker is a breaker whose state can be read without changing it:
// breaker.Breaker and redisstore's shared breaker.
type Peeker interface {
	// Peek returns the state and whether a call now would be refused,
	// moving no state and running no listener.
	Peek() (s breaker.State, refusing bool)
}

// keepBreaker is KeepBreaker for NewBreakers's groups.
func keepBreaker(b *breaker.Breaker, idle bool) bool { return KeepBreaker(b, idle) }

// KeepBreaker is the keep rule of a group of breakers (NewBreakers, and
// config's and redisstore's keyed breakers): it keeps an open breaker, and
// a half-open one unless it admits probes and has been idle, since
// dropping a breaker that refuses calls would close it silently. A group
// asks it under its lock, so it reads the breaker with Peek, which moves
// no state and runs no listener: a listener that uses the group (its
// Stats, say) does not deadlock.
func KeepBreaker(b Peeker, idle bool) bool {
	switch s, refusing := b.Peek(); s {
	case breaker.Open:
		return true
	case breaker.HalfOpen:
		return !idle || refusing
	}
	return false
}

// Allow is the default member's Allow.
func (b *Breakers) Allow() (done func(err error), err error) { return b.Default().Allow() }

// Ready is the default member's Ready.
func (b *Breakers) Ready() error { return b.Default().Ready() }

// BreakerFor returns the breaker of KeyFrom(ctx).
func (b *Breakers) BreakerFor(ctx context.Context) retry.Breaker { return b.For(ctx) }

// Budgets is a group of retry budgets, one per key, each made by one
// function. It is a retry.BudgetGroup: as a Policy's Budget (or
// NestedBudget), each call uses the budget of its key. Budgets are never
// kept: an idle budget is removed, and its key starts again with a new
// one.
type Budgets struct {
	*Group[retry.Budget]
}

var _ retry.BudgetGroup = (*Budgets)(nil)

// NewBudgets returns a group of the budgets newBudget makes (a budget
// per call of it, such as func() retry.Budget { return
// budget.NewRatio(cfg) }), bounded by kc.
func NewBudgets(kc Config, newBudget func() retry.Budget) (*Budgets, error) {
	g, err := New(kc, func(string) retry.Budget { return newBudget() }, nil)
	if err != nil {
		return nil, err
	}
	return &Budgets{g}, nil
}

// Record is the default member's Record.
func (b *Budgets) Record(retry bool, err error) { b.Default().Record(retry, err) }

// Withdraw is the default member's Withdraw.
func (b *Budgets) Withdraw(err error) bool { return b.Default().Withdraw(err) }

// BudgetFor returns the budget of KeyFrom(ctx).
func (b *Budgets) BudgetFor(ctx context.Context) retry.Budget { return b.For(ctx) }

// Limiters is a group of client-side limiters, one per key, each made by
// one function. It is a retry.LimiterGroup: as a Policy's Limiter, each
// call uses the limiter of its key. Its own Acquire uses the limiter of
// KeyFrom(ctx) too.
type Limiters struct {
	*Group[retry.Limiter]
}

var _ retry.LimiterGroup = (*Limiters)(nil)

// NewLimiters returns a group of the limiters newLimiter makes, bounded by
// kc.
func NewLimiters(kc Config, newLimiter func() retry.Limiter) (*Limiters, error) {
	g, err := New(kc, func(string) retry.Limiter { return newLimiter() }, nil)
	if err != nil {
		return nil, err
	}
	return &Limiters{g}, nil
}

// Acquire is Acquire of the limiter of KeyFrom(ctx).
func (l *Limiters) Acquire(ctx context.Context, retry bool) (done func(err error), err error) {
	return l.For(ctx).Acquire(ctx, retry)
}

// LimiterFor returns the limiter of KeyFrom(ctx).
func (l *Limiters) LimiterFor(ctx context.Context) retry.Limiter { return l.For(ctx) }
