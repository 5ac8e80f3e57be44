package retry

import "context"

// Inline is a first attempt begun without a Call, the way Do makes the
// first attempt of a call whose Policy needs nothing set up around it but
// its breaker and its budget (BeginInline). An adapter that keeps a Call
// in a pooled struct of its own uses it so that a first attempt that
// succeeds costs what Do's does, and hands the attempt to the Call only
// when it needs the Call's steps after all:
//
//	in, ok, err := retry.BeginInline(ctx, p)
//	if err != nil {
//		return err // the breaker refused: an *Error, as Begin's
//	}
//	if !ok {
//		// the Call's steps from Begin, as its documentation shows
//	}
//	err = op(ctx) // the attempt runs with ctx itself
//	if err == nil {
//		in.Succeed(p)
//		return nil
//	}
//	a := c.Adopt(ctx, p, in) // c's call, whose first attempt is a
//	err = c.End(&a, err)
//	d, err := c.Next(err) // and on, as with Begin
//
// The zero Inline is no attempt.
type Inline struct {
	done func(error) // the breaker's permit
}

// BeginInline begins the first attempt of a call under p (nil: the zero
// Policy) for the caller's ctx without a Call, when p needs nothing set
// up around a first attempt but its breaker and its budget (no Observer,
// AttemptTimeout, MaxElapsed, Limiter or NestedBudget, and no group:
// HasGroups) and ctx has not ended. It asks the breaker and tells a
// BudgetTracker, as Begin does, and reports ok. When p needs more, ok is
// false and nothing was done: begin with a Call (which resolves groups).
// When the breaker refuses, err is the *Error to give up with, as Begin's
// would be.
func BeginInline(ctx context.Context, p *Policy) (in Inline, ok bool, err error) {
	if p == nil {
		p = &zeroPolicy
	}
	if !p.inlineFirst() || ctx.Err() != nil {
		return in, false, nil
	}
	// HasGroups, for a Policy inlineFirst accepts (no NestedBudget or
	// Limiter): one look tells whether the budget is a group and whether
	// it is a tracker.
	if breakerIsGroup(&p.Breaker) { // kinds.go
		return in, false, nil
	}
	group, tracker := budgetKind(&p.Budget)
	if group {
		return in, false, nil
	}
	if in, err = beginInline(ctx, p, tracker); err != nil {
		return in, false, err
	}
	return in, true, nil
}

// beginInline is BeginInline once the Policy and the context allow it;
// tracker is p's Budget when it is a BudgetTracker.
func beginInline(ctx context.Context, p *Policy, tracker BudgetTracker) (in Inline, err error) {
	if p.Breaker != nil {
		var refused error
		if in.done, refused = p.Breaker.Allow(); refused != nil {
			return in, refuse(ctx, p, refused)
		}
	}
	if tracker != nil {
		startTracker(tracker, in.done)
	}
	return in, nil
}

// startTracker tells tracker an attempt starts. If it panics, the
// breaker's permit just taken (done, when not nil) ends as failed with a
// *PanicError, so that a half-open breaker's probe slot is not held for
// good, and the panic goes on.
func startTracker(tracker BudgetTracker, done func(error)) {
	ok := false
	defer func() {
		if !ok && done != nil {
			r := recover() // nil for runtime.Goexit, which goes on by itself
			done(&PanicError{Value: r})
			if r != nil {
				panic(r)
			}
		}
	}()
	tracker.Start(false)
	ok = true
}

// refuse is the *Error of a call whose first attempt the breaker refused:
// the breaker's prebuilt one when nobody observes the call (see
// PrebuiltRefusal).
func refuse(ctx context.Context, p *Policy, refused error) error {
	if pr, ok := p.Breaker.(PrebuiltRefusal); ok && p.Observer == nil {
		if err := pr.RefusalError(refused); err != nil {
			return err
		}
	}
	return refuseNew(ctx, p, refused)
}

// refuseNew builds the *Error of a call whose first attempt the breaker
// refused.
func refuseNew(ctx context.Context, p *Policy, refused error) error {
	var c Call
	c.init(ctx, p)
	return c.giveUp(0, ReasonBreaker, refused)
}

// inlineFirst reports whether a first attempt under p needs nothing set
// up around it but the breaker and the budget (for a caller's context that
// has not ended).
func (p *Policy) inlineFirst() bool {
	return p.Observer == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && p.Limiter == nil && p.NestedBudget == nil
}

// Succeed ends the successful inline attempt of a call under p: the
// breaker and the budget hear of it as End and Call.Succeed would tell
// them. When the breaker's done panics (a listener's panic re-raised), the
// budget hears the attempt fail with a *PanicError, and the panic goes on.
func (in Inline) Succeed(p *Policy) {
	if p == nil || p.Budget == nil {
		if in.done != nil {
			in.done(nil)
		}
		return
	}
	returned := false
	defer func() {
		if !returned {
			v := recover()
			p.Budget.Record(false, &PanicError{Value: v})
			if v != nil { // nil: runtime.Goexit, which goes on by itself
				panic(v)
			}
		}
	}()
	if in.done != nil {
		in.done(nil)
	}
	returned = true
	p.Budget.Record(false, nil)
}

// Adopt makes c a new call under p for ctx, as Reset does, whose first
// attempt is in, begun by BeginInline and not ended: it returns that
// attempt, to end with End (or Panic) as if Begin had made it.
func (c *Call) Adopt(ctx context.Context, p *Policy, in Inline) Attempt {
	c.Reset(ctx, p)
	c.n = 1
	return Attempt{N: 1, Context: c.ctx, actx: c.ctx, done: in.done, live: true}
}
