package retry

import (
	"context"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
)

// Call is one call's retry loop taken apart into steps, for adapters whose
// attempts do not fit one function call — a gRPC stream attempt begins in
// NewStream and ends in a later RecvMsg — or that wait on their own
// scheduler. Do is written with it:
//
//	c := retry.NewCall(ctx, p)
//	for {
//		a, err := c.Begin()   // caller's context, breaker, budget, attempt context, observer
//		if err != nil {
//			return err        // an *Error: give up
//		}
//		err = c.End(&a, op(a.Context)) // observer, breaker, budget
//		if err == nil {
//			c.Succeed()
//			return nil
//		}
//		d, err := c.Next(err) // classification, backoff, advice, deadline, breaker, budget
//		if err != nil {
//			return err
//		}
//		c.Wait(d)             // or wait on your own timer, then Begin again
//	}
//
// Using the steps in that order makes exactly the checks and Observer,
// Budget and Breaker calls of Do, so budgets, breakers and metrics cannot
// tell the adapter from Do. A Call is used by one goroutine at a time and
// costs no allocation of its own.
type Call struct {
	ctx     context.Context
	p       *Policy
	clk     clock.Clock
	obs     Observer
	tracker BudgetTracker
	start   time.Time

	n           int           // attempts begun
	delay       time.Duration // the wait before the next attempt
	prevBackoff time.Duration
	withdrawn   bool // a retry was granted by the budget and not yet begun
	last        error
	elapsed     time.Duration // since start, when the last attempt ended (with an Observer)

	grant grant // a PricedBudget's grant, for the next Begin (priced.go)
}

// Attempt is one attempt in flight, from Call.Begin to Call.End.
type Attempt struct {
	N       int             // 1 for the first attempt
	Delay   time.Duration   // the wait that preceded it
	Context context.Context // run the attempt with this context

	actx context.Context // bounded by AttemptTimeout
	stop context.CancelFunc
	done func(error)   // the breaker's
	lim  func(error)   // the Limiter's
	t0   time.Duration // since the call's start (with an Observer)

	grant grant // what a PricedBudget's grant for it paid (priced.go)
}

var zeroPolicy Policy

// NewCall starts a call under p (nil: the zero Policy) for the caller's ctx.
func NewCall(ctx context.Context, p *Policy) *Call {
	c := new(Call)
	c.init(ctx, p)
	return c
}

// Reset makes c a new call under p (nil: the zero Policy) for the caller's
// ctx, as NewCall does, in place: an adapter that keeps a Call in a pooled
// struct of its own starts each call without a copy. Whatever c was doing
// is forgotten; a retry its budget granted and no attempt used is not
// refunded.
func (c *Call) Reset(ctx context.Context, p *Policy) {
	c.n, c.delay, c.prevBackoff, c.withdrawn, c.elapsed = 0, 0, 0, false, 0
	c.grant = grant{}
	if c.last != nil {
		c.last = nil
	}
	c.init(ctx, p)
}

// init sets up a Call that is zero, or that Reset cleared of its last call.
func (c *Call) init(ctx context.Context, p *Policy) {
	if p == nil {
		p = &zeroPolicy
	}
	c.ctx, c.p, c.clk, c.obs = ctx, p, clock.Or(p.Clock), p.Observer
	if cs, ok := c.obs.(CallStarter); ok {
		c.ctx = cs.CallStart(ctx, CallStart{Operation: p.Operation})
	}
	c.tracker = nil
	if p.Budget != nil {
		c.tracker, _ = p.Budget.(BudgetTracker)
	}
	c.start = time.Time{}
	if c.obs != nil || p.MaxElapsed > 0 {
		c.start = c.clk.Now()
	}
}

// Attempts returns how many attempts have begun.
func (c *Call) Attempts() int { return c.n }

// Begin starts the next attempt: it checks the caller's context, asks the
// breaker, tells a BudgetTracker, bounds the attempt's context by
// AttemptTimeout and tells the Observer. It returns the *Error to give up
// with when the attempt may not run.
func (c *Call) Begin() (Attempt, error) {
	var a Attempt
	err := c.begin(&a)
	return a, err
}

