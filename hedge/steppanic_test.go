package hedge_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// trapClock is a fake clock whose Since panics with "since" once armed,
// when package hedge itself calls it (the latency Adaptive is fed), and
// whose NewTimer panics with "newtimer" when newTimer is set.
type trapClock struct {
	*clocktest.Fake
	since    atomic.Bool
	now      atomic.Bool // Now panics with "now", every time, when package hedge calls it
	newTimer bool
}

// fromHedge reports whether the caller of the caller of fromHedge is in
// package hedge.
func fromHedge() bool {
	pc, _, _, _ := runtime.Caller(2)
	f := runtime.FuncForPC(pc)
	return f != nil && strings.HasPrefix(f.Name(), "github.com/stormguard/stormguard/hedge.")
}

func (c *trapClock) Now() time.Time {
	if c.now.Load() && fromHedge() {
		panic("now")
	}
	return c.Fake.Now()
}

func (c *trapClock) Since(t time.Time) time.Duration {
	if c.since.Load() && fromHedge() && c.since.CompareAndSwap(true, false) {
		panic("since")
	}
	return c.Fake.Since(t)
}

func (c *trapClock) NewTimer(d time.Duration) clock.Timer {
	if c.newTimer {
		panic("newtimer")
	}
	return c.Fake.NewTimer(d)
}

// errBreaker records what each attempt's done heard.
type errBreaker struct {
	mu     sync.Mutex
	allows int
	dones  []error
}

func (b *errBreaker) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.allows++
	return func(err error) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.dones = append(b.dones, err)
	}, nil
}

func (b *errBreaker) Ready() error { return nil }

// check fails t unless every permit was given back, no attempt was
// reported a success, and one failed with a *retry.PanicError.
func (b *errBreaker) check(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.allows != len(b.dones) {
		t.Fatalf("breaker: %d allowed, %d done: a permit is left out", b.allows, len(b.dones))
	}
	panics := 0
	for _, err := range b.dones {
		var pe *retry.PanicError
		if err == nil {
			t.Fatalf("breaker heard %v: an attempt whose latency read panicked was reported a success", b.dones)
		}
		if errors.As(err, &pe) {
			panics++
		}
	}
	if panics != 1 {
		t.Fatalf("breaker heard %v; want one attempt failed with a *retry.PanicError", b.dones)
	}
}

// A Clock whose Since panics when Do reads the latency of an attempt that
// answered (for Adaptive) must not leave the call half ended: the attempt
// is reported failed (a *retry.PanicError) to the breaker, the budget and
// the Observer, the call ends for the Observer (ReasonPanic), every value
// is released, every context ended, no timer is left, and the panic goes
// on. Before, the latency was read after the attempt had been reported a
// success, and with the call's steps on (an Observer, a retry round) the
// Observer never heard the call end.
func TestObserveLatencyClockPanicEndsCall(t *testing.T) {
	transient := errors.New("transient")
	for _, tc := range []struct {
		name     string
		observer bool
		errs     []error // the attempts before the one that answers
		hedged   bool    // a hedge answers, on its own goroutine
	}{
		{"inline first attempt", false, nil, false},
		{"first attempt with an observer", true, nil, false},
		{"retry round", true, []error{transient}, false},
		{"retry round without an observer", false, []error{transient}, false},
		{"hedge wins", true, nil, true},
		{"hedge wins without an observer", false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &trapClock{Fake: clocktest.NewFake()}
			br := &errBreaker{}
			cb := budget.NewConcurrency(budget.ConcurrencyConfig{})
			ev := new(events)
			p := &retry.Policy{MaxAttempts: 5, Backoff: zeroBackoff{}, Clock: clk, Breaker: br, Budget: cb}
			if tc.observer {
				p.Observer = ev
			}
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: clk.Fake})}
			var (
				r        any
				released []string
				ctxs     []context.Context
			)
			if tc.hedged {
				s := newScript()
				op := func(ctx context.Context) (string, error) {
					v, err := s.op(ctx)
					if err == nil {
						clk.since.Store(true)
					}
					return v, err
				}
				out := make(chan result, 1)
				pan := make(chan any, 1)
				go func() {
					defer func() { pan <- recover() }()
					v, err := hedge.Do(context.Background(), h, op, s.release)
					out <- result{v, err}
				}()
				s.wait(t, 1)
				clk.BlockUntil(1)
				clk.Advance(10 * time.Millisecond)
				s.wait(t, 2)
				s.answer(2, "v2", nil)
				select {
				case r = <-pan:
				case <-time.After(10 * time.Second):
					t.Fatal("Do hangs")
				}
				released = s.releasedValues()
				ctxs = []context.Context{s.ctx(1), s.ctx(2)}
			} else {
				o := &valuesOp{errs: tc.errs}
				op := func(ctx context.Context) (string, error) {
					v, err := o.op(ctx)
					if err == nil {
						clk.since.Store(true)
					}
					return v, err
				}
				r, _, _ = doPanics(h, op, o.release)
				released, ctxs = o.released, o.ctxs
			}
			if r != "since" {
				t.Fatalf("Do panicked with %v, want the Clock's since", r)
			}
			slices.Sort(released)
			want := []string{"v1"}
			if tc.hedged {
				want = []string{"v1-cancelled", "v2"}
			} else if len(tc.errs) > 0 {
				want = []string{"v1", "v2"}
			}
			if !slices.Equal(released, want) {
				t.Fatalf("released %q, want %q", released, want)
			}
			for i, ctx := range ctxs {
				if ctx.Err() == nil {
					t.Fatalf("attempt %d's context not ended", i+1)
				}
			}
			br.check(t)
			if req, ret := cb.Active(); req != 0 || ret != 0 {
				t.Fatalf("concurrency budget after the panic: %d requests, %d retries active", req, ret)
			}
			if tc.observer {
				log := ev.String()
				if n := strings.Count(log, "callend:"); n != 1 || !strings.Contains(log, "callend:panic") {
					t.Fatalf("the Observer heard %s; want the call to end once, with ReasonPanic", log)
				}
			}
			if clk.Pending() != 0 {
				t.Fatalf("%d timers left", clk.Pending())
			}
		})
	}
}

