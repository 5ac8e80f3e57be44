package queue_test

import (
	"context"
	"errors"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// TestSchedulerDonePanicRecovered: a done function that panics on a
// worker does not end the worker or the program: the task is counted as
// it ended, SchedulerStats.Panics counts the panic and the only worker
// runs the next task. Before the fix the panic crashed the test binary.
func TestSchedulerDonePanicRecovered(t *testing.T) {
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1})
	defer closeNow(s)
	s.Submit(func(context.Context) error { return nil }, func(error) { panic("done") })
	res := newResult()
	s.Submit(func(context.Context) error { return nil }, res.done)
	if err := res.get(t); err != nil {
		t.Fatalf("next task: %v", err)
	}
	closeAll(t, s)
	st := s.Stats()
	checkSchedInvariant(t, st)
	if st.Succeeded != 2 || st.Panics != 1 || st.Failed != 0 {
		t.Fatalf("stats %+v; want 2 succeeded, 1 panic", st)
	}
}

// TestSchedulerPolicyPanicFailsTask: a Policy callback that panics during a
// task's step (Classify, in the call's End) fails that task as a panicking
// task fails — done hears retry.ErrPanicked once — without ending the
// worker; the next task runs. Before the fix the panic crashed the test
// binary.
func TestSchedulerPolicyPanicFailsTask(t *testing.T) {
	p := &retry.Policy{MaxAttempts: 3, Classify: func(err error) bool {
		if errors.Is(err, errDown) {
			panic("classify")
		}
		return true
	}}
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Policy: p})
	defer closeNow(s)
	res := newResult()
	s.Submit(func(context.Context) error { return errDown }, res.done)
	if err := res.get(t); !errors.Is(err, retry.ErrPanicked) {
		t.Fatalf("done(%v), want retry.ErrPanicked", err)
	}
	s.Submit(func(context.Context) error { return nil }, res.done)
	if err := res.get(t); err != nil {
		t.Fatalf("next task: %v", err)
	}
	closeAll(t, s)
	st := s.Stats()
	checkSchedInvariant(t, st)
	if st.Failed != 1 || st.Succeeded != 1 || st.Panics != 1 || st.Running != 0 {
		t.Fatalf("stats %+v", st)
	}
	select {
	case err := <-res.ch:
		t.Fatalf("a done function called twice: %v", err)
	default:
	}
}

// TestSchedulerClockPanicInPark: a Clock that panics when a worker parks a
// task for its retry fails that task (retry.ErrPanicked) without leaving
// the Scheduler's lock held or the worker ended. Before the fix the lock
// stayed held (park read the clock under it) and the worker's panic
// crashed the test binary.
func TestSchedulerClockPanicInPark(t *testing.T) {
	clk := &nowPanicClock{Fake: clocktest.NewFake(), from: ").park("}
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Clock: clk, Policy: &retry.Policy{MaxAttempts: 3}})
	defer closeNow(s)
	clk.armed.Store(true)
	res := newResult()
	s.Submit(func(context.Context) error { return errDown }, res.done)
	if err := res.get(t); !errors.Is(err, retry.ErrPanicked) {
		t.Fatalf("done(%v), want retry.ErrPanicked", err)
	}
	s.Submit(func(context.Context) error { return nil }, res.done)
	if err := res.get(t); err != nil {
		t.Fatalf("next task: %v", err)
	}
	closeAll(t, s)
	if st := s.Stats(); st.Failed != 1 || st.Succeeded != 1 || st.Panics != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSchedulerDispatcherClockPanic: a Clock that panics in the
