package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// attempt is one attempt of a scripted task, answered by the test.
type attempt struct {
	id    int
	ctx   context.Context
	reply chan error
}

// script makes tasks whose attempts the test answers one by one.
type script struct{ attempts chan attempt }

func newScript() *script { return &script{attempts: make(chan attempt)} }

func (s *script) task(id int) func(context.Context) error {
	return func(ctx context.Context) error {
		a := attempt{id: id, ctx: ctx, reply: make(chan error, 1)}
		select {
		case s.attempts <- a:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case err := <-a.reply:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *script) await(t *testing.T) attempt {
	t.Helper()
	select {
	case a := <-s.attempts:
		return a
	case <-time.After(10 * time.Second): // a hang guard only
		t.Fatal("no attempt")
		return attempt{}
	}
}

// answer waits for the next attempt and answers it with err.
func (s *script) answer(t *testing.T, err error) attempt {
	t.Helper()
	a := s.await(t)
	a.reply <- err
	return a
}

// result collects done calls.
type result struct{ ch chan error }

func newResult() *result         { return &result{ch: make(chan error, 1024)} }
func (r *result) done(err error) { r.ch <- err }
func (r *result) get(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("task not done")
		return nil
	}
}

func checkSchedInvariant(t fataler, s queue.SchedulerStats) {
	t.Helper()
	if s.Submitted != s.Succeeded+s.Failed+s.Abandoned+s.Pending || s.Running+s.Waiting > s.Pending {
		t.Fatalf("scheduler invariant broken: %+v", s)
	}
}

func TestSchedulerRetriesUntilSuccess(t *testing.T) {
	fake := clocktest.NewFake()
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: noJitter(fake, 0)})
	defer closeNow(s)

	if !s.Submit(sc.task(1), res.done) {
		t.Fatal("Submit refused")
	}
	sc.answer(t, errDown)
	for _, want := range []time.Duration{time.Second, 2 * time.Second} {
		fake.BlockUntil(1) // the dispatcher sleeps until the retry is due
		if d := fake.Deadlines(); len(d) != 1 || d[0] != want {
			t.Fatalf("wait %v, want %v", d, want)
		}
		st := s.Stats()
		checkSchedInvariant(t, st)
		if st.Waiting != 1 || st.Running != 0 {
			t.Fatalf("stats %+v", st)
		}
		fake.Advance(want)
		if want == time.Second {
			sc.answer(t, errDown)
		} else {
			sc.answer(t, nil)
		}
	}
	if err := res.get(t); err != nil {
		t.Fatalf("done(%v)", err)
	}
	closeAll(t, s)
	st := s.Stats()
	checkSchedInvariant(t, st)
	if st.Attempts != 3 || st.Succeeded != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSchedulerStopConditions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		policy   func(*retry.Policy)
		errs     []error // answers to the attempts, in order
		sentinel error   // the *retry.Error's reason (nil: not retryable)
		drop     string
	}{
		{"Permanent", func(*retry.Policy) {}, []error{retry.Permanent(errDown)}, nil, queue.DropPermanent},
		{"Classify", func(p *retry.Policy) { p.Classify = func(error) bool { return false } }, []error{errDown}, nil, queue.DropPermanent},
		{"MaxAttempts", func(p *retry.Policy) { p.MaxAttempts = 3 }, []error{errDown, errDown, errDown}, retry.ErrAttemptsExhausted, queue.DropExhausted},
		// 0: fail, wait 1s; 1s: fail, a 2s wait would end past 2.5s.
		{"MaxElapsed", func(p *retry.Policy) { p.MaxElapsed = 2500 * time.Millisecond }, []error{errDown, errDown}, retry.ErrElapsed, queue.DropExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktest.NewFake()
			p := noJitter(fake, 0)
			tc.policy(p)
			sc := newScript()
			res := newResult()
			obs := newRecObserver()
			s := queue.NewScheduler(queue.SchedulerConfig{Name: "jobs", Policy: p, Observer: obs})
			s.Submit(sc.task(1), res.done)
			for i, e := range tc.errs {
				if i > 0 {
					fake.BlockUntil(1)
					fake.Advance(fake.Deadlines()[0])
				}
				sc.answer(t, e)
			}
			err := res.get(t)
			var re *retry.Error
			if !errors.As(err, &re) || re.Attempts != len(tc.errs) || re.Reason != tc.sentinel || !errors.Is(err, errDown) {
				t.Fatalf("done(%v), want a *retry.Error with reason %v after %d attempts", err, tc.sentinel, len(tc.errs))
			}
			closeAll(t, s)
			st := s.Stats()
			checkSchedInvariant(t, st)
			if st.Failed != 1 || st.Attempts != uint64(len(tc.errs)) {
				t.Fatalf("stats %+v", st)
			}
			if d, _ := obs.snapshot(); d[tc.drop] != 1 || !obs.names["jobs"] {
				t.Fatalf("observer %v", d)
			}
		})
	}
}

