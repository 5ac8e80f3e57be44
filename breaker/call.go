package breaker

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/retry"
)

// Done functions. In the closed state, unless slow calls are timed, every
// call gets the same done function, made once per generation (bindDone):
// admitting a call then costs one atomic load, and no write and no
// allocation. Such a done cannot tell one call from
// another, so calling it twice counts twice.
//
// Calls that need their own state (the start time of a call timed for
// SlowCallDuration, a half-open probe's slot) get a call record from the
// breaker's pool, and a done function of their own: a closure of the
// record and the admission's number, its only allocation. The record
// counts its admissions; a done whose number is not the record's current
// admission does nothing, so a done called again — even after its record
// went back to the pool and was handed to another call — neither records
// twice nor touches the other call's record, and a probe slot is never
// released twice.

// bindDone gives the closed epoch e its shared done function, unless calls
// need to be timed.
//
// It is kept out of line: the compiler does not inline the calls in a
// closure made by an inlined copy of its function (Go 1.26), and the
// closure's atomic operations must be inlined.
//
//go:noinline
func (b *Breaker) bindDone(e *epoch) {
	switch {
	case b.s.slowDur > 0:
	case b.s.mode == tripConsecutive:
		e.done = func(err error) {
			if err == nil {
				// A success of the current generation, written out: one
				// increment of the goroutine's stripe, and, while no run
				// of failures is under way (the streak is 0), one load.
				// fastSucceed is the same with a stripe hint given.
				if b.cur.Load() != e {
					return // a result from an earlier generation
				}
				b.stripes.Local().successes.Add(1)
				if b.streak.Load()&streakMask != 0 {
					b.endStreak(e)
				}
				return
			}
			b.record(e, time.Time{}, false, err)
		}
		e.fast = true
	default:
		e.done = func(err error) { b.record(e, time.Time{}, false, err) }
	}
}

func init() {
	var x retry.Breaker = (*Breaker)(nil)
	fastpath.Breaker.Admit = fastAdmit
	fastpath.Breaker.AdmitFirst = fastAdmitFirst
	fastpath.Breaker.Succeed = fastSucceed
	fastpath.Breaker.EndStreak = fastEndStreak
	fastpath.Breaker.Refusal = fastRefusal
	var b Breaker
	fastpath.Breaker.Cur = unsafe.Offsetof(b.cur)
	fastpath.Breaker.Successes = fastpath.Counter{
		Off:    unsafe.Offsetof(b.stripes) + uintptr(unsafe.Pointer(&b.stripes.At(0).successes)) - uintptr(unsafe.Pointer(&b.stripes)),
		Stride: uintptr(unsafe.Pointer(b.stripes.At(1))) - uintptr(unsafe.Pointer(b.stripes.At(0))),
	}
	fastpath.Breaker.Streak = unsafe.Offsetof(b.streak)
	var e epoch
	fastpath.Breaker.Fast, fastpath.Breaker.Done = unsafe.Offsetof(e.fast), unsafe.Offsetof(e.done)
	fastpath.Breaker.Tab.Store(fastpath.TypeWord(unsafe.Pointer(&x))) // last: it publishes the functions
}

// fastAdmit is Allow for retry's first attempt (internal/fastpath), for
// the closed and open states, calling nothing: it also returns the epoch
// when its calls share the consecutive condition's done (fastSucceed
// counts their successes), and (nil, nil, nil) when the caller must ask
// Allow.
func fastAdmit(p unsafe.Pointer) (unsafe.Pointer, func(error), error) {
	b := (*Breaker)(p)
	if b == nil {
		return nil, nil, nil
	}
	e := b.cur.Load()
	switch {
	case e.fast:
		return unsafe.Pointer(e), e.done, nil
	case e.done != nil:
		return nil, e.done, nil
	case e.state == Open && !e.due.Load():
		return nil, nil, ErrOpen // as Allow: no clock read
	}
	return nil, nil, nil
}

// fastAdmitFirst is fastAdmit for retry's first attempt of a call nobody
// observes (internal/fastpath): an open breaker's refusal is the call's
// final error, the prebuilt *retry.Error RefusalError gives for ErrOpen.
func fastAdmitFirst(p unsafe.Pointer) (unsafe.Pointer, func(error), error) {
	b := (*Breaker)(p)
	if b == nil {
		return nil, nil, nil
	}
	e := b.cur.Load()
	switch {
	case e.fast:
		return unsafe.Pointer(e), e.done, nil
	case e.done != nil:
		return nil, e.done, nil
	case e.state == Open && !e.due.Load() && b.refusedOpen != nil:
		return nil, nil, b.refusedOpen // as Allow, then RefusalError(ErrOpen)
	}
	return nil, nil, nil
}

