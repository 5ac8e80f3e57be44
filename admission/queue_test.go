package admission_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

type result struct {
	name string
	p    admission.Permit
	err  error
}

// enqueue starts an Acquire that must queue, and returns once it has.
func enqueue(t *testing.T, l *admission.Limiter, ctx context.Context, name string, out chan<- result) {
	t.Helper()
	before := l.Queued()
	go func() {
		p, err := l.Acquire(ctx)
		out <- result{name, p, err}
	}()
	for l.Queued() == before {
		runtime.Gosched()
	}
}

func expect(t *testing.T, out <-chan result, name string, want error) result {
	t.Helper()
	r := <-out
	if r.name != name {
		t.Fatalf("%s answered first (err %v), want %s", r.name, r.err, name)
	}
	if (want == nil) != (r.err == nil) || (want != nil && !errors.Is(r.err, want)) {
		t.Fatalf("%s: err %v, want %v", name, r.err, want)
	}
	return r
}

func queued(t *testing.T, l *admission.Limiter, want int) {
	t.Helper()
	if got := l.Queued(); got != want {
		t.Fatalf("%d queued, want %d", got, want)
	}
}

func oneSlot(t *testing.T, f *clocktest.Fake, length int) (*admission.Limiter, admission.Permit) {
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1, QueueLength: length})
	return l, mustAcquire(t, l)
}

func TestQueueServesOldestFirstWhenNoQueueStands(t *testing.T) {
	f := clocktest.NewFake()
	l, hold := oneSlot(t, f, 0)
	out := make(chan result, 2)
	enqueue(t, l, context.Background(), "A", out)
	f.Advance(time.Millisecond)
	enqueue(t, l, context.Background(), "B", out)
	f.Advance(time.Millisecond)
	hold.Release()
	a := expect(t, out, "A", nil)
	queued(t, l, 1)
	a.p.Release()
	expect(t, out, "B", nil).p.Release()
	if l.InFlight() != 0 || l.Queued() != 0 {
		t.Fatalf("in flight %d, queued %d at the end", l.InFlight(), l.Queued())
	}
}

// The CoDel rule and adaptive LIFO on the fake clock: the queue has not
// been empty since 0, so from 100ms on a queue stands — newcomers may wait
// only the 5ms target and the newest is served first.
func TestQueueStandingServesNewestAndWaitsAtMostTarget(t *testing.T) {
	f := clocktest.NewFake()
	l, hold := oneSlot(t, f, 0)
	out := make(chan result, 4)
	enqueue(t, l, context.Background(), "A", out) // t=0: may wait the 100ms interval
	f.Advance(50 * time.Millisecond)
	enqueue(t, l, context.Background(), "B", out) // t=50ms: no queue stands yet: 100ms
	f.Advance(50 * time.Millisecond)
	expect(t, out, "A", admission.ErrQueueTimeout) // t=100ms
	queued(t, l, 1)
	enqueue(t, l, context.Background(), "C", out) // a queue stands: 5ms
	enqueue(t, l, context.Background(), "D", out)
	f.Advance(time.Millisecond)
	hold.Release() // t=101ms: LIFO
	d := expect(t, out, "D", nil)
	f.Advance(4 * time.Millisecond) // t=105ms: C has waited its 5ms
	expect(t, out, "C", admission.ErrQueueTimeout)
	queued(t, l, 1)
	d.p.Release()
	expect(t, out, "B", nil).p.Release()
	s := l.Stats()
	if s.Shed[admission.ReasonQueueTimeout] != 2 || s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("stats %+v: want 2 queue timeouts, nothing left", s)
	}
}

func TestQueueFullSheds(t *testing.T) {
	f := clocktest.NewFake()
	l, hold := oneSlot(t, f, 1)
	out := make(chan result, 1)
	enqueue(t, l, context.Background(), "A", out)
	if _, err := l.Acquire(context.Background()); !errors.Is(err, admission.ErrQueueFull) {
		t.Fatalf("Acquire with the queue full: err %v, want ErrQueueFull", err)
	}
	hold.Release()
	expect(t, out, "A", nil).p.Release()
}

