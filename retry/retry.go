package retry

import (
	"context"
	"unsafe"

	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/internal/stripe"
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
	if p.Breaker != nil || p.Budget != nil {
		// A *breaker.Breaker and a *budget.Ratio, with the fast paths of
		// internal/fastpath, or else runTold (fused checks the types).
		return fused(ctx, p, op)
	}
	if !p.inlineFirst() || ctx.Err() != nil {
		return runPlain(ctx, p, op)
	}
	// Nothing to set up or report around the first attempt, nothing a
	// panic could leak, and no group (inlineFirst: no NestedBudget or
	// Limiter): make it inline, with no guard, which keeps the success
	// path at a few ns.
	v, err := op(ctx)
	if err == nil {
		return v, nil
	}
	return guarded(ctx, p, op, v, err)
}

// runTold is run for a Policy with a breaker or a budget that fused does
// not take (a group, a BudgetTracker, a type of the user's).
func runTold[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (T, error) {
	if !p.inlineFirst() || ctx.Err() != nil {
		return runPlain(ctx, p, op)
	}
	// Only a breaker or a budget to tell (inlineFirst: no NestedBudget or
	// Limiter, so only they can be groups): the first attempt inline,
	// with a guard of its own, handing over to the Call only when it
	// fails. One look finds both whether the budget is a group and
	// whether it is a tracker. A refusal by the breaker, the cost of every
	// call during an outage, returns before anything is set up.
	if breakerIsGroup(&p.Breaker) { // kinds.go
		return runGroups(ctx, p, op) // member.go
	}
	group, tracker := budgetKind(&p.Budget)
	if group {
		return runGroups(ctx, p, op)
	}
	var done func(error)
	if p.Breaker != nil {
		var refused error
		if done, refused = p.Breaker.Allow(); refused != nil {
			var zero T
			// refuse, written out: nobody observes the call (inlineFirst)
			if pr, ok := p.Breaker.(PrebuiltRefusal); ok {
				if err := pr.RefusalError(refused); err != nil {
					return zero, err
				}
			}
			return zero, refuseNew(ctx, p, refused)
		}
	}
	return first(ctx, p, op, done, tracker)
}

// first makes the first attempt of a call whose Policy has only a breaker
// or a budget to tell (tracker is the budget, when it is a BudgetTracker),
// with the steps of Call.begin and Call.End written out, and hands the
// call to guarded when it fails: the breaker admitted it (done, nil
// without a breaker), and the breaker and the budget hear how it ended.
// An op, a breaker's done (a listener's panic re-raised), a
// BudgetTracker's Start or a Classify that panics (or calls
// runtime.Goexit) is reported as a failed attempt, to the breaker unless
// it heard the attempt end and to the budget, before the panic goes on.
func first[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error), done func(error), tracker BudgetTracker) (v T, err error) {
	// g is p until the budget is to hear the attempt's end, and nil
	// from then on: the guard has nothing left to report.
	g := p
	defer func() {
		if g != nil {
			firstPanicked(ctx, g, done, recover())
		}
	}()
	if tracker != nil {
		tracker.Start(false)
	}
	v, err = op(ctx)
	if d := done; d != nil {
		done = nil // told: the guard does not tell it again
		d(err)
	}
	if b := p.Budget; b != nil {
		berr := err
		if err != nil {
			berr = budgetErr(ctx, p, err) // Classify, which may panic
		}
		g = nil
		b.Record(false, berr)
	}
	g = nil
	if err == nil {
		return v, nil
	}
	return guarded(ctx, p, op, v, err)
}

// fusable reports whether p's Breaker is a *breaker.Breaker or nil and its
// Budget a *budget.Ratio or nil (not both nil), whose first attempt fused
// makes (internal/fastpath).
func fusable(p *Policy) bool { return fusableWords(&p.Breaker, &p.Budget) }

// fusableWords is fusable for the Breaker at br and the Budget at bu.
func fusableWords(br *Breaker, bu *Budget) bool {
	bw, uw := fastpath.TypeWord(unsafe.Pointer(br)), fastpath.TypeWord(unsafe.Pointer(bu))
	return (bw == 0 || bw == fastpath.Breaker.Tab.Load()) && (uw == 0 || uw == fastpath.Budget.Tab.Load())
}