// fastSucceed is the shared done of the consecutive condition's closed
// epoch ep of the Breaker at bp told of a success, with the caller's
// stripe hint h (internal/fastpath): the done's success path, written out,
// but for ending a run of failures, which it leaves to fastEndStreak.
func fastSucceed(bp, ep unsafe.Pointer, h int) bool {
	b, e := (*Breaker)(bp), (*epoch)(ep)
	if b.cur.Load() != e {
		return false // a result from an earlier generation
	}
	b.stripes.For(h).successes.Add(1)
	return b.streak.Load()&streakMask != 0
}

// fastEndStreak ends the run of failures of epoch ep of the Breaker at bp,
// for a success fastSucceed counted.
func fastEndStreak(bp, ep unsafe.Pointer) { (*Breaker)(bp).endStreak((*epoch)(ep)) }

// fastRefusal is RefusalError of the Breaker at bp (not nil), written out
// so that it calls nothing, and an untyped nil when it has none for
// refused (internal/fastpath).
func fastRefusal(bp unsafe.Pointer, refused error) error {
	b := (*Breaker)(bp)
	switch r, _ := refused.(*refusal); {
	case r == nil:
		return nil
	case r == errOpen:
		return b.refusedOpen
	case r == errTooManyProbes:
		return b.refusedProbes
	}
	return nil
}

// call is the record behind the done function of one admitted call.
type call struct {
	b     *Breaker
	e     *epoch
	start time.Time
	probe bool
	seq   atomic.Uint64 // odd while admission seq is in flight
}

// admit hands out pooled record c to a call of epoch e started at start:
// it returns the call's done function.
func (b *Breaker) admit(e *epoch, start time.Time, probe bool) func(error) {
	c := b.pool.Get().(*call)
	c.e, c.start, c.probe = e, start, probe
	seq := c.seq.Add(1) // odd: armed for this admission only
	return func(err error) { c.finish(seq, err) }
}

// finish records the outcome of admission seq of c; it is the done
// function.
func (c *call) finish(seq uint64, err error) {
	if !c.seq.CompareAndSwap(seq, seq+1) {
		return // done called again, maybe after c was handed out anew
	}
	b, e, start, probe := c.b, c.e, c.start, c.probe
	c.e = nil
	b.pool.Put(c) // c may be reused from here on
	b.record(e, start, probe, err)
}

// record counts the result err of a call admitted in epoch e at start
// (zero unless slow calls are timed). If Config.IsFailure, IsExcluded or
// Clock panics, the call counts as a failure before the panic goes on.
func (b *Breaker) record(e *epoch, start time.Time, probe bool, err error) {
	if probe {
		b.recordProbe(e, start, err)
		return
	}
	counted := false
	defer func() {
		if !counted {
			// Config.IsFailure, IsExcluded or Clock panicked: a failure,
			// counted without reading the clock (a time window counts it
			// in its newest bucket), and the panic goes on.
			b.count(e, outFailure, time.Time{})
		}
	}()
	o := b.classify(err)
	var now time.Time
	if o != outExcluded && (b.s.slowDur > 0 || b.win != nil) {
		now = b.clk.Now()
		if b.s.slowDur > 0 && now.Sub(start) >= b.s.slowDur {
			o |= outSlow
		}
	}
	counted = true
	b.count(e, o, now)
}

// count counts outcome o of a closed-state call of epoch e that ended at
// now (zero unless slow calls are timed or a window measures time).
func (b *Breaker) count(e *epoch, o outcome, now time.Time) {
	if b.s.mode == tripConsecutive {
		b.recordConsecutive(e, o)
		return
	}
	b.recordLocked(e, o, now)
}

// recordProbe is record for a half-open probe call. If Config.IsFailure,
// IsExcluded or Clock panics, the probe still releases its slot, as a
// failure, before the panic goes on.
func (b *Breaker) recordProbe(e *epoch, start time.Time, err error) {
	counted := false
	defer func() {
		if !counted {
			b.finishProbe(e, outFailure, time.Time{})
		}
	}()
	o := b.classify(err)
	var now time.Time
	if o != outExcluded && b.s.slowDur > 0 {
		now = b.clk.Now()
		if now.Sub(start) >= b.s.slowDur {
			o |= outSlow
		}
	}
	counted = true
	b.finishProbe(e, o, now)
}

// classify judges a call's result. A call that panicked (Do's errPanicked,
// or the retry.PanicError that retry.Do and retry.Call.Panic report) is
// always a failure, whatever Config.IsFailure and IsExcluded say.
func (b *Breaker) classify(err error) outcome {
	switch {
	case err == nil:
		return outSuccess
	case err == errPanicked:
		return outFailure
	case isPanic(err):
		return outFailure
	case b.s.isExcluded(err):
		return outExcluded
	case b.s.isFailure(err):
		return outFailure
	}
	return outSuccess
}

