package queue_test

import (
	"context"
	"errors"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

// catchPanic runs f and returns the value it panicked with (nil: none).
func catchPanic(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// TestDeliverPanicDoesNotCrashOrLoseRecords: a deliver that panics (or
// calls runtime.Goexit) on one batch neither ends the program nor loses
// the batch: the only worker recovers, Stats.Panics counts it, the batch goes back to the buffer and
// the queue pauses for the Policy's backoff, as after a delivery that gave
// up; the next delivery sends the same records once, and Close leaves
// nothing behind (goleak in TestMain checks every goroutine ended).
// Before the fix the panic went on on the worker's goroutine and crashed
// the test binary.
func TestDeliverPanicDoesNotCrashOrLoseRecords(t *testing.T) {
	for _, mode := range []string{"panic", "goexit"} {
		t.Run(mode, func(t *testing.T) {
			fake := clocktest.NewFake()
			c := newCollector()
			p := noJitter(fake, 1)
			var first atomic.Bool
			q := queue.New(queue.Config[int]{Workers: 1, MaxBatch: 3, Linger: time.Hour, Policy: p}, func(ctx context.Context, b []int) error {
				if first.CompareAndSwap(false, true) {
					if mode == "goexit" {
						runtime.Goexit()
					}
					panic("boom")
				}
				return c.deliver(ctx, b)
			})
			defer closeNow(q)
			for i := 1; i <= 3; i++ {
				q.Offer(i)
			}
			// The pause after the panicking delivery (the worker may have
			// armed its linger timer first, while the batch filled).
			waitFor(t, "the pause", func() bool {
				d := fake.Deadlines()
				return len(d) == 1 && d[0] == time.Second
			})
			s := q.Stats()
			checkInvariant(t, s)
			if s.Panics != 1 || s.Buffered != 3 || s.InFlight != 0 || s.Delivered != 0 || s.DroppedFull != 0 || s.DroppedPermanent != 0 {
				t.Fatalf("after the panic: %+v; want the 3 records back in the buffer, 1 panic", s)
			}
			fake.Advance(time.Second)
			if got := c.next(t, nil); !slices.Equal(got, []int{1, 2, 3}) {
				t.Fatalf("redelivery %v, want [1 2 3]", got)
			}
			q.Offer(4)
			fake.BlockUntil(1) // the linger timer of record 4
			fake.Advance(time.Hour)
			if got := c.next(t, nil); !slices.Equal(got, []int{4}) {
				t.Fatalf("next delivery %v, want [4]", got)
			}
			closeAll(t, q)
			s = q.Stats()
			checkInvariant(t, s)
			if s.Offered != 4 || s.Delivered != 4 || s.Panics != 1 || s.Pending != 0 {
				t.Fatalf("final stats %+v; want 4 offered, 4 delivered once, 1 panic", s)
			}
		})
	}
}

// TestDeliverPanicReportedToBreaker: the attempt that panicked is a failed
// attempt for the Policy's Breaker (retry.Run reports it before the worker
// recovers), so a breaker that opens on one failure opens.
func TestDeliverPanicReportedToBreaker(t *testing.T) {
	fake := clocktest.NewFake()
	br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour, OpenJitter: -1, Clock: fake})
	p := noJitter(fake, 1)
	p.Breaker = br
	q := queue.New(queue.Config[int]{Workers: 1, Linger: -1, Policy: p}, func(context.Context, []int) error { panic("boom") })
	q.Offer(1)
	fake.BlockUntil(1) // paused after the panic
	if br.State() != breaker.Open {
		t.Fatalf("breaker %v, want open: the panicking attempt failed", br.State())
	}
	if s := q.Stats(); s.Panics != 1 || s.Buffered != 1 {
		t.Fatalf("stats %+v", s)
	}
	n, err := q.Close(expired())
	if n != 1 || !errors.Is(err, queue.ErrClosed) {
		t.Fatalf("Close = %d, %v; want the 1 record reported undelivered", n, err)
	}
}

