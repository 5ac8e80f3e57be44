package retry

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/clock"
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

var zeroPolicy Policy

func run[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (v T, err error) {
	if p == nil {
		p = &zeroPolicy
	}
	c := call{p: p, obs: p.Observer}
	if p.Budget != nil {
		c.tracker, _ = p.Budget.(BudgetTracker)
	}
	if c.obs != nil || p.MaxElapsed > 0 {
		c.start = clock.Or(p.Clock).Now()
	}
	var delay, prevBackoff time.Duration
	for attempt := 1; ; attempt++ {
		if cerr := ctx.Err(); cerr != nil {
			if attempt > 1 && c.tracker != nil {
				c.tracker.Refund()
			}
			return v, c.giveUp(ctx, attempt-1, ReasonContext, cerr, err)
		}
		var done func(error)
		if p.Breaker != nil {
			var berr error
			if done, berr = p.Breaker.Allow(); berr != nil {
				if attempt > 1 && c.tracker != nil {
					c.tracker.Refund()
				}
				return v, c.giveUp(ctx, attempt-1, ReasonBreaker, berr, err)
			}
		}
		if c.tracker != nil {
			c.tracker.Start(attempt > 1)
		}

		if p.AttemptTimeout <= 0 && c.obs == nil {
			v, err = op(ctx) // nothing to set up or report: the fast path
		} else {
			v, err = runAttempt(&c, ctx, op, attempt, delay)
		}

		if done != nil {
			done(err)
		}
		if p.Budget != nil {
			p.Budget.Record(attempt > 1, err)
		}
		if err == nil {
			if c.obs != nil {
				c.obs.CallEnd(ctx, CallEnd{Operation: p.Operation, Attempts: attempt, Reason: ReasonSuccess, Duration: c.since(c.start)})
			}
			return v, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return v, c.giveUp(ctx, attempt, ReasonContext, cerr, err)
		}
		if !c.retryable(err) {
			return v, c.giveUp(ctx, attempt, ReasonPermanent, nil, err)
		}
		if p.MaxAttempts > 0 && attempt >= p.MaxAttempts {
			return v, c.giveUp(ctx, attempt, ReasonAttempts, ErrAttemptsExhausted, err)
		}

		// Decide the wait.
		b := p.Backoff
		if b == nil {
			b = DefaultBackoff
		}
		prevBackoff = b.Delay(attempt, prevBackoff)
		delay = prevBackoff
		advised := false
		if adv, ok := c.advice(err); ok && adv >= delay {
			delay, advised = adv, true
		}

		// Stop now if the deadline cannot hold the wait and a useful attempt.
		if reason, sentinel := c.fits(ctx, delay); sentinel != nil {
			return v, c.giveUp(ctx, attempt, reason, sentinel, err)
		}
		if p.Breaker != nil {
			if berr := p.Breaker.Ready(); berr != nil {
				return v, c.giveUp(ctx, attempt, ReasonBreaker, berr, err)
			}
		}
		if p.Budget != nil && !p.Budget.Withdraw(err) {
			return v, c.giveUp(ctx, attempt, ReasonBudget, ErrBudgetExhausted, err)
		}
		if c.obs != nil {
			c.obs.RetryScheduled(ctx, RetryScheduled{Operation: p.Operation, Attempt: attempt + 1, Delay: delay, Advised: advised, Err: err})
		}
		if delay > 0 {
			t := clock.Or(p.Clock).NewTimer(delay)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C():
			}
		}
	}
}

// call holds one Do's per-call state, on the stack.
type call struct {
	p       *Policy
	obs     Observer
	tracker BudgetTracker
	start   time.Time
}

func (c *call) since(t time.Time) time.Duration { return clock.Or(c.p.Clock).Since(t) }