func TestSchedulerRetryAfter(t *testing.T) {
	fake := clocktest.NewFake()
	sc := newScript()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: noJitter(fake, 0)})
	defer closeNow(s)
	s.Submit(sc.task(1), nil)
	sc.answer(t, retry.After(errDown, 20*time.Second))
	fake.BlockUntil(1)
	if d := fake.Deadlines(); len(d) != 1 || d[0] < 20*time.Second || d[0] > 22*time.Second {
		t.Fatalf("wait %v, want the advised 20s plus at most 10%%", d)
	}
}

// switchBreaker is open until closed by the test.
type switchBreaker struct {
	open    atomic.Bool
	results chan error
}

func (b *switchBreaker) Ready() error {
	if b.open.Load() {
		return errOpen
	}
	return nil
}

func (b *switchBreaker) Allow() (func(error), error) {
	if err := b.Ready(); err != nil {
		return nil, err
	}
	return func(err error) { b.results <- err }, nil
}

// TestSchedulerBreakerRefusalEndsTask checks that, as in retry.Do, a
// breaker that refuses a task's first attempt or a retry ends the task
// with the breaker's error, without an attempt or a wait.
func TestSchedulerBreakerRefusalEndsTask(t *testing.T) {
	fake := clocktest.NewFake()
	b := &switchBreaker{results: make(chan error, 10)}
	b.open.Store(true)
	p := noJitter(fake, 0)
	p.Breaker = b
	sc := newScript()
	res := newResult()
	obs := newRecObserver()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: p, Observer: obs})

	// Open at Submit: no attempt.
	s.Submit(sc.task(1), res.done)
	err := res.get(t)
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 0 || re.Reason != errOpen || re.Last != nil {
		t.Fatalf("done(%v), want the breaker's refusal before any attempt", err)
	}

	// Open during the wait before a retry: Next saw it ready, Begin is
	// refused when the retry is due.
	b.open.Store(false)
	s.Submit(sc.task(2), res.done)
	sc.answer(t, errDown)
	if err := <-b.results; err != errDown {
		t.Fatalf("breaker told %v", err)
	}
	fake.BlockUntil(1)
	b.open.Store(true)
	fake.Advance(time.Second)
	err = res.get(t)
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != errOpen || !errors.Is(err, errDown) {
		t.Fatalf("done(%v), want the breaker's refusal after 1 attempt", err)
	}

	// Open when the attempt fails: Next refuses the retry at once.
	b.open.Store(false)
	s.Submit(sc.task(3), res.done)
	a := sc.await(t)
	b.open.Store(true)
	a.reply <- errDown
	err = res.get(t)
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != errOpen || !errors.Is(err, errDown) {
		t.Fatalf("done(%v), want the breaker's refusal after 1 attempt", err)
	}
	if d := fake.Deadlines(); len(d) != 0 {
		t.Fatalf("a refused task still waits: %v", d)
	}

	closeAll(t, s)
	st := s.Stats()
	checkSchedInvariant(t, st)
	if st.Attempts != 2 || st.Failed != 3 || st.Succeeded != 0 {
		t.Fatalf("stats %+v", st)
	}
	if d, _ := obs.snapshot(); d[queue.DropExhausted] != 3 {
		t.Fatalf("observer %v", d)
	}
}

// gateBudget grants retries while open and records what it is told.
type gateBudget struct {
	mu      sync.Mutex
	grant   bool
	records []string
}