// TestSizePanicLeavesQueueIntact: a panicking Config.Size reaches Offer's
// caller with nothing counted; the queue's lock and counts are intact and
// later records are delivered.
func TestSizePanicLeavesQueueIntact(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{MaxBatch: 2, MaxBatchBytes: 100, Linger: time.Hour, Policy: noJitter(fake, 0),
		Size: func(v int) int {
			if v < 0 {
				panic("bad record")
			}
			return 1
		}}, c.deliver)
	defer closeNow(q)
	q.Offer(1)
	if v := catchPanic(func() { q.Offer(-1) }); v != "bad record" {
		t.Fatalf("Offer's panic %v, want Size's", v)
	}
	s := q.Stats()
	checkInvariant(t, s)
	if s.Offered != 1 || s.Buffered != 1 {
		t.Fatalf("stats %+v after Size panicked", s)
	}
	q.Offer(2) // a full batch
	if got := c.next(t, nil); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("delivery %v", got)
	}
	closeAll(t, q)
}

// nowPanicClock is a Fake whose Now panics once armed, when called from
// the method named by from (default Offer): the goroutines of a Queue or
// Scheduler read the clock too, at times the test does not control.
type nowPanicClock struct {
	*clocktest.Fake
	from  string
	armed atomic.Bool
}

func (c *nowPanicClock) Now() time.Time {
	from := c.from
	if from == "" {
		from = ").Offer("
	}
	if c.armed.Load() && strings.Contains(string(debug.Stack()), from) && c.armed.CompareAndSwap(true, false) {
		panic("clock")
	}
	return c.Fake.Now()
}

