package admission_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// panickyError is an error whose Is and Unwrap panic: user code that
// judging an attempt's error runs.
type panickyError struct{}

func (panickyError) Error() string { return "panicky" }
func (panickyError) Is(error) bool { panic("Is bug") }
func (panickyError) Unwrap() error { panic("Unwrap bug") }

// TestRetryLimiterErrorPanicReleasesPermit (sweep, callback panics): the
// done function of an attempt judges its error with errors.Is, which
// calls the error's own methods; when they panic, the permit is still
// given back (as a request that says nothing), and the panic goes on.
func TestRetryLimiterErrorPanicReleasesPermit(t *testing.T) {
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: clocktest.NewFake(), QueueLength: -1})
	done, err := l.RetryLimiter().Acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the error's panic did not go on")
			}
		}()
		done(panickyError{})
	}()
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the judging panicked, want 0", n)
	}
}

// panicClock is a fake clock whose Now panics while armed, and whose
// AfterFunc panics while timerArmed.
type panicClock struct {
	*clocktest.Fake
	armed, timerArmed atomic.Bool
}

func (c *panicClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.timerArmed.Load() {
		panic("timer bug")
	}
	return c.Fake.AfterFunc(d, f)
}

func (c *panicClock) Now() time.Time {
	if c.armed.Load() {
		panic("clock bug")
	}
	return c.Fake.Now()
}
func (c *panicClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func mustPanic(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if recover() == nil {
			t.Fatalf("%s: the panic did not go on", what)
		}
	}()
	f()
}

// TestLimiterClockPanicTakesNoSlotAndKeepsQueue (sweep, callback
// panics): a Clock whose Now panics — read as a request is admitted, as
// it enters the queue, as its caller leaves it or as it is released — or
// whose AfterFunc panics as the queue's timeout is armed, holds no slot,
// leaves no request in the queue and leaves the queue's lock free.
// (Before: the slot was taken, and given back, on the far side of the
// clock's read, and the queue's lock was held across it.)
func TestLimiterClockPanicTakesNoSlotAndKeepsQueue(t *testing.T) {
	c := &panicClock{Fake: clocktest.NewFake()}
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: c, ProbeInterval: -1})
	c.armed.Store(true)
	for name, acquire := range map[string]func(){
		"Acquire":    func() { l.Acquire(context.Background()) },
		"TryAcquire": func() { l.TryAcquire() },
	} {
		mustPanic(t, name, acquire)
		if n := l.InFlight(); n != 0 {
			t.Fatalf("%d in flight after the clock panicked in %s, want 0", n, name)
		}
	}
	c.armed.Store(false)
	hold := mustAcquire(t, l)
	c.armed.Store(true)
	mustPanic(t, "Acquire into the queue", func() { l.Acquire(context.Background()) })
	c.armed.Store(false)
	if q := l.Queued(); q != 0 { // Queued takes the queue's lock
		t.Fatalf("%d queued after the clock panicked, want 0", q)
	}
	c.timerArmed.Store(true)
	mustPanic(t, "Acquire arming the queue's timeout", func() { l.Acquire(context.Background()) })
	c.timerArmed.Store(false)
	if q := l.Queued(); q != 0 {
		t.Fatalf("%d queued after the clock's AfterFunc panicked, want 0", q)
	}
	// A queued caller leaves while the clock panics.
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan any, 1)
	go func() {
		defer func() { out <- recover() }()
		l.Acquire(ctx)
	}()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	c.armed.Store(true)
	cancel()
	if v := <-out; v == nil {
		t.Fatal("the clock's panic as the caller left did not go on")
	}
	c.armed.Store(false)
	if q := l.Queued(); q != 0 {
		t.Fatalf("%d queued after the caller left, want 0", q)
	}
	c.armed.Store(true)
	mustPanic(t, "Release", hold.Release)
	c.armed.Store(false)
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the clock panicked in Release, want 0", n)
	}
}