func (g *gateBudget) Record(retry bool, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.records = append(g.records, fmt.Sprint(retry, err == nil))
}

func (g *gateBudget) Withdraw(error) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.records = append(g.records, fmt.Sprint("withdraw ", g.grant))
	return g.grant
}

// TestSchedulerBudgetRefusalEndsTask checks that, as in retry.Do, the
// budget is asked for a retry's token when the retry is scheduled, and
// that its refusal ends the task at once with retry.ErrBudgetExhausted.
func TestSchedulerBudgetRefusalEndsTask(t *testing.T) {
	fake := clocktest.NewFake()
	bud := &gateBudget{grant: true}
	p := noJitter(fake, 0)
	p.Budget = bud
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: p})
	s.Submit(sc.task(1), res.done) // first attempts need no token
	sc.answer(t, errDown)          // the retry's token is withdrawn now
	fake.BlockUntil(1)
	bud.mu.Lock()
	bud.grant = false
	bud.mu.Unlock()
	fake.Advance(time.Second) // the retry runs on the token it holds
	sc.answer(t, errDown)     // no token for another retry
	err := res.get(t)
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 2 || re.Reason != retry.ErrBudgetExhausted || !errors.Is(err, errDown) {
		t.Fatalf("done(%v), want the budget's refusal after 2 attempts", err)
	}
	if d := fake.Deadlines(); len(d) != 0 {
		t.Fatalf("a refused task still waits: %v", d)
	}
	closeAll(t, s)
	want := "[false false withdraw true true false withdraw false]"
	if got := fmt.Sprint(bud.records); got != want {
		t.Fatalf("budget saw %s, want %s", got, want)
	}
	if st := s.Stats(); st.Failed != 1 || st.Attempts != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestSchedulerAttemptTimeout(t *testing.T) {
	fake := clocktest.NewFake()
	p := noJitter(fake, 2)
	p.AttemptTimeout = time.Second
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: p})
	s.Submit(sc.task(1), res.done)
	a := sc.await(t)
	fake.BlockUntil(1)
	fake.Advance(time.Second) // cuts the attempt, which never answers
	<-a.ctx.Done()
	fake.BlockUntil(1) // the retry's wait
	fake.Advance(fake.Deadlines()[0])
	sc.await(t)
	fake.Advance(time.Second)
	err := res.get(t)
	if !errors.Is(err, retry.ErrAttemptTimeout) || !errors.Is(err, retry.ErrAttemptsExhausted) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("done(%v)", err)
	}
	if want := "retry: attempts exhausted after 2 attempts: retry: attempt timed out: context deadline exceeded"; err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	closeAll(t, s)
}

func TestSchedulerRefusesWhenFull(t *testing.T) {
	fake := clocktest.NewFake()
	sc := newScript()
	obs := newRecObserver()
	s := queue.NewScheduler(queue.SchedulerConfig{MaxPending: 2, Workers: 1, Policy: noJitter(fake, 0), Observer: obs})
	if !s.Submit(sc.task(1), nil) || !s.Submit(sc.task(2), nil) {
		t.Fatal("refused with room")
	}
	if s.Submit(sc.task(3), nil) {
		t.Fatal("accepted beyond MaxPending")
	}
	sc.answer(t, nil)
	sc.answer(t, nil)
	closeAll(t, s)
	if s.Submit(sc.task(4), nil) {
		t.Fatal("accepted after Close")
	}
	st := s.Stats()
	checkSchedInvariant(t, st)
	if st.Submitted != 2 || st.Succeeded != 2 || st.Refused != 1 || st.Rejected != 1 {
		t.Fatalf("stats %+v", st)
	}
	if d, _ := obs.snapshot(); d[queue.DropFull] != 1 {
		t.Fatalf("observer %v", d)
	}
}

