package queue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/queue"
	"github.com/stormguard/stormguard/retry"
)

func TestBatchesByCountThenLinger(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{Capacity: 16, MaxBatch: 3, Linger: time.Second, Policy: noJitter(fake, 0)}, c.deliver)

	for i := 1; i <= 7; i++ {
		q.Offer(i)
	}
	if got := c.next(t, nil); !slices.Equal(got, []int{1, 2, 3}) {
		t.Fatalf("first batch %v", got)
	}
	if got := c.next(t, nil); !slices.Equal(got, []int{4, 5, 6}) {
		t.Fatalf("second batch %v", got)
	}
	// Record 7 lingers: the worker waits for the linger deadline, measured
	// from when the buffer became non-empty.
	fake.BlockUntil(1)
	if d := fake.Deadlines(); len(d) != 1 || d[0] != time.Second {
		t.Fatalf("deadlines %v, want [1s]", d)
	}
	c.none(t)
	fake.Advance(time.Second)
	if got := c.next(t, nil); !slices.Equal(got, []int{7}) {
		t.Fatalf("lingered batch %v", got)
	}
	closeAll(t, q)
	s := q.Stats()
	checkInvariant(t, s)
	if s.Offered != 7 || s.Delivered != 7 {
		t.Fatalf("stats %+v", s)
	}
}

func TestLingerMeasuredFromFirstRecord(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{MaxBatch: 100, Linger: 5 * time.Second, Policy: noJitter(fake, 0)}, c.deliver)
	defer closeNow(q)

	q.Offer(1)
	fake.BlockUntil(1)
	fake.Advance(3 * time.Second)
	q.Offer(2) // does not restart the linger
	fake.Advance(2*time.Second - time.Nanosecond)
	c.none(t)
	fake.Advance(time.Nanosecond)
	if got := c.next(t, nil); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("batch %v", got)
	}
}

func TestNegativeLingerSendsAtOnce(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{MaxBatch: 100, Linger: -1, Policy: noJitter(fake, 0)}, c.deliver)
	defer closeNow(q)
	q.Offer(1)
	if got := c.next(t, nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("batch %v", got)
	}
}

func TestMaxBatchBytes(t *testing.T) {
	fake := clocktest.NewFake()
	var got [][]string
	done := make(chan struct{}, 10)
	q := queue.New(queue.Config[string]{
		MaxBatch:      100,
		MaxBatchBytes: 10,
		Size:          func(s string) int { return len(s) },
		Linger:        time.Hour,
		Policy:        noJitter(fake, 0),
	}, func(_ context.Context, b []string) error {
		got = append(got, slices.Clone(b))
		done <- struct{}{}
		return nil
	})
	q.Offer("aaaa")
	q.Offer("bbbb")
	q.Offer("cccc") // 12 bytes buffered: a batch is due, of at most 10 bytes
	<-done
	q.Offer(strings.Repeat("x", 20)) // larger than a batch: sent alone
	<-done
	closeAll(t, q)
	want := [][]string{{"aaaa", "bbbb"}, {"cccc"}, {strings.Repeat("x", 20)}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("batches %q, want %q", got, want)
	}
}

func TestDropOldestWhenFull(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	obs := newRecObserver()
	q := queue.New(queue.Config[int]{Name: "telemetry", Capacity: 4, MaxBatch: 2, Linger: -1, Policy: noJitter(fake, 0), Observer: obs}, c.deliver)

	q.Offer(1)
	// The worker takes [1] and blocks in the delivery: the buffer is free.
	first := <-c.calls
	for i := 2; i <= 11; i++ {
		if !q.Offer(i) {
			t.Fatalf("Offer(%d) = false under DropOldest", i)
		}
	}
	s := q.Stats()
	checkInvariant(t, s)
	if s.Buffered != 4 || s.InFlight != 1 || s.DroppedFull != 6 {
		t.Fatalf("stats %+v", s)
	}
	first.reply <- nil
	var delivered []int
	for len(delivered) < 4 {
		delivered = append(delivered, c.next(t, nil)...)
	}
	if !slices.Equal(delivered, []int{8, 9, 10, 11}) {
		t.Fatalf("delivered %v, want the newest records", delivered)
	}
	closeAll(t, q)
	s = q.Stats()
	checkInvariant(t, s)
	if s.Delivered != 5 || s.DroppedFull != 6 {
		t.Fatalf("stats %+v", s)
	}
	dropped, _ := obs.snapshot()
	if dropped[queue.DropFull] != 6 || !obs.names["telemetry"] {
		t.Fatalf("observer %v %v", dropped, obs.names)
	}
}