func TestQueueDropsRequestWhoseCallerDeadlinePassed(t *testing.T) {
	cause := errors.New("the caller's deadline")
	t.Run("context ends", func(t *testing.T) {
		f := clocktest.NewFake()
		l, hold := oneSlot(t, f, 0)
		ctx, cancel := clock.WithTimeout(context.Background(), f, 3*time.Millisecond, cause)
		defer cancel()
		out := make(chan result, 1)
		enqueue(t, l, ctx, "A", out)
		f.Advance(3 * time.Millisecond)
		r := expect(t, out, "A", admission.ErrCallerGone)
		if !errors.Is(r.err, cause) || !errors.Is(r.err, admission.ErrShed) {
			t.Fatalf("err %v: want it to wrap the context's cause and ErrShed", r.err)
		}
		queued(t, l, 0)
		hold.Release()
	})
	t.Run("inbound deadline passed", func(t *testing.T) {
		// Only the retry.Inbound deadline says so: the context itself has
		// not ended. The request is dropped when a slot frees, and the
		// slot goes to the next.
		f := clocktest.NewFake()
		l, hold := oneSlot(t, f, 0)
		ctx := retry.WithInbound(context.Background(), retry.Inbound{Deadline: f.Now().Add(2 * time.Millisecond)})
		out := make(chan result, 2)
		enqueue(t, l, ctx, "A", out)
		enqueue(t, l, context.Background(), "B", out)
		f.Advance(3 * time.Millisecond)
		hold.Release() // decides both at once: they answer in any order
		got := map[string]result{}
		for range 2 {
			r := <-out
			got[r.name] = r
		}
		if !errors.Is(got["A"].err, admission.ErrCallerGone) || got["B"].err != nil {
			t.Fatalf("A: %v, B: %v; want A dropped (ErrCallerGone), B admitted", got["A"].err, got["B"].err)
		}
		got["B"].p.Release()
		if l.InFlight() != 0 {
			t.Fatalf("in flight %d", l.InFlight())
		}
	})
	t.Run("already gone", func(t *testing.T) {
		f := clocktest.NewFake()
		l, hold := oneSlot(t, f, 0)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := l.Acquire(ctx); !errors.Is(err, admission.ErrCallerGone) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v, want ErrCallerGone wrapping context.Canceled", err)
		}
		queued(t, l, 0)
		hold.Release()
	})
}

// TestAcquireShedsCallerAlreadyGone (outside review): a request whose
// context has ended when it arrives is shed at once (ErrCallerGone,
// wrapping the cause), also while slots are free and none is queued —
// the path that admits at once — and it takes no slot. (Before: only a
// request that queued was checked: below the limit, a caller whose
// deadline had passed, Stormguard-Deadline-Ms: 0 say, was admitted and
// served.)
func TestAcquireShedsCallerAlreadyGone(t *testing.T) {
	f := clocktest.NewFake()
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: 10}, Clock: f, ProbeInterval: -1})
	cause := errors.New("the caller's deadline")
	ctx, cancel := clock.WithTimeout(context.Background(), f, time.Millisecond, cause)
	defer cancel()
	f.Advance(time.Millisecond)
	_, err := l.Acquire(ctx)
	if !errors.Is(err, admission.ErrCallerGone) || !errors.Is(err, cause) || !errors.Is(err, admission.ErrShed) {
		t.Fatalf("err %v, want ErrCallerGone wrapping the context's cause", err)
	}
	if s := l.Stats(); s.InFlight != 0 || s.Queued != 0 || s.Shed[admission.ReasonCallerGone] != 1 {
		t.Fatalf("stats %+v, want nothing in flight or queued and one caller_gone shed", s)
	}
	mustAcquire(t, l).Release()
}

// Many goroutines through a small limit and queue on the real clock: the
// limit is never exceeded, every request is admitted or shed with a
// reason, and nothing is left in flight or queued.
func TestQueueConcurrentAdmissionKeepsLimit(t *testing.T) {
	const limit = 3
	l := newLimiter(t, admission.Config{Limit: admission.Fixed{N: limit}, QueueLength: 4})
	var active, over atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				ctx := context.Background()
				var cancel context.CancelFunc = func() {}
				if (g+i)%7 == 0 {
					ctx, cancel = context.WithCancel(ctx)
					if i%2 == 0 {
						cancel()
					}
				}
				p, err := l.Acquire(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, admission.ErrShed) {
						t.Errorf("err %v does not wrap ErrShed", err)
					}
					continue
				}
				if active.Add(1) > limit {
					over.Add(1)
				}
				runtime.Gosched()
				active.Add(-1)
				switch i % 3 {
				case 0:
					p.Release()
				case 1:
					p.Drop()
				default:
					p.Ignore()
				}
			}
		})
	}
	wg.Wait()
	if over.Load() > 0 {
		t.Fatalf("the limit of %d was exceeded %d times", limit, over.Load())
	}
	if l.InFlight() != 0 || l.Queued() != 0 {
		t.Fatalf("in flight %d, queued %d at the end", l.InFlight(), l.Queued())
	}
}