// TestLimiterRandPanicLeavesItConsistent (sweep, callback panics): Rand
// is asked by New for the first probe and as each probe ends for the
// next. A panic in New goes on to New's caller; one as a probe ends goes
// on to the Release that ended it, with the limit back from ProbeLimit
// and no slot held, and the next probe comes at the next window.
func TestLimiterRandPanicLeavesItConsistent(t *testing.T) {
	var armed atomic.Bool
	r := func() float64 {
		if armed.Load() {
			panic("rand bug")
		}
		return 0
	}
	f := clocktest.NewFake()
	// recording takes a no-load RTT (Fixed would never be probed).
	c := admission.Config{Limit: &recording{limit: 10}, Clock: f, Window: 10 * time.Millisecond, WindowSamples: 1, ProbeInterval: 50 * time.Millisecond, Rand: r}
	armed.Store(true)
	mustPanic(t, "New", func() { admission.New(c) })
	armed.Store(false)
	l := newLimiter(t, c)
	for !l.Probing() {
		p := mustAcquire(t, l)
		f.Advance(10 * time.Millisecond)
		p.Release()
	}
	if l.Limit() != admission.DefaultProbeLimit {
		t.Fatalf("limit %d while probing, want %d", l.Limit(), admission.DefaultProbeLimit)
	}
	p := mustAcquire(t, l)
	f.Advance(10 * time.Millisecond)
	armed.Store(true)
	mustPanic(t, "the Release ending the probe", p.Release)
	armed.Store(false)
	if l.Probing() || l.Limit() != 10 || l.InFlight() != 0 {
		t.Fatalf("after the panic: probing %v, limit %d, in flight %d; want false, 10, 0", l.Probing(), l.Limit(), l.InFlight())
	}
	p = mustAcquire(t, l)
	f.Advance(10 * time.Millisecond)
	p.Release()
	if !l.Probing() {
		t.Fatal("no probe at the next window (the next probe's time was never set)")
	}
}

// TestTimedReleaseClockPanicHandsSlotToWaiter (review): a timed Release
// whose Clock panics as it reads the end gives its slot back; the slot
// goes to the queued request before the panic goes on, without any
// further Acquire and without the waiter's timeout. (Before: the slot was
// free but the waiter sat in the queue until the next Acquire or its
// timeout.)
func TestTimedReleaseClockPanicHandsSlotToWaiter(t *testing.T) {
	c := &panicClock{Fake: clocktest.NewFake()}
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: c, ProbeInterval: -1})
	hold := mustAcquire(t, l)
	type result struct {
		p   admission.Permit
		err error
	}
	out := make(chan result, 1)
	go func() {
		p, err := l.Acquire(context.Background())
		out <- result{p, err}
	}()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	c.armed.Store(true)
	mustPanic(t, "Release", hold.Release)
	c.armed.Store(false)
	// The hand-over is done by Release itself, before it returns.
	if q, n := l.Queued(), l.InFlight(); q != 0 || n != 1 {
		t.Fatalf("after the panicking Release: %d queued, %d in flight; want 0 queued, 1 in flight (the waiter's)", q, n)
	}
	r := <-out
	if r.err != nil {
		t.Fatalf("the waiter was shed: %v", r.err)
	}
	r.p.Release()
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the waiter's Release, want 0", n)
	}
}

// valuePanicCtx is a caller's context whose Value panics while armed.
type valuePanicCtx struct {
	context.Context
	armed *atomic.Bool
}

func (c valuePanicCtx) Value(k any) any {
	if c.armed.Load() {
		panic("context bug")
	}
	return c.Context.Value(k)
}

// TestDispatchContextPanicFreesQueueLock (sweep, callback panics): a
// queued caller's context whose methods panic as a release hands its
// slot on goes on to that Release with the queue's lock free, so the
// Limiter keeps working. (Before: dispatch held the lock across the
// context's methods without a defer, and every later queued Acquire,
// Queued and Release with waiters hung on it.)
func TestDispatchContextPanicFreesQueueLock(t *testing.T) {
	c := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: c, ProbeInterval: -1})
	hold := mustAcquire(t, l)
	var armed atomic.Bool
	base, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan error, 1)
	go func() {
		p, err := l.Acquire(valuePanicCtx{base, &armed})
		if err == nil {
			p.Release()
		}
		out <- err
	}()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	armed.Store(true)
	mustPanic(t, "Release", hold.Release)
	armed.Store(false)
	if admission.QueueLockedForTest(l) {
		t.Fatal("the queue's lock is still held after the context panicked in dispatch")
	}
	cancel()
	<-out // the waiter returns (shed as its caller went), as it would without the panic
	if q, n := l.Queued(), l.InFlight(); q != 0 || n != 0 {
		t.Fatalf("%d queued, %d in flight at the end, want 0 and 0", q, n)
	}
}

