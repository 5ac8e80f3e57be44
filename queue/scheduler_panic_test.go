package queue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// TestSchedulerTaskPanic: a task that panics (or calls runtime.Goexit) in
// a half-open breaker's probe, under a concurrency budget, fails through
// retry.Call.Panic: the probe permit and the budget's slot are released,
// the Policy's Observer hears the call end with ReasonPanic, done gets an
// error matching retry.ErrPanicked, and the only worker goes on running
// tasks. goleak (TestMain) checks no goroutine outlives Close.
func TestSchedulerTaskPanic(t *testing.T) {
	for _, mode := range []string{"panic", "goexit"} {
		t.Run(mode, func(t *testing.T) {
			fake := clocktest.NewFake()
			br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: fake})
			done, _ := br.Allow()
			done(errDown)
			fake.Advance(time.Second)
			if br.State() != breaker.HalfOpen {
				t.Fatalf("setup: breaker %v", br.State())
			}
			bud := budget.NewConcurrency(budget.ConcurrencyConfig{})
			log := &eventLog{}
			obs := newRecObserver()
			p := &retry.Policy{MaxAttempts: 3, Breaker: br, Budget: bud, Clock: fake, Observer: log}
			s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Policy: p, Observer: obs})
			res := newResult()
			s.Submit(func(context.Context) error {
				if mode == "goexit" {
					runtime.Goexit()
				}
				panic("boom")
			}, res.done)
			err := res.get(t)
			var pe *retry.PanicError
			if !errors.Is(err, retry.ErrPanicked) || !errors.As(err, &pe) {
				t.Fatalf("done(%v), want a *retry.PanicError", err)
			}
			if mode == "panic" && pe.Value != "boom" {
				t.Fatalf("panic value %v", pe.Value)
			}
			if br.State() != breaker.Open {
				t.Fatalf("breaker %v after a panicking probe, want open (the probe failed)", br.State())
			}
			if req, ret := bud.Active(); req != 0 || ret != 0 {
				t.Fatalf("budget still counts %d requests, %d retries active", req, ret)
			}
			if got := fmt.Sprint(log.log); !strings.Contains(got, "panic") {
				t.Fatalf("Policy observer saw %q, want the call to end with ReasonPanic", got)
			}
			if st := s.Stats(); st.Failed != 1 || st.Running != 0 || st.Pending != 0 || st.Attempts != 1 {
				t.Fatalf("stats %+v", st)
			}
			if d, _ := obs.snapshot(); d[queue.DropPanicked] != 1 {
				t.Fatalf("observer drops %v", d)
			}
			// The probe slot is free again once the breaker half-opens, and
			// the one worker still runs tasks.
			fake.Advance(time.Second)
			s.Submit(func(context.Context) error { return nil }, res.done)
			if err := res.get(t); err != nil {
				t.Fatalf("next task: %v", err)
			}
			if br.State() != breaker.Closed {
				t.Fatalf("breaker %v after a successful probe", br.State())
			}
			closeAll(t, s)
		})
	}
}