func TestSchedulerBoundedGoroutinesAndAbandon(t *testing.T) {
	fake := clocktest.NewFake()
	before := runtime.NumGoroutine()
	const tasks = 500
	res := newResult()
	obs := newRecObserver()
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 4, MaxPending: tasks, Policy: noJitter(fake, 0), Observer: obs})
	var attempts atomic.Int64
	for i := range tasks {
		ok := s.Submit(func(context.Context) error {
			attempts.Add(1)
			return fmt.Errorf("task %d: %w", i, errDown)
		}, res.done)
		if !ok {
			t.Fatalf("Submit %d refused", i)
		}
	}
	// Every task fails once and waits for its retry in the heap.
	for st := s.Stats(); st.Waiting != tasks; st = s.Stats() {
		checkSchedInvariant(t, st)
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine() - before; n > 4+1 {
		t.Fatalf("%d goroutines for %d waiting tasks", n, tasks)
	}
	ctx := expired()
	n, err := s.Close(ctx)
	if n != tasks || !errors.Is(err, queue.ErrClosed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %d, %v", n, err)
	}
	for range tasks {
		err := res.get(t)
		var re *retry.Error
		if !errors.Is(err, queue.ErrClosed) || !errors.Is(err, errDown) || !errors.As(err, &re) || re.Attempts != 1 {
			t.Fatalf("done(%v)", err)
		}
	}
	st := s.Stats()
	checkSchedInvariant(t, st)
	if st.Abandoned != tasks || st.Pending != 0 || attempts.Load() != tasks {
		t.Fatalf("stats %+v", st)
	}
	if d, _ := obs.snapshot(); d[queue.DropClosed] != tasks {
		t.Fatalf("observer %v", d)
	}
}

func TestSchedulerCloseLetsWaitingTasksFinish(t *testing.T) {
	fake := clocktest.NewFake()
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: noJitter(fake, 0)})
	s.Submit(sc.task(1), res.done)
	sc.answer(t, errDown)
	fake.BlockUntil(1)
	closed := make(chan error)
	go func() {
		_, err := s.Close(context.Background())
		closed <- err
	}()
	fake.Advance(time.Second)
	sc.answer(t, nil)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := res.get(t); err != nil {
		t.Fatalf("done(%v)", err)
	}
}

func TestSchedulerCloseCancelsRunningAttempt(t *testing.T) {
	fake := clocktest.NewFake()
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: noJitter(fake, 0)})
	s.Submit(sc.task(1), res.done)
	a := sc.await(t) // never answered
	ctx := expired()
	if n, err := s.Close(ctx); n != 1 || !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Close = %d, %v", n, err)
	}
	if a.ctx.Err() == nil {
		t.Fatal("the running attempt was not cancelled")
	}
	if err := res.get(t); !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("done(%v)", err)
	}
	if n, err := s.Close(ctx); n != 0 || err != nil {
		t.Fatalf("second Close = %d, %v", n, err)
	}
}

// eventLog is a retry.Observer that logs events.
type eventLog struct {
	mu  sync.Mutex
	log []string
}

func (l *eventLog) add(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = append(l.log, s)
}

func (l *eventLog) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	l.add(fmt.Sprintf("start %s #%d", e.Operation, e.Attempt))
	return ctx
}
func (l *eventLog) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	l.add(fmt.Sprintf("end #%d %s", e.Attempt, e.Outcome))
}
func (l *eventLog) RetryScheduled(_ context.Context, e retry.RetryScheduled) {
	l.add(fmt.Sprintf("retry #%d in %v", e.Attempt, e.Delay))
}
func (l *eventLog) CallEnd(_ context.Context, e retry.CallEnd) {
	l.add(fmt.Sprintf("call end %s after %d", e.Reason, e.Attempts))
}

func TestSchedulerRetryObserverEvents(t *testing.T) {
	fake := clocktest.NewFake()
	log := &eventLog{}
	p := noJitter(fake, 0)
	p.Operation, p.Observer = "sync", log
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: p})
	s.Submit(sc.task(1), res.done)
	sc.answer(t, errDown)
	fake.BlockUntil(1)
	fake.Advance(time.Second)
	sc.answer(t, nil)
	res.get(t)
	closeAll(t, s)
	want := "[start sync #1 end #1 error retry #2 in 1s start sync #2 end #2 success call end success after 2]"
	if got := fmt.Sprint(log.log); got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
}

