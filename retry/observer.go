package retry

import (
	"context"
	"time"
)

// Observer is told what Do does, for metrics, traces and logs. Every event
// carries the Policy's Operation. Methods are called synchronously from the
// calling goroutine and must be safe for concurrent use; they should be
// quick. A nil Observer costs nothing.
//
// The promretry and otelretry modules implement Observer; Multi combines
// several; NewSlogObserver logs. Embed NopObserver to implement only some
// methods.
type Observer interface {
	// AttemptStart is called before each attempt. The returned context is
	// the one the attempt runs with (a tracer returns one carrying the
	// attempt's span); return ctx unchanged otherwise.
	AttemptStart(ctx context.Context, e AttemptStart) context.Context
	// AttemptEnd is called after each attempt with the context returned by
	// AttemptStart.
	AttemptEnd(ctx context.Context, e AttemptEnd)
	// RetryScheduled is called when Do has decided to retry, before it waits.
	RetryScheduled(ctx context.Context, e RetryScheduled)
	// CallEnd is called once per Do, when it returns.
	CallEnd(ctx context.Context, e CallEnd)
}

// AttemptStart describes an attempt about to run.
type AttemptStart struct {
	// Operation is the Policy's Operation ("" when it has none).
	Operation string
	Attempt   int           // 1 for the first attempt
	Delay     time.Duration // the wait that preceded it (0 for the first)
}

// Retry reports whether this attempt is a retry.
func (e AttemptStart) Retry() bool { return e.Attempt > 1 }

// AttemptEnd describes a finished attempt.
type AttemptEnd struct {
	// Operation is the Policy's Operation ("" when it has none).
	Operation string
	// Attempt is the attempt's number, as in its AttemptStart (1 for the
	// first).
	Attempt int
	// Outcome classifies the result: OutcomeSuccess when Err is nil.
	Outcome Outcome
	Err     error // nil on success
	// Duration is how long the attempt took on the Policy's Clock. The
	// first attempt is measured from the call's start, so it includes the
	// Limiter's wait and the breaker's and budget's bookkeeping before
	// it; a later one from its AttemptStart.
	Duration time.Duration
}

// Retry reports whether this attempt was a retry.
func (e AttemptEnd) Retry() bool { return e.Attempt > 1 }

// RetryScheduled describes a decision to retry.
type RetryScheduled struct {
	// Operation is the Policy's Operation ("" when it has none).
	Operation string
	Attempt   int           // the attempt that will follow the wait
	Delay     time.Duration // the wait
	Advised   bool          // the delay was set by server advice (After)
	Err       error         // the failure that caused the retry
}

// CallEnd describes how a call to Do ended.
type CallEnd struct {
	// Operation is the Policy's Operation ("" when it has none).
	Operation string
	// Attempts is how many attempts began (0 when the first was refused
	// by the context, the Limiter or the breaker).
	Attempts int
	Reason   Reason // ReasonSuccess, or why Do gave up
	Err      error  // nil on success
	// Duration is the call's time on the Policy's Clock from its start:
	// to the end of the last attempt on success, to the decision to give
	// up otherwise (waits included); 0 when the call ends with a panic of
	// the Clock itself.
	Duration time.Duration
}

// Outcome classifies an attempt's result.
type Outcome uint8

// Attempt outcomes.
const (
	OutcomeSuccess   Outcome = iota
	OutcomeError             // failed with a retryable error
	OutcomePermanent         // failed with an error not worth retrying
	OutcomeTimeout           // cut by AttemptTimeout
	OutcomeCanceled          // the caller's context ended during the attempt
)

var outcomeNames = [...]string{"success", "error", "permanent_error", "timeout", "canceled"}

// String returns the label value used in metrics.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "unknown"
}

// Reason says why a call ended.
type Reason uint8

// Call end reasons.
const (
	ReasonSuccess    Reason = iota
	ReasonAttempts          // MaxAttempts reached
	ReasonBudget            // the retry budget refused
	ReasonBreaker           // the breaker refused
	ReasonPermanent         // the error was not retryable
	ReasonContext           // the caller's context ended
	ReasonDeadline          // the caller's deadline or MaxElapsed could not hold another wait and attempt
	ReasonPanic             // the attempt panicked; the panic goes on after the call is reported
	ReasonAdvice            // the server asked to wait longer than MaxRetryAfter
	ReasonNested            // the layer rule (Policy.Nested) left retrying to the inbound caller
	ReasonOverloaded        // the downstream answered "overloaded; don't retry" (ErrOverloaded)
	ReasonThrottled         // the Limiter refused the attempt
)

