package breaker

import (
	"context"
	"github.com/stormguard/stormguard/internal/listeners"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/stripe"
	"github.com/stormguard/stormguard/retry"
)

// Breaker is a circuit breaker shared by every caller of one downstream.
// Make one with New; a nil *Breaker admits every call. A Breaker is safe
// for concurrent use.
//
// Each state the breaker enters starts a new generation (see Generation).
// Outcomes reported for a call admitted in an earlier generation are
// ignored, so that results that arrive after a state change cannot trip or
// close the breaker again.
//
// In the closed state Allow takes no lock, writes nothing and does not
// allocate; nor does its done function allocate, which takes the lock only
// for the window and custom conditions. (With Window.SlowCallDuration each
// call gets a done function of its own, one allocation of 24 bytes, so
// that a done called twice cannot be mistaken for another call's.) With the consecutive-failures
// condition a call costs three atomic loads and one increment of a counter
// striped per processor, so the breaker scales with parallel callers.
//
// In the open state Allow and Ready refuse without a lock, a write or an
// allocation, and on the real clock without reading the clock (see
// Config.Clock); retry.Do refuses such a call with an *Error built once
// per breaker (see RefusalError) unless an Observer watches it.
type Breaker struct {
	cur  atomic.Pointer[epoch] // the current state; replaced, never mutated, on a change
	s    settings
	clk  clock.Clock
	gate bool      // open periods end by a timer (the real clock): a refusal reads no clock
	pool sync.Pool // *call records of timed calls and probes

	refusedOpen, refusedProbes *retry.Error // RefusalError's, built once

	_          [64]byte
	streak     atomic.Uint64              // consecutive condition: uint32(gen)<<32 | failures in a row
	succAtFail atomic.Uint64              // stripe success total at the last failure (consecutive condition)
	stripes    stripe.Array[stripeCounts] // closed-state counters; padded on both sides

	mu           sync.Mutex // guards the fields below and the half-open fields of the current epoch
	t            tally
	win          window // nil for the consecutive condition and an unwindowed custom one
	trips        int    // open periods since the breaker last closed
	pendingProbe *epoch // an open epoch whose probe timer is to be started after unlocking
	pendingEnd   *epoch // an open epoch whose end timer is to be started after unlocking (gate)
	queued       bool   // transitions are waiting to be delivered to listeners
	closed       bool   // Close was called
	closedFlag   atomic.Bool
	probeTimer   clock.Timer
	probeCtx     context.Context
	probeCancel  context.CancelFunc
	probeWG      sync.WaitGroup

	ev listeners.Queue[transition]
}

// epoch is one stay in one state. Its gen and state never change; the
// half-open counters are guarded by Breaker.mu.
type epoch struct {
	gen     uint64
	state   State
	until   time.Time   // Open: end of the open period
	probeAt time.Time   // Open: when the active probe starts
	base    totals      // Closed: the stripe totals when the state began
	done    func(error) // Closed without slow-call timing: the done shared by its calls
	fast    bool        // done is the consecutive condition's: a success is counted by succeed

	inflight int // HalfOpen: probe calls in flight

	// due is set once the open period may have ended, so that Allow, Ready
	// and State read the clock to see whether it has: on the real clock
	// by a timer at until (see Breaker.gate), on any other clock from the
	// start (each refusal reads the clock), and by Close for a period that
	// active probing governed until then.
	due atomic.Bool
	// unprobed is set when the probe timer could not be started (the
	// Clock panicked): the open period then ends on time, as after Close.
	unprobed atomic.Bool
}

// New returns a closed Breaker configured by c. It panics if c.Validate
// reports an error.
func New(c Config) *Breaker {
	return newBreaker(c, c.Clock == nil || c.Clock == clock.Real)
}