func TestSchedulerConfigValidate(t *testing.T) {
	for _, c := range []queue.SchedulerConfig{{Workers: -1}, {MaxPending: -1}} {
		if err := c.Validate(); err == nil {
			t.Errorf("Validate(%+v) = nil", c)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewScheduler(%+v) did not panic", c)
				}
			}()
			queue.NewScheduler(c)
		}()
	}
}

// trackingBudget is a retry.BudgetTracker that logs calls.
type trackingBudget struct{ gateBudget }

func (b *trackingBudget) Start(retry bool) { b.add(fmt.Sprint("start ", retry)) }
func (b *trackingBudget) Refund()          { b.add("refund") }
func (b *trackingBudget) add(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.records = append(b.records, s)
}

// raceBreaker says it is ready but refuses the next n Allow calls, as a
// half-open breaker whose probe permits another caller took.
type raceBreaker struct{ refuse atomic.Int32 }

func (b *raceBreaker) Ready() error { return nil }
func (b *raceBreaker) Allow() (func(error), error) {
	if b.refuse.Add(-1) >= 0 {
		return nil, errors.New("breaker: too many probes")
	}
	return func(error) {}, nil
}

func TestSchedulerRefundsTokenWhenBreakerRefuses(t *testing.T) {
	fake := clocktest.NewFake()
	bud := &trackingBudget{gateBudget{grant: true}}
	br := &raceBreaker{}
	p := noJitter(fake, 0)
	p.Budget, p.Breaker = bud, br
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: p})
	s.Submit(sc.task(1), res.done)
	sc.answer(t, errDown) // token withdrawn for the retry
	br.refuse.Store(1)
	fake.BlockUntil(1)
	fake.Advance(time.Second) // due: Allow refuses, the token is refunded
	err := res.get(t)
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason == nil || re.Reason.Error() != "breaker: too many probes" || !errors.Is(err, errDown) {
		t.Fatalf("done(%v), want the breaker's refusal", err)
	}
	closeAll(t, s)
	want := "[start false false false withdraw true refund]"
	if got := fmt.Sprint(bud.records); got != want {
		t.Fatalf("budget saw %s, want %s", got, want)
	}
}

// TestSchedulerCloseRefundsWaitingRetry checks that a task Close gives up
// on while it waits for a retry returns that retry's token, and that the
// Observer hears its call end for its context, as retry.Do's would.
func TestSchedulerCloseRefundsWaitingRetry(t *testing.T) {
	fake := clocktest.NewFake()
	bud := &trackingBudget{gateBudget{grant: true}}
	log := &eventLog{}
	p := noJitter(fake, 0)
	p.Budget, p.Observer, p.Operation = bud, log, "sync"
	sc := newScript()
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Policy: p})
	s.Submit(sc.task(1), res.done)
	s.Submit(sc.task(2), res.done)
	sc.answer(t, errDown)
	sc.answer(t, errDown)
	for s.Stats().Waiting != 2 {
		runtime.Gosched() // both wait for their retry, holding a token each
	}
	ctx := expired()
	if n, err := s.Close(ctx); n != 2 || !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Close = %d, %v", n, err)
	}
	for range 2 {
		err := res.get(t)
		var re *retry.Error
		if !errors.As(err, &re) || re.Attempts != 1 || !errors.Is(err, queue.ErrClosed) || !errors.Is(err, context.Canceled) || !errors.Is(err, errDown) {
			t.Fatalf("done(%v)", err)
		}
	}
	want := "[start false false false withdraw true start false false false withdraw true refund refund]"
	if got := fmt.Sprint(bud.records); got != want {
		t.Fatalf("budget saw %s, want %s", got, want)
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	ends := 0
	for _, e := range log.log {
		if e == "call end context after 1" {
			ends++
		}
	}
	if ends != 2 {
		t.Fatalf("events %v, want 2 call ends for the context", log.log)
	}
}

