package retry

import (
	"context"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/sat"
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
	ntrack  BudgetTracker // Policy.NestedBudget's, when the layer rule is NestedBudget
	start   time.Time

	n           int           // attempts begun
	delay       time.Duration // the wait before the next attempt
	prevBackoff time.Duration
	withdrawn   bool // a retry was granted by the budget and not yet begun
	nwithdrawn  bool // a retry was granted by the NestedBudget and not yet begun
	last        error
	elapsed     time.Duration // since start, when the last attempt ended (with an Observer)
	over        bool          // the Observer has been told the call ended (CallEnd)

	grant grant // a PricedBudget's grant, for the next Begin (priced.go)

	timer clock.Timer // the timer wait is waiting on: stopped by nextPanic when its C or Stop panics

	// lean is set when begin has no callback to call but the context's
	// Err (no Limiter, Breaker, BudgetTracker, AttemptTimeout or
	// Observer), so that Do begins its attempts with beginLean.
	lean bool
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
	live bool          // begun and not yet ended: End has something to report

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
// is forgotten; a retry its budget (or NestedBudget) granted and no attempt
// used is not refunded: end the call first (Abandon refunds it).
func (c *Call) Reset(ctx context.Context, p *Policy) {
	c.n, c.delay, c.prevBackoff, c.withdrawn, c.nwithdrawn, c.elapsed, c.over = 0, 0, 0, false, false, 0, false
	c.grant = grant{}
	if c.last != nil {
		c.last = nil
	}
	if c.timer != nil { // only if a wait's guard did not run
		c.timer = nil
	}
	c.init(ctx, p)
}

// init sets up a Call that is zero, or that Reset cleared of its last call.
func (c *Call) init(ctx context.Context, p *Policy) {
	if p == nil {
		p = &zeroPolicy
	}
	if HasGroups(p) {
		p = resolved(ctx, p) // member.go
	}
	c.setup(ctx, p)
}

// setup is init for a Policy (not nil) without groups.
func (c *Call) setup(ctx context.Context, p *Policy) {
	c.ctx, c.p, c.clk, c.obs = ctx, p, clock.Or(p.Clock), p.Observer
	c.start = time.Time{}
	if c.obs != nil || p.MaxElapsed > 0 {
		c.start = c.clk.Now() // before CallStart: a Clock that panics leaves no call begun
	}
	if c.obs != nil {
		if cs, ok := c.obs.(CallStarter); ok {
			c.ctx = cs.CallStart(ctx, CallStart{Operation: p.Operation})
		}
	}
	c.tracker, c.ntrack = nil, nil
	if p.Budget != nil {
		c.tracker, _ = p.Budget.(BudgetTracker)
	}
	if p.NestedBudget != nil && p.Nested == NestedBudget {
		c.ntrack, _ = p.NestedBudget.(BudgetTracker)
	}
	c.lean = c.obs == nil && p.Limiter == nil && p.Breaker == nil && c.tracker == nil && c.ntrack == nil && p.AttemptTimeout <= 0
}

// Attempts returns how many attempts have begun.
func (c *Call) Attempts() int { return c.n }

// Begin starts the next attempt: it checks the caller's context, asks the
// Limiter and the breaker, tells a BudgetTracker, bounds the attempt's
// context by AttemptTimeout and tells the Observer. It returns the *Error
// to give up with when the attempt may not run.
//
// A callback that panics once the Limiter has admitted the attempt (a
// breaker listener re-raised from Allow, a BudgetTracker, the Observer's
// AttemptStart) ends the attempt as failed with a *PanicError and the call
// with ReasonPanic, as Panic does — the Limiter's permit, the breaker's
// probe and the budget's slot are given back — and the panic goes on. One
// that panics before (the Limiter's Acquire) or while Begin gives up (a
// budget's Refund, the Clock, the Observer's CallEnd) ends the call with
// ReasonPanic likewise, a granted retry refunded, and the panic goes on.
func (c *Call) Begin() (Attempt, error) {
	var a Attempt
	err := c.begin(&a)
	return a, err
}

// begin is Begin writing into a, which keeps Do's fast path free of
// struct copies.
func (c *Call) begin(a *Attempt) error {
	n := c.n + 1
	// settled is set once begin has nothing left that may panic: a
	// refund, a Limiter, a Clock or an Observer that panics on any path,
	// the early give-ups included, ends the call (CallEnd for its
	// CallStart). Until *a is set below, a is the previous attempt's,
	// ended (not live, its permit given back), or a zero Attempt.
	settled := false
	defer func() {
		if !settled {
			c.beginPanic(a, recover())
		}
	}()
	if cerr := c.ctx.Err(); cerr != nil {
		c.refund()
		err := c.giveUp(n-1, ReasonContext, cerr)
		settled = true
		return err
	}
	var lim func(error)
	if c.p.Limiter != nil {
		var lerr error
		if lim, lerr = c.p.Limiter.Acquire(c.ctx, n > 1); lerr != nil {
			c.refund()
			err := c.giveUp(n-1, ReasonThrottled, lerr)
			settled = true
			return err
		}
	}
	*a = Attempt{lim: lim}
	if c.p.Breaker != nil {
		done, berr := c.p.Breaker.Allow()
		if berr != nil {
			c.refund()
			if lim := a.lim; lim != nil {
				a.lim = nil
				lim(berr)
			}
			var err error
			if rerr := c.refused(berr); rerr != nil {
				err = rerr
			} else {
				err = c.giveUp(n-1, ReasonBreaker, berr)
			}
			settled = true
			return err
		}
		a.done = done
	}
	c.withdrawn, c.nwithdrawn = false, false
	c.n = n
	a.N, a.Delay, a.Context, a.actx, a.live = n, c.delay, c.ctx, c.ctx, true
	a.grant, c.grant = c.grant, grant{}
	if c.tracker != nil {
		c.tracker.Start(n > 1)
	}
	if c.ntrack != nil && c.nestedApplies() {
		c.ntrack.Start(n > 1) // as it hears Record: for the calls the rule governs
	}
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
	settled = true
	return nil
}

// beginLean is begin for a Call whose begin has no callback to call but
// the context's Err (c.lean): no guard, no Limiter, breaker, tracker,
// attempt timer or Observer, so nothing to give back if Err panics, and a
// give-up that tells nobody.
func (c *Call) beginLean(a *Attempt) error {
	n := c.n + 1
	if cerr := c.ctx.Err(); cerr != nil {
		c.withdrawn, c.nwithdrawn = false, false // refund: no tracker to tell
		return c.giveUp(n-1, ReasonContext, cerr)
	}
	c.withdrawn, c.nwithdrawn = false, false
	c.n = n
	// *a = Attempt{N: n, ...}, field by field: with c.lean the previous
	// attempt (or the zero Attempt) left stop, done, lim and t0 zero.
	a.N, a.Delay, a.Context, a.actx, a.live = n, c.delay, c.ctx, c.ctx, true
	a.grant, c.grant = c.grant, grant{}
	return nil
}

// beginPanic ends attempt a, whose begin panicked with v once the Limiter
// admitted it, and the call, then lets the panic go on: an attempt the
// breaker admitted is ended as failed, otherwise the Limiter's permit is
// given back.
func (c *Call) beginPanic(a *Attempt, v any) {
	perr := &PanicError{Value: v}
	if a.live {
		a.live = false
		c.last = perr
		c.endSteps(a, &ending{err: perr})
	} else if lim := a.lim; lim != nil {
		a.lim = nil
		safely(lim, perr)
	}
	c.endPanic()
	if v != nil { // nil: runtime.Goexit, which goes on by itself
		panic(v)
	}
}

// safely calls f(err), dropping a panic of f's: it runs while another
// panic, which goes on, is being handled.
func safely(f func(error), err error) {
	defer func() { _ = recover() }()
	f(err)
}

// End finishes attempt a with its result err (nil: success): the Observer
// hears the outcome, then the breaker, then the Limiter, then the budget.
// It returns err as the loop sees it — an attempt cut by AttemptTimeout is
// marked so that errors.Is(err, ErrAttemptTimeout) — and releases the
// attempt's context. When the Policy would not retry err (Permanent,
// Classify or DefaultClassifier), the budget's Record receives it marked
// Permanent, so that retry.IsPermanent reports true and the budget does not
// charge the failure.
//
// Every step runs even when one before it panics (Classify, the Observer,
// a breaker listener re-raised from the breaker's done, the Limiter's
// done): the steps after it hear the attempt fail with a *PanicError, so
// the breaker's probe, the Limiter's permit and the budget's slot are
// given back. The call then ends with ReasonPanic, as Panic ends it, and
// the first panic goes on. An attempt already ended (by End or Panic) is
// not reported again: End returns err and does nothing else.
func (c *Call) End(a *Attempt, err error) error {
	if !a.live {
		return err
	}
	a.live = false
	if err != nil && a.actx != c.ctx && c.ctx.Err() == nil && a.actx.Err() != nil {
		err = &attemptTimeoutError{err}
	}
	c.last = err
	if c.obs == nil && a.stop == nil && a.done == nil && a.lim == nil && c.p.Budget == nil && c.p.NestedBudget == nil {
		return err // no step has anything to do or anyone to tell
	}
	if v, panicked := c.endSteps(a, &ending{err: err}); panicked {
		c.endPanic()
		if v != nil { // nil: runtime.Goexit, which goes on by itself
			panic(v)
		}
	}
	return err
}

// ending is what End's steps tell about one attempt.
type ending struct {
	err  error   // the attempt's result; a *PanicError once a step panicked
	berr error   // what the budgets hear
	out  Outcome // what the Observer hears
	step int     // the step running
}

// End's steps, in order.
const (
	stepJudge = iota
	stepObserve
	stepStop
	stepBreaker
	stepLimiter
	stepBudget
	stepNested
	stepsDone
)

// endSteps runs End's steps for attempt a from e.step on. A step that
// panics is recovered and the steps after it run with the attempt failed
// by a *PanicError; endSteps then returns the first panic's value (nil
// for runtime.Goexit), dropping any later one.
func (c *Call) endSteps(a *Attempt, e *ending) (v any, panicked bool) {
	defer func() {
		if e.step == stepsDone {
			return
		}
		v, panicked = recover(), true
		e.err = &PanicError{Value: v}
		e.out, e.berr = c.judge(e.err) // asks no callback
		e.step++
		c.endSteps(a, e)
	}()
	for ; e.step < stepsDone; e.step++ {
		c.endStep(a, e)
	}
	return nil, false
}

// endStep runs End's step e.step for attempt a. The breaker's, the
// Limiter's and the context's functions are cleared before they are
// called, so that none is called twice.
func (c *Call) endStep(a *Attempt, e *ending) {
	switch e.step {
	case stepJudge:
		e.out, e.berr = OutcomeSuccess, nil
		if e.err != nil && (c.obs != nil || c.p.Budget != nil || c.p.NestedBudget != nil) {
			e.out, e.berr = c.judge(e.err)
		}
	case stepObserve:
		if c.obs != nil {
			c.elapsed = c.clk.Since(c.start)
			c.obs.AttemptEnd(a.Context, AttemptEnd{Operation: c.p.Operation, Attempt: a.N, Outcome: e.out, Err: e.err, Duration: c.elapsed - a.t0})
		}
	case stepStop:
		if stop := a.stop; stop != nil {
			a.stop = nil
			stop()
		}
	case stepBreaker:
		if done := a.done; done != nil {
			a.done = nil
			done(e.err)
		}
	case stepLimiter:
		if lim := a.lim; lim != nil {
			a.lim = nil
			lim(e.err)
		}
	case stepBudget:
		if c.p.Budget != nil {
			c.record(a, e.berr)
		}
	case stepNested:
		if c.p.NestedBudget != nil && c.p.Nested == NestedBudget && c.nestedApplies() {
			c.p.NestedBudget.Record(a.N > 1, e.berr)
		}
	}
}

// judge returns, for an attempt that ended with err, the outcome the
// Observer hears and the error the budgets hear: err itself when the
// Policy would retry it, marked Permanent when its classification would
// not (so that a budget charges only failures that cost retries). It asks
// Classify at most once, never about a *PanicError, and allocates only to
// mark err.
func (c *Call) judge(err error) (Outcome, error) {
	if err == nil {
		return OutcomeSuccess, nil
	}
	retryable := c.retryable(err)
	berr := err
	if !retryable && !IsPermanent(err) {
		berr = Permanent(err)
	}
	switch {
	case c.ctx.Err() != nil:
		return OutcomeCanceled, berr
	case walk(err, isTimeoutMarker):
		return OutcomeTimeout, berr
	case !retryable:
		return OutcomePermanent, berr
	}
	return OutcomeError, berr
}

// budgetErr is the error Budget.Record hears for an attempt that ended with
// err, as judge gives it. It allocates only to mark err.
func (c *Call) budgetErr(err error) error {
	if err == nil || IsPermanent(err) || c.retryable(err) {
		return err
	}
	return Permanent(err)
}

// Panic ends attempt a, whose code panicked with v, and the whole call: the
// Observer, the breaker, the Limiter and the budget see the attempt fail
// with a *PanicError (so a half-open probe permit or a concurrency slot is
// released), a granted retry is refunded, and the Observer hears the call
// end with ReasonPanic (unless it heard the call end already). A callback
// that panics meanwhile stops none of this, and its panic is dropped. An
// attempt already ended (End panicked, say) is not reported again. The
// caller then re-panics with v. Key the guard on the attempt not having
// returned, not on recover() != nil, so that a runtime.Goexit (v nil,
// which goes on by itself) is reported too:
//
//	returned := false
//	defer func() {
//		if !returned {
//			v := recover()
//			c.Panic(&a, v)
//			if v != nil {
//				panic(v)
//			}
//		}
//	}()
//	v, err := op(a.Context)
//	returned = true
func (c *Call) Panic(a *Attempt, v any) {
	if a.live {
		a.live = false
		perr := &PanicError{Value: v}
		c.last = perr
		c.endSteps(a, &ending{err: perr})
	}
	c.endPanic()
}

// endPanic ends the call after a panic: a granted retry is refunded and
// the Observer, unless it heard the call end already, hears it end with
// ReasonPanic (with Duration 0 when the Clock panics too), even when a
// budget's Refund panics. A panic of theirs is dropped: the first one goes
// on.
func (c *Call) endPanic() {
	defer func() { _ = recover() }()
	c.refundSafely()
	if c.obs != nil && !c.over {
		d := c.sinceStart()
		c.over = true
		c.obs.CallEnd(c.ctx, CallEnd{Operation: c.p.Operation, Attempts: c.n, Reason: ReasonPanic, Err: c.failure(c.n, ReasonPanic, ErrPanicked), Duration: d})
	}
}

// refundSafely is refund, dropping a panic of a budget's Refund: it runs
// while another panic, which goes on, is being handled.
func (c *Call) refundSafely() {
	defer func() { _ = recover() }()
	c.refund()
}

// sinceStart is the call's duration on its Clock, or 0 when the Clock
// panics (its panic dropped: it happens while another goes on).
func (c *Call) sinceStart() (d time.Duration) {
	defer func() { _ = recover() }()
	return c.clk.Since(c.start)
}

// Succeed ends the call with success, after End returned nil.
func (c *Call) Succeed() {
	if c.obs != nil && !c.over {
		c.over = true
		c.obs.CallEnd(c.ctx, CallEnd{Operation: c.p.Operation, Attempts: c.n, Reason: ReasonSuccess, Duration: c.elapsed})
	}
}

// Next decides, after a failed attempt whose error End returned, whether to
// retry: the caller's context, the classification (the overload marker
// included), MaxAttempts, the layer rule, the wait (backoff raised to
// server advice), whether the deadline can hold it, the breaker, the
// NestedBudget when the layer rule asks it, and the budget, in that order. It returns the wait, the budget
// having granted the retry, or the *Error to give up with.
//
// A callback that panics meanwhile (Classify, the Backoff, the Observer's
// RetryScheduled) ends the call with ReasonPanic, a retry already granted
// refunded, and the panic goes on.
func (c *Call) Next(err error) (time.Duration, error) {
	settled := false
	defer func() {
		if !settled {
			c.nextPanic(recover())
		}
	}()
	d, gerr := c.next(err)
	settled = true
	return d, gerr
}

// nextPanic ends the call whose Next panicked with v, and lets the panic
// go on.
func (c *Call) nextPanic(v any) {
	if t := c.timer; t != nil {
		c.timer = nil
		stopSafely(t)
	}
	c.endPanic()
	if v != nil { // nil: runtime.Goexit, which goes on by itself
		panic(v)
	}
}

// next is Next.
func (c *Call) next(err error) (time.Duration, error) {
	if cerr := c.ctx.Err(); cerr != nil {
		return 0, c.giveUp(c.n, ReasonContext, cerr)
	}
	retryable, adv, hasAdv := c.classify(err)
	if !retryable {
		if IsOverloaded(err) {
			return 0, c.giveUp(c.n, ReasonOverloaded, ErrOverloaded)
		}
		return 0, c.giveUp(c.n, ReasonPermanent, nil)
	}
	if limit := c.p.AttemptLimit(); limit > 0 && c.n >= limit {
		return 0, c.giveUp(c.n, ReasonAttempts, ErrAttemptsExhausted)
	}
	// The layer rule, with one context lookup (NestedForbids, then
	// whether the NestedBudget pays for this retry).
	nested := false
	if c.p.Nested != NestedIgnore && c.nestedApplies() {
		if c.p.Nested != NestedBudget || c.p.NestedBudget == nil {
			return 0, c.giveUp(c.n, ReasonNested, ErrNestedRetry)
		}
		nested = true
	}
	b := c.p.Backoff
	if b == nil {
		b = DefaultBackoff
	}
	if eb, ok := errorBackoff(&b); ok { // kinds.go
		c.prevBackoff = eb.DelayAfter(c.n, c.prevBackoff, err)
	} else {
		c.prevBackoff = b.Delay(c.n, c.prevBackoff)
	}
	delay := c.prevBackoff
	advised := false
	if adv, ok := c.advice(adv, hasAdv); ok && adv >= delay {
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
	if nested {
		if !c.p.NestedBudget.Withdraw(err) {
			return 0, c.giveUp(c.n, ReasonNested, ErrNestedRetry)
		}
		c.nwithdrawn = true
	}
	if c.p.Budget != nil {
		if !c.withdraw(err) {
			c.refund() // the NestedBudget's grant
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
//
// When the Clock panics (NewTimer, or the Timer's C or Stop), the call
// ends as a panicking Next ends it: the timer, once made, is stopped (a
// panic of that Stop dropped), the retry Next granted is refunded to
// the budget and the NestedBudget, the Observer hears the call end with
// ReasonPanic, and the panic goes on.
func (c *Call) Wait(d time.Duration) {
	if d <= 0 {
		return
	}
	waited := false
	defer func() {
		if !waited {
			c.nextPanic(recover())
		}
	}()
	c.wait(d)
	waited = true
}

// wait is Wait without its guard, for d > 0. It keeps the timer in
// c.timer while it waits, so that the guard (nextPanic) stops it when the
// Timer's C or Stop panics.
func (c *Call) wait(d time.Duration) {
	t := c.clk.NewTimer(d)
	c.timer = t
	select {
	case <-c.ctx.Done():
		t.Stop()
	case <-t.C():
	}
	c.timer = nil
}

// stopSafely stops t, dropping a panic of its Stop: it runs while another
// panic, which goes on, is being handled.
func stopSafely(t clock.Timer) {
	defer func() { _ = recover() }()
	t.Stop()
}

// Abandon gives up a retry that Next granted but that will not be made
// (a stream was committed meanwhile): the budget and the NestedBudget are
// refunded and the Observer hears the call end as permanent.
//
// A budget's Refund or a Clock that panics meanwhile ends the call as a
// panicking Next ends it: the Observer hears it end with ReasonPanic, and
// the panic goes on.
func (c *Call) Abandon() error {
	ended := false
	defer func() {
		if !ended {
			c.nextPanic(recover())
		}
	}()
	c.refund()
	err := c.giveUp(c.n, ReasonPermanent, nil)
	ended = true
	return err
}

// refund returns a granted, unstarted retry to the budget and to the
// NestedBudget that granted it, when they are BudgetTrackers.
// Each grant is given back once: the flags are cleared first, and the
// NestedBudget hears its Refund even when the budget's panics.
func (c *Call) refund() {
	w, nw := c.withdrawn, c.nwithdrawn
	c.withdrawn, c.nwithdrawn = false, false
	if nw && c.ntrack != nil {
		defer c.ntrack.Refund()
	}
	if w && c.tracker != nil {
		c.tracker.Refund()
	}
}

// giveUp ends the call after attempts attempts, for reason, and returns
// its *Error (see failure). The Observer hears the call end unless it has
// already: a Clock that panics meanwhile leaves that to endPanic.
func (c *Call) giveUp(attempts int, reason Reason, sentinel error) error {
	err := c.failure(attempts, reason, sentinel)
	if c.obs != nil && !c.over {
		d := c.clk.Since(c.start)
		c.over = true
		c.obs.CallEnd(c.ctx, CallEnd{Operation: c.p.Operation, Attempts: attempts, Reason: reason, Err: err, Duration: d})
	}
	return err
}

// failure is the *Error of a call given up after attempts attempts, for
// reason, with sentinel.
func (c *Call) failure(attempts int, reason Reason, sentinel error) *Error {
	err := &Error{Attempts: attempts, Reason: sentinel, Last: c.last}
	if reason == ReasonContext {
		if cause := context.Cause(c.ctx); cause != sentinel {
			err.Cause = cause
		}
	}
	return err
}

func (c *Call) retryable(err error) bool {
	if _, ok := err.(*PanicError); ok {
		// An attempt that panicked is a failure like any other, and
		// Classify, which may be what panicked, is not asked about it.
		return true
	}
	if c.p.Classify == nil {
		return DefaultClassifier(err) // which rejects a Permanent mark itself
	}
	if IsPermanent(err) {
		return false
	}
	// An attempt cut by its own timer is retryable whatever Classify
	// says, as Policy.AttemptTimeout promises.
	if walk(err, isTimeoutMarker) {
		return true
	}
	return c.p.Classify(err)
}

// classify returns, for a failed attempt's error, whether the Policy
// would retry it (retryable) and, when it would, the server advice it
// carries (RetryAfter). Under DefaultClassifier both come from one walk of the
// chain (scanChain) where they would take three (IsPermanent,
// DefaultClassifier, RetryAfter).
func (c *Call) classify(err error) (retryable bool, adv time.Duration, hasAdv bool) {
	if err == nil {
		return false, 0, false
	}
	if _, ok := err.(*PanicError); ok || c.p.Classify != nil {
		adv, hasAdv = RetryAfter(err)
		return c.retryable(err), adv, hasAdv
	}
	s := scanChain(err)
	return s.f.retryable(), s.adv, s.hasAdv
}

// advice returns the server-advised wait d (RetryAfter of the error, when
// ok), jittered upwards by at most a tenth and never above MaxRetryAfter.
// Advice above the cap gives -1: the call must stop rather than come back
// sooner than asked.
func (c *Call) advice(d time.Duration, ok bool) (time.Duration, bool) {
	if c.p.MaxRetryAfter < 0 {
		return 0, false
	}
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
	need := c.clk.Now().Add(sat.Add(d, c.p.MinAttemptTime)) // a sum near math.MaxInt64 must not wrap into the past
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
