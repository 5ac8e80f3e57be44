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
// inherit its Err and cause as they would from a real timeout and, as
// under a real timeout, have ended by the time the timer's firing (within
// the virtual clock's Advance) or cancel returns; so have the contexts
// made by WithTimeout on a non-real clock from those. When a parent that
// is not itself derived from such a virtual timeout ends (a standard
// context cancelled on its own), the returned context follows it from a
// goroutine of the context package's, as context.AfterFunc does.
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
	// The parent's end reaches v through holder: at once from a parent
	// that runs its AfterFunc functions when it ends (another virtual
	// deadline), from a goroutine of the context package's otherwise —
	// and also at once when the nearest virtual deadline above the parent
	// ends, after the contexts between (registered with it before v) have
	// ended.
	end := func() { v.finish(nil, nil) }
	v.mu.Lock()
	if a, ok := parent.(afterFuncer); ok {
		v.stopParent = a.AfterFunc(end) // after holder's own, registered first
	} else {
		stop := context.AfterFunc(v.holder, end)
		v.stopParent = stop
		if anc, ok := parent.Value(virtualKey{}).(*virtualDeadline); ok {
			stopAnc := anc.AfterFunc(end)
			v.stopParent = func() bool { a, b := stopAnc(), stop(); return a && b }
		}
	}
	v.mu.Unlock()
	if v.holder.Err() != nil { // the parent has ended already: end now, as context does
		v.finish(nil, nil)
	}
	// A Clock whose AfterFunc panics: v, registered with the parent
	// above, ends before the panic goes on, so nothing stays registered.
	armed := false
	defer func() {
		if !armed {
			v.finish(context.Canceled, context.Canceled)
		}
	}()
	t := c.AfterFunc(d, func() { v.finish(context.DeadlineExceeded, cause) })
	armed = true
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
	after      []*afterFunc // registered by AfterFunc, run by finish in order
}

// afterFunc is one function registered with virtualDeadline.AfterFunc.
type afterFunc struct{ f func() }

// afterFuncer is a context that runs functions when it ends, as the
// context package looks for it.
type afterFuncer interface {
	AfterFunc(func()) func() bool
}

// finish ends v with err and cause, unless the parent has ended already:
// then v takes the parent's Err and cause. Only the first call counts;
// finish(nil, nil) (the parent's end) does nothing while holder has not
// ended. The
// functions registered with AfterFunc — the cancellation of the contexts
// derived from v — run before finish returns, in the order they were
// registered, as a real timeout cancels its children before its own
// cancel returns.
func (v *virtualDeadline) finish(err, cause error) {
	v.mu.Lock()
	if v.err != nil {
		v.mu.Unlock()
		return
	}
	if herr := v.holder.Err(); herr != nil {
		err = herr // the parent ended first: report its end and cause
	} else if err == nil {
		v.mu.Unlock() // not ended yet (a context between ends on its own time)
		return
	} else if cause != nil {
		v.cancelHolder(cause)
	}
	if v.stopParent != nil {
		v.stopParent()
	}
	v.err = err
	v.cancelSig()
	after := v.after
	v.after = nil
	v.mu.Unlock()
	// Outside the lock: each function reads v.Err and Cause(v).
	for _, a := range after {
		a.f()
	}
}

func (v *virtualDeadline) Deadline() (time.Time, bool) {
	if d, ok := v.holder.Deadline(); ok && d.Before(v.deadline) {
		return d, true
	}
	return v.deadline, true
}

func (v *virtualDeadline) Done() <-chan struct{} { return v.sig.Done() }

// virtualKey finds, through Value, the nearest virtualDeadline a context
// derives from.
type virtualKey struct{}

// Value returns v for virtualKey, and holder's value for any other key.
func (v *virtualDeadline) Value(key any) any {
	if key == (virtualKey{}) {
		return v
	}
	return v.holder.Value(key)
}

// Err reports context.DeadlineExceeded once this context's own timer
// expired, like a context made by context.WithTimeout, the parent's error
// if the parent ended first, and context.Canceled after cancel.
func (v *virtualDeadline) Err() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// AfterFunc lets contexts derived from v follow it without a goroutine of
// their own (the context package looks for this method): f runs when v
// ends, in the goroutine that ends it (finish), so that v's children have
// ended by the time Advance or cancel returns. If v has ended already, f
// runs at once in a goroutine of its own (the context package may hold a
// lock of the child's while it registers f). stop reports whether it kept
// f from running.
func (v *virtualDeadline) AfterFunc(f func()) (stop func() bool) {
	a := &afterFunc{f: f}
	v.mu.Lock()
	if v.err != nil {
		v.mu.Unlock()
		go f()
		return func() bool { return false }
	}
	v.after = append(v.after, a)
	v.mu.Unlock()
	return func() bool {
		v.mu.Lock()
		defer v.mu.Unlock()
		for i, x := range v.after {
			if x == a {
				v.after = append(v.after[:i], v.after[i+1:]...)
				return true
			}
		}
		return false
	}
}

func (v *virtualDeadline) String() string { return "clock.WithTimeout(virtual)" }