// TestSchedulerTaskMatchesDo runs the same failing operation through
// retry.Do and through a Scheduler under equal policies, and checks that
// the Observer, the Budget and the caller see the same things.
func TestSchedulerTaskMatchesDo(t *testing.T) {
	errs := []error{
		errDown,
		retry.After(errDown, 3*time.Second), // advice below the cap
		fmt.Errorf("reset: %w", errDown),
		errDown,
		retry.After(errDown, 10*time.Second), // advice above it: the call stops
	}
	policy := func(fake *clocktest.Fake) (*retry.Policy, *eventLog, *trackingBudget) {
		log, bud := &eventLog{}, &trackingBudget{gateBudget{grant: true}}
		p := noJitter(fake, len(errs)+1)
		p.Operation, p.Observer, p.Budget = "sync", log, bud
		p.MaxRetryAfter = 5 * time.Second
		p.Rand = rand.NewPCG(1, 2) // the advice's jitter
		return p, log, bud
	}
	// drive moves the fake clock over each of the waits between attempts,
	// marking them in the budget's log.
	drive := func(fake *clocktest.Fake, bud *trackingBudget) {
		for range len(errs) - 1 {
			fake.BlockUntil(1)
			bud.add("wait")
			fake.Advance(fake.Deadlines()[0])
		}
	}
	op := func(n *int) func(context.Context) error {
		return func(context.Context) error {
			*n++
			return errs[*n-1]
		}
	}

	fake := clocktest.NewFake()
	p, doLog, doBud := policy(fake)
	var doN int
	doErr := make(chan error, 1)
	go func() { doErr <- retry.Run(context.Background(), p, op(&doN)) }()
	drive(fake, doBud)
	want := <-doErr

	fake = clocktest.NewFake()
	p, sLog, sBud := policy(fake)
	var sN int
	res := newResult()
	s := queue.NewScheduler(queue.SchedulerConfig{Policy: p})
	s.Submit(op(&sN), res.done)
	drive(fake, sBud)
	got := res.get(t)
	closeAll(t, s)

	if got.Error() != want.Error() || !errors.Is(got, retry.ErrAdviceExceedsCap) {
		t.Fatalf("done(%v), retry.Run returned %v", got, want)
	}
	if g, w := fmt.Sprint(sLog.log), fmt.Sprint(doLog.log); g != w {
		t.Fatalf("observer saw\n%s\nretry.Run's saw\n%s", g, w)
	}
	if g, w := fmt.Sprint(sBud.records), fmt.Sprint(doBud.records); g != w {
		t.Fatalf("budget saw\n%s\nretry.Run's saw\n%s", g, w)
	}
	if !strings.Contains(fmt.Sprint(sLog.log), "retry #3 in 3.") {
		t.Fatalf("events %v: the advised wait of about 3s is missing", sLog.log)
	}
}

// TestSubmitKeyIsolatesHosts: tasks submitted with SubmitKey use their
// key's members of a keyed breaker group, so one host's failures open
// only its own breaker; the task's context carries the key. Tasks
// submitted with Submit share the default member.
func TestSubmitKeyIsolatesHosts(t *testing.T) {
	brs, err := keyed.NewBreakers(keyed.Config{}, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Policy: &retry.Policy{MaxAttempts: 1, Breaker: brs}})
	defer s.Close(context.Background())
	run := func(host string, fail bool) error {
		t.Helper()
		done := make(chan error, 1)
		task := func(ctx context.Context) error {
			if got := keyed.KeyFrom(ctx); got != host {
				return fmt.Errorf("task's context carries key %q, want %q", got, host)
			}
			if fail {
				return errors.New(host + " is down")
			}
			return nil
		}
		var ok bool
		if host == "" {
			ok = s.Submit(task, func(err error) { done <- err })
		} else {
			ok = s.SubmitKey(host, task, func(err error) { done <- err })
		}
		if !ok {
			t.Fatal("task refused")
		}
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second): // a hang guard
			t.Fatal("task never ended")
			return nil
		}
	}
	if err := run("https://a:443", true); err == nil {
		t.Fatal("failing task succeeded")
	}
	if err := run("https://a:443", false); !errors.Is(err, breaker.ErrOpen) {
		t.Fatalf("host a after its failure: %v, want breaker.ErrOpen", err)
	}
	if err := run("https://b:443", false); err != nil {
		t.Fatalf("healthy host b refused after host a failed: %v", err)
	}
	if err := run("", false); err != nil {
		t.Fatalf("unkeyed task refused after host a failed: %v", err)
	}
	if n := brs.Len(); n != 2 {
		t.Fatalf("%d keyed members, want 2 (a and b)", n)
	}
}

