package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// Defaults used for zero SchedulerConfig fields.
const (
	DefaultSchedulerWorkers = 4
	DefaultMaxPending       = 1024
)

// SchedulerConfig configures a Scheduler. Every field is optional.
type SchedulerConfig struct {
	// Name labels the scheduler in Observer calls.
	Name string

	// Workers is the number of goroutines running attempts, hence the most
	// attempts in progress at once. 0: DefaultSchedulerWorkers.
	Workers int

	// MaxPending bounds the tasks accepted and not yet finished (running,
	// due, or waiting for a retry); Submit refuses tasks beyond it.
	// 0: DefaultMaxPending.
	MaxPending int

	// Policy says how each task is retried; see Scheduler for how its
	// fields are applied. nil: the zero retry.Policy (at most
	// retry.DefaultMaxAttempts attempts; set MaxAttempts: retry.Unlimited
	// to retry until success, a permanent error or Close).
	Policy *retry.Policy

	// Clock times the waits between attempts, AttemptTimeout and
	// MaxElapsed: it replaces Policy.Clock for the tasks' retry calls.
	// nil: Policy.Clock, and clock.Real if that is nil too.
	Clock clock.Clock

	// Observer is told about refused, failed and abandoned tasks and the
	// number pending. nil: none. (The Policy's retry.Observer sees every
	// attempt.)
	Observer Observer
}

// Validate reports a configuration NewScheduler would reject.
func (c *SchedulerConfig) Validate() error {
	switch {
	case c.Workers < 0:
		return errors.New("queue: negative Workers")
	case c.MaxPending < 0:
		return errors.New("queue: negative MaxPending")
	}
	return nil
}

// SchedulerStats is a consistent snapshot of a Scheduler's counters, read
// under one lock, so at every instant
//
//	Submitted == Succeeded + Failed + Abandoned + Pending
type SchedulerStats struct {
	// Submitted counts tasks accepted by Submit.
	Submitted uint64
	// Succeeded counts tasks whose last attempt returned nil.
	Succeeded uint64
	// Failed counts tasks given up on: a permanent error, a stop
	// condition of the Policy (MaxAttempts, MaxElapsed, a Budget or Breaker
	// refusal), or a panic in the task.
	Failed uint64
	// Abandoned counts tasks Close gave up on when its context ended.
	Abandoned uint64
	// Pending counts tasks accepted and not finished: running, due and
	// waiting for a worker, or waiting for their next attempt.
	Pending uint64
	// Running and Waiting are the parts of Pending that are in an attempt
	// and that wait for a retry's due time.
	Running, Waiting uint64
	// Attempts counts attempts made, over all tasks.
	Attempts uint64
	// Refused counts tasks Submit refused because MaxPending were pending.
	Refused uint64
	// Rejected counts tasks submitted after Close; they are not in
	// Submitted.
	Rejected uint64
	// Panics counts the panics (and runtime.Goexit calls) the Scheduler's
	// goroutines recovered outside the tasks themselves (a task's own
	// panic counts in Failed): in the Policy's callbacks during a task's
	// step, the Clock, the Observer and done functions; see Scheduler. It
	// is not part of the identity above.
	Panics uint64
}

