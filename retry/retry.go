package retry

import (
	"context"
)

// Do calls op until it succeeds or the Policy says stop, and returns op's
// value and nil, or the last attempt's value and an *Error. A nil Policy is
// the zero Policy. See the package documentation for the order of checks.
//
// op receives a context derived from ctx, bounded by AttemptTimeout; it must
// return when that context ends. That context is cancelled as soon as op
// returns, so nothing op hands back may keep using it: an HTTP response body
// or a gRPC stream that outlives the attempt needs its own timer (httpretry
// and grpcretry do this) rather than Policy.AttemptTimeout.
func Do[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (T, error) {
	return run(ctx, p, op)
}

// Run is Do for operations that return only an error.
func Run(ctx context.Context, p *Policy, op func(context.Context) error) error {
	// The adapter does not escape run, so it costs no allocation.
	_, err := run(ctx, p, func(ctx context.Context) (struct{}, error) { return struct{}{}, op(ctx) })
	return err
}

func run[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (T, error) {
	if p == nil {
		p = &zeroPolicy
	}
	// With no observer, attempt timeout, time allowance, breaker or budget
	// there is nothing to set up or report around the first attempt, and
	// nothing a panic could leak: make it inline, with no guard, which
	// keeps the success path at a few ns.
	if p.Observer == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && p.Breaker == nil && p.Budget == nil && ctx.Err() == nil {
		v, err := op(ctx)
		if err == nil {
			return v, nil
		}
		return guarded(ctx, p, op, v, err)
	}
	var zero T
	return guarded(ctx, p, op, zero, nil)
}

// guarded runs the call from its first attempt (err nil) or after run's
// inline first attempt failed with (v, err). An attempt whose op panics
// (or calls runtime.Goexit) is reported as failed to the breaker, the
// budget and the Observer before the panic goes on.
func guarded[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error), v T, err error) (T, error) {
	var c Call
	var a Attempt
	var done func(error)
	// inOp says which attempt runs: 1 an inline first attempt, 2 an
	// attempt of the Call. The deferred function does work only when op
	// did not return.
	inOp := 0
	defer func() {
		if inOp != 0 {
			r := recover()
			if inOp == 1 {
				c.init(ctx, p)
				c.n = 1
				a = Attempt{N: 1, Context: ctx, actx: ctx, done: done}
			}
			c.Panic(&a, r)
			if r != nil { // nil: runtime.Goexit, which goes on by itself
				panic(r)
			}
		}
	}()
	firstDone := err != nil
	if firstDone {
		c.init(ctx, p)
		c.n, c.last = 1, err
	} else if p.Observer == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && ctx.Err() == nil {
		// Only a breaker or a budget to tell: the same steps as Call.begin
		// and Call.End, made inline, handing over to the Call only when
		// the attempt fails.
		if p.Breaker != nil {
			var berr error
			if done, berr = p.Breaker.Allow(); berr != nil {
				c.init(ctx, p)
				return v, c.giveUp(0, ReasonBreaker, berr)
			}
		}
		if p.Budget != nil {
			if tracker, ok := p.Budget.(BudgetTracker); ok {
				tracker.Start(false)
			}
		}
		inOp = 1
		v, err = op(ctx)
		inOp = 0
		if done != nil {
			done(err)
		}
		if err == nil {
			if p.Budget != nil {
				p.Budget.Record(false, nil)
			}
			return v, nil
		}
		c.init(ctx, p)
		if p.Budget != nil {
			p.Budget.Record(false, c.budgetErr(err))
		}
		c.n, c.last, firstDone = 1, err, true
	} else {
		c.init(ctx, p)
	}
	for {
		if !firstDone {
			if gerr := c.begin(&a); gerr != nil {
				return v, gerr
			}
			inOp = 2
			v, err = op(a.Context)
			inOp = 0
			if err = c.End(&a, err); err == nil {
				c.Succeed()
				return v, nil
			}
		}
		firstDone = false
		d, gerr := c.Next(err)
		if gerr != nil {
			return v, gerr
		}
		c.Wait(d)
	}
}