// begin is Begin writing into a, which keeps Do's fast path free of
// struct copies.
func (c *Call) begin(a *Attempt) error {
	n := c.n + 1
	if cerr := c.ctx.Err(); cerr != nil {
		c.refund()
		return c.giveUp(n-1, ReasonContext, cerr)
	}
	var lim, done func(error)
	if c.p.Limiter != nil {
		var lerr error
		if lim, lerr = c.p.Limiter.Acquire(c.ctx, n > 1); lerr != nil {
			c.refund()
			return c.giveUp(n-1, ReasonThrottled, lerr)
		}
	}
	if c.p.Breaker != nil {
		var berr error
		if done, berr = c.p.Breaker.Allow(); berr != nil {
			if lim != nil {
				lim(berr)
			}
			c.refund()
			return c.giveUp(n-1, ReasonBreaker, berr)
		}
	}
	c.withdrawn = false
	a.grant, c.grant = c.grant, grant{}
	if c.tracker != nil {
		c.tracker.Start(n > 1)
	}
	c.n = n
	a.N, a.Delay, a.Context, a.actx, a.done, a.lim, a.stop = n, c.delay, c.ctx, c.ctx, done, lim, nil
	if c.p.AttemptTimeout > 0 {
		a.actx, a.stop = clock.WithTimeout(c.ctx, c.p.Clock, c.p.AttemptTimeout, ErrAttemptTimeout)
		a.Context = a.actx
	}
	if c.obs != nil {
		a.Context = c.obs.AttemptStart(a.actx, AttemptStart{Operation: c.p.Operation, Attempt: n, Delay: a.Delay})
		// Clock reads are the main cost of an observed call: the first
		// attempt starts with the call (a few ns of breaker and budget
		// bookkeeping apart), later ones are measured from it.
		a.t0 = 0
		if n > 1 {
			a.t0 = c.clk.Since(c.start)
		}
	}
	return nil
}

// End finishes attempt a with its result err (nil: success): the Observer
// hears the outcome, then the breaker, then the budget. It returns err as
// the loop sees it — an attempt cut by AttemptTimeout is marked so that
// errors.Is(err, ErrAttemptTimeout) — and releases the attempt's context.
// When the Policy would not retry err (Permanent, Classify or
// DefaultClassifier), the budget's Record receives it marked Permanent,
// so that retry.IsPermanent reports true and the budget does not charge
// the failure.
func (c *Call) End(a *Attempt, err error) error {
	if err != nil && a.actx != c.ctx && c.ctx.Err() == nil && a.actx.Err() != nil {
		err = &attemptTimeoutError{err}
	}
	if c.obs != nil {
		c.elapsed = c.clk.Since(c.start)
		c.obs.AttemptEnd(a.Context, AttemptEnd{Operation: c.p.Operation, Attempt: a.N, Outcome: c.outcome(err), Err: err, Duration: c.elapsed - a.t0})
	}
	if a.stop != nil {
		a.stop()
	}
	if a.done != nil {
		a.done(err)
	}
	if a.lim != nil {
		a.lim(err)
	}
	if c.p.Budget != nil {
		c.record(a, c.budgetErr(err))
	}
	if c.p.NestedBudget != nil && c.p.Nested == NestedBudget {
		c.nestedRecord(a.N > 1, err)
	}
	c.last = err
	return err
}

// budgetErr is the error Budget.Record hears for an attempt that ended with
// err: err itself when the Policy would retry it, marked Permanent when
// its classification would not (so that a budget charges only failures
// that cost retries). It allocates only on that path.
func (c *Call) budgetErr(err error) error {
	if err == nil || IsPermanent(err) || c.retryable(err) {
		return err
	}
	return Permanent(err)
}

func (c *Call) outcome(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeSuccess
	case c.ctx.Err() != nil:
		return OutcomeCanceled
	case walk(err, isTimeoutMarker):
		return OutcomeTimeout
	case !c.retryable(err):
		return OutcomePermanent
	}
	return OutcomeError
}

// Panic ends attempt a, whose code panicked with v, and the whole call: the
// Observer, the breaker and the budget see the attempt fail with a
// *PanicError (so a half-open probe permit or a concurrency slot is
// released), a granted retry is refunded, and the Observer hears the call
// end with ReasonPanic. The caller then re-panics with v:
//
//	defer func() {
//		if v := recover(); v != nil {
//			c.Panic(&a, v)
//			panic(v)
//		}
//	}()
func (c *Call) Panic(a *Attempt, v any) {
	c.End(a, &PanicError{Value: v})
	c.refund()
	c.giveUp(c.n, ReasonPanic, ErrPanicked)
}

// Succeed ends the call with success, after End returned nil.
func (c *Call) Succeed() {
	if c.obs != nil {
		c.obs.CallEnd(c.ctx, CallEnd{Operation: c.p.Operation, Attempts: c.n, Reason: ReasonSuccess, Duration: c.elapsed})
	}
}