// TestSecondCloseWaitsForTheFirst: a second Close returns only once the
// first has finished, the done function of each task it abandons
// included, and returns (0, nil): the first reports what it abandoned.
func TestSecondCloseWaitsForTheFirst(t *testing.T) {
	fake := clocktest.NewFake()
	s := queue.NewScheduler(queue.SchedulerConfig{
		Workers: 1,
		Policy: &retry.Policy{
			MaxAttempts: retry.Unlimited,
			Backoff:     backoff.Constant{Interval: time.Hour},
			Clock:       fake,
		},
	})
	inDone, release := make(chan struct{}), make(chan struct{})
	var doneReturned atomic.Bool
	s.Submit(func(ctx context.Context) error { return errors.New("down") }, func(err error) {
		close(inDone)
		<-release // a done function that takes a while
		doneReturned.Store(true)
	})
	fake.BlockUntil(1) // the task waits for its retry
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	var firstN int
	var firstErr error
	first := make(chan struct{})
	go func() {
		firstN, firstErr = s.Close(expired)
		close(first)
	}()
	<-inDone
	type result struct {
		n            int
		err          error
		doneReturned bool
	}
	second := make(chan result, 1)
	go func() {
		n, err := s.Close(context.Background())
		second <- result{n, err, doneReturned.Load()}
	}()
	// Give a second Close that does not wait every chance to return.
	for range 1000 {
		runtime.Gosched()
		select {
		case r := <-second:
			close(release)
			<-first
			t.Fatalf("second Close returned (%d, %v) while the first was still calling the abandoned task's done function", r.n, r.err)
		default:
		}
	}
	close(release)
	<-first
	r := <-second
	if !r.doneReturned || r.n != 0 || r.err != nil {
		t.Fatalf("second Close = (%d, %v), the abandoned task's done had returned: %v; want (0, nil) after the first's done functions", r.n, r.err, r.doneReturned)
	}
	if firstN != 1 || !errors.Is(firstErr, queue.ErrClosed) {
		t.Fatalf("first Close = (%d, %v), want 1 abandoned and ErrClosed", firstN, firstErr)
	}
}

// TestOverloadedTaskIsPermanent: a task answered "overloaded, don't
// retry" is not retried and is counted as permanent, as a task failing
// with an error the Policy does not retry, not as exhausted.
func TestOverloadedTaskIsPermanent(t *testing.T) {
	obs := newRecObserver()
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Observer: obs})
	done := make(chan error, 1)
	var calls atomic.Int32
	s.Submit(func(context.Context) error {
		calls.Add(1)
		return retry.Overloaded(errors.New("503"))
	}, func(err error) { done <- err })
	select {
	case err := <-done:
		if !errors.Is(err, retry.ErrOverloaded) {
			t.Fatalf("task ended with %v, want retry.ErrOverloaded", err)
		}
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("task never ended")
	}
	s.Close(context.Background())
	if d, _ := obs.snapshot(); d[queue.DropPermanent] != 1 || d[queue.DropExhausted] != 0 {
		t.Fatalf("overloaded task counted as %v, want permanent", d)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("overloaded task ran %d times, want 1", n)
	}
}

// doneCtxPanics is a context whose Done panics.
type doneCtxPanics struct{ context.Context }

func (doneCtxPanics) Done() <-chan struct{} { panic("Done bug") }