func TestDropNewestWhenFull(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{Capacity: 3, MaxBatch: 3, Linger: -1, Overflow: queue.DropNewest, Policy: noJitter(fake, 0)}, c.deliver)

	q.Offer(1)
	first := <-c.calls
	for i := 2; i <= 4; i++ {
		if !q.Offer(i) {
			t.Fatalf("Offer(%d) refused with room", i)
		}
	}
	for i := 5; i <= 9; i++ {
		if q.Offer(i) {
			t.Fatalf("Offer(%d) accepted when full", i)
		}
	}
	first.reply <- nil
	if got := c.next(t, nil); !slices.Equal(got, []int{2, 3, 4}) {
		t.Fatalf("delivered %v, want the oldest records", got)
	}
	closeAll(t, q)
	s := q.Stats()
	checkInvariant(t, s)
	if s.Offered != 9 || s.Delivered != 4 || s.DroppedFull != 5 {
		t.Fatalf("stats %+v", s)
	}
}

func TestPermanentRejectionDroppedNotRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy func(*retry.Policy)
		err    error
	}{
		{"Permanent", func(*retry.Policy) {}, retry.Permanent(errors.New("400 bad request"))},
		{"Classify", func(p *retry.Policy) { p.Classify = func(error) bool { return false } }, errors.New("rejected")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktest.NewFake()
			c := newCollector()
			obs := newRecObserver()
			p := noJitter(fake, 0)
			tc.policy(p)
			q := queue.New(queue.Config[int]{MaxBatch: 2, Linger: -1, Policy: p, Observer: obs}, c.deliver)
			q.Offer(1)
			q.Offer(2)
			batch := c.next(t, tc.err)
			rest := len(batch)
			for rest < 2 { // 1 and 2 may come as one batch or two
				rest += len(c.next(t, nil))
			}
			closeAll(t, q)
			s := q.Stats()
			checkInvariant(t, s)
			if s.DroppedPermanent != uint64(len(batch)) || s.Delivered != uint64(2-len(batch)) {
				t.Fatalf("stats %+v after rejecting %v", s, batch)
			}
			if d, _ := obs.snapshot(); d[queue.DropPermanent] != len(batch) {
				t.Fatalf("observer drops %v", d)
			}
		})
	}
}

func TestCloseFlushesWithoutWaitingForLinger(t *testing.T) {
	fake := clocktest.NewFake()
	var got []int
	q := queue.New(queue.Config[int]{MaxBatch: 2, Linger: time.Hour, Policy: noJitter(fake, 0)}, func(_ context.Context, b []int) error {
		got = append(got, b...)
		return nil
	})
	for i := 1; i <= 5; i++ {
		q.Offer(i)
	}
	closeAll(t, q)
	if !slices.Equal(got, seq(1, 5)) {
		t.Fatalf("delivered %v", got)
	}
	if q.Offer(6) {
		t.Fatal("Offer after Close accepted")
	}
	s := q.Stats()
	checkInvariant(t, s)
	if s.Rejected != 1 || s.Offered != 5 {
		t.Fatalf("stats %+v", s)
	}
	if n, err := q.Close(context.Background()); n != 0 || err != nil {
		t.Fatalf("second Close = %d, %v", n, err)
	}
}