// newBreaker is New; gate says whether open periods end by a timer on the
// breaker's clock (always so on the real clock) rather than by reading the
// clock on every refusal.
func newBreaker(c Config, gate bool) *Breaker {
	if err := c.Validate(); err != nil {
		panic(err.Error())
	}
	b := &Breaker{s: c.settings(), gate: gate}
	b.clk = b.s.clk
	b.refusedOpen = &retry.Error{Reason: ErrOpen}
	b.refusedProbes = &retry.Error{Reason: ErrTooManyProbes}
	now := b.clk.Now()
	switch b.s.mode {
	case tripCountWindow:
		b.win = newCountWindow(b.s.windowCalls)
	case tripTimeWindow:
		b.win = newTimeWindow(b.s.windowDur, b.s.buckets, now)
	case tripCustom:
		if b.s.windowCalls > 0 {
			b.win = newCountWindow(b.s.windowCalls)
		} else if b.s.windowDur > 0 {
			b.win = newTimeWindow(b.s.windowDur, b.s.buckets, now)
		}
	}
	b.pool.New = func() any { return &call{b: b} }
	if b.s.probe != nil {
		b.probeCtx, b.probeCancel = context.WithCancel(context.Background())
	}
	if b.s.onStateChange != nil {
		b.ev.Subscribe(listen(b.s.onStateChange))
	}
	e := &epoch{state: Closed}
	b.bindDone(e)
	b.cur.Store(e)
	return b
}

var _ retry.Breaker = (*Breaker)(nil)

// Allow asks to make one call. If the breaker refuses, it returns ErrOpen or
// ErrTooManyProbes and a nil done. Otherwise the call may be made, and done
// must be called exactly once with its result (nil for success). Allow is
// meant for transports and interceptors that cannot wrap the call in a
// function; see Do for the simpler form.
//
// In the closed state all calls of one generation share one done function
// (that is what makes Allow free of allocation), so calling it twice counts
// the result twice. A half-open probe's done, and that of a call timed for
// Window.SlowCallDuration, are the call's own (one allocation of 24 bytes)
// and ignore every call after the first, even one made after other calls
// were admitted: it never counts for another call, and a probe slot is
// never released twice.
func (b *Breaker) Allow() (done func(err error), err error) {
	if b == nil {
		return nopDone, nil
	}
	e := b.cur.Load()
	if e.done != nil { // closed, calls not timed: the shared done
		return e.done, nil
	}
	if e.state == Open && !e.due.Load() { // on the real clock: no clock read
		return nil, ErrOpen
	}
	return b.allowSlow(e)
}

func nopDone(error) {}

func (b *Breaker) admitClosed(e *epoch) func(error) {
	if e.done != nil {
		return e.done
	}
	return b.admit(e, b.clk.Now(), false)
}

// allowSlow is Allow for every case but the closed state's shared done.
func (b *Breaker) allowSlow(e *epoch) (func(error), error) {
	for {
		switch e.state {
		case Closed:
			return b.admitClosed(e), nil
		case Open:
			if !e.due.Load() || b.probing(e) {
				return nil, ErrOpen // on the real clock without reading it
			}
			now := b.clk.Now()
			if now.Before(e.until) {
				return nil, ErrOpen
			}
			e = b.expire(e, now)
		default: // HalfOpen
			// The clock is read before a probe slot is taken: a Clock
			// whose Now panics takes none (TestHalfOpenClockPanicTakesNoProbe).
			var start time.Time
			if b.s.slowDur > 0 {
				start = b.clk.Now()
			}
			b.mu.Lock()
			if b.cur.Load() != e {
				b.mu.Unlock()
				e = b.cur.Load()
				continue
			}
			if e.inflight >= b.s.maxProbes {
				b.mu.Unlock()
				return nil, ErrTooManyProbes
			}
			e.inflight++
			b.mu.Unlock()
			return b.admit(e, start, true), nil
		}
	}
}

// Ready reports, without admitting a call, the error Allow would return
// now: nil, ErrOpen or ErrTooManyProbes. retry.Do asks it before spending
// budget on a wait.
func (b *Breaker) Ready() error {
	if b == nil {
		return nil
	}
	e := b.current()
	switch e.state {
	case Open:
		return ErrOpen
	case HalfOpen:
		b.mu.Lock()
		full := b.cur.Load() == e && e.inflight >= b.s.maxProbes
		b.mu.Unlock()
		if full {
			return ErrTooManyProbes
		}
	}
	return nil
}

// State returns the current state. An open breaker whose open period has
// ended (without active probing) moves to half-open here, as it would on
// the next Allow (on the real clock: once the period's timer has fired;
// see Config.Clock).
func (b *Breaker) State() State {
	if b == nil {
		return Closed
	}
	return b.current().state
}