var reasonNames = [...]string{"success", "attempts", "budget", "breaker", "permanent", "context", "deadline", "panic", "advice", "nested", "overloaded", "throttled"}

// String returns the label value used in metrics.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// NopObserver implements Observer doing nothing; embed it to implement only
// some methods.
type NopObserver struct{}

// AttemptStart returns ctx.
func (NopObserver) AttemptStart(ctx context.Context, _ AttemptStart) context.Context { return ctx }

// AttemptEnd does nothing.
func (NopObserver) AttemptEnd(context.Context, AttemptEnd) {}

// RetryScheduled does nothing.
func (NopObserver) RetryScheduled(context.Context, RetryScheduled) {}

// CallEnd does nothing.
func (NopObserver) CallEnd(context.Context, CallEnd) {}

// Multi returns an Observer that calls each non-nil observer in order. It
// returns nil when none is given, so a Policy keeps its zero-cost path.
// The result of two or more has an Unwrap() []Observer method, so optional
// interfaces its members implement (config.ReloadObserver,
// queue.RefusedObserver, …) are still found: use EachObserver.
func Multi(observers ...Observer) Observer {
	var list multi
	for _, o := range observers {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return list
}

// CallStarter is implemented by Observers that want a context of their own
// for a whole call, such as a tracer's call span for a caller that has no
// span: when a call starts (Do, Run, NewCall), CallStart gets the caller's
// context, and the context it returns is the call's from then on: its
// attempts start from it, and RetryScheduled and CallEnd receive it. It
// must return a context derived from ctx (or ctx itself), so that the
// caller's cancellation and deadline still hold. CallEnd comes once for
// every CallStart, including calls that end with a panic.
type CallStarter interface {
	// CallStart is called once when a call starts, before its first
	// attempt, from the calling goroutine (concurrently for concurrent
	// calls), and returns the call's context: ctx or one derived from it,
	// never nil. If it panics the call does not start and the panic goes
	// on; no CallEnd follows.
	CallStart(ctx context.Context, e CallStart) context.Context
}

// CallStart is the event of CallStarter.
type CallStart struct {
	// Operation is the Policy's Operation ("" when it has none).
	Operation string
}

type multi []Observer

// Unwrap returns the observers m calls, in order.
func (m multi) Unwrap() []Observer { return m }

// EachObserver calls f for o, or, when o is a Multi (anything with an
// Unwrap() []Observer method), for each of its members in order, looking
// into nested Multis too. Code that looks for an optional interface on an
// Observer uses it so that Multi passes the interface through. A nil o
// calls nothing.
func EachObserver(o Observer, f func(Observer)) {
	if o == nil {
		return
	}
	if m, ok := o.(interface{ Unwrap() []Observer }); ok {
		for _, e := range m.Unwrap() {
			EachObserver(e, f)
		}
		return
	}
	f(o)
}

// CallStart passes ctx through the observers that implement CallStarter,
// in order.
func (m multi) CallStart(ctx context.Context, e CallStart) context.Context {
	for _, o := range m {
		if cs, ok := o.(CallStarter); ok {
			ctx = cs.CallStart(ctx, e)
		}
	}
	return ctx
}

func (m multi) AttemptStart(ctx context.Context, e AttemptStart) context.Context {
	for _, o := range m {
		ctx = o.AttemptStart(ctx, e)
	}
	return ctx
}

func (m multi) AttemptEnd(ctx context.Context, e AttemptEnd) {
	for _, o := range m {
		o.AttemptEnd(ctx, e)
	}
}

func (m multi) RetryScheduled(ctx context.Context, e RetryScheduled) {
	for _, o := range m {
		o.RetryScheduled(ctx, e)
	}
}

func (m multi) CallEnd(ctx context.Context, e CallEnd) {
	for _, o := range m {
		o.CallEnd(ctx, e)
	}
}