func TestCloseExpiredContextReturnsRemaining(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	obs := newRecObserver()
	q := queue.New(queue.Config[int]{Capacity: 100, MaxBatch: 10, Workers: 2, Linger: -1, Policy: noJitter(fake, 0), Observer: obs}, c.deliver)
	for i := 1; i <= 50; i++ {
		q.Offer(i)
	}
	// Both workers are inside a delivery that never answers.
	<-c.calls
	<-c.calls
	ctx := expired()
	n, err := q.Close(ctx)
	if n != 50 {
		t.Fatalf("remaining %d, want 50", n)
	}
	if !errors.Is(err, queue.ErrClosed) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v", err)
	}
	s := q.Stats()
	checkInvariant(t, s)
	if s.Pending != 50 || s.Delivered != 0 {
		t.Fatalf("stats %+v", s)
	}
	if d, depths := obs.snapshot(); d[queue.DropClosed] != 50 || depths[len(depths)-1] != 50 {
		t.Fatalf("observer %v %v", d, depths)
	}
}

func TestCloseDeadlineDuringOutage(t *testing.T) {
	fake := clocktest.NewFake()
	q := queue.New(queue.Config[int]{MaxBatch: 10, Linger: -1, Policy: noJitter(fake, 0)}, func(context.Context, []int) error {
		return errDown
	})
	for i := 1; i <= 25; i++ {
		q.Offer(i)
	}
	fake.BlockUntil(1) // the worker waits between retries
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan int)
	go func() {
		n, _ := q.Close(ctx)
		res <- n
	}()
	// Close keeps retrying while its context lasts.
	fake.Advance(time.Second)
	fake.BlockUntil(1)
	cancel()
	if n := <-res; n != 25 {
		t.Fatalf("remaining %d, want 25", n)
	}
	checkInvariant(t, q.Stats())
}

func TestRetryAfterPausesQueue(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	// One attempt per delivery: a failure gives up at once, the batch goes
	// back to the buffer and the queue pauses.
	q := queue.New(queue.Config[int]{MaxBatch: 2, Linger: -1, Policy: noJitter(fake, 1)}, c.deliver)
	defer closeNow(q)

	q.Offer(1)
	c.next(t, retry.After(errDown, 5*time.Second))
	fake.BlockUntil(1)
	// The advice is jittered upwards by at most a tenth, as in retry.Do.
	d := fake.Deadlines()
	if len(d) != 1 || d[0] < 5*time.Second || d[0] > 5500*time.Millisecond {
		t.Fatalf("pause %v, want the advised 5s plus at most 10%%", d)
	}
	// A full batch wakes the worker, which must pause again. Only once it
	// has set its timer anew may the clock move: a worker that read the
	// clock before an Advance and set its timer after it would count the
	// pause from the later time and miss the end the test advances to
	// (the "no delivery" flake under load).
	armed := fake.Armed()
	q.Offer(2)
	fake.BlockUntilArmed(armed + 1)
	fake.Advance(d[0] - time.Nanosecond)
	c.none(t)
	fake.Advance(time.Nanosecond)
	if got := c.next(t, errDown); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("redelivery %v", got)
	}
	// Without advice the pause is the Policy's backoff for the second
	// consecutive failure (2s with this policy).
	fake.BlockUntil(1)
	if d := fake.Deadlines(); len(d) != 1 || d[0] != 2*time.Second {
		t.Fatalf("pause %v, want 2s", d)
	}
	fake.Advance(2 * time.Second)
	if got := c.next(t, nil); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("redelivery %v", got)
	}
}