// Scheduler keeps retrying submitted tasks in the background until each
// succeeds or hits a stop condition, with a fixed number of goroutines
// whatever the number of tasks: Workers goroutines run attempts and one
// dispatcher goroutine moves tasks whose wait is over to the workers. A
// task waiting for its next attempt is a small struct in a timer heap, not
// a goroutine.
//
// Each task is one retry.Call under the Policy, driven step by step: a
// worker makes an attempt (Call.Begin, the task, Call.End) and asks
// Call.Next for the wait before the next one; the task then waits in the
// heap, not in Call.Wait, and the worker moves on. So a task makes exactly
// the checks and the Budget, Breaker and Observer calls of retry.Do — the
// same classification, backoff, Retry-After advice (capped and jittered),
// MaxAttempts, MaxElapsed (counted from Submit), AttemptTimeout and
// outcome labels — and budgets, breakers and metrics cannot tell a
// scheduled task from a retry.Do call. In particular, as in retry.Do:
//
//   - a retry's Budget token is withdrawn when the retry is scheduled, so
//     a waiting task holds it (a BudgetTracker's reservation) until the
//     retry starts, or until Close gives up, which refunds it;
//   - a Breaker or Budget refusal ends the task, like any other stop
//     condition: done receives a *retry.Error whose Reason is
//     retry.ErrBudgetExhausted or the Breaker's error, and the task is
//     counted in SchedulerStats.Failed. The Scheduler does not postpone a
//     refused task: a refusal ends its call, so going on would take a new
//     call, whose first attempt no Budget gates and which would count
//     MaxAttempts and MaxElapsed afresh — a budget would then pace the
//     task instead of capping its retries. A caller that wants tasks to
//     ride out an outage can leave the Breaker and Budget out of this
//     Policy (Workers and the backoff already bound the load the
//     Scheduler puts on a downstream), or resubmit later what done hands
//     back.
//
// A task that panics (or calls runtime.Goexit) is not retried: its call
// reports the attempt as failed (retry.Call.Panic: the Breaker's probe
// permit and the Budget's slot are released, the Observer hears
// retry.ReasonPanic), done receives a *retry.Error whose Reason is
// retry.ErrPanicked and whose Last is the *retry.PanicError, and the task
// counts in SchedulerStats.Failed (QueueDropped with DropPanicked). The
// panic is recovered there rather than re-raised: no caller is waiting
// on a scheduled task, and re-raising it would end the program. The worker
// goes on, so no worker, slot or goroutine is lost.
//
// The other callbacks the Scheduler's goroutines make are guarded too, each
// panic counted in SchedulerStats.Panics and none re-raised there (it
// would end the program): a panic in the Policy's callbacks during a
// task's step (Budget, Breaker, Limiter, Classify, Observer, Backoff,
// Rand, as retry.Call re-raises them after releasing what the attempt
// held) or in the Clock fails that task as a panicking task fails; a
// panicking done function or Observer call is skipped, the task counted
// as it ended; a panicking Clock in the dispatcher is skipped and the
// dispatcher goes on. The one callback made with the Scheduler's lock held
// (the Clock and retry.NewCall in Submit) releases it before its panic
// goes on. On Submit's and Close's goroutines the panic goes on to the
// caller: Close first calls every abandoned task's done function, then
// re-raises the first panic.
//
// A task stops when it succeeds, fails with an error not worth retrying,
// has made MaxAttempts attempts, cannot fit the next wait plus
// MinAttemptTime within MaxElapsed from Submit, is refused by the Breaker
// or the Budget, or when Close gives up. The Policy's retry.Observer, if
// any, sees AttemptStart, AttemptEnd, RetryScheduled and CallEnd for every
// task as retry.Do reports them; a task Close gives up on ends with
// retry.ReasonContext, as a retry.Do call whose context ended.
//
// A Scheduler is safe for concurrent use.
type Scheduler struct {
	name       string
	maxPending int
	policy     *retry.Policy
	clock      clock.Clock
	obs        Observer

	ctx    context.Context // attempts' parent; cancelled when Close gives up
	cancel context.CancelCauseFunc

	kick   chan struct{} // capacity 1: the earliest due time changed
	quit   chan struct{} // closed when the goroutines must return
	exited chan struct{} // closed by the last goroutine to return
	closed chan struct{} // closed when the first Close has finished

	mu        sync.Mutex
	cond      sync.Cond // workers wait on it for ready tasks or quit
	ready     taskFIFO
	waiting   taskHeap
	abandoned []*task // taken from workers after Close gave up
	closing   bool
	stopped   bool
	live      int
	seq       uint64
	st        SchedulerStats
}

// task is one submitted task: its function and its retry.Call.
type task struct {
	fn     func(context.Context) error
	done   func(error)
	call   *retry.Call
	due    time.Time
	seq    uint64
	gaveUp *retry.Error // how the call gave up, once a worker handed t to Close
	ended  bool         // a worker's step has finished, parked or handed t on; guarded by mu
	// goexited: t's task called runtime.Goexit and attempt replaced the
	// worker; read only by that worker's goroutine.
	goexited bool
}

var zeroPolicy retry.Policy