// fused is run for a Policy with a breaker or a budget; one that fusable
// does not accept goes on as runTold. For the others, the first attempt as
// first makes it, with the breaker's Allow written out (fastpath.Current,
// Fast and DoneOf for a closed breaker counting consecutive failures,
// fastpath.Breaker.AdmitFirst otherwise; a nil *breaker.Breaker, whose
// Allow admits every attempt with a done that does nothing, is told
// nothing), and, when the attempt succeeds and the breaker is closed,
// counting consecutive failures, or there is no breaker to tell, the
// breaker's done and the budget's Record are the fastpath functions that
// do their work with one stripe.Hint for both (IsCurrent and AddSuccess,
// AddFirstOK). A Policy that needs more set up around its first attempt,
// or a context that has ended, goes to runPlain; a refusal is answered as
// run answers it. Otherwise it goes on as first: the breaker and the
// budget hear how the attempt ended, and a failure goes on to guarded. An
// op, a breaker's done (a listener's panic re-raised) or a Classify that
// panics (or calls runtime.Goexit) is reported as a failed attempt, to the
// breaker unless it heard the attempt end and to the budget, before the
// panic goes on.
//
// The Breaker's and the Budget's types are checked again after the last
// call of user code before the attempt (the context's Err), and their
// data words read there once: the fastpath functions, which take them
// for a *breaker.Breaker and a *budget.Ratio, are only ever given the
// values checked, whatever op, a listener or the context does to p
// (TestFusedPolicyChangedByOp); what runs after op reaches p's values
// through their interfaces, as first does. A Policy changed on the way
// goes on as runTold.
func fused[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (T, error) {
	if !p.inlineFirst() || ctx.Err() != nil {
		return runPlain(ctx, p, op)
	}
	// The types checked after the context's Err, the last user code
	// before the attempt (fusable, written out); the data words read once.
	br, bu := (*fastpath.Iface)(unsafe.Pointer(&p.Breaker)), (*fastpath.Iface)(unsafe.Pointer(&p.Budget))
	bw, uw := br.Tab, bu.Tab
	if bw != fastpath.Breaker.Tab.Load() && bw != 0 {
		return runTold(ctx, p, op)
	}
	if uw != fastpath.Budget.Tab.Load() && uw != 0 {
		return runTold(ctx, p, op)
	}
	bp, rp := br.Data, bu.Data
	var e unsafe.Pointer // the breaker's closed state, when its success may be counted by AddSuccess
	var done func(error)
	// No Breaker (data word nil) or a nil *breaker.Breaker, which admits
	// every attempt with a done that does nothing: none to tell.
	if bp != nil {
		// fastpath.Breaker.AdmitFirst, its closed state inlined
		if e = fastpath.Current(bp); fastpath.Fast(e) {
			done = fastpath.DoneOf(e)
		} else {
			var refused error
			if e, done, refused = fastpath.Breaker.AdmitFirst(bp); done == nil {
				var zero T
				if refused != nil {
					return zero, refused // refuse, written out: the breaker's prebuilt *Error
				}
				// the *breaker.Breaker checked: only AdmitFirst, a leaf, ran since
				if done, refused = p.Breaker.Allow(); refused != nil {
					// refuse, written out, as run does: *breaker.Breaker is
					// a PrebuiltRefusal
					if err := fastpath.Breaker.Refusal(bp, refused); err != nil {
						return zero, err
					}
					return zero, refuseNew(ctx, p, refused)
				}
			}
		}
	}
	// g.p is p until the budget is to hear the attempt's end, as first's
	// g, and nil from then on; g.done is nil once the breaker was told.
	g := firstGuard{p: p, ctx: ctx, done: done}
	defer func() {
		if g.p != nil {
			firstPanicked(g.ctx, g.p, g.done, recover())
		}
	}()
	v, err := op(ctx)
	if err == nil && e != nil {
		g.p = nil // nothing below calls user code
		// stripe.Hint, after op (the goroutine may have moved), written out
		h := stripe.Pin() & (stripe.N - 1)
		stripe.Unpin()
		// fastpath.Breaker.Succeed and fastpath.Budget.FirstOK, inlined
		if fastpath.IsCurrent(bp, e) && fastpath.AddSuccess(bp, h) {
			fastpath.Breaker.EndStreak(bp, e)
		}
		if rp != nil && fastpath.AddFirstOK(rp, h) {
			fastpath.Budget.Refill(rp, h)
		}
		return v, nil
	}
	if err == nil && g.done == nil { // no breaker to tell: the budget's, as above
		g.p = nil
		if rp != nil {
			h := stripe.Pin() & (stripe.N - 1)
			stripe.Unpin()
			if fastpath.AddFirstOK(rp, h) {
				fastpath.Budget.Refill(rp, h)
			}
		}
		return v, nil
	}
	if d := g.done; d != nil {
		g.done = nil // told: the guard does not tell it again
		d(err)
	}
	if b := p.Budget; b != nil { // an interface call: op may have changed p
		berr := err
		if err != nil {
			berr = budgetErr(ctx, p, err) // Classify, which may panic
		}
		g.p = nil
		b.Record(false, berr)
	}
	g.p = nil
	if err == nil {
		return v, nil
	}
	return guarded(ctx, p, op, v, err)
}

// firstGuard is what fused's guard needs to report a first attempt whose
// op, breaker's done or Classify panicked (firstPanicked): p is nil once
// nothing is left to report.
type firstGuard struct {
	p    *Policy
	ctx  context.Context
	done func(error)
}

// budgetErr is the error the budget hears for a first attempt of a call
// under p (without groups) that failed with err, as Call.budgetErr gives
// it. Call.budgetErr reads only the Policy (retryable), so the Call needs
// no setup: no Clock read, no CallStart, no tracker look-up.
func budgetErr(ctx context.Context, p *Policy, err error) error {
	c := Call{ctx: ctx, p: p}
	return c.budgetErr(err)
}

// runPlain is run for a Policy that needs more set up around its first
// attempt than a breaker and a budget, or for a context that has ended.
func runPlain[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error)) (T, error) {
	if HasGroups(p) {
		return runGroups(ctx, p, op) // member.go
	}
	var zero T
	return guarded(ctx, p, op, zero, nil)
}