type zeroBackoff struct{}

func (zeroBackoff) Delay(int, time.Duration) time.Duration { return 0 }

// The backoff wait before a retry (retry.Call.Wait) makes a timer on the
// Policy's Clock. A NewTimer that panicked there left the retry the budget
// had just granted reserved for good (a BudgetTracker never heard Refund),
// and the Observer never heard the call end. Do now ends the call as a
// step's panic ends it: the grant is refunded, the Observer hears
// ReasonPanic, the failed attempt's value is released, and the panic goes
// on.
func TestWaitNewTimerPanicRefundsRetry(t *testing.T) {
	for _, hedges := range []int{hedge.NoHedges, 1} {
		for _, observer := range []bool{false, true} {
			t.Run(fmt.Sprintf("hedges=%d/observer=%v", hedges, observer), func(t *testing.T) {
				clk := &trapClock{Fake: clocktest.NewFake(), newTimer: true}
				cb := budget.NewConcurrency(budget.ConcurrencyConfig{})
				ev := new(events)
				p := &retry.Policy{MaxAttempts: 3, Backoff: constBackoff(time.Second), Clock: clk, Budget: cb}
				if observer {
					p.Observer = ev
				}
				h := &hedge.Hedger{Policy: p, Delay: time.Hour, MaxHedges: hedges}
				o := &valuesOp{errs: []error{errors.New("transient")}}
				r, _, _ := doPanics(h, o.op, o.release)
				if r != "newtimer" {
					t.Fatalf("Do panicked with %v, want the Clock's newtimer", r)
				}
				if req, ret := cb.Active(); req != 0 || ret != 0 {
					t.Fatalf("concurrency budget after the panic: %d requests, %d retries active: the granted retry was not refunded", req, ret)
				}
				if !slices.Equal(o.released, []string{"v1"}) {
					t.Fatalf("released %q, want [v1]", o.released)
				}
				if observer {
					log := ev.String()
					if n := strings.Count(log, "callend:"); n != 1 || !strings.Contains(log, "callend:panic") {
						t.Fatalf("the Observer heard %s; want the call to end once, with ReasonPanic", log)
					}
				}
				if clk.Pending() != 0 {
					t.Fatalf("%d timers left", clk.Pending())
				}
			})
		}
	}
}

type constBackoff time.Duration

func (b constBackoff) Delay(int, time.Duration) time.Duration { return time.Duration(b) }