// NewScheduler starts a Scheduler. It panics if cfg does not Validate.
func NewScheduler(cfg SchedulerConfig) *Scheduler {
	if err := cfg.Validate(); err != nil {
		panic(err.Error())
	}
	p := cfg.Policy
	if p == nil {
		p = &zeroPolicy
	}
	if cfg.Clock != nil {
		// Each task's call measures time on the Scheduler's clock.
		cp := *p
		cp.Clock = cfg.Clock
		p = &cp
	}
	workers := cmp.Or(cfg.Workers, DefaultSchedulerWorkers)
	s := &Scheduler{
		name:       cfg.Name,
		maxPending: cmp.Or(cfg.MaxPending, DefaultMaxPending),
		policy:     p,
		clock:      clock.Or(p.Clock),
		obs:        cfg.Observer,
		kick:       make(chan struct{}, 1),
		quit:       make(chan struct{}),
		exited:     make(chan struct{}),
		closed:     make(chan struct{}),
		live:       workers + 1,
	}
	s.cond.L = &s.mu
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	for range workers {
		go s.work()
	}
	go s.dispatch()
	return s
}

// Submit hands task to the Scheduler without blocking. It reports whether
// the task was accepted; it refuses it (counted in SchedulerStats.Refused)
// when MaxPending tasks are pending — the caller keeps the work and decides,
// as the Scheduler never drops a task it accepted — and after Close
// (SchedulerStats.Rejected).
//
// task receives a context that ends with its attempt (AttemptTimeout) or
// when Close gives up, and must return when it ends. done, if not nil, is
// called exactly once for an accepted task, outside any lock, from a worker
// goroutine (from Close for the tasks Close abandons): with nil on success,
// otherwise with the *retry.Error that ended it (wrapping ErrClosed if
// Close gave up on it). It should be quick; it may call Submit, not Close
// (Close waits for every done function it calls, so a done that called
// Close would wait for itself for ever).
// Submit panics if task is nil. A panicking Clock (SchedulerConfig.Clock or
// the Policy's) goes on to Submit's caller with the task not taken and
// nothing counted; the Scheduler stays usable.
//
// Submit's tasks use the default members of the Policy's keyed groups (a
// keyed.Breakers, say): for tasks sent to many hosts, use SubmitKey.
func (s *Scheduler) Submit(task func(ctx context.Context) error, done func(err error)) bool {
	return s.submit(s.ctx, task, done)
}

// SubmitKey is Submit for a task whose attempts use key's members of the
// Policy's keyed groups, as a retry.Do with keyed.WithKey(ctx, key) does:
// a Scheduler delivering to many hosts keeps one host's outage from
// opening the breaker, or spending the budget, of the others. The task's
// context carries key (keyed.KeyFrom). The empty key means the default
// members, as Submit.
func (s *Scheduler) SubmitKey(key string, task func(ctx context.Context) error, done func(err error)) bool {
	if key == "" {
		return s.submit(s.ctx, task, done)
	}
	return s.submit(keyed.WithKey(s.ctx, key), task, done)
}

// submit is Submit and SubmitKey, with ctx the task's call's context:
// s.ctx, or s.ctx carrying a key.
func (s *Scheduler) submit(ctx context.Context, task func(ctx context.Context) error, done func(err error)) bool {
	if task == nil {
		panic("queue: nil task")
	}
	s.mu.Lock()
	if s.closing {
		s.st.Rejected++
		s.mu.Unlock()
		return false
	}
	if s.pendingLocked() >= uint64(s.maxPending) {
		s.st.Refused++
		s.mu.Unlock()
		if r, ok := s.obs.(RefusedObserver); ok {
			r.QueueRefused(s.name, 1)
		} else if s.obs != nil {
			s.obs.QueueDropped(s.name, DropFull, 1)
		}
		return false
	}
	s.seq++
	t := s.newTaskLocked(ctx, task, done)
	s.st.Submitted++
	s.ready.push(t)
	depth := s.pendingLocked()
	s.mu.Unlock()
	s.cond.Signal()
	if s.obs != nil {
		s.obs.QueueDepth(s.name, int(depth))
	}
	return true
}

func newTask(fn func(context.Context) error, done func(error), call *retry.Call, now time.Time, seq uint64) *task {
	return &task{fn: fn, done: done, call: call, due: now, seq: seq}
}

