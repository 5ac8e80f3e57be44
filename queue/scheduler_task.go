package queue

import (
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
		t.gaveUp = re
		s.abandoned = append(s.abandoned, t)
		s.mu.Unlock()
		return
	}
	drop := DropExhausted
	if re.Reason == nil {
		drop = DropPermanent
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
	s.mu.Lock()
	t.due = s.clock.Now().Add(delay)
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
	s.end(t, err, drop)
	if s.obs != nil {
		s.obs.QueueDepth(s.name, int(depth))
	}
}

// end reports t's end to the Observer and to its done function; its call
// has already told the Policy's Observer. It is called once per task,
// without s.mu held.
func (s *Scheduler) end(t *task, err error, drop string) {
	if drop != "" && s.obs != nil {
		s.obs.QueueDropped(s.name, drop, 1)
	}
	if t.done != nil {
		t.done(err)
	}
}
