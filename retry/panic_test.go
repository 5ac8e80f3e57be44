package retry_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"pgregory.net/rapid"
)

// A step is what one attempt does.
type step uint8

const (
	stepOK     step = iota // returns nil
	stepFail               // returns a transient error
	stepPanic              // panics
	stepCancel             // the caller cancels during the attempt
)

func (s step) String() string { return [...]string{"ok", "fail", "panic", "cancel"}[s] }

// rig is one breaker and one budget on their own fake clock, the shared
// state that a panicking attempt must not leak.
type rig struct {
	clk  *clocktest.Fake
	br   *breaker.Breaker
	bud  retry.Budget
	kind string
}

const rigProbes = 2

var budgetKinds = []string{"ratio", "window", "concurrency"}

func newRig(kind string) *rig {
	clk := clocktest.NewFake()
	r := &rig{clk: clk, kind: kind, br: breaker.New(breaker.Config{
		ConsecutiveFailures: 2,
		OpenTimeout:         time.Second,
		OpenJitter:          -1,
		MaxProbes:           rigProbes,
		SuccessThreshold:    rigProbes,
		Clock:               clk,
	})}
	switch kind {
	case "ratio":
		r.bud = budget.NewRatio(budget.GRPC())
	case "window":
		r.bud = budget.NewWindow(budget.WindowConfig{Clock: clk})
	case "concurrency":
		r.bud = budget.NewConcurrency(budget.ConcurrencyConfig{})
	}
	return r
}

// policy returns a Policy over the rig. observed takes Do's Call path from
// the first attempt on; otherwise the first attempt runs inline.
func (r *rig) policy(maxAttempts int, observed bool) *retry.Policy {
	p := &retry.Policy{MaxAttempts: maxAttempts, Backoff: backoff.Constant{}, Breaker: r.br, Budget: r.bud, Clock: r.clk}
	if observed {
		p.Observer = retry.NopObserver{}
	}
	return p
}

// state is everything the rig's breaker and budget show.
func (r *rig) state() string {
	s := fmt.Sprintf("breaker %v %+v", r.br.State(), r.br.Counts())
	switch b := r.bud.(type) {
	case *budget.Ratio:
		s += fmt.Sprintf(" ratio %+v %.3f", b.Stats(), b.Available())
	case *budget.Window:
		s += fmt.Sprintf(" window %+v %.3f", b.Stats(), b.Available())
	case *budget.Concurrency:
		req, ret := b.Active()
		s += fmt.Sprintf(" concurrency %+v active %d/%d", b.Stats(), req, ret)
	}
	return s
}

// check fails t if the budget holds attempts in flight or, when the
// breaker is half-open, it does not admit rigProbes probes.
func (r *rig) check(t interface{ Fatalf(string, ...any) }) {
	if c, ok := r.bud.(*budget.Concurrency); ok {
		if req, ret := c.Active(); req != 0 || ret != 0 {
			t.Fatalf("%s: concurrency budget still counts %d requests and %d retries active", r.kind, req, ret)
		}
	}
	if r.br.State() != breaker.HalfOpen {
		return
	}
	var dones []func(error)
	for i := range rigProbes {
		done, err := r.br.Allow()
		if err != nil {
			t.Fatalf("%s: half-open breaker refused probe %d of %d: %v", r.kind, i+1, rigProbes, err)
		}
		dones = append(dones, done)
	}
	if _, err := r.br.Allow(); !errors.Is(err, breaker.ErrTooManyProbes) {
		t.Fatalf("%s: half-open breaker admitted more than %d probes (err %v)", r.kind, rigProbes, err)
	}
	for _, done := range dones { // give the permits back: excluded results
		done(context.Canceled)
	}
}

// call runs one retry.Do over the rig whose attempts follow steps (then
// succeed). With asFailure a panicking attempt fails instead, returning a
// *retry.PanicError and ending the call, which is what a panic must look
// like to the breaker and the budget. It reports whether Do panicked.
func (r *rig) call(p *retry.Policy, steps []step, asFailure bool) (panicked bool) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	defer func() {
		if v := recover(); v != nil {
			if v != "boom" {
				panic(v)
			}
			panicked = true
		}
	}()
	retry.Do(ctx, p, func(ctx context.Context) (int, error) {
		s := stepOK
		if n < len(steps) {
			s = steps[n]
		}
		n++
		switch s {
		case stepFail:
			return 0, errFlaky
		case stepPanic:
			if asFailure {
				cancel() // ends the call after this attempt, as the panic does
				return 0, &retry.PanicError{Value: "boom"}
			}
			panic("boom")
		case stepCancel:
			cancel()
			return 0, ctx.Err()
		}
		return n, nil
	})
	return panicked
}

