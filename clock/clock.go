// Package clock abstracts reading time and waiting, so that every part of
// stormguard that waits or measures can be driven by a fake clock in tests
// and by virtual time in the storm simulator.
//
// Real is the wall clock. clocktest.Fake is a manual clock for tests.
// A nil Clock anywhere in stormguard means Real.
package clock

import (
	"context"
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
// c.Now()+d through Deadline (if that is earlier than the parent's); its
// Err is context.DeadlineExceeded and context.Cause returns cause.
func WithTimeout(parent context.Context, c Clock, d time.Duration, cause error) (context.Context, context.CancelFunc) {
	if c == nil || c == Real {
		return context.WithTimeoutCause(parent, d, cause)
	}
	if cause == nil {
		cause = context.DeadlineExceeded
	}
	ctx, cancel := context.WithCancelCause(parent)
	vc := &virtualDeadline{Context: ctx, deadline: c.Now().Add(d), cause: cause}
	t := c.AfterFunc(d, func() { cancel(cause) })
	return vc, func() {
		t.Stop()
		cancel(context.Canceled)
	}
}

// virtualDeadline is a context whose deadline is measured on a non-real clock.
type virtualDeadline struct {
	context.Context
	deadline time.Time
	cause    error
}

func (v *virtualDeadline) Deadline() (time.Time, bool) {
	if d, ok := v.Context.Deadline(); ok && d.Before(v.deadline) {
		return d, true
	}
	return v.deadline, true
}

// Err reports context.DeadlineExceeded when this context's own timer
// expired, like a context made by context.WithTimeout.
func (v *virtualDeadline) Err() error {
	err := v.Context.Err()
	if err != nil && err == context.Canceled && context.Cause(v.Context) == v.cause {
		return context.DeadlineExceeded
	}
	return err
}