// newTaskLocked makes Submit's task, with s.mu held. If a Clock panics (the
// Scheduler's, or the Policy's through retry.NewCall), it unlocks s.mu
// before the panic goes on to Submit's caller: the task is not counted and
// the Scheduler stays usable.
func (s *Scheduler) newTaskLocked(ctx context.Context, fn func(context.Context) error, done func(error)) *task {
	ok := false
	defer func() {
		if !ok {
			s.mu.Unlock()
		}
	}()
	t := newTask(fn, done, retry.NewCall(ctx, s.policy), s.clock.Now(), s.seq)
	ok = true
	return t
}

// pendingLocked returns the number of pending tasks. s.mu must be held.
func (s *Scheduler) pendingLocked() uint64 {
	return s.st.Submitted - s.st.Succeeded - s.st.Failed - s.st.Abandoned
}

// Stats returns a consistent snapshot of the counters.
func (s *Scheduler) Stats() SchedulerStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.st
	st.Pending = s.pendingLocked()
	st.Waiting = uint64(s.waiting.Len())
	return st
}

// Close stops accepting tasks and lets the pending ones run — waits
// included — until they have all finished or ctx ends. If ctx ends first,
// Close cancels the attempts in progress, waits for the Scheduler's
// goroutines to return, and abandons the remaining tasks: each one's done
// function is called, from Close, with a *retry.Error wrapping ErrClosed
// and ctx's error. With an expired ctx it returns as soon as the attempts
// in progress have seen the cancellation.
//
// Close returns the number of tasks abandoned and, when that is not zero,
// an error wrapping ErrClosed and ctx's error; if a done function or the
// Observer panicked (or ctx's Err), Close re-raises the first panic once
// every abandoned task's done has been called; if ctx's Done panics, Close
// has changed nothing and the panic goes on. No goroutine started by the Scheduler
// outlives Close. Later calls return (0, nil) once the first has
// finished, its abandoned tasks' done functions included; a later call
// whose ctx ends first makes the Scheduler give up as the first's would.
func (s *Scheduler) Close(ctx context.Context) (abandoned int, err error) {
	// ctx's methods are user code: Done is read before anything changes
	// (if it panics, the Scheduler is as it was), and a panic of Err's
	// goes on only once this Close has done its work.
	ctxDone := ctx.Done()
	s.mu.Lock()
	first := !s.closing
	if first {
		s.closing = true
		if s.pendingLocked() == 0 {
			s.stopLocked()
		}
	}
	s.mu.Unlock()

	var panicked any // the first panic: of ctx's Err, a done function or the Observer
	select {
	case <-s.exited:
	case <-ctxDone:
		var cerr error
		panicked, cerr = errOf(ctx)
		s.cancel(cerr)
		s.mu.Lock()
		s.stopLocked()
		s.mu.Unlock()
		<-s.exited
	}
	if !first {
		// The first Close abandons what is left and calls its done
		// functions; a later one (which may still have made it give up,
		// above) returns once that has finished.
		<-s.closed
		if panicked != nil {
			panic(panicked)
		}
		return 0, nil
	}
	defer close(s.closed) // also when a done function's panic goes on
	s.cancel(context.Canceled)

	s.mu.Lock()
	left := s.abandoned
	s.abandoned = nil
	left = append(left, s.ready.drain()...)
	for s.waiting.Len() > 0 {
		left = append(left, s.waiting.pop())
	}
	s.st.Abandoned += uint64(len(left))
	s.mu.Unlock()
	if len(left) == 0 {
		if panicked != nil {
			panic(panicked)
		}
		return 0, nil
	}
	cause := context.Cause(s.ctx)
	reason := fmt.Errorf("%w: %w", ErrClosed, cause)
	for _, t := range left {
		re := t.gaveUp
		if re == nil {
			// Ending the call runs the Policy's callbacks (the Observer's
			// CallEnd, a budget's Refund, the Clock): if one panics, the
			// task is ended all the same, and its done called.
			if v := guard(func() { re = s.cancelCall(t) }); v != nil {
				if panicked == nil {
					panicked = v
				}
				re = &retry.Error{Attempts: t.call.Attempts()}
			}
		}
		if v := s.end(t, &retry.Error{Attempts: re.Attempts, Reason: reason, Last: re.Last}, DropClosed); panicked == nil {
			panicked = v
		}
	}
	if s.obs != nil {
		if v := guard(func() { s.obs.QueueDepth(s.name, 0) }); panicked == nil {
			panicked = v
		}
	}
	if panicked != nil {
		panic(panicked) // to Close's caller, once every abandoned task has been ended
	}
	return len(left), fmt.Errorf("%w with %d tasks abandoned: %w", ErrClosed, len(left), cause)
}

