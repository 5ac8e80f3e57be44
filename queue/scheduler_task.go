package queue

import (
	"errors"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// execute makes t's next attempt through its retry.Call and decides what
// follows: the task ends, or waits in the heap for the wait Call.Next
// returned. It runs on a worker with s.mu not held; t has been counted in
// st.Running.
func (s *Scheduler) execute(t *task) {
	a, err := t.call.Begin()
	if err != nil {
		s.giveUp(t, err)
		return
	}
	s.mu.Lock()
	s.st.Attempts++
	s.mu.Unlock()
	err, ok := s.attempt(t, &a)
	if !ok {
		return // the task panicked: attempt has ended it
	}
	if err = t.call.End(&a, err); err == nil {
		t.call.Succeed()
		s.finish(t, nil, "")
		return
	}
	d, err := t.call.Next(err)
	if err != nil {
		s.giveUp(t, err)
		return
	}
	s.park(t, d)
}

// attempt runs t's task for attempt a. If the task panics (or calls
// runtime.Goexit), its call reports the attempt as failed through
// retry.Call.Panic — so the Breaker's probe permit and the Budget's slot
// are released and the Observer hears the call end with
// retry.ReasonPanic — and the task fails, its done function receiving a
// *retry.Error whose Reason is retry.ErrPanicked and whose Last is the
// *retry.PanicError. The panic does not go on: it would take the
// Scheduler's goroutine, and the whole program, with it. ok is false then.
func (s *Scheduler) attempt(t *task, a *retry.Attempt) (err error, ok bool) {
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()
		if v == nil {
			// runtime.Goexit: this worker goroutine ends; start another in
			// its place before exit counts this one out.
			s.mu.Lock()
			s.live++
			s.mu.Unlock()
			t.goexited = true // for step, which Goexit unwinds next
			go s.work()
		}
		t.call.Panic(a, v)
		s.finish(t, &retry.Error{Attempts: t.call.Attempts(), Reason: retry.ErrPanicked, Last: &retry.PanicError{Value: v}}, DropPanicked)
	}()
	err = t.fn(a.Context)
	returned = true
	return err, true
}

// giveUp ends running task t, whose call gave up with err (a *retry.Error,
// already reported to the Policy's Observer): Close's cancellation hands
// it to Close, any other reason fails it.
func (s *Scheduler) giveUp(t *task, err error) {
	re := err.(*retry.Error) // Begin and Next give up with an *Error
	if cerr := s.ctx.Err(); cerr != nil && re.Reason == cerr {
		s.mu.Lock()
		s.st.Running--
		t.ended = true
		t.gaveUp = re
		s.abandoned = append(s.abandoned, t)
		s.mu.Unlock()
		return
	}
	drop := DropExhausted
	if re.Reason == nil || errors.Is(re.Reason, retry.ErrOverloaded) {
		drop = DropPermanent // not retried: by the Policy, or by the overload marker
	}
	s.finish(t, re, drop)
}

// cancelCall ends the call of task t, waiting in the heap or never
// started, after Close gave up and cancelled s.ctx. Begin sees the
// cancellation and gives up as retry.Do does when its context ends during
// a wait: it refunds a BudgetTracker the retry that Next granted, and the
// Observer hears the call end with retry.ReasonContext. (Call.Abandon
// would refund as well, but report the end as permanent.)
func (s *Scheduler) cancelCall(t *task) *retry.Error {
	_, err := t.call.Begin()
	return err.(*retry.Error) // s.ctx is cancelled: Begin gives up
}

// park moves running task t to the timer heap, due after delay.
func (s *Scheduler) park(t *task, delay time.Duration) {
	now := s.clock.Now() // outside s.mu: the Clock may panic
	s.mu.Lock()
	t.due = now.Add(delay)
	t.ended = true
	s.st.Running--
	first := s.waiting.push(t)
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// finish ends running task t with err (nil on success).
func (s *Scheduler) finish(t *task, err error, drop string) {
	s.mu.Lock()
	t.ended = true
	s.st.Running--
	if err == nil {
		s.st.Succeeded++
	} else {
		s.st.Failed++
	}
	depth := s.pendingLocked()
	if s.closing && depth == 0 {
		s.stopLocked()
	}
	s.mu.Unlock()
	v := s.end(t, err, drop)
	if s.obs != nil {
		if w := guard(func() { s.obs.QueueDepth(s.name, int(depth)) }); v == nil {
			v = w
		}
	}
	if v != nil {
		s.mu.Lock()
		s.st.Panics++
		s.mu.Unlock()
	}
}

// end reports t's end to the Observer and to its done function; its call
// has already told the Policy's Observer. It is called once per task,
// without s.mu held. Each of the two calls is made even if the other
// panics; end returns the first panic's value (nil: none), for its caller
// to count (a worker) or re-raise (Close).
func (s *Scheduler) end(t *task, err error, drop string) (panicked any) {
	if drop != "" && s.obs != nil {
		panicked = guard(func() { s.obs.QueueDropped(s.name, drop, 1) })
	}
	if t.done != nil {
		if v := guard(func() { t.done(err) }); panicked == nil {
			panicked = v
		}
	}
	return panicked
}

// guard calls f and returns the value it panicked with; nil when f
// returned. (runtime.Goexit in f is not stopped.)
func guard(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// step runs t's next step (execute) on a worker. A panic outside the
// task's own attempt, which attempt recovers — in the Policy's callbacks
// through t's retry.Call (Budget, Breaker, Limiter, Classify, Observer,
// Backoff, Rand: the Call has released what the step held before the
// panic goes on) or in the Clock — is recovered here and counted in
// SchedulerStats.Panics; a task the step had not ended yet fails as a
// panicking task does (a *retry.Error with Reason retry.ErrPanicked,
// DropPanicked). After runtime.Goexit a new worker takes this one's place.
func (s *Scheduler) step(t *task) {
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()
		if v == nil && t.goexited {
			return // the task's own Goexit: attempt has ended it and replaced the worker
		}
		s.mu.Lock()
		s.st.Panics++
		ended := t.ended
		if v == nil {
			s.live++
		}
		s.mu.Unlock()
		if !ended {
			// A retry the budget granted (Next runs before park reads the
			// Clock) is refunded and the Observer hears the call end;
			// nothing if the call has ended already.
			t.call.Panic(&retry.Attempt{}, v)
			s.finish(t, &retry.Error{Attempts: t.call.Attempts(), Reason: retry.ErrPanicked, Last: &retry.PanicError{Value: v}}, DropPanicked)
		}
		if v == nil {
			go s.work()
		}
	}()
	s.execute(t)
	returned = true
}