// Peek returns the state, as State does, and whether a call now would be
// refused, as Ready says (open, or half-open with every probe slot taken),
// without changing either: an open breaker whose open period has ended
// reads HalfOpen and not refusing, but moves to half-open only at its next
// Allow, Ready or State. No listener runs, so Peek may be called while
// holding a lock that a listener (Config.OnStateChange) takes: keyed's
// groups ask it under theirs.
func (b *Breaker) Peek() (s State, refusing bool) {
	if b == nil {
		return Closed, false
	}
	e := b.cur.Load()
	switch e.state {
	case Open:
		if e.due.Load() && !b.probing(e) && !b.clk.Now().Before(e.until) {
			return HalfOpen, false
		}
		return Open, true
	case HalfOpen:
		b.mu.Lock()
		full := b.cur.Load() == e && e.inflight >= b.s.maxProbes
		b.mu.Unlock()
		return HalfOpen, full
	}
	return e.state, false
}

// Generation returns the number of the current generation. It grows by one
// on every state change, and when a failed active probe restarts the open
// period.
func (b *Breaker) Generation() uint64 {
	if b == nil {
		return 0
	}
	return b.current().gen
}

// Counts returns the outcomes counted in the current state; see Counts.
func (b *Breaker) Counts() Counts {
	if b == nil {
		return Counts{}
	}
	if e := b.current(); e.state == Closed && b.s.mode == tripConsecutive {
		return b.fastCounts(e)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.cur.Load()
	if e.state == Closed && b.s.mode == tripConsecutive {
		return b.fastCounts(e)
	}
	return b.countsLocked(e, b.clk.Now())
}

// fastCounts returns the counts of the consecutive condition's closed state.
func (b *Breaker) fastCounts(e *epoch) Counts {
	all := sumStripes(&b.stripes)
	t := all.minus(e.base)
	c := Counts{Requests: t.successes + t.failures + t.excluded, Successes: t.successes, Failures: t.failures, SlowCalls: t.slow}
	if w := b.streak.Load(); w>>32 == genTag(e.gen) {
		c.ConsecutiveFailures = w & streakMask
	}
	if c.ConsecutiveFailures == 0 {
		if at := b.succAtFail.Load(); all.successes > at {
			c.ConsecutiveSuccesses = all.successes - at
		}
	}
	return c
}

func (b *Breaker) countsLocked(e *epoch, now time.Time) Counts {
	c := Counts{
		Requests:             b.t.requests,
		Successes:            b.t.successes,
		Failures:             b.t.failures,
		SlowCalls:            b.t.slow,
		ConsecutiveSuccesses: b.t.consecSuccesses,
		ConsecutiveFailures:  b.t.consecFailures,
	}
	switch e.state {
	case Open:
		return Counts{}
	case HalfOpen:
		return c
	}
	if b.win != nil {
		c.Successes, c.Failures, c.SlowCalls = b.win.sums(now)
	}
	return c
}

// current returns the current epoch after moving an expired open breaker
// to half-open.
func (b *Breaker) current() *epoch {
	e := b.cur.Load()
	if e.state == Open && e.due.Load() && !b.probing(e) {
		if now := b.clk.Now(); !now.Before(e.until) {
			e = b.expire(e, now)
		}
	}
	return e
}

// expire moves the open epoch e, whose period has ended, to half-open and
// returns the current epoch.
func (b *Breaker) expire(e *epoch, now time.Time) *epoch {
	b.mu.Lock()
	func() {
		defer b.unlock()
		if b.cur.Load() == e && !now.Before(e.until) && !b.probing(e) {
			b.setLocked(e, HalfOpen, now)
		}
	}()
	return b.cur.Load()
}

// probing reports whether active probing governs the open epoch e.
func (b *Breaker) probing(e *epoch) bool {
	return b.s.probe != nil && !b.closedFlag.Load() && !e.unprobed.Load()
}

const streakMask = 1<<32 - 1

func genTag(gen uint64) uint64 { return uint64(uint32(gen)) }

// setLocked replaces the current epoch from with a new one in state to.
// b.mu must be held; call b.unlock to release it.
func (b *Breaker) setLocked(from *epoch, to State, now time.Time) *epoch {
	n := &epoch{gen: from.gen + 1, state: to}
	switch to {
	case Open:
		b.trips++
		d := b.openPeriod(b.trips)
		n.until = now.Add(d)
		switch {
		case b.s.probe != nil && !b.closed:
			wait := max(d-b.s.probeOffset, d/2, 1)
			n.probeAt = now.Add(wait)
			b.pendingProbe = n
		case b.gate:
			b.pendingEnd = n
		default:
			n.due.Store(true)
		}
	case HalfOpen:
		b.t = tally{}
	case Closed:
		b.trips = 0
		b.t = tally{}
		n.base = sumStripes(&b.stripes)
		b.succAtFail.Store(n.base.successes)
		b.streak.Store(genTag(n.gen) << 32)
		if b.win != nil {
			b.win.reset(now)
		}
		b.bindDone(n)
	}
	b.cur.Store(n)
	if from.state != to {
		b.ev.Push(transition{from.state, to})
		b.queued = true
	}
	return n
}

// unlock releases b.mu, then starts a pending probe timer or open period's
// end timer and delivers queued transitions to the listeners (also when
// the Clock panics), in that order: the state machine's
// own work is done before any listener runs, so that a listener that
// panics (the panic goes on once every listener has heard every change)
// cannot leave an actively probed breaker open for good.
func (b *Breaker) unlock() {
	pe, ee, queued := b.pendingProbe, b.pendingEnd, b.queued
	b.pendingProbe, b.pendingEnd, b.queued = nil, nil, false
	b.mu.Unlock()
	if queued {
		defer b.ev.Deliver() // also when the Clock panics
	}
	if pe != nil {
		b.scheduleProbe(pe)
	}
	if ee != nil {
		b.scheduleEnd(ee)
	}
}

// scheduleEnd starts the timer that marks the end of the open period of
// e. If the Clock panics, e is judged by reading the clock, as on a breaker
// without the gate, and the panic goes on.
func (b *Breaker) scheduleEnd(e *epoch) {
	armed := false
	defer func() {
		if !armed {
			e.due.Store(true)
		}
	}()
	b.clk.AfterFunc(e.until.Sub(b.clk.Now()), func() { e.due.Store(true) })
	armed = true
}

// RefusalError returns the *retry.Error that retry.Do, Run and BeginInline
// give up with when b refuses a call's first attempt with refused
// (ErrOpen or ErrTooManyProbes) and no Observer watches the call; nil for
// any other error. Each is built once per breaker and shared by every
// call it refuses, so that a refusal allocates nothing: do not modify it.
// See retry.PrebuiltRefusal.
func (b *Breaker) RefusalError(refused error) *retry.Error {
	r, ok := refused.(*refusal) // cheaper than comparing interfaces
	switch {
	case b == nil || !ok:
		return nil
	case r == errOpen:
		return b.refusedOpen
	case r == errTooManyProbes:
		return b.refusedProbes
	}
	return nil
}

var _ retry.PrebuiltRefusal = (*Breaker)(nil)

// openPeriod returns the length of the n-th open period since the breaker
// last closed: grown, capped and jittered.
func (b *Breaker) openPeriod(n int) time.Duration {
	d := b.s.openTimeout
	if b.s.maxOpen > d && b.s.multiplier > 1 {
		for i := 1; i < n && d < b.s.maxOpen; i++ {
			if f := float64(d) * b.s.multiplier; f < float64(b.s.maxOpen) {
				d = time.Duration(f)
			} else {
				d = b.s.maxOpen
			}
		}
	}
	if j := b.s.jitter; j > 0 {
		var r uint64
		if b.s.rand != nil {
			r = b.s.rand.Uint64() // safe: backoff.Shared
		} else {
			r = rand.Uint64()
		}
		u := float64(r>>11) / (1 << 53) // [0, 1)
		d -= time.Duration(j * u * float64(d))
	}
	return max(d, 1)
}

// trip opens the breaker if e is still the current epoch.
func (b *Breaker) trip(e *epoch) {
	b.mu.Lock()
	defer b.unlock() // even if Config.Rand or Clock panics
	if b.cur.Load() == e {
		b.setLocked(e, Open, b.clk.Now())
	}
}