// firstPanicked reports run's first attempt, under p for ctx, as failed
// when it did not return (r is what recover gave: nil for runtime.Goexit):
// to the breaker through done unless it heard the attempt end (done nil),
// first, then to the budget, the limiter and the Observer through a Call
// set up from p (to the budget alone when that setup panics); then it lets
// the panic go on. A panic while reporting (a listener's, the setup's) is
// dropped: op's goes on.
func firstPanicked(ctx context.Context, p *Policy, done func(error), r any) {
	if done != nil {
		// The breaker first, whatever the rest does: the Call below is
		// set up from the Policy as op left it (an Observer's CallStart,
		// a Clock, a group's key function, any of which may panic), and
		// a half-open breaker whose probe is never told refuses every
		// later call.
		tellPanicked(done, r)
	}
	set := false
	func() {
		defer func() { _ = recover() }() // a panic of the setup's is dropped: op's goes on
		var c Call
		a := c.Adopt(ctx, p, Inline{})
		set = true // from here Panic tells the budget, whatever its steps do
		c.Panic(&a, r)
	}()
	if !set {
		// The setup panicked: the budget (a BudgetTracker's Start is
		// open) still hears the attempt fail.
		recordPanicked(p.Budget, r)
	}
	if r != nil {
		panic(r)
	}
}

// recordPanicked tells b (if any) that an attempt failed with a panic r,
// dropping a panic of Record's own: r's goes on.
func recordPanicked(b Budget, r any) {
	if b == nil {
		return
	}
	defer func() { _ = recover() }()
	b.Record(false, &PanicError{Value: r})
}

// tellPanicked tells a breaker's done that its attempt panicked with r,
// dropping a panic of done's own (a listener's): r's goes on.
func tellPanicked(done func(error), r any) {
	defer func() { _ = recover() }()
	done(&PanicError{Value: r})
}

// guarded runs the call from its first attempt (err nil) or after an
// inline first attempt (run's or first's, already reported to the breaker
// and the budget) failed with (v, err). An attempt whose op panics
// (or calls runtime.Goexit) is reported as failed to the breaker, the
// budget and the Observer before the panic goes on.
func guarded[T any](ctx context.Context, p *Policy, op func(context.Context) (T, error), v T, err error) (T, error) {
	var c Call
	var a Attempt
	// at is the step of the Call under way: the deferred function does
	// work only when op, or Next and Wait (called here without guards of
	// their own), did not return.
	at := guardIdle
	defer func() {
		switch at {
		case guardOp:
			r := recover()
			c.Panic(&a, r)
			if r != nil { // nil: runtime.Goexit, which goes on by itself
				panic(r)
			}
		case guardNext:
			c.nextPanic(recover()) // as Next's and Wait's guards would
		}
	}()
	c.setup(ctx, p) // p has no groups: run resolved them
	firstDone := err != nil
	if firstDone {
		c.n, c.last = 1, err
	}
	for {
		if !firstDone {
			var gerr error
			if c.lean {
				gerr = c.beginLean(&a)
			} else {
				gerr = c.begin(&a)
			}
			if gerr != nil {
				return v, gerr
			}
			at = guardOp
			v, err = op(a.Context)
			at = guardIdle
			if err = c.End(&a, err); err == nil {
				c.Succeed()
				return v, nil
			}
		}
		firstDone = false
		at = guardNext
		d, gerr := c.next(err)
		if gerr == nil && d > 0 {
			c.wait(d)
		}
		at = guardIdle
		if gerr != nil {
			return v, gerr
		}
	}
}

// The steps of guarded's Call that its deferred function guards.
const (
	guardIdle = iota
	guardOp   // the attempt's op
	guardNext // Next and Wait
)