// With Adaptive, cancelling the losers when an attempt wins reads the
// Clock (their running time goes to Adaptive as unanswered). A Clock that
// panicked there, on a hedge's goroutine, panicked again as the call was
// stopped (the same read), with the call's lock held: the hedge never
// left, and Do waited for it for ever. Now the losers are cancelled and
// the timer stopped before the Clock is read, a call stopped by a panic
// reads no Clock, and the panic goes on in the caller's goroutine.
func TestCancelLosersClockPanicDoesNotHang(t *testing.T) {
	for _, winner := range []int{1, 2} {
		t.Run(fmt.Sprintf("attempt %d wins", winner), func(t *testing.T) {
			clk := &trapClock{Fake: clocktest.NewFake()}
			br := &errBreaker{}
			p := &retry.Policy{MaxAttempts: 5, Clock: clk, Breaker: br}
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: clk.Fake})}
			s := newScript()
			out, pan := runRelease(h, s, s.release)
			s.wait(t, 1)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond)
			s.wait(t, 2)
			clk.now.Store(true)
			s.answer(winner, fmt.Sprintf("v%d", winner), nil)
			wantPanic(t, out, pan, "now")
			got := s.releasedValues()
			slices.Sort(got)
			want := []string{"v1", "v2-cancelled"}
			if winner == 2 {
				want = []string{"v1-cancelled", "v2"}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("released %q, want %q", got, want)
			}
			for n := 1; n <= 2; n++ {
				if s.ctx(n).Err() == nil {
					t.Fatalf("attempt %d's context not ended", n)
				}
			}
			br.mu.Lock()
			allows, dones := br.allows, len(br.dones)
			br.mu.Unlock()
			if allows != dones {
				t.Fatalf("breaker: %d allowed, %d done", allows, dones)
			}
		})
	}
}

// With Adaptive, a hedge's start is read from the Clock. It was read after
// the hedge's budget grant and breaker permit were taken, so a Clock that
// panicked there (on the timer's goroutine) left both out for good. It is
// now read before anything is granted.
func TestHedgeStartClockPanicLeavesNoGrant(t *testing.T) {
	clk := &trapClock{Fake: clocktest.NewFake()}
	br := &errBreaker{}
	cb := budget.NewConcurrency(budget.ConcurrencyConfig{})
	p := &retry.Policy{MaxAttempts: 5, Clock: clk, Breaker: br, Budget: cb}
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond, Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: clk.Fake})}
	s := newScript()
	out, pan := runRelease(h, s, s.release)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.now.Store(true)
	clk.Advance(10 * time.Millisecond)
	wantPanic(t, out, pan, "now")
	if got := s.releasedValues(); !slices.Equal(got, []string{"v1-cancelled"}) {
		t.Fatalf("released %q, want [v1-cancelled]", got)
	}
	br.mu.Lock()
	allows, dones := br.allows, len(br.dones)
	br.mu.Unlock()
	if allows != 1 || dones != 1 {
		t.Fatalf("breaker: %d allowed, %d done; want the first attempt's permit only, given back", allows, dones)
	}
	if req, ret := cb.Active(); req != 0 || ret != 0 {
		t.Fatalf("concurrency budget after the panic: %d requests, %d retries active", req, ret)
	}
}

// stopPanicClock is a fake clock whose AfterFunc timers panic in Stop
// while stop is set (the timer is stopped all the same).
type stopPanicClock struct {
	*clocktest.Fake
	stop atomic.Bool
}

type stopPanicTimer struct {
	clock.Timer
	c *stopPanicClock
}

func (t stopPanicTimer) Stop() bool {
	ok := t.Timer.Stop()
	if t.c.stop.Load() {
		panic("stop")
	}
	return ok
}

func (c *stopPanicClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return stopPanicTimer{c.Fake.AfterFunc(d, f), c}
}

// A Clock whose timer panics in Stop, as the first attempt answered
// before the delay, must not leave the call's hedge timer able to start a
// hedge after Do has panicked: no attempt starts late, no goroutine is
// left, and the call ends for the breaker.
func TestTimerStopPanicStartsNoLateHedge(t *testing.T) {
	clk := &stopPanicClock{Fake: clocktest.NewFake()}
	br := &errBreaker{}
	p := &retry.Policy{MaxAttempts: 5, Clock: clk, Breaker: br}
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
	var started atomic.Int32
	op := func(ctx context.Context) (string, error) {
		started.Add(1)
		clk.stop.Store(true)
		return "v", nil
	}
	r, _, _ := doPanics(h, op, nil)
	if r != "stop" {
		t.Fatalf("Do panicked with %v, want the timer's stop", r)
	}
	clk.stop.Store(false)
	clk.Advance(time.Second)
	if n := started.Load(); n != 1 {
		t.Fatalf("%d attempts started; want 1, none after Do panicked", n)
	}
	br.mu.Lock()
	allows, dones := br.allows, len(br.dones)
	br.mu.Unlock()
	if allows != dones {
		t.Fatalf("breaker: %d allowed, %d done", allows, dones)
	}
}