// TestOverloadedGiveUpPauses: a collector answering "overloaded, don't
// retry" (retry.Overloaded, what httpretry and grpcretry make of the
// overload marker) ends the delivery at once, and the queue pauses before
// it sends the batch again, as after any delivery that gave up: for the
// backoff, or for the server's Retry-After when it sent one. It used to
// send the same batch again at once, in a loop, with the clock stopped.
func TestOverloadedGiveUpPauses(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		min, max time.Duration
	}{
		{"backoff", retry.Overloaded(errDown), time.Second, time.Second},
		{"advice", retry.Overloaded(retry.After(errDown, 5*time.Second)), 5 * time.Second, 5500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktest.NewFake()
			c := newCollector()
			q := queue.New(queue.Config[int]{Linger: -1, Policy: noJitter(fake, 3)}, c.deliver)
			defer closeNow(q)
			q.Offer(1)
			c.next(t, tc.err)
			paused := make(chan struct{})
			go func() { fake.BlockUntil(1); close(paused) }()
			select {
			case cl := <-c.calls:
				cl.reply <- nil
				t.Fatalf("batch %v sent again at once after an overloaded answer, with the clock stopped", cl.batch)
			case <-paused:
			}
			if d := fake.Deadlines(); len(d) != 1 || d[0] < tc.min || d[0] > tc.max {
				t.Fatalf("pause %v, want within [%v, %v]", d, tc.min, tc.max)
			}
			c.none(t)
			fake.Advance(fake.Deadlines()[0])
			if got := c.next(t, nil); !slices.Equal(got, []int{1}) {
				t.Fatalf("redelivery %v", got)
			}
		})
	}
}

// TestPauseAdviceFollowsPolicy checks that the pause after a give-up
// applies Policy.MaxRetryAfter as retry.Do does: advice above the cap
// gives a pause spread in [0.9·cap, cap] (with this seed, below the cap:
// queues told the same large value do not all resume at once), and a
// negative cap ignores it.
func TestPauseAdviceFollowsPolicy(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cap      time.Duration
		min, max time.Duration
	}{
		{"capped", 3 * time.Second, 2700 * time.Millisecond, 3*time.Second - time.Millisecond},
		{"ignored", -1, time.Second, time.Second}, // the backoff's first step
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clocktest.NewFake()
			c := newCollector()
			p := noJitter(fake, 1)
			p.MaxRetryAfter = tc.cap
			p.Rand = rand.NewPCG(1, 2)
			q := queue.New(queue.Config[int]{Linger: -1, Policy: p}, c.deliver)
			defer closeNow(q)
			q.Offer(1)
			c.next(t, retry.After(errDown, time.Minute))
			fake.BlockUntil(1)
			if d := fake.Deadlines(); len(d) != 1 || d[0] < tc.min || d[0] > tc.max {
				t.Fatalf("pause %v, want within [%v, %v]", d, tc.min, tc.max)
			}
		})
	}
}

// TestPauseGrowsUntilSuccess checks that the pause grows with each
// consecutive delivery that gives up and starts over after a success.
func TestPauseGrowsUntilSuccess(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{Linger: -1, Policy: noJitter(fake, 1)}, c.deliver)
	defer closeNow(q)
	pause := func(want time.Duration) {
		t.Helper()
		fake.BlockUntil(1)
		if d := fake.Deadlines(); len(d) != 1 || d[0] != want {
			t.Fatalf("pause %v, want %v", d, want)
		}
		fake.Advance(want)
	}
	q.Offer(1)
	c.next(t, errDown)
	pause(time.Second)
	c.next(t, errDown)
	pause(2 * time.Second)
	c.next(t, errDown)
	pause(4 * time.Second)
	c.next(t, nil)
	q.Offer(2)
	c.next(t, errDown)
	pause(time.Second)
	if got := c.next(t, nil); !slices.Equal(got, []int{2}) {
		t.Fatalf("redelivery %v", got)
	}
}

func TestRetryAfterHonouredWithinDelivery(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{Linger: -1, Policy: noJitter(fake, 0)}, c.deliver)
	defer closeNow(q)
	q.Offer(1)
	c.next(t, retry.After(errDown, 20*time.Second))
	fake.BlockUntil(1)
	if d := fake.Deadlines(); len(d) != 1 || d[0] < 20*time.Second || d[0] > 22*time.Second {
		t.Fatalf("retry wait %v, want 20s plus at most 10%%", d)
	}
}