func (c *nowPanicClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestOfferClockPanicUnlocks: a Clock that panics in Offer (which reads it
// with the queue's lock held, when the buffer starts filling) reaches
// Offer's caller without leaving the lock held: Stats, Offer and Close go
// on working, and the record Offer had buffered is delivered. Before the
// fix the lock stayed held and every later call blocked.
func TestOfferClockPanicUnlocks(t *testing.T) {
	clk := &nowPanicClock{Fake: clocktest.NewFake()}
	c := newCollector()
	q := queue.New(queue.Config[int]{MaxBatch: 2, Linger: -1, Clock: clk, Policy: &retry.Policy{MaxAttempts: 1}}, c.deliver)
	defer closeNow(q)
	clk.armed.Store(true)
	if v := catchPanic(func() { q.Offer(1) }); v != "clock" {
		t.Fatalf("Offer's panic %v, want the Clock's", v)
	}
	stats := make(chan queue.Stats, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); stats <- q.Stats() }()
	select {
	case s := <-stats:
		checkInvariant(t, s)
		if s.Offered != 1 {
			t.Fatalf("stats %+v", s)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
		t.Fatal("Stats blocked: Offer left the lock held")
	}
	wg.Wait()
	q.Offer(2)
	got := c.next(t, nil)
	if len(got) == 1 { // record 1 was sent alone, then 2
		got = append(got, c.next(t, nil)...)
	}
	if !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("deliveries %v, want 1 and 2", got)
	}
	closeAll(t, q)
}

// TestSubmitClockPanicUnlocks: a Clock that panics in Submit (read with the
// Scheduler's lock held, for the task's due time and its call's start)
// reaches Submit's caller without leaving the lock held or the task
// counted; later Submits run. Before the fix the lock stayed held.
func TestSubmitClockPanicUnlocks(t *testing.T) {
	clk := &nowPanicClock{Fake: clocktest.NewFake(), from: ").Submit("}
	s := queue.NewScheduler(queue.SchedulerConfig{Workers: 1, Clock: clk, Policy: &retry.Policy{MaxAttempts: 1}})
	defer closeNow(s)
	clk.armed.Store(true)
	if v := catchPanic(func() { s.Submit(func(context.Context) error { return nil }, nil) }); v != "clock" {
		t.Fatalf("Submit's panic %v, want the Clock's", v)
	}
	stats := make(chan queue.SchedulerStats, 1)
	go func() { stats <- s.Stats() }()
	select {
	case st := <-stats:
		if st.Submitted != 0 || st.Pending != 0 {
			t.Fatalf("stats %+v after Submit panicked", st)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
		t.Fatal("Stats blocked: Submit left the lock held")
	}
	res := newResult()
	if !s.Submit(func(context.Context) error { return nil }, res.done) {
		t.Fatal("Submit refused")
	}
	if err := res.get(t); err != nil {
		t.Fatalf("task: %v", err)
	}
	closeAll(t, s)
}

// panicObserver is an Observer that panics, while armed, on every call.
type panicObserver struct{ armed atomic.Bool }

func (o *panicObserver) QueueDropped(string, string, int) {
	if o.armed.Load() {
		panic("observer")
	}
}

func (o *panicObserver) QueueDepth(string, int) {
	if o.armed.Load() {
		panic("observer")
	}
}

// TestWorkerObserverPanicRecovered: an Observer that panics when a worker
// calls it (a batch taken, a delivery ended) does not end the worker or
// the program: the worker recovers, counts it in Stats.Panics and goes on
// with the round, so the batch is delivered once. Offer's own Observer
// call panics to Offer's caller, with the record buffered and counted.
// Before the fix the worker's panic crashed the test binary.
func TestWorkerObserverPanicRecovered(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	obs := &panicObserver{}
	obs.armed.Store(true)
	q := queue.New(queue.Config[int]{Workers: 1, Linger: -1, Policy: noJitter(fake, 1), Observer: obs}, c.deliver)
	defer closeNow(q)
	if v := catchPanic(func() { q.Offer(1) }); v != "observer" {
		t.Fatalf("Offer's panic %v, want the Observer's", v)
	}
	if got := c.next(t, nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("delivery %v", got)
	}
	if v := catchPanic(func() { q.Offer(2) }); v != "observer" {
		t.Fatalf("Offer's panic %v, want the Observer's", v)
	}
	if got := c.next(t, errDown); !slices.Equal(got, []int{2}) {
		t.Fatalf("delivery %v", got)
	}
	fake.BlockUntil(1) // paused after the give-up: the round went on past its Observer calls
	obs.armed.Store(false)
	fake.Advance(time.Second)
	if got := c.next(t, nil); !slices.Equal(got, []int{2}) {
		t.Fatalf("redelivery %v", got)
	}
	closeAll(t, q)
	s := q.Stats()
	checkInvariant(t, s)
	if s.Delivered != 2 || s.Offered != 2 || s.Panics < 4 {
		t.Fatalf("stats %+v; want 2 delivered once each, at least 4 Observer panics recovered (take and finish, twice)", s)
	}
}

// TestPauseBackoffPanicRecovered: a Policy Backoff that panics when the
// queue computes its pause after a delivery that gave up does not end the
// worker or leave the queue's lock held: the batch is back in the buffer,
// Stats.Panics counts the panic, and the next round delivers the batch.
func TestPauseBackoffPanicRecovered(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	var armed atomic.Bool
	p := &retry.Policy{MaxAttempts: 1, Clock: fake, Backoff: backoff.Func(func(n int, prev time.Duration) time.Duration {
		if armed.CompareAndSwap(true, false) {
			panic("backoff")
		}
		return time.Second
	})}
	q := queue.New(queue.Config[int]{Workers: 1, Linger: -1, Policy: p}, c.deliver)
	defer closeNow(q)
	armed.Store(true)
	q.Offer(1)
	if got := c.next(t, errDown); !slices.Equal(got, []int{1}) {
		t.Fatalf("delivery %v", got)
	}
	if got := c.next(t, nil); !slices.Equal(got, []int{1}) { // no pause: its computation panicked
		t.Fatalf("redelivery %v", got)
	}
	closeAll(t, q)
	s := q.Stats()
	checkInvariant(t, s)
	if s.Delivered != 1 || s.Panics != 1 || armed.Load() {
		t.Fatalf("stats %+v; want 1 delivered, 1 panic", s)
	}
}

// waitFor waits until cond holds, yielding meanwhile; it fails the test
// rather than hang if cond never holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	guard := time.Now().Add(10 * time.Second) // a hang guard, not a wait for the code under test
	for !cond() {
		if time.Now().After(guard) {
			t.Fatalf("timed out waiting for %s", what)
		}
		runtime.Gosched()
	}
}

// TestPanickingEveryRoundDoesNotSpin: a callback that panics on every
// round (here the pause's Backoff, after every delivery fails) does not
// spin the worker: after two panicking rounds in a row, each round waits
// panicPause (100 ms) first, so four panics take at least two pauses.
// Before, the worker went round as fast as it could.
func TestPanickingEveryRoundDoesNotSpin(t *testing.T) {
	p := &retry.Policy{MaxAttempts: 1, Clock: clocktest.NewFake(), Backoff: backoff.Func(func(int, time.Duration) time.Duration {
		panic("backoff")
	})}
	q := queue.New(queue.Config[int]{Workers: 1, Linger: -1, Policy: p}, func(context.Context, []int) error { return errDown })
	start := time.Now()
	q.Offer(1)
	waitFor(t, "four panicking rounds", func() bool { return q.Stats().Panics >= 4 })
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("four panicking rounds in %v: the worker spins (want a 100 ms pause before each round after the second)", d)
	}
	closeNow(q)
	checkInvariant(t, q.Stats())
}

