package retry_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// throttleLimiter admits the first attempt; a retry's Acquire panics
// (panicky) or is refused with errLimited.
type throttleLimiter struct {
	panicky bool
	onRetry func() // called before a retry's Acquire is refused
	calls   atomic.Int64
}

var errLimited = errors.New("throttled")

func (l *throttleLimiter) Acquire(_ context.Context, retrying bool) (func(error), error) {
	l.calls.Add(1)
	if !retrying {
		return func(error) {}, nil
	}
	if l.panicky {
		panic("acquire")
	}
	if l.onRetry != nil {
		l.onRetry()
	}
	return nil, errLimited
}

// refusingBreaker refuses every attempt.
type refusingBreaker struct{}

var errRefused = errors.New("refused")

func (refusingBreaker) Allow() (func(error), error) { return nil, errRefused }
func (refusingBreaker) Ready() error                { return errRefused }

// TestBeginEarlyGiveUpPanicKeepsCallEndPaired: a call that Begin gives up
// before any attempt starts (the caller's context ended, the Limiter
// refused, the breaker refused) or whose Limiter's Acquire panics, with a
// Clock whose Since panics as giveUp reads it, or a budget whose Refund
// panics as the granted retry is given back: the panic must reach the
// caller, and the CallStarter must hear one CallEnd for its CallStart.
func TestBeginEarlyGiveUpPanicKeepsCallEndPaired(t *testing.T) {
	type setup struct {
		name string
		want any
		// policy fills in p, and arms clk or sets it to cancel ctx.
		policy func(p *retry.Policy, clk *panicClock, cancel context.CancelFunc)
	}
	cases := []setup{
		{name: "ctx-ended/Since", want: "clock Since", policy: func(p *retry.Policy, clk *panicClock, cancel context.CancelFunc) {
			cancel()
			clk.arm()
		}},
		{name: "acquire-panics", want: "acquire", policy: func(p *retry.Policy, _ *panicClock, _ context.CancelFunc) {
			p.Limiter = &throttleLimiter{panicky: true}
		}},
		{name: "throttled/Since", want: "clock Since", policy: func(p *retry.Policy, clk *panicClock, _ context.CancelFunc) {
			p.Limiter = &throttleLimiter{onRetry: clk.arm}
		}},
		{name: "throttled/Refund", want: "refund", policy: func(p *retry.Policy, _ *panicClock, _ context.CancelFunc) {
			p.Limiter = &throttleLimiter{}
			p.Budget = refundPanicBudget{budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})}
		}},
		{name: "ctx-ended/Refund", want: "refund", policy: func(p *retry.Policy, clk *panicClock, cancel context.CancelFunc) {
			clk.cancel = cancel // the wait's timer cancels ctx and never fires
			p.Budget = refundPanicBudget{budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})}
		}},
		{name: "breaker-refused/Since", want: "clock Since", policy: func(p *retry.Policy, clk *panicClock, _ context.CancelFunc) {
			p.Breaker = refusingBreaker{}
			clk.arm()
		}},
	}
	for _, tc := range cases {
		for _, how := range []string{"Do", "Call"} {
			t.Run(tc.name+"/"+how, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				clk := &panicClock{at: "Since"}
				obs := &startEnds{}
				p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Millisecond}, Observer: obs, Clock: clk}
				tc.policy(p, clk, cancel)
				// The first attempt fails; the retry's Begin then gives up.
				op := func(context.Context) (int, error) { return 0, errFlaky }
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
						_, oerr := op(a.Context)
						if err = c.End(&a, oerr); err == nil {
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
				if got != tc.want {
					t.Fatalf("recovered %v, want %q", got, tc.want)
				}
				if obs.starts != 1 || obs.ends != 1 {
					t.Fatalf("Observer heard %d CallStarts and %d CallEnds, want 1 and 1", obs.starts, obs.ends)
				}
			})
		}
	}
}

// TestAbandonPanicKeepsCallEndPaired: Abandon, with a Clock whose Since
// panics as it gives up or a budget whose Refund panics as it gives the
// granted retry back, must still end the call for the CallStarter (once),
// refund the grant and let the panic go on.
func TestAbandonPanicKeepsCallEndPaired(t *testing.T) {
	for _, at := range []string{"Since", "Refund"} {
		t.Run(at, func(t *testing.T) {
			clk := &panicClock{at: "Since"}
			obs := &startEnds{}
			cb := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: -1, MinConcurrency: 1})
			var b retry.Budget = cb
			want := "clock Since"
			if at == "Refund" {
				b, want = refundPanicBudget{cb}, "refund"
			}
			p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Millisecond}, Observer: obs, Clock: clk, Budget: b}
			c := retry.NewCall(context.Background(), p)
			a, err := c.Begin()
			if err != nil {
				t.Fatal(err)
			}
			err = c.End(&a, errFlaky)
			if _, err := c.Next(err); err != nil {
				t.Fatalf("Next: %v, want a granted retry", err)
			}
			if at == "Since" {
				clk.arm()
			}
			var got any
			func() {
				defer func() { got = recover() }()
				_ = c.Abandon()
			}()
			if got != want {
				t.Fatalf("recovered %v, want %q", got, want)
			}
			if obs.starts != 1 || obs.ends != 1 {
				t.Fatalf("Observer heard %d CallStarts and %d CallEnds, want 1 and 1", obs.starts, obs.ends)
			}
			if req, ret := cb.Active(); req != 0 || ret != 0 {
				t.Fatalf("budget counts %d attempts and %d retries active, want 0 and 0", req, ret)
			}
		})
	}
}

// cPanicClock is a fake Clock whose Timers' C panics.
type cPanicClock struct{ *clocktest.Fake }

func (c cPanicClock) NewTimer(d time.Duration) clock.Timer { return cPanicTimer{c.Fake.NewTimer(d)} }

type cPanicTimer struct{ clock.Timer }

func (cPanicTimer) C() <-chan time.Time { panic("clock C") }

// TestWaitTimerCPanicStopsTimer: when the Timer's C panics while Wait (or
// Do) waits for a retry, the panic goes on and the timer is stopped: the
// fake Clock has no timer left pending.
func TestWaitTimerCPanicStopsTimer(t *testing.T) {
	for _, how := range []string{"Do", "Call"} {
		t.Run(how, func(t *testing.T) {
			f := clocktest.NewFake()
			p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Second}, Clock: cPanicClock{f}}
			op := func(context.Context) (int, error) { return 0, errFlaky }
			var got any
			func() {
				defer func() { got = recover() }()
				if how == "Do" {
					_, _ = retry.Do(context.Background(), p, op)
					return
				}
				c := retry.NewCall(context.Background(), p)
				a, err := c.Begin()
				if err != nil {
					t.Error(err)
					return
				}
				_, oerr := op(a.Context)
				d, err := c.Next(c.End(&a, oerr))
				if err != nil {
					t.Error(err)
					return
				}
				c.Wait(d)
			}()
			if got != "clock C" {
				t.Fatalf("recovered %v, want the clock's panic", got)
			}
			if n := f.Pending(); n != 0 {
				t.Fatalf("%d timers pending after the panic, want 0", n)
			}
		})
	}
}