// TestEnterContextPanicLeavesNoOrphanWaiter (review): when another queued
// caller's context panics as a new request's enter dispatches, the new
// request is not left in the queue without a timer and without a caller
// waiting (it would hold its place, and later a slot, for good). Before,
// once the first waiter timed out the orphan was still queued.
func TestEnterContextPanicLeavesNoOrphanWaiter(t *testing.T) {
	c := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: c, ProbeInterval: -1, FIFO: true})
	hold := mustAcquire(t, l)
	var armed atomic.Bool
	out := make(chan error, 1)
	go func() {
		p, err := l.Acquire(valuePanicCtx{context.Background(), &armed})
		if err == nil {
			p.Release()
		}
		out <- err
	}()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	armed.Store(true)
	mustPanic(t, "Acquire", func() { _, _ = l.Acquire(context.Background()) })
	armed.Store(false)
	c.BlockUntil(1) // the first waiter's queue timer
	c.Advance(time.Hour)
	if err := <-out; err == nil {
		t.Fatal("the first waiter got a slot, want its queue timeout")
	}
	if q := l.Queued(); q != 0 {
		t.Fatalf("%d queued after the first waiter's timeout, want 0: the panicked Acquire left its waiter behind", q)
	}
	hold.Release()
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight at the end, want 0", n)
	}
	if p, err := l.TryAcquire(); err != nil {
		t.Fatalf("TryAcquire after everything ended: %v", err)
	} else {
		p.Release()
	}
}

// stopPanicClock is a fake clock whose timers' Stop panics while armed.
type stopPanicClock struct {
	*clocktest.Fake
	armed atomic.Bool
}

type stopPanicTimer struct {
	clock.Timer
	armed *atomic.Bool
}

func (t stopPanicTimer) Stop() bool {
	if t.armed.Load() {
		panic("stop bug")
	}
	return t.Timer.Stop()
}

func (c *stopPanicClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return stopPanicTimer{c.Fake.AfterFunc(d, f), &c.armed}
}

// TestQueueTimerStopPanicStillHandsTheSlot (review): a queued request's
// timer whose Stop panics as a released slot is handed to it still gets
// the slot and its caller is woken, the panic going on to the releaser.
// Before, Stop ran before the waiter was decided: the slot taken for it
// was never given back and its caller waited for good.
func TestQueueTimerStopPanicStillHandsTheSlot(t *testing.T) {
	c := &stopPanicClock{Fake: clocktest.NewFake()}
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: c, ProbeInterval: -1})
	hold := mustAcquire(t, l)
	got := make(chan error, 1)
	go func() {
		p, err := l.Acquire(context.Background())
		if err == nil {
			p.Release()
		}
		got <- err
	}()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	c.armed.Store(true)
	mustPanic(t, "Release", hold.Release)
	c.armed.Store(false)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("the queued request: %v, want the released slot", err)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
		t.Fatal("the queued request was never woken")
	}
	if q, n := l.Queued(), l.InFlight(); q != 0 || n != 0 {
		t.Fatalf("%d queued, %d in flight at the end, want 0 and 0", q, n)
	}
}

// noLoadPanic is a Limit whose SetNoLoadRTT panics while armed.
type noLoadPanic struct{ armed atomic.Bool }

func (*noLoadPanic) OnSample(time.Time, time.Duration, int, bool) {}
func (*noLoadPanic) Limit() int                                   { return 50 }
func (n *noLoadPanic) SetNoLoadRTT(time.Duration) {
	if n.armed.Load() {
		panic("SetNoLoadRTT bug")
	}
}

// TestProbeEndNoLoadPanicRestoresLimit (outside review, callback
// panics): a Limit whose SetNoLoadRTT panics as a probe ends leaves the
// Limiter out of the probe with its limit back from ProbeLimit, no slot
// held, and the next probe at the next window. (Before: the limit stayed
// pinned at ProbeLimit while Probing said false, until the next window
// with a sample.)
func TestProbeEndNoLoadPanicRestoresLimit(t *testing.T) {
	f := clocktest.NewFake()
	alg := &noLoadPanic{}
	l := newLimiter(t, admission.Config{Limit: alg, Clock: f, Window: 10 * time.Millisecond, WindowSamples: 1, ProbeInterval: 50 * time.Millisecond, ProbeJitter: -1})
	probeAfter(t, l, f, 10*time.Millisecond)
	p := mustAcquire(t, l)
	f.Advance(10 * time.Millisecond)
	alg.armed.Store(true)
	mustPanic(t, "the Release ending the probe", p.Release)
	alg.armed.Store(false)
	if l.Probing() || l.Limit() != 50 || l.InFlight() != 0 {
		t.Fatalf("after the panic: probing %v, limit %d, in flight %d; want false, 50, 0", l.Probing(), l.Limit(), l.InFlight())
	}
	p = mustAcquire(t, l)
	f.Advance(10 * time.Millisecond)
	p.Release()
	if !l.Probing() {
		t.Fatal("no probe at the next window")
	}
}