// TestPanicReleasesBreakerAndBudget panics in an attempt with the breaker
// closed and half-open, inline (first attempt, no Observer), on the Call
// path and on a retry, under every budget kind, and compares the breaker
// and the budget with a twin whose attempt failed instead.
func TestPanicReleasesBreakerAndBudget(t *testing.T) {
	for _, kind := range budgetKinds {
		for _, halfOpen := range []bool{false, true} {
			for _, path := range []string{"inline", "call", "retry"} {
				if halfOpen && path == "retry" {
					continue // a failed probe reopens the breaker: no retry follows
				}
				t.Run(fmt.Sprintf("%s/halfopen=%v/%s", kind, halfOpen, path), func(t *testing.T) {
					got, want := newRig(kind), newRig(kind)
					for _, r := range []*rig{got, want} {
						if halfOpen { // trip the breaker and let the open period pass
							r.call(r.policy(2, false), []step{stepFail, stepFail}, false)
							r.clk.Advance(time.Second)
							if r.br.State() != breaker.HalfOpen {
								t.Fatalf("setup: breaker %v, want half-open", r.br.State())
							}
						}
					}
					steps := []step{stepPanic}
					if path == "retry" {
						steps = []step{stepFail, stepPanic}
					}
					observed := path == "call"
					if !got.call(got.policy(3, observed), steps, false) {
						t.Fatal("the panic did not reach the caller")
					}
					want.call(want.policy(3, observed), steps, true)
					if g, w := got.state(), want.state(); g != w {
						t.Fatalf("after a panic:\n got %s\nwant %s (as if the attempt had failed)", g, w)
					}
					got.check(t)
					if halfOpen && got.br.State() != breaker.Open {
						t.Fatalf("a panicking probe left the breaker %v, want open", got.br.State())
					}
				})
			}
		}
	}
}

// TestPanicProperty drives random mixes of successes, failures, panics and
// cancellations through retry.Do with a real breaker and each budget kind,
// beside a twin whose panics are failures, checking after every call that
// both show the same state and nothing is held.
func TestPanicProperty(t *testing.T) {
	for _, kind := range budgetKinds {
		t.Run(kind, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				got, want := newRig(kind), newRig(kind)
				calls := rapid.IntRange(1, 30).Draw(t, "calls")
				for i := range calls {
					if rapid.Bool().Draw(t, "advance") {
						got.clk.Advance(time.Second)
						want.clk.Advance(time.Second)
					}
					steps := rapid.SliceOfN(rapid.SampledFrom([]step{stepOK, stepFail, stepPanic, stepCancel}), 0, 4).Draw(t, "steps")
					maxAttempts := rapid.IntRange(1, 4).Draw(t, "maxAttempts")
					observed := rapid.Bool().Draw(t, "observed")
					got.call(got.policy(maxAttempts, observed), steps, false)
					want.call(want.policy(maxAttempts, observed), steps, true)
					if g, w := got.state(), want.state(); g != w {
						t.Fatalf("call %d %v:\n got %s\nwant %s", i, steps, g, w)
					}
					got.check(t) // the same on both: handing probes back counts
					want.check(t)
				}
			})
		})
	}
}

// TestRunPanicReleases checks Run, whose adapter must pass the panic on.
func TestRunPanicReleases(t *testing.T) {
	r := newRig("concurrency")
	r.call(r.policy(2, false), []step{stepFail, stepFail}, false)
	r.clk.Advance(time.Second)
	func() {
		defer func() {
			if v := recover(); v != "boom" {
				t.Fatalf("recovered %v, want boom", v)
			}
		}()
		retry.Run(context.Background(), r.policy(3, false), func(context.Context) error { panic("boom") })
	}()
	if r.br.State() != breaker.Open {
		t.Fatalf("breaker %v after a panicking probe, want open", r.br.State())
	}
	r.check(t)
}

// TestGoexitReleases checks that an attempt ending in runtime.Goexit (a
// t.FailNow inside op) releases the breaker and the budget too.
func TestGoexitReleases(t *testing.T) {
	r := newRig("concurrency")
	r.call(r.policy(2, false), []step{stepFail, stepFail}, false)
	r.clk.Advance(time.Second)
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		retry.Run(context.Background(), r.policy(3, false), func(context.Context) error {
			runtime.Goexit()
			return nil
		})
	}()
	<-exited
	if r.br.State() != breaker.Open {
		t.Fatalf("breaker %v after a probe that called Goexit, want open", r.br.State())
	}
	r.check(t)
}