// openBreaker refuses every attempt.
type openBreaker struct{ asked chan struct{} }

var errOpen = errors.New("breaker: open")

func (b openBreaker) Allow() (func(error), error) {
	select {
	case b.asked <- struct{}{}:
	default:
	}
	return nil, errOpen
}
func (openBreaker) Ready() error { return errOpen }

func TestOpenBreakerRequeuesAndPauses(t *testing.T) {
	fake := clocktest.NewFake()
	p := noJitter(fake, 0)
	b := openBreaker{asked: make(chan struct{}, 1)}
	p.Breaker = b
	calls := 0
	q := queue.New(queue.Config[int]{Capacity: 5, MaxBatch: 5, Linger: -1, Policy: p}, func(context.Context, []int) error {
		calls++
		return nil
	})
	for i := 1; i <= 3; i++ {
		q.Offer(i)
	}
	<-b.asked
	fake.BlockUntil(1) // paused 1s; the batch is back in the buffer
	if d := fake.Deadlines(); d[0] != time.Second {
		t.Fatalf("pause %v", d)
	}
	// The batch went back to the oldest end: new records evict it first.
	for i := 4; i <= 7; i++ {
		q.Offer(i)
	}
	s := q.Stats()
	checkInvariant(t, s)
	if s.Buffered != 5 || s.DroppedFull != 2 {
		t.Fatalf("stats %+v", s)
	}
	closeNow(q)
	if calls != 0 {
		t.Fatalf("deliver called %d times through an open breaker", calls)
	}
}

func TestRequeueDropNewestKeepsFailedBatch(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{Capacity: 4, MaxBatch: 2, Linger: -1, Overflow: queue.DropNewest, Policy: noJitter(fake, 1)}, c.deliver)
	defer closeNow(q)
	q.Offer(1)
	q.Offer(2)
	first := <-c.calls // [1] or [1 2]
	for i := 3; i <= 8; i++ {
		q.Offer(i)
	}
	first.reply <- errDown // gives up at once (MaxAttempts 1): requeued
	fake.BlockUntil(1)     // the pause, armed once the batch is back
	fake.Advance(time.Second)
	var got []int
	for len(got) < 4 {
		got = append(got, c.next(t, nil)...)
	}
	// The failed batch is older than anything buffered, so under
	// DropNewest it stays and the newest buffered records make room.
	if !slices.Equal(got[:len(first.batch)], first.batch) || !slices.Equal(got, seq(1, 4)) {
		t.Fatalf("delivered %v after failing %v", got, first.batch)
	}
	s := q.Stats()
	checkInvariant(t, s)
	if s.DroppedFull != 4 {
		t.Fatalf("stats %+v", s)
	}
}

func TestWorkersBoundInFlight(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{Capacity: 10, MaxBatch: 5, Workers: 3, Linger: -1, Policy: noJitter(fake, 0)}, c.deliver)
	var held []call
	next := 1
	for len(held) < 3 { // each worker takes a batch and blocks in delivery
		for range 5 {
			q.Offer(next)
			next++
		}
		held = append(held, <-c.calls)
	}
	for ; next <= 100; next++ {
		q.Offer(next)
		s := q.Stats()
		checkInvariant(t, s)
		if s.Buffered > 10 || s.InFlight > 15 {
			t.Fatalf("memory not bounded: %+v", s)
		}
	}
	c.none(t) // no fourth delivery: every worker is busy
	s := q.Stats()
	if s.Buffered != 10 || s.DroppedFull != 100-s.InFlight-10 {
		t.Fatalf("stats %+v", s)
	}
	for _, cl := range held {
		cl.reply <- nil
	}
	go func() {
		for cl := range c.calls {
			cl.reply <- nil
		}
	}()
	closeAll(t, q)
	close(c.calls)
	s = q.Stats()
	checkInvariant(t, s)
	if s.Pending != 0 || s.Offered != 100 || s.Delivered != 100-s.DroppedFull {
		t.Fatalf("stats %+v", s)
	}
}