// alwaysPanicNow is a Fake whose Now panics on every call once armed.
type alwaysPanicNow struct {
	*clocktest.Fake
	armed atomic.Bool
}

func (c *alwaysPanicNow) Now() time.Time {
	if c.armed.Load() {
		panic("clock")
	}
	return c.Fake.Now()
}

func (c *alwaysPanicNow) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestCloseEmptyQueueWithPanickingClockReturns: Close of a queue with
// nothing left to deliver returns even when the Clock panics on every
// call: the worker sees there is nothing to do before it reads the clock.
// Before, it went round (every 100 ms) for good and Close never returned.
func TestCloseEmptyQueueWithPanickingClockReturns(t *testing.T) {
	clk := &alwaysPanicNow{Fake: clocktest.NewFake()}
	q := queue.New(queue.Config[int]{Workers: 1, Clock: clk, Policy: &retry.Policy{MaxAttempts: 1}}, func(context.Context, []int) error { return nil })
	clk.armed.Store(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = q.Close(context.Background())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
		closeNow(q)
		t.Fatal("Close of an empty queue did not return with a Clock that always panics")
	}
}

// TestDeliverGoexitThenPausePanicKeepsAWorker: a deliver that calls
// runtime.Goexit, followed by a panic of the pause's Backoff while that
// Goexit unwinds, still leaves a worker in the dead one's place: the
// batch is delivered on the next try and Close delivers everything.
// Before, the recovered panic hid the Goexit, no worker was started, and
// the record was never delivered.
func TestDeliverGoexitThenPausePanicKeepsAWorker(t *testing.T) {
	var calls atomic.Int32
	delivered := make(chan []int, 4)
	p := &retry.Policy{MaxAttempts: 1, Clock: clocktest.NewFake(), Backoff: backoff.Func(func(int, time.Duration) time.Duration {
		panic("backoff")
	})}
	q := queue.New(queue.Config[int]{Workers: 1, Linger: -1, Policy: p}, func(_ context.Context, b []int) error {
		if calls.Add(1) == 1 {
			runtime.Goexit()
		}
		delivered <- slices.Clone(b)
		return nil
	})
	q.Offer(1)
	select {
	case got := <-delivered:
		if !slices.Equal(got, []int{1}) {
			t.Fatalf("delivered %v, want [1]", got)
		}
	case <-time.After(10 * time.Second): // a hang guard, not a wait for the code under test
		closeNow(q)
		t.Fatal("no worker delivered the batch after a Goexit and a pause panic")
	}
	closeAll(t, q)
	s := q.Stats()
	checkInvariant(t, s)
	if s.Delivered != 1 || s.Panics != 1 {
		t.Fatalf("stats %+v; want 1 delivered, 1 panic (the Goexit, counted once)", s)
	}
}