// errOf is ctx.Err, or context.Canceled when it panics; v is the panic,
// which the caller raises once its work is done.
func errOf(ctx context.Context) (v any, err error) {
	defer func() {
		if v = recover(); v != nil {
			err = context.Canceled
		}
	}()
	return nil, ctx.Err()
}

// stopLocked tells every goroutine to return. s.mu must be held.
func (s *Scheduler) stopLocked() {
	if !s.stopped {
		s.stopped = true
		close(s.quit)
		s.cond.Broadcast()
	}
}

// exit is deferred by every goroutine of the Scheduler.
func (s *Scheduler) exit() {
	s.mu.Lock()
	s.live--
	last := s.live == 0
	s.mu.Unlock()
	if last {
		close(s.exited)
	}
}

// work runs due tasks until the Scheduler stops.
func (s *Scheduler) work() {
	defer s.exit()
	s.mu.Lock()
	for {
		for s.ready.len() == 0 && !s.stopped {
			s.cond.Wait()
		}
		if s.stopped {
			s.mu.Unlock()
			return
		}
		t := s.ready.pop()
		t.ended = false
		s.st.Running++
		s.mu.Unlock()
		s.step(t)
		s.mu.Lock()
	}
}

// dispatch moves tasks whose due time has come from the heap to the ready
// queue, sleeping on the clock until the earliest due time.
func (s *Scheduler) dispatch() {
	defer s.exit()
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	panicked := false // the last round panicked
	for {
		more, p := s.dispatchOnce(&timer)
		if !more {
			return
		}
		if p {
			// A round that panics before it sees the Scheduler stopped
			// (a Clock that panics on every call) must not keep Close
			// waiting, nor spin: after two in a row, wait first.
			select {
			case <-s.quit:
				return
			default:
			}
			if panicked {
				s.pauseAfterPanics()
			}
		}
		panicked = p
	}
}

// pauseAfterPanics waits panicPause on the real clock, or until the
// Scheduler's goroutines must return.
func (s *Scheduler) pauseAfterPanics() {
	t := time.NewTimer(panicPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-s.quit:
	}
}

// dispatchOnce makes one round of dispatch; it reports false when the
// Scheduler has stopped. A panicking Clock is recovered (s.mu is not held
// when the Clock is called) and counted in SchedulerStats.Panics, and the
// dispatcher goes on with the next round (after two panicking rounds in a
// row, 100 ms later on the real clock). (After runtime.Goexit, which it
// cannot stop, a new dispatcher takes its place.)
func (s *Scheduler) dispatchOnce(timer *clock.Timer) (more, panicked bool) {
	returned := false
	defer func() {
		if returned {
			return
		}
		panicked = true
		v := recover()
		s.mu.Lock()
		s.st.Panics++
		if v == nil {
			s.live++
		}
		s.mu.Unlock()
		more = true
		if v == nil {
			go s.dispatch()
		}
	}()
	now := s.clock.Now() // outside s.mu: the Clock may panic
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		returned = true
		return false, false
	}
	moved := 0
	for s.waiting.Len() > 0 && !s.waiting[0].due.After(now) {
		s.ready.push(s.waiting.pop())
		moved++
	}
	var next time.Duration
	hasNext := s.waiting.Len() > 0
	if hasNext {
		next = s.waiting[0].due.Sub(now)
	}
	s.mu.Unlock()
	switch {
	case moved == 1:
		s.cond.Signal()
	case moved > 1:
		s.cond.Broadcast()
	}

	var tc <-chan time.Time
	if hasNext {
		if *timer == nil {
			*timer = s.clock.NewTimer(next)
		} else {
			(*timer).Reset(next)
		}
		tc = (*timer).C()
	}
	select {
	case <-tc:
		returned = true
		return true, false
	case <-s.kick:
	case <-s.quit:
	}
	if *timer != nil {
		(*timer).Stop()
	}
	returned = true
	return true, false
}
