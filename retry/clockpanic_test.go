package retry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// panicClock is a Clock that panics in the method named by at (a Timer's
// C or Stop for "C" and "Stop"), once armed. Its time stands still and its
// timers have fired at once, unless cancel is set: then a Timer's C
// cancels it and never fires, so that Wait takes its context's branch and
// stops the timer.
type panicClock struct {
	at     string
	armed  bool
	cancel context.CancelFunc
	mu     sync.Mutex
}

func (c *panicClock) maybe(m string) {
	c.mu.Lock()
	hot := c.armed && c.at == m
	c.mu.Unlock()
	if hot {
		panic("clock " + m)
	}
}

func (c *panicClock) arm() { c.mu.Lock(); c.armed = true; c.mu.Unlock() }

func (c *panicClock) Now() time.Time                { c.maybe("Now"); return time.Unix(1e9, 0) }
func (c *panicClock) Since(time.Time) time.Duration { c.maybe("Since"); return 0 }
func (c *panicClock) NewTimer(time.Duration) clock.Timer {
	c.maybe("NewTimer")
	return panicTimer{c}
}
func (c *panicClock) AfterFunc(time.Duration, func()) clock.Timer {
	c.maybe("AfterFunc")
	return panicTimer{c}
}

type panicTimer struct{ c *panicClock }

func (t panicTimer) C() <-chan time.Time {
	t.c.maybe("C")
	if t.c.cancel != nil {
		t.c.cancel()
		return nil
	}
	return fired
}

// fired is a timer channel that has fired (closed: every receive returns).
var fired = func() chan time.Time { ch := make(chan time.Time); close(ch); return ch }()

func (t panicTimer) Stop() bool               { t.c.maybe("Stop"); return true }
func (t panicTimer) Reset(time.Duration) bool { return true }

// callEnds records the reasons of the CallEnds an Observer hears.
type callEnds struct {
	retry.NopObserver
	mu      sync.Mutex
	reasons []retry.Reason
}

func (o *callEnds) CallEnd(_ context.Context, e retry.CallEnd) {
	o.mu.Lock()
	o.reasons = append(o.reasons, e.Reason)
	o.mu.Unlock()
}

// TestWaitClockPanicRefundsGrantedRetry makes the Policy's Clock panic
// while Wait waits for a retry the budget and the NestedBudget (both
// Concurrency budgets, which count their granted retries) have granted:
// in NewTimer, in the Timer's C and in its Stop (Wait stops the timer
// when the caller's context ends). The panic must reach the caller, both
// grants must be given back (no retry left active, so a budget with room
// for one retry grants it again), every Limiter permit must be back and
// the Observer must hear the call end with ReasonPanic. Each case runs
// through Do and through a Call driven by hand. Clock methods that Next
// and the Call's own steps read (Now for the deadline, Since for the
// Observer, AfterFunc for AttemptTimeout) are checked likewise.
func TestWaitClockPanicRefundsGrantedRetry(t *testing.T) {
	for _, at := range []string{"NewTimer", "C", "Stop", "Now", "Since", "AfterFunc"} {
		for _, how := range []string{"Do", "Call"} {
			t.Run(at+"/"+how, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Hour) // a deadline: Next reads Now
				defer cancel()
				ctx = retry.WithInbound(ctx, retry.Inbound{Attempt: 1, Retries: true})
				clk := &panicClock{at: at}
				if at == "Stop" {
					ctx, clk.cancel = context.WithCancel(ctx)
				}
				b := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})
				nb := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})
				lim := &countingLimiter{}
				obs := &callEnds{}
				p := &retry.Policy{
					MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Millisecond},
					Budget: b, Nested: retry.NestedBudget, NestedBudget: nb,
					Limiter: lim, Observer: obs, Clock: clk,
				}
				if at == "AfterFunc" {
					p.AttemptTimeout = time.Hour
				}
				attempts := 0
				op := func(context.Context) (int, error) {
					attempts++
					if attempts == 1 {
						clk.arm() // the clock panics from now on
					}
					return 0, errFlaky
				}
				var got any
				func() {
					defer func() { got = recover() }()
					if how == "Do" {
						_, _ = retry.Do(ctx, p, op)
						return
					}
					c := retry.NewCall(ctx, p)
					for {
						a, err := c.Begin()
						if err != nil {
							return
						}
						err = c.End(&a, func() error { _, err := op(a.Context); return err }())
						if err == nil {
							c.Succeed()
							return
						}
						d, err := c.Next(err)
						if err != nil {
							return
						}
						c.Wait(d)
					}
				}()
				if got != "clock "+at {
					t.Fatalf("recovered %v, want the clock's panic %q", got, "clock "+at)
				}
				for name, cb := range map[string]*budget.Concurrency{"budget": b, "nested budget": nb} {
					if req, ret := cb.Active(); req != 0 || ret != 0 {
						t.Errorf("%s counts %d attempts and %d retries active after the panic, want 0 and 0", name, req, ret)
					}
					if !cb.Withdraw(errFlaky) {
						t.Errorf("%s refuses a retry after the panic: its grant was not given back", name)
					} else {
						cb.Refund()
					}
				}
				if n := lim.out.Load(); n != 0 {
					t.Errorf("%d Limiter permits not given back", n)
				}
				obs.mu.Lock()
				defer obs.mu.Unlock()
				if len(obs.reasons) != 1 || obs.reasons[0] != retry.ReasonPanic {
					t.Errorf("Observer heard the call end with %v, want once with ReasonPanic", obs.reasons)
				}
			})
		}
	}
}