// TestQueueTimeoutClockPanicStillSheds (outside review, callback
// panics): a Clock whose Now panics as a queued request's timeout fires
// (the timeout reads the time) sheds that request all the same
// (ErrQueueTimeout), the panic going on to the Clock's timer. (Before:
// the request stayed queued with no timeout, its caller — here without a
// deadline — waiting until some release happened to hand it a slot.)
func TestQueueTimeoutClockPanicStillSheds(t *testing.T) {
	c := &panicClock{Fake: clocktest.NewFake()}
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: c, ProbeInterval: -1})
	hold := mustAcquire(t, l)
	defer hold.Release()
	out := make(chan result, 1)
	enqueue(t, l, context.Background(), "A", out)
	c.armed.Store(true)
	mustPanic(t, "the Advance firing the timeout", func() { c.Advance(admission.DefaultQueueInterval) })
	c.armed.Store(false)
	if n := l.Queued(); n != 0 {
		t.Fatalf("%d queued after the timeout fired, want 0 (the request left queued with no timeout)", n)
	}
	expect(t, out, "A", admission.ErrQueueTimeout)
	if s := l.Stats(); s.Shed[admission.ReasonQueueTimeout] != 1 || s.InFlight != 1 {
		t.Fatalf("stats %+v, want one queue timeout and the held slot alone in flight", s)
	}
}

// donePanicCtx is a caller's context whose Done panics while armed.
type donePanicCtx struct {
	context.Context
	armed *atomic.Bool
}

func (c donePanicCtx) Done() <-chan struct{} {
	if c.armed.Load() {
		panic("context Done bug")
	}
	return c.Context.Done()
}

// TestQueuedContextDonePanicLeaksNoSlot (outside review, callback
// panics): a caller's context whose Done panics as Acquire is about to
// wait in the queue leaves nothing queued, so the next release's slot
// goes to no one and comes back free. (Before: Done was called after the
// request was queued; the release handed the slot to a request no one
// waited for, and the slot was lost for good — with a limit of 1 the
// Limiter admitted nothing again.)
func TestQueuedContextDonePanicLeaksNoSlot(t *testing.T) {
	f := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1})
	hold := mustAcquire(t, l)
	var armed atomic.Bool
	armed.Store(true)
	mustPanic(t, "Acquire", func() { l.Acquire(donePanicCtx{context.Background(), &armed}) })
	if q := l.Queued(); q != 0 {
		t.Fatalf("%d queued after the panicking Acquire, want 0", q)
	}
	hold.Release()
	f.Advance(time.Hour)
	if n, q := l.InFlight(), l.Queued(); n != 0 || q != 0 {
		t.Fatalf("after the panicking Acquire and the only Release: %d in flight, %d queued; want 0, 0", n, q)
	}
	mustAcquire(t, l).Release()
}

// errPanicCtx is a caller's context whose Err panics when when says so.
type errPanicCtx struct {
	context.Context
	when func() bool
}

func (c errPanicCtx) Err() error {
	if c.when() {
		panic("context Err bug")
	}
	return c.Context.Err()
}

// TestQueuedContextErrPanicAfterHandOverLeaksNoSlot (outside review,
// callback panics): a queued request is handed a slot, and Acquire then
// asks ctx.Err whether its caller went meanwhile; if that panics, the
// slot goes back unused before the panic goes on. (Before: the Permit
// handed over was never ended, a slot lost for good.)
func TestQueuedContextErrPanicAfterHandOverLeaksNoSlot(t *testing.T) {
	f := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1})
	hold := mustAcquire(t, l)
	// Err panics once hold has gone and the slot is taken again: when
	// Acquire asks after the hand-over (the release's dispatch asks
	// before it takes the slot for the request).
	var released atomic.Bool
	ctx := errPanicCtx{context.Background(), func() bool { return released.Load() && l.InFlight() == 1 }}
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		l.Acquire(ctx)
	}()
	for l.Queued() != 1 {
		runtime.Gosched()
	}
	released.Store(true)
	hold.Release() // hands the slot to the queued request
	if v := <-panicked; v == nil {
		t.Fatal("no panic")
	}
	if n, q := l.InFlight(), l.Queued(); n != 0 || q != 0 {
		t.Fatalf("after the panicking Acquire returned: %d in flight, %d queued; want 0, 0 (the slot handed to it was never given back)", n, q)
	}
	mustAcquire(t, l).Release()
}