func TestConfigValidate(t *testing.T) {
	bad := []queue.Config[int]{
		{Capacity: -1}, {Workers: -1}, {MaxBatch: -1}, {MaxBatchBytes: -1},
		{MaxBatchBytes: 10}, {Overflow: 7},
	}
	for _, c := range bad {
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "queue: ") {
			t.Errorf("Validate(%+v) = %v", c, err)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%+v) did not panic", c)
				}
			}()
			queue.New(c, func(context.Context, []int) error { return nil })
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("New with nil deliver did not panic")
		}
	}()
	queue.New[int](queue.Config[int]{}, nil)
}

func TestZeroConfigWorks(t *testing.T) {
	var got []int
	q := queue.New(queue.Config[int]{}, func(_ context.Context, b []int) error {
		got = append(got, b...)
		return nil
	})
	for i := range 3000 {
		q.Offer(i)
	}
	closeAll(t, q)
	s := q.Stats()
	checkInvariant(t, s)
	if s.Delivered+s.DroppedFull != 3000 || len(got) != int(s.Delivered) {
		t.Fatalf("stats %+v, got %d", s, len(got))
	}
	if s.Buffered+s.InFlight != 0 || uint64(len(got)) < queue.DefaultCapacity {
		t.Fatalf("stats %+v", s)
	}
}

type record struct{ id int }

func TestOfferDoesNotAllocate(t *testing.T) {
	fake := clocktest.NewFake()
	q := queue.New(queue.Config[*record]{Capacity: 64, MaxBatch: 16, Linger: time.Hour, Policy: noJitter(fake, 0)}, func(context.Context, []*record) error {
		return nil
	})
	defer closeNow(q)
	r := &record{id: 1}
	if n := testing.AllocsPerRun(1000, func() { q.Offer(r) }); n != 0 {
		t.Fatalf("Offer allocates %v times per call", n)
	}
}

func TestConfigClockDrivesDeliveryRetries(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	p := &retry.Policy{Backoff: noJitter(nil, 0).Backoff} // no Clock of its own
	q := queue.New(queue.Config[int]{Linger: -1, Clock: fake, Policy: p}, c.deliver)
	defer closeNow(q)
	q.Offer(1)
	c.next(t, errDown)
	fake.BlockUntil(1) // the retry waits on the queue's clock
	if d := fake.Deadlines(); d[0] != time.Second {
		t.Fatalf("retry wait %v", d)
	}
	fake.Advance(time.Second)
	if got := c.next(t, nil); !slices.Equal(got, []int{1}) {
		t.Fatalf("redelivery %v", got)
	}
	if p.Clock != nil {
		t.Fatal("the caller's Policy was modified")
	}
}

// TestNegativeSizeCountsAsZero: a Size below zero counts as 0 rather than
// lowering the buffered byte count, so a later record that fills
// MaxBatchBytes still sends the batch at once. Before the fix the negative
// size hid the full batch until the linger time.
func TestNegativeSizeCountsAsZero(t *testing.T) {
	fake := clocktest.NewFake()
	c := newCollector()
	q := queue.New(queue.Config[int]{MaxBatch: 100, MaxBatchBytes: 10, Linger: time.Hour, Policy: noJitter(fake, 0),
		Size: func(v int) int { return v }}, c.deliver)
	defer closeNow(q)
	q.Offer(-100)
	q.Offer(10)
	if got := c.next(t, nil); !slices.Equal(got, []int{-100, 10}) {
		t.Fatalf("delivery %v, want [-100 10] sent as soon as 10 bytes are buffered", got)
	}
	closeAll(t, q)
}