// TestCloseWhoseCtxDonePanics (second outside review): a first Close
// whose ctx's Done panics changes nothing, so a later Close is the first
// and abandons the pending task, calling its done. (Before, the panic left
// the Scheduler closing with nobody to finish: every later Close waited
// for ever.)
func TestCloseWhoseCtxDonePanics(t *testing.T) {
	fake := clocktest.NewFake()
	s := queue.NewScheduler(queue.SchedulerConfig{
		Workers: 1,
		Policy:  &retry.Policy{MaxAttempts: retry.Unlimited, Backoff: backoff.Constant{Interval: time.Hour}, Clock: fake},
	})
	doneErr := make(chan error, 1)
	s.Submit(func(ctx context.Context) error { return errors.New("down") }, func(err error) { doneErr <- err })
	fake.BlockUntil(1) // the task waits for its retry
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("Close with a panicking Done did not panic")
			}
		}()
		s.Close(doneCtxPanics{context.Background()})
	}()
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	second := make(chan int, 1)
	go func() { n, _ := s.Close(expired); second <- n }()
	select {
	case n := <-second:
		if n != 1 {
			t.Fatalf("second Close abandoned %d tasks, want 1", n)
		}
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("second Close (its ctx expired) never returned")
	}
	select {
	case err := <-doneErr:
		if !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("done heard %v, want ErrClosed", err)
		}
	default:
		t.Fatal("the abandoned task's done was not called")
	}
}

// errCtxPanics is an ended context whose Err panics.
type errCtxPanics struct{ context.Context }

func (errCtxPanics) Err() error { panic("Err bug") }

// TestCloseWhoseCtxErrPanics: Close's ctx has ended and its Err panics:
// Close gives up all the same (cause context.Canceled), abandons the
// pending task and calls its done, and then the panic goes on.
func TestCloseWhoseCtxErrPanics(t *testing.T) {
	fake := clocktest.NewFake()
	s := queue.NewScheduler(queue.SchedulerConfig{
		Workers: 1,
		Policy:  &retry.Policy{MaxAttempts: retry.Unlimited, Backoff: backoff.Constant{Interval: time.Hour}, Clock: fake},
	})
	doneErr := make(chan error, 1)
	s.Submit(func(ctx context.Context) error { return errors.New("down") }, func(err error) { doneErr <- err })
	fake.BlockUntil(1)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	var r any
	func() {
		defer func() { r = recover() }()
		s.Close(errCtxPanics{expired})
	}()
	if r != "Err bug" {
		t.Fatalf("Close panicked with %v, want the context's", r)
	}
	select {
	case err := <-doneErr:
		if !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("done heard %v, want ErrClosed", err)
		}
	default:
		t.Fatal("the abandoned task's done was not called before the panic went on")
	}
	if n, err := s.Close(context.Background()); n != 0 || err != nil {
		t.Fatalf("a later Close = (%d, %v), want (0, nil)", n, err)
	}
}

// callEndPanics is an Observer whose CallEnd panics while armed.
type callEndPanics struct {
	retry.NopObserver
	armed atomic.Bool
}

func (o *callEndPanics) CallEnd(context.Context, retry.CallEnd) {
	if o.armed.Load() {
		panic("CallEnd bug")
	}
}

// TestCloseObserverPanicCallsEveryDone (second outside review): ending
// an abandoned task's call runs the Policy's Observer (CallEnd); when it
// panics, Close still calls the done of that task and of every other,
// then raises the panic. (Before, the panic left the loop: no done was
// called, though Stats counted the tasks abandoned.)
func TestCloseObserverPanicCallsEveryDone(t *testing.T) {
	fake := clocktest.NewFake()
	obs := &callEndPanics{}
	s := queue.NewScheduler(queue.SchedulerConfig{
		Workers: 1,
		Policy:  &retry.Policy{MaxAttempts: retry.Unlimited, Backoff: backoff.Constant{Interval: time.Hour}, Clock: fake, Observer: obs},
	})
	var dones atomic.Int32
	for range 2 {
		s.Submit(func(ctx context.Context) error { return errors.New("down") }, func(error) { dones.Add(1) })
	}
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Waiting != 2; { // both tasks wait for their retries
		if time.Now().After(deadline) { // a hang guard
			t.Fatalf("the tasks never both waited: %+v", s.Stats())
		}
		runtime.Gosched()
	}
	obs.armed.Store(true)
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	var r any
	func() {
		defer func() { r = recover() }()
		s.Close(expired)
	}()
	obs.armed.Store(false)
	if n := dones.Load(); n != 2 {
		t.Fatalf("%d of 2 abandoned tasks' done called (stats %+v)", n, s.Stats())
	}
	if r != "CallEnd bug" {
		t.Fatalf("Close panicked with %v, want the Observer's", r)
	}
}