// startEnds counts the CallStarts and CallEnds an Observer hears.
type startEnds struct {
	retry.NopObserver
	starts, ends int
}

func (o *startEnds) CallStart(ctx context.Context, _ retry.CallStart) context.Context {
	o.starts++
	return ctx
}

func (o *startEnds) CallEnd(context.Context, retry.CallEnd) { o.ends++ }

// TestCallStartClockPanicKeepsStartsAndEndsPaired makes the Clock's Now
// panic when a call starts (NewCall and Do read it for an observed call):
// the panic must reach the caller, and the CallStarter must hear CallEnd
// once for every CallStart it heard (CallStarter's promise).
func TestCallStartClockPanicKeepsStartsAndEndsPaired(t *testing.T) {
	for _, how := range []string{"Do", "NewCall"} {
		t.Run(how, func(t *testing.T) {
			clk := &panicClock{at: "Now"}
			clk.arm()
			obs := &startEnds{}
			p := &retry.Policy{Observer: obs, Clock: clk}
			var got any
			func() {
				defer func() { got = recover() }()
				if how == "Do" {
					_, _ = retry.Do(context.Background(), p, func(context.Context) (int, error) { return 0, nil })
					return
				}
				retry.NewCall(context.Background(), p)
			}()
			if got != "clock Now" {
				t.Fatalf("recovered %v, want the clock's panic", got)
			}
			if obs.starts != obs.ends {
				t.Fatalf("Observer heard %d CallStarts and %d CallEnds, want as many", obs.starts, obs.ends)
			}
		})
	}
}

// refundPanicBudget is a Concurrency budget whose Refund panics after
// giving the retry back.
type refundPanicBudget struct{ *budget.Concurrency }

func (b refundPanicBudget) Refund() {
	b.Concurrency.Refund()
	panic("refund")
}

// TestPanicCleanupSurvivesPanickingRefund: while a call ends after a
// panic (here the Clock's, in Wait), the budget's Refund panics too. The
// NestedBudget must still get its grant back, the Observer must still
// hear the call end with ReasonPanic, and the first panic (the Clock's)
// must be the one that goes on.
func TestPanicCleanupSurvivesPanickingRefund(t *testing.T) {
	ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	clk := &panicClock{at: "NewTimer"}
	b := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})
	nb := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})
	obs := &callEnds{}
	p := &retry.Policy{
		MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Millisecond},
		Budget: refundPanicBudget{b}, Nested: retry.NestedBudget, NestedBudget: nb,
		Observer: obs, Clock: clk,
	}
	var got any
	func() {
		defer func() { got = recover() }()
		_, _ = retry.Do(ctx, p, func(context.Context) (int, error) { clk.arm(); return 0, errFlaky })
	}()
	if got != "clock NewTimer" {
		t.Fatalf("recovered %v, want the clock's panic", got)
	}
	for name, cb := range map[string]*budget.Concurrency{"budget": b, "nested budget": nb} {
		if req, ret := cb.Active(); req != 0 || ret != 0 {
			t.Errorf("%s counts %d attempts and %d retries active after the panic, want 0 and 0", name, req, ret)
		}
	}
	if len(obs.reasons) != 1 || obs.reasons[0] != retry.ReasonPanic {
		t.Errorf("Observer heard the call end with %v, want once with ReasonPanic", obs.reasons)
	}
}