// recordConsecutive counts an outcome of the consecutive condition's closed
// state without taking the lock. A success writes shared memory only when
// it ends a run of failures.
func (b *Breaker) recordConsecutive(e *epoch, o outcome) {
	if b.cur.Load() != e {
		return // a result from an earlier generation
	}
	st := b.stripes.Local()
	if o == outExcluded {
		st.excluded.Add(1)
		return
	}
	if o.slow() {
		st.slow.Add(1)
	}
	tag := genTag(e.gen) << 32
	if !o.failed() {
		st.successes.Add(1)
		b.endStreak(e)
		return
	}
	st.failures.Add(1)
	b.succAtFail.Store(sumStripes(&b.stripes).successes)
	for {
		w := b.streak.Load()
		if w&^streakMask != tag {
			return // the generation changed meanwhile
		}
		n := w&streakMask + 1
		if b.streak.CompareAndSwap(w, tag|n) {
			if n >= b.s.consecutive {
				b.trip(e)
			}
			return
		}
	}
}

// endStreak ends the run of failures of the closed epoch e, for a success
// just counted. A failure that changes the streak between the load and the
// compare-and-swap must not make the success vanish: it tries again until
// the streak is 0 or the generation changed.
func (b *Breaker) endStreak(e *epoch) {
	tag := genTag(e.gen) << 32
	for {
		w := b.streak.Load()
		if w&streakMask == 0 || w&^streakMask != tag {
			return
		}
		if b.streak.CompareAndSwap(w, tag) {
			return
		}
	}
}

// recordLocked counts an outcome of the closed state of the window and
// custom conditions.
func (b *Breaker) recordLocked(e *epoch, o outcome, now time.Time) {
	b.mu.Lock()
	defer b.unlock()
	if b.cur.Load() != e {
		return
	}
	b.t.add(o)
	if o == outExcluded {
		return
	}
	if b.win != nil {
		b.win.add(now, o)
	}
	if b.shouldTripLocked(e, o, now) {
		if now.IsZero() {
			now = b.clk.Now()
		}
		b.setLocked(e, Open, now)
	}
}

func (b *Breaker) shouldTripLocked(e *epoch, o outcome, now time.Time) bool {
	if b.s.mode == tripCustom {
		return (o.failed() || o.slow()) && b.s.readyToTrip(b.countsLocked(e, now))
	}
	s, f, sl := b.win.sums(now)
	n := s + f
	if n == 0 || n < b.s.minCalls {
		return false
	}
	if b.s.failPct > 0 && float64(f)*100 >= b.s.failPct*float64(n) {
		return true
	}
	return b.s.slowPct > 0 && float64(sl)*100 >= b.s.slowPct*float64(n)
}

// finishProbe counts the outcome of a half-open probe call and releases its
// slot. A failure (or, with a slow-call rate condition, a slow call)
// reopens the breaker; SuccessThreshold successes close it.
func (b *Breaker) finishProbe(e *epoch, o outcome, now time.Time) {
	b.mu.Lock()
	defer b.unlock()
	e.inflight--
	if b.cur.Load() != e {
		return
	}
	if b.t.add(o); o == outExcluded {
		return
	}
	if now.IsZero() {
		now = b.clk.Now()
	}
	if o.failed() || (o.slow() && b.s.slowPct > 0) {
		b.setLocked(e, Open, now)
		return
	}
	if b.t.consecSuccesses >= uint64(b.s.successes) {
		b.setLocked(e, Closed, now)
	}
}

// errPanicked is the outcome recorded for a call whose function panicked.
var errPanicked = errors.New("breaker: call panicked")

// isPanic reports whether err is a *retry.PanicError, as retry hands it to
// done for an attempt that panicked.
func isPanic(err error) bool {
	_, ok := err.(*retry.PanicError)
	return ok
}

// Do calls fn if the breaker admits a call, and records its result. When
// the breaker refuses, Do returns ErrOpen or ErrTooManyProbes at once
// without calling fn; when ctx has already ended it returns ctx.Err()
// without taking a slot. A panic in fn counts as a failure (whatever
// Config.IsFailure says) and releases a half-open probe slot, then goes
// on. A nil b calls fn.
func Do[T any](ctx context.Context, b *Breaker, fn func(context.Context) (T, error)) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	done, err := b.Allow()
	if err != nil {
		return zero, err
	}
	finished := false
	defer func() {
		if !finished {
			done(errPanicked)
		}
	}()
	v, err := fn(ctx)
	finished = true
	done(err)
	return v, err
}
