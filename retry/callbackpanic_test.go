package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// countingLimiter admits every attempt and counts the permits not yet
// given back. With panicky set, a permit's done panics (after counting it
// back: the limiter's own state is settled, as a well-behaved one's is).
type countingLimiter struct {
	out     atomic.Int64
	panicky *atomic.Bool
}

func (l *countingLimiter) Acquire(context.Context, bool) (func(error), error) {
	l.out.Add(1)
	var once atomic.Bool
	return func(error) {
		if !once.CompareAndSwap(false, true) {
			panic("limiter permit given back twice")
		}
		l.out.Add(-1)
		if l.panicky != nil && l.panicky.Load() {
			panic("boom")
		}
	}, nil
}

// panicObserver panics in the hook named by at.
type panicObserver struct {
	retry.NopObserver
	at  string
	hot *atomic.Bool
}

func (o *panicObserver) maybe(hook string) {
	if o.at == hook && o.hot.Load() {
		panic("boom")
	}
}

func (o *panicObserver) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	o.maybe("AttemptStart")
	return ctx
}

func (o *panicObserver) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	o.maybe("AttemptEnd")
}

func (o *panicObserver) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	o.maybe("RetryScheduled")
}

// TestCallbackPanicReleasesProbeSlotAndPermit panics in each user
// callback around an attempt — Classify, each Observer hook that runs
// while the attempt holds something, a breaker listener (re-raised from
// the breaker's done or Allow), the Limiter's done — with a real breaker
// in half-open, a Concurrency budget and a counting Limiter, on the inline
// first attempt and on the Call's path. The panic must reach the caller,
// and afterwards the breaker must admit its probes again, the budget count
// nothing in flight and every Limiter permit be back.
func TestCallbackPanicReleasesProbeSlotAndPermit(t *testing.T) {
	type tc struct {
		callback string
		inline   bool // no Observer or Limiter: Do's inline first attempt
		retry    bool // the panic comes on the second attempt (after a grant)
		success  bool // the attempt succeeds (a probe that closes the breaker)
	}
	var cases []tc
	for _, inline := range []bool{true, false} {
		cases = append(cases,
			tc{callback: "Classify", inline: inline},
			tc{callback: "listener/close", inline: inline, success: true},
			tc{callback: "listener/reopen", inline: inline},
			tc{callback: "listener/allow", inline: inline, success: true},
		)
	}
	cases = append(cases,
		tc{callback: "AttemptStart"},
		tc{callback: "AttemptEnd"},
		tc{callback: "AttemptEnd", success: true},
		tc{callback: "RetryScheduled"},
		tc{callback: "Classify", retry: true},
		tc{callback: "AttemptStart", retry: true},
		tc{callback: "limiter"},
		tc{callback: "limiter", success: true},
	)
	for _, c := range cases {
		name := fmt.Sprintf("%s/inline=%v/retry=%v/success=%v", c.callback, c.inline, c.retry, c.success)
		t.Run(name, func(t *testing.T) {
			clk := clocktest.NewFake()
			br := breaker.New(breaker.Config{
				ConsecutiveFailures: 1,
				OpenTimeout:         time.Second,
				OpenJitter:          -1,
				MaxProbes:           1,
				SuccessThreshold:    1,
				Clock:               clk,
			})
			bud := budget.NewConcurrency(budget.ConcurrencyConfig{})
			lim := &countingLimiter{}
			var armed atomic.Bool
			br.Subscribe(func(from, to breaker.State) {
				if !armed.Load() {
					return
				}
				switch {
				case c.callback == "listener/close" && to == breaker.Closed,
					c.callback == "listener/reopen" && to == breaker.Open,
					c.callback == "listener/allow" && to == breaker.HalfOpen:
					panic("boom")
				}
			})
			// Trip the breaker; unless Allow is to make the change to
			// half-open (and its listener panic), make it now.
			if done, err := br.Allow(); err == nil {
				done(errFlaky)
			}
			clk.Advance(time.Second)
			if c.callback != "listener/allow" && br.State() != breaker.HalfOpen {
				t.Fatalf("setup: breaker %v, want half-open", br.State())
			}
			p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}, Clock: clk, Breaker: br, Budget: bud}
			if c.retry || c.callback == "RetryScheduled" {
				// The first attempt fails on a closed breaker; a
				// half-open one would reopen and refuse the retry.
				br = breaker.New(breaker.Config{ConsecutiveFailures: 5, Clock: clk})
				p.Breaker = br
			}
			if !c.inline {
				p.Observer = retry.NopObserver{}
				p.Limiter = lim
			}
			// hot makes the callback under test panic: from the start, or
			// from the attempt named below on.
			var hot atomic.Bool
			switch c.callback {
			case "Classify":
				p.Classify = func(error) bool {
					if hot.Load() {
						panic("boom")
					}
					return true
				}
			case "AttemptStart", "AttemptEnd", "RetryScheduled":
				p.Observer = &panicObserver{at: c.callback, hot: &hot}
			case "limiter":
				lim.panicky = &hot
			}
			attempts := 0
			op := func(context.Context) (int, error) {
				attempts++
				switch {
				case !c.retry:
				case c.callback == "AttemptStart" && attempts == 1: // the retry's start panics
					hot.Store(true)
				case attempts == 2:
					hot.Store(true)
				}
				if c.success && (!c.retry || attempts > 1) {
					return attempts, nil
				}
				return 0, errFlaky
			}
			hot.Store(!c.retry)
			armed.Store(true)
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				retry.Do(context.Background(), p, op)
			}()
			armed.Store(false)
			hot.Store(false)
			if recovered != "boom" {
				t.Fatalf("Do recovered %v, want the callback's panic to go on", recovered)
			}
			if req, ret := bud.Active(); req != 0 || ret != 0 {
				t.Errorf("concurrency budget still counts %d requests and %d retries in flight", req, ret)
			}
			if n := lim.out.Load(); n != 0 {
				t.Errorf("%d Limiter permits not given back", n)
			}
			// The breaker is not wedged: whatever state the attempt left
			// it in, once its open period passes it admits a probe.
			clk.Advance(time.Hour)
			if br.State() == breaker.HalfOpen || br.State() == breaker.Open {
				done, err := br.Allow()
				if err != nil {
					t.Fatalf("breaker %v refuses its probe after the panic: %v (a leaked probe slot)", br.State(), err)
				}
				done(nil)
			}
			// And the budget still grants retries.
			if !bud.Withdraw(errFlaky) {
				t.Error("concurrency budget refuses a retry")
			} else {
				bud.Refund()
			}
		})
	}
}

// TestDoubleEndIsNoOp: ending an attempt a second time (an adapter whose
// guard also covers End, after End panicked) reports nothing again.
func TestDoubleEndIsNoOp(t *testing.T) {
	tb := &trackingBudget{}
	br := &stubBreaker{}
	lim := &countingLimiter{}
	c := retry.NewCall(context.Background(), &retry.Policy{Budget: tb, Breaker: br, Limiter: lim})
	a, err := c.Begin()
	if err != nil {
		t.Fatal(err)
	}
	c.End(&a, errFlaky)
	c.End(&a, errFlaky)
	c.Panic(&a, "boom")
	if tb.records.Load() != 1 || len(br.results) != 1 || lim.out.Load() != 0 {
		t.Fatalf("records %d, breaker results %v, permits out %d", tb.records.Load(), br.results, lim.out.Load())
	}
	if !errors.Is(br.results[0], errFlaky) {
		t.Fatalf("breaker heard %v", br.results[0])
	}
}