// attempt runs op once with its own context and classifies a timeout.
func runAttempt[T any](c *call, ctx context.Context, op func(context.Context) (T, error), n int, delay time.Duration) (T, error) {
	actx := ctx
	if c.p.AttemptTimeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = clock.WithTimeout(ctx, c.p.Clock, c.p.AttemptTimeout, ErrAttemptTimeout)
		defer cancel()
	}
	var t0 time.Time
	octx := actx
	if c.obs != nil {
		octx = c.obs.AttemptStart(actx, AttemptStart{Operation: c.p.Operation, Attempt: n, Delay: delay})
		t0 = clock.Or(c.p.Clock).Now()
	}
	v, err := op(octx)
	outcome := OutcomeSuccess
	if err != nil {
		switch {
		case ctx.Err() != nil:
			outcome = OutcomeCanceled
		case actx != ctx && actx.Err() != nil:
			err = &attemptTimeoutError{err}
			outcome = OutcomeTimeout
		case walk(err, isTimeoutMarker):
			outcome = OutcomeTimeout // an adapter's own attempt timer
		case !c.retryable(err):
			outcome = OutcomePermanent
		default:
			outcome = OutcomeError
		}
	}
	if c.obs != nil {
		c.obs.AttemptEnd(octx, AttemptEnd{Operation: c.p.Operation, Attempt: n, Outcome: outcome, Err: err, Duration: c.since(t0)})
	}
	return v, err
}

func (c *call) retryable(err error) bool {
	if IsPermanent(err) {
		return false
	}
	if c.p.Classify != nil {
		return c.p.Classify(err)
	}
	return DefaultClassifier(err)
}

// advice returns the server-advised wait carried by err, jittered upwards
// by at most a tenth, never above MaxRetryAfter; advice at or above the cap
// gives a wait in [0.9·cap, cap].
func (c *call) advice(err error) (time.Duration, bool) {
	if c.p.MaxRetryAfter < 0 {
		return 0, false
	}
	d, ok := RetryAfter(err)
	if !ok || d <= 0 {
		return 0, false
	}
	limit := c.p.MaxRetryAfter
	if limit == 0 {
		limit = DefaultMaxRetryAfter
	}
	if d >= limit {
		// Many clients told the same large value would otherwise all
		// come back exactly at the cap: spread them below it.
		return limit - c.uniform(limit/10), true
	}
	return d + c.uniform(min(d/10, limit-d)), true
}

// uniform returns a uniform duration in [0, n].
func (c *call) uniform(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	if c.p.Rand != nil {
		return time.Duration(c.p.Rand.Uint64() % uint64(n+1))
	}
	return time.Duration(rand.Int64N(int64(n) + 1))
}

// fits reports whether a wait of d followed by MinAttemptTime ends before
// the caller's deadline and MaxElapsed. If not it returns the reason and the
// sentinel to stop with.
func (c *call) fits(ctx context.Context, d time.Duration) (Reason, error) {
	dl, hasDL := ctx.Deadline()
	if !hasDL && c.p.MaxElapsed <= 0 {
		return 0, nil
	}
	now := clock.Or(c.p.Clock).Now()
	need := now.Add(d + c.p.MinAttemptTime)
	if c.p.MaxElapsed > 0 && !need.Before(c.start.Add(c.p.MaxElapsed)) {
		if !hasDL || c.start.Add(c.p.MaxElapsed).Before(dl) {
			return ReasonDeadline, ErrElapsed
		}
	}
	if hasDL && !need.Before(dl) {
		return ReasonDeadline, context.DeadlineExceeded
	}
	return 0, nil
}

func (c *call) giveUp(ctx context.Context, attempts int, reason Reason, sentinel, last error) error {
	err := &Error{Attempts: attempts, Reason: sentinel, Last: last}
	if c.obs != nil {
		c.obs.CallEnd(ctx, CallEnd{Operation: c.p.Operation, Attempts: attempts, Reason: reason, Err: err, Duration: c.since(c.start)})
	}
	return err
}