// dispatcher is recovered (counted in Panics) and the dispatcher goes on:
// a task waiting for its retry still runs when its time comes.
func TestSchedulerDispatcherClockPanic(t *testing.T) {
	clk := &nowPanicClock{Fake: clocktest.NewFake(), from: ").dispatchOnce("}
	var calls atomic.Int32
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Clock: clk, Policy: noJitter(nil, 3)})
	defer closeNow(s)
	res := newResult()
	clk.armed.Store(true)
	s.Submit(func(context.Context) error {
		if calls.Add(1) == 1 {
			return errDown
		}
		return nil
	}, res.done)
	clk.BlockUntil(1) // the retry's wait, armed by a dispatcher round after the one that panicked
	if clk.armed.Load() {
		t.Fatal("the dispatcher's Clock did not panic")
	}
	clk.Advance(time.Second)
	if err := res.get(t); err != nil {
		t.Fatalf("done(%v)", err)
	}
	closeAll(t, s)
	if st := s.Stats(); st.Panics != 1 || st.Failed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestSchedulerCloseDonePanicEndsEveryTask: when Close abandons tasks and
// one's done function panics, every other abandoned task's done is still
// called, and the panic goes on to Close's caller afterwards.
func TestSchedulerCloseDonePanicEndsEveryTask(t *testing.T) {
	fake := clocktest.NewFake()
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Policy: noJitter(fake, 0)})
	res := newResult()
	s.Submit(func(context.Context) error { return errDown }, func(error) { panic("done") })
	s.Submit(func(context.Context) error { return errDown }, res.done)
	waitFor(t, "both tasks waiting for their retry", func() bool { return s.Stats().Waiting == 2 })
	if v := catchPanic(func() { s.Close(expired()) }); v != "done" {
		t.Fatalf("Close's panic %v, want the done function's", v)
	}
	if err := res.get(t); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("second task's done(%v), want ErrClosed", err)
	}
	if st := s.Stats(); st.Abandoned != 2 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// alwaysPanicDispatch is a Fake whose Now panics whenever the Scheduler's
// dispatcher calls it.
type alwaysPanicDispatch struct{ *clocktest.Fake }

func (c alwaysPanicDispatch) Now() time.Time {
	if strings.Contains(string(debug.Stack()), ").dispatchOnce(") {
		panic("clock")
	}
	return c.Fake.Now()
}

// TestSchedulerDispatcherClockPanicsEveryRoundDoesNotSpin: a Clock that
// panics on every dispatcher round does not spin the dispatcher: after two
// panicking rounds in a row each round waits 100 ms first, so four panics
// take at least two pauses; and Close returns (before, the dispatcher
// never saw the Scheduler stopped, and Close waited for it for good).
func TestSchedulerDispatcherClockPanicsEveryRoundDoesNotSpin(t *testing.T) {
	start := time.Now()
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Clock: alwaysPanicDispatch{clocktest.NewFake()}, Policy: noJitter(nil, 3)})
	waitFor(t, "four panicking dispatcher rounds", func() bool { return s.Stats().Panics >= 4 })
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("four panicking dispatcher rounds in %v: the dispatcher spins", d)
	}
	closeNow(s)
}

// TestSchedulerParkClockPanicRefundsGrantedRetry: a Clock that panics as a
// task is parked for its retry (after the budget granted that retry) fails
// the task and gives the grant back: a BudgetTracker holds no retry once
// the Scheduler is closed. Before, the retry stayed active for good.
func TestSchedulerParkClockPanicRefundsGrantedRetry(t *testing.T) {
	clk := &nowPanicClock{Fake: clocktest.NewFake(), from: ").park("}
	b := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 10})
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Clock: clk, Policy: &retry.Policy{MaxAttempts: 3, Budget: b}})
	clk.armed.Store(true)
	res := newResult()
	s.Submit(func(context.Context) error { return errDown }, res.done)
	if err := res.get(t); !errors.Is(err, retry.ErrPanicked) {
		t.Fatalf("done(%v), want retry.ErrPanicked", err)
	}
	closeAll(t, s)
	if requests, retries := b.Active(); requests != 0 || retries != 0 {
		t.Errorf("budget holds %d requests and %d retries after Close, want none", requests, retries)
	}
}
