package hedge

import (
	"context"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// Observer is told about hedges, for metrics and traces. retry.Observer
// has no hedge events, so Do looks for this interface on the Policy's
// Observer by type assertion, and on each member of a retry.Multi (any
// Observer with an Unwrap() []retry.Observer method). The attempts
// themselves are reported through retry.Observer as usual: a hedge is an
// attempt with Attempt > 1, so it counts as a retry in
// stormguard_attempts_total{attempt_kind="retry"}.
//
// Methods are called while the call's state is locked, from the goroutine
// that made the event happen (the caller's, a hedge's, or the clock's
// timer): they must be quick, safe for concurrent use, and must not call
// back into the call. A method that panics stops the call as a panicking
// op does, and the panic goes on in the caller's goroutine (never in a
// goroutine of Do's or the clock's). ctx is the attempt's context as AttemptStart
// returned it (so a tracer finds the attempt's span in it).
type Observer interface {
	// HedgeStarted is called when a hedge attempt has begun (after its
	// AttemptStart), because no attempt answered within the delay.
	HedgeStarted(ctx context.Context, e Event)
	// HedgeWon is called when a hedge attempt gave the call's result.
	HedgeWon(ctx context.Context, e Event)
	// HedgeCancelled is called when an attempt was cancelled because
	// another attempt answered first or a fatal result (or a panic)
	// stopped the call: a hedge (Event.Hedge true) or the attempt it
	// hedged (Event.Hedge false: the call's first attempt, or a retry).
	HedgeCancelled(ctx context.Context, e Event)
	// HedgeRefused is called when a hedge was due but not started:
	// Event.Reason says why (retry.ReasonBudget, ReasonBreaker,
	// ReasonAttempts, ReasonDeadline — the caller's deadline or
	// Policy.MaxElapsed —, ReasonNested or ReasonThrottled). No further
	// hedge starts in that call; running attempts go on.
	HedgeRefused(ctx context.Context, e Event)
}

// Event describes a hedge event.
type Event struct {
	// Operation is the Policy's Operation ("" when it has none).
	Operation string
	Attempt   int           // the attempt's number in the call (1 for the first)
	Hedge     bool          // the attempt was started as a hedge
	Delay     time.Duration // the hedge delay in effect
	Reason    retry.Reason  // HedgeRefused only
}

// NopObserver implements Observer doing nothing; embed it to implement only
// some methods.
type NopObserver struct{}

// HedgeStarted does nothing.
func (NopObserver) HedgeStarted(context.Context, Event) {}

// HedgeWon does nothing.
func (NopObserver) HedgeWon(context.Context, Event) {}

// HedgeCancelled does nothing.
func (NopObserver) HedgeCancelled(context.Context, Event) {}

// HedgeRefused does nothing.
func (NopObserver) HedgeRefused(context.Context, Event) {}

// maxObservers bounds how many hedge Observers one Policy's Observer may
// hold (more are ignored).
const maxObservers = 4

type observers struct {
	list [maxObservers]Observer
	n    int
}

// find collects the hedge Observers in o: o itself or the members of a
// Multi (retry.EachObserver).
func (os *observers) find(o retry.Observer) {
	retry.EachObserver(o, func(x retry.Observer) {
		if h, ok := x.(Observer); ok && os.n < maxObservers {
			os.list[os.n] = h
			os.n++
		}
	})
}

func (os *observers) reset() {
	clear(os.list[:os.n])
	os.n = 0
}

// wrapObserver stands between the retry.Call and the Policy's Observer: it
// drops the CallEnd of a hedge's refused Begin (the call goes on), reports
// a cancelled loser's attempt as OutcomeCanceled, and puts a fatal
// attempt's error back as the call's Last. Its fields are read under the
// call's lock.
type wrapObserver struct {
	c     *call
	inner retry.Observer
	list  [1]retry.Observer // inner, for Unwrap
}

func (w *wrapObserver) CallStart(ctx context.Context, e retry.CallStart) context.Context {
	if cs, ok := w.inner.(retry.CallStarter); ok {
		return cs.CallStart(ctx, e)
	}
	return ctx
}

func (w *wrapObserver) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	return w.inner.AttemptStart(ctx, e)
}

func (w *wrapObserver) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	if w.c.endingLost {
		e.Outcome = retry.OutcomeCanceled
	}
	w.inner.AttemptEnd(ctx, e)
}

func (w *wrapObserver) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	w.inner.RetryScheduled(ctx, e)
}

func (w *wrapObserver) CallEnd(ctx context.Context, e retry.CallEnd) {
	if w.c.fixLast != nil {
		if re, ok := e.Err.(*retry.Error); ok {
			re.Last = w.c.fixLast
		}
	}
	w.inner.CallEnd(ctx, e)
}

// Unwrap lets optional observer interfaces be found through the wrapper.
func (w *wrapObserver) Unwrap() []retry.Observer {
	w.list[0] = w.inner
	return w.list[:]
}
