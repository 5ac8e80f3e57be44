// Package clocktest provides Fake, a manually driven clock for tests.
package clocktest

import (
	"sort"
	"sync"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// Fake is a clock.Clock whose time moves only when Advance or Set is
// called. Timers fire, in deadline order, from within Advance: channel
// timers send without blocking (their channel has room for one value, and
// as with time.Timer since Go 1.23, Stop and Reset discard a value not yet
// received, so no stale tick is ever delivered after them), and
// AfterFunc callbacks run synchronously in the goroutine calling Advance,
// after the clock's lock has been released.
//
// BlockUntil lets a test wait, without sleeping, until the code under test
// has started waiting on the clock; BlockUntilArmed, until it has set a
// timer anew (the wait for a goroutine that reacts by re-arming a timer
// that was pending already, so that BlockUntil would return at once).
// Fake is safe for concurrent use.
type Fake struct {
	mu     sync.Mutex
	cond   *sync.Cond
	now    time.Time
	target time.Time // the time the Advance and Set calls so far move to
	timers []*fakeTimer
	seq    uint64 // timers set so far (NewTimer, AfterFunc, Reset)
}

var _ clock.Clock = (*Fake)(nil)

// Epoch is the time a Fake made by NewFake starts at.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// NewFake returns a Fake clock set to Epoch.
//
// Epoch lies in the real future, so a context.WithDeadline built from
// Fake.Now does not expire in real time during a test, while the code under
// test measures the remaining time on the fake clock.
func NewFake() *Fake { return NewFakeAt(Epoch) }

// NewFakeAt returns a Fake clock set to t.
func NewFakeAt(t time.Time) *Fake {
	f := &Fake{now: t}
	f.cond = sync.NewCond(&f.mu)
	return f
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns Now().Sub(t).
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer that fires once the fake time reaches Now()+d.
func (f *Fake) NewTimer(d time.Duration) clock.Timer {
	t := &fakeTimer{f: f, ch: make(chan time.Time, 1)}
	f.add(t, d)
	return t
}

// AfterFunc calls fn from Advance once the fake time reaches Now()+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) clock.Timer {
	t := &fakeTimer{f: f, fn: fn}
	f.add(t, d)
	return t
}

func (f *Fake) add(t *fakeTimer, d time.Duration) {
	f.mu.Lock()
	f.schedule(t, d)
	f.mu.Unlock()
	if d <= 0 {
		f.fireDue()
	}
}

// fireDue fires the timers due now, without moving the clock (whatever
// a concurrent Advance is moving it to).
func (f *Fake) fireDue() {
	f.mu.Lock()
	now := f.now
	f.mu.Unlock()
	f.advanceTo(now)
}

// schedule must be called with f.mu held.
func (f *Fake) schedule(t *fakeTimer, d time.Duration) {
	if d < 0 {
		d = 0
	}
	f.seq++
	t.when = f.now.Add(d)
	t.seq = f.seq
	t.active = true
	f.timers = append(f.timers, t)
	f.cond.Broadcast()
}

// remove must be called with f.mu held. It reports whether t was pending.
func (f *Fake) remove(t *fakeTimer) bool {
	if !t.active {
		return false
	}
	t.active = false
	for i, x := range f.timers {
		if x == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			break
		}
	}
	f.cond.Broadcast()
	return true
}

// Advance moves the clock forward by d, firing every timer due on the way
// in deadline order (and, for equal deadlines, in creation order). Timers
// created by callbacks that fall due within the advance fire too.
// Concurrent calls add up: each moves the clock d beyond where the calls
// before it move it, even while those are still firing timers, and
// returns once the clock has got at least that far. So does a call made
// by a callback that an Advance is running: it moves the clock d beyond
// that Advance's target (to make time pass inside a callback without
// going further, keep the outer Advance short of it).
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	if f.target.Before(f.now) {
		f.target = f.now
	}
	f.target = f.target.Add(d)
	target := f.target
	f.mu.Unlock()
	f.advanceTo(target)
}

// Set moves the clock to t, which must not be before Now(); see Advance.
// A concurrent Advance counts from the later of t and its own start.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	if t.After(f.target) {
		f.target = t
	}
	f.mu.Unlock()
	f.advanceTo(t)
}

func (f *Fake) advanceTo(target time.Time) {
	for {
		f.mu.Lock()
		next := f.nextDue(target)
		if next == nil {
			if target.After(f.now) {
				f.now = target
			}
			f.mu.Unlock()
			return
		}
		if next.when.After(f.now) {
			f.now = next.when
		}
		f.remove(next)
		if next.fn == nil {
			// Send under the lock, so that a Stop or Reset that returns
			// after this point drains the value: no stale tick escapes.
			select {
			case next.ch <- f.now:
			default:
			}
			f.mu.Unlock()
			continue
		}
		f.mu.Unlock()
		next.fn()
	}
}

// nextDue must be called with f.mu held.
func (f *Fake) nextDue(target time.Time) *fakeTimer {
	var best *fakeTimer
	for _, t := range f.timers {
		if t.when.After(target) {
			continue
		}
		if best == nil || t.when.Before(best.when) || (t.when.Equal(best.when) && t.seq < best.seq) {
			best = t
		}
	}
	return best
}

// Pending returns the number of timers that have not fired or been stopped.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil blocks until at least n timers are pending. It is how a test
// waits for the code under test to start a wait before calling Advance.
func (f *Fake) BlockUntil(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.timers) < n {
		f.cond.Wait()
	}
}

// Armed returns how many times a timer has been set on f so far: by
// NewTimer, AfterFunc and Reset. With BlockUntilArmed it lets a test wait
// for code that reacts by setting a timer:
//
//	armed := fake.Armed()
//	q.Offer(v) // wakes a goroutine, which sets its timer anew
//	fake.BlockUntilArmed(armed + 1)
//	fake.Advance(d) // the goroutine's timer counts from the time it was set
func (f *Fake) Armed() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// BlockUntilArmed blocks until Armed reports at least n.
func (f *Fake) BlockUntilArmed(n uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for f.seq < n {
		f.cond.Wait()
	}
}

// Deadlines returns how far in the future each pending timer fires, in
// firing order.
func (f *Fake) Deadlines() []time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts := append([]*fakeTimer(nil), f.timers...)
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].when.Equal(ts[j].when) {
			return ts[i].seq < ts[j].seq
		}
		return ts[i].when.Before(ts[j].when)
	})
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.when.Sub(f.now)
	}
	return out
}

type fakeTimer struct {
	f      *Fake
	ch     chan time.Time
	fn     func()
	when   time.Time
	seq    uint64
	active bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

// Stop stops the timer. As a time.Timer since Go 1.23, no value sent
// before Stop can be received after it returns, and a timer that fired
// but whose value was not received yet counts as stopped by this call
// (Stop returns true).
func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.stopLocked()
}

// stopLocked must be called with t.f.mu held.
func (t *fakeTimer) stopLocked() bool {
	was := t.f.remove(t)
	if t.ch != nil {
		select { // drop an undelivered tick
		case <-t.ch:
			was = true
		default:
		}
	}
	return was
}

// Reset restarts the timer for d. As a time.Timer since Go 1.23, no value
// sent before Reset can be received after it returns; it reports whether
// the timer was active, a fired but unreceived timer included.
func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	was := t.stopLocked()
	t.f.schedule(t, d)
	t.f.mu.Unlock()
	if d <= 0 {
		t.f.fireDue()
	}
	return was
}
