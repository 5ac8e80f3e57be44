// Package clock abstracts reading time and waiting, so that every part of
// stormguard that waits or measures can be driven by a fake clock in tests
// and by virtual time in the storm simulator.
//
// Real is the wall clock. clocktest.Fake is a manual clock for tests.
// A nil Clock anywhere in stormguard means Real.
package clock

import (
	"context"
	"sync"
	"time"
)

// Clock tells the time and makes timers. Implementations must be safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// Since returns the time elapsed since t.
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that sends the current time on its channel
	// after at least d.
	NewTimer(d time.Duration) Timer
	// AfterFunc waits for d and then calls f in its own goroutine (or, for
	// virtual clocks, in the goroutine that advances time).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single event, as made by NewTimer or AfterFunc.
type Timer interface {
	// C returns the channel the time is delivered on; nil for AfterFunc timers.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer (false if it had already fired or been stopped).
	Stop() bool
	// Reset changes the timer to expire after d. It reports whether the
	// timer had been active.
	Reset(d time.Duration) bool
}

// Real is the wall clock, backed by package time.
var Real Clock = realClock{}

// Or returns c, or Real when c is nil.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

// After waits for d on c and then sends the time on the returned channel.
func After(c Clock, d time.Duration) <-chan time.Time {
	return Or(c).NewTimer(d).C()
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// WithTimeout returns a copy of parent that is cancelled, with the given
// cause, once d has passed on c.
//
// On the Real clock it is context.WithTimeoutCause, so the returned context
// carries a deadline that net/http and gRPC propagate. On any other clock the
// context is cancelled by a c.AfterFunc timer and reports the deadline
// c.Now()+d through Deadline (if that is earlier than the parent's). Either
// way it keeps the context contract of context.WithTimeoutCause: when d
// passes its Err is context.DeadlineExceeded and context.Cause returns
// cause (context.DeadlineExceeded if cause is nil); when the parent ends
// first it reports the parent's Err and cause; after the returned cancel it
// reports context.Canceled. Contexts derived from it (WithCancel,
// WithTimeout, WithCancelCause, nested WithTimeout on the same clock)
// inherit its Err and cause as they would from a real timeout.
func WithTimeout(parent context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if c == nil || c == Real {
		return context.WithTimeoutCause(parent, d, cause)
	}
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	v := &virtualDeadline{deadline: c.Now().Add(d)}
	v.holder, v.cancelHolder = context.WithCancelCause(parent)
	v.sig, v.cancelSig = context.WithCancel(context.Background())
	v.Context = v.holder
	// The parent's end reaches v through holder.
	v.mu.Lock()
	v.stopParent = context.AfterFunc(v.holder, func() { v.finish(nil, nil) })
	v.mu.Unlock()
	if v.holder.Err() != nil { // the parent has ended already: end now, as context does
		v.finish(nil, nil)
	}
	t := c.AfterFunc(d, func() { v.finish(context.DeadlineExceeded, cause) })
	return v, func() {
		t.Stop()
		v.finish(context.Canceled, context.Canceled)
	}
}

// virtualDeadline is a context whose deadline is measured on a non-real
// clock. It is built from two standard contexts so that the context
// package treats it as it treats its own:
//
//   - holder, context.WithCancelCause(parent), holds the cause: Value
//     reaches it, so context.Cause(v) — and the cause a child inherits —
//     is holder's;
//   - sig, a context of its own, is what Done returns and what AfterFunc
//     registers on. Since Done is not holder's channel, a child made by
//     context.WithCancel(v) is not attached to holder (which ends with
//     Err Canceled) but to v through AfterFunc, and takes v.Err() —
//     context.DeadlineExceeded once the timer fired — and Cause(v).
type virtualDeadline struct {
	context.Context // holder, for Value
	holder          context.Context
	cancelHolder    context.CancelCauseFunc
	sig             context.Context
	cancelSig       context.CancelFunc
	deadline        time.Time

	mu         sync.Mutex
	stopParent func() bool
	err        error
}

// finish ends v with err and cause, unless the parent has ended already:
// then v takes the parent's Err and cause. Only the first call counts.
func (v *virtualDeadline) finish(err, cause error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err != nil {
		return
	}
	if v.stopParent != nil {
		v.stopParent()
	}
	if herr := v.holder.Err(); herr != nil {
		err = herr // the parent ended first: report its end and cause
	} else if cause != nil {
		v.cancelHolder(cause)
	}
	v.err = err
	v.cancelSig()
}

func (v *virtualDeadline) Deadline() (time.Time, bool) {
	if d, ok := v.holder.Deadline(); ok && d.Before(v.deadline) {
		return d, true
	}
	return v.deadline, true
}

func (v *virtualDeadline) Done() <-chan struct{} { return v.sig.Done() }

// Err reports context.DeadlineExceeded once this context's own timer
// expired, like a context made by context.WithTimeout, the parent's error
// if the parent ended first, and context.Canceled after cancel.
func (v *virtualDeadline) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// AfterFunc lets contexts derived from v follow it without a goroutine of
// their own (the context package looks for this method).
func (v *virtualDeadline) AfterFunc(f func()) func() bool {
	return context.AfterFunc(v.sig, f)
}

func (v *virtualDeadline) String() string { return "clock.WithTimeout(virtual)" }