// Next decides, after a failed attempt whose error End returned, whether to
// retry: the caller's context, the classification (the overload marker
// included), MaxAttempts, the layer rule, the wait (backoff raised to
// server advice), whether the deadline can hold it, the breaker, the
// NestedBudget when the layer rule asks it, and the budget, in that order. It returns the wait, the budget
// having granted the retry, or the *Error to give up with.
func (c *Call) Next(err error) (time.Duration, error) {
	if cerr := c.ctx.Err(); cerr != nil {
		return 0, c.giveUp(c.n, ReasonContext, cerr)
	}
	if !c.retryable(err) {
		if IsOverloaded(err) {
			return 0, c.giveUp(c.n, ReasonOverloaded, ErrOverloaded)
		}
		return 0, c.giveUp(c.n, ReasonPermanent, nil)
	}
	if limit := c.p.AttemptLimit(); limit > 0 && c.n >= limit {
		return 0, c.giveUp(c.n, ReasonAttempts, ErrAttemptsExhausted)
	}
	if c.p.NestedForbids(c.ctx) {
		return 0, c.giveUp(c.n, ReasonNested, ErrNestedRetry)
	}
	nested := c.p.Nested == NestedBudget && c.p.NestedBudget != nil && c.nestedApplies()
	b := c.p.Backoff
	if b == nil {
		b = DefaultBackoff
	}
	if eb, ok := b.(ErrorBackoff); ok {
		c.prevBackoff = eb.DelayAfter(c.n, c.prevBackoff, err)
	} else {
		c.prevBackoff = b.Delay(c.n, c.prevBackoff)
	}
	delay := c.prevBackoff
	advised := false
	if adv, ok := c.advice(err); ok && adv >= delay {
		delay, advised = adv, true
	} else if ok && adv < 0 {
		// The server asked for longer than MaxRetryAfter: coming back at
		// the cap would be sooner than it asked, so stop.
		return 0, c.giveUp(c.n, ReasonAdvice, ErrAdviceExceedsCap)
	}
	if reason, sentinel := c.fits(delay); sentinel != nil {
		return 0, c.giveUp(c.n, reason, sentinel)
	}
	if c.p.Breaker != nil {
		if berr := c.p.Breaker.Ready(); berr != nil {
			return 0, c.giveUp(c.n, ReasonBreaker, berr)
		}
	}
	if nested && !c.p.NestedBudget.Withdraw(err) {
		return 0, c.giveUp(c.n, ReasonNested, ErrNestedRetry)
	}
	if c.p.Budget != nil {
		if !c.withdraw(err) {
			return 0, c.giveUp(c.n, ReasonBudget, ErrBudgetExhausted)
		}
		c.withdrawn = true
	}
	if c.obs != nil {
		c.obs.RetryScheduled(c.ctx, RetryScheduled{Operation: c.p.Operation, Attempt: c.n + 1, Delay: delay, Advised: advised, Err: err})
	}
	c.delay = delay
	return delay, nil
}

// Wait waits for d on the Policy's clock, returning early when the
// caller's context ends (the next Begin then gives up).
func (c *Call) Wait(d time.Duration) {
	if d <= 0 {
		return
	}
	t := c.clk.NewTimer(d)
	select {
	case <-c.ctx.Done():
		t.Stop()
	case <-t.C():
	}
}

// Abandon gives up a retry that Next granted but that will not be made
// (a stream was committed meanwhile): the budget is refunded and the
// Observer hears the call end as permanent.
func (c *Call) Abandon() error {
	c.refund()
	return c.giveUp(c.n, ReasonPermanent, nil)
}

// refund returns a granted, unstarted retry to a BudgetTracker.
func (c *Call) refund() {
	if c.withdrawn && c.tracker != nil {
		c.tracker.Refund()
	}
	c.withdrawn = false
}

func (c *Call) giveUp(attempts int, reason Reason, sentinel error) error {
	err := &Error{Attempts: attempts, Reason: sentinel, Last: c.last}
	if reason == ReasonContext {
		if cause := context.Cause(c.ctx); cause != sentinel {
			err.Cause = cause
		}
	}
	if c.obs != nil {
		c.obs.CallEnd(c.ctx, CallEnd{Operation: c.p.Operation, Attempts: attempts, Reason: reason, Err: err, Duration: c.clk.Since(c.start)})
	}
	return err
}

func (c *Call) retryable(err error) bool {
	if IsPermanent(err) {
		return false
	}
	if c.p.Classify != nil {
		// An attempt cut by its own timer is retryable whatever Classify
		// says, as Policy.AttemptTimeout promises.
		if walk(err, isTimeoutMarker) {
			return true
		}
		return c.p.Classify(err)
	}
	return DefaultClassifier(err)
}

// advice returns the server-advised wait carried by err, jittered upwards
// by at most a tenth and never above MaxRetryAfter. Advice above the cap
// gives -1: the call must stop rather than come back sooner than asked.
func (c *Call) advice(err error) (time.Duration, bool) {
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
	if d > limit {
		return -1, true
	}
	return d + c.uniform(min(d/10, limit-d)), true
}

// uniform returns a uniform duration in [0, n].
func (c *Call) uniform(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	return time.Duration(backoff.Uniform(c.p.Rand, uint64(n)))
}

// fits reports whether a wait of d followed by MinAttemptTime ends before
// the caller's deadline and MaxElapsed. If not it returns the reason and the
// sentinel to stop with.
func (c *Call) fits(d time.Duration) (Reason, error) {
	dl, hasDL := c.ctx.Deadline()
	if !hasDL && c.p.MaxElapsed <= 0 {
		return 0, nil
	}
	need := c.clk.Now().Add(d + c.p.MinAttemptTime)
	if c.p.MaxElapsed > 0 && !need.Before(c.start.Add(c.p.MaxElapsed)) {
		if !hasDL || c.start.Add(c.p.MaxElapsed).Before(dl) {
			return ReasonDeadline, ErrElapsed
		}
	}
	if hasDL && !need.Before(dl) {
		return ReasonDeadline, ErrDeadlineTooClose
	}
	return 0, nil
}
