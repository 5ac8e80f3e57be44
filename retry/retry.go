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

func run[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (v T, err error) {
	if p == nil {
		p = &zeroPolicy
	}
	var c Call
	// With no observer, attempt timeout or time allowance there is nothing
	// to set up or report around the first attempt: make it inline (the
	// same steps as Call.begin and Call.End), which keeps the success path
	// at a few ns, and hand over to the Call only when it fails.
	firstDone := false
	if p.Observer == nil && p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && ctx.Err() == nil {
		if p.Breaker == nil && p.Budget == nil {
			v, err = op(ctx)
		} else {
			var done func(error)
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
			v, err = op(ctx)
			if done != nil {
				done(err)
			}
			if p.Budget != nil {
				p.Budget.Record(false, err)
			}
		}
		if err == nil {
			return v, nil
		}
		c.init(ctx, p)
		c.n, c.last, firstDone = 1, err, true
	} else {
		c.init(ctx, p)
	}
	var a Attempt
	for {
		if !firstDone {
			if gerr := c.begin(&a); gerr != nil {
				return v, gerr
			}
			v, err = op(a.Context)
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
