package throttle

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// tinyRate returns an enabled Adaptive on a fake clock whose bucket is
// empty and whose fill rate is rate, however small: the state a tiny
// MinFillRate (or a huge backlog of waiters) leads to.
func tinyRate(t *testing.T, rate float64) (*Adaptive, *clocktest.Fake) {
	t.Helper()
	clk := clocktest.NewFakeAt(time.Unix(100, 0))
	a := NewAdaptive(AdaptiveConfig{Clock: clk})
	a.record(errTestOverload{})
	a.mu.Lock()
	a.tokens, a.fillRate = 0, rate
	a.mu.Unlock()
	return a, clk
}

type errTestOverload struct{}

func (errTestOverload) Error() string  { return "overloaded" }
func (errTestOverload) Overload() bool { return true }

// TestAdaptiveTinyRateWaitSaturates (issue 31 item 22): at a fill rate so
// small that the wait for one token is beyond math.MaxInt64 nanoseconds,
// the wait saturates instead of overflowing to a negative duration that
// lets the attempt through at once: under a deadline it is refused, without
// one it waits (until its context ends).
func TestAdaptiveTinyRateWaitSaturates(t *testing.T) {
	for _, rate := range []float64{1e-11, 1e-300, math.SmallestNonzeroFloat64} {
		a, clk := tinyRate(t, rate)
		ctx, cancel := clock.WithTimeout(context.Background(), clk, time.Hour, nil)
		_, err := a.Acquire(ctx, false)
		cancel()
		if !errors.Is(err, ErrWaitTooLong) {
			t.Fatalf("rate %v under a 1h deadline: %v, want ErrWaitTooLong", rate, err)
		}

		ctx, cancel = context.WithCancel(context.Background())
		got := make(chan error, 1)
		go func() {
			_, err := a.Acquire(ctx, false)
			got <- err
		}()
		clk.BlockUntil(1)
		if d := clk.Deadlines(); len(d) != 1 || d[0] < 100*365*24*time.Hour {
			t.Fatalf("rate %v: the wait is %v, want it saturated", rate, d)
		}
		cancel()
		if err := <-got; !errors.Is(err, context.Canceled) {
			t.Fatalf("rate %v: %v, want the context's error", rate, err)
		}
	}
}

// TestAdaptiveTinyMinFillRateRefused (issue 31 item 22): Validate refuses
// a MinFillRate below the floor, naming the field and the floor.
func TestAdaptiveTinyMinFillRateRefused(t *testing.T) {
	for _, r := range []float64{1e-11, 1e-7, math.SmallestNonzeroFloat64} {
		err := AdaptiveConfig{MinFillRate: r}.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "MinFillRate") || !strings.Contains(err.Error(), "1e-06") {
			t.Errorf("MinFillRate %v: %v, want ErrInvalidConfig naming the field and the floor", r, err)
		}
	}
	if err := (AdaptiveConfig{MinFillRate: 1e-6}).Validate(); err != nil {
		t.Errorf("MinFillRate 1e-6: %v", err)
	}
}

// TestAdaptiveCancelledWaiterClampsToCapacity (issue 31 item 23): a waiter
// reserved its token at a slow rate; the rate then rose and the bucket
// refilled to its capacity, reservation included. When the waiter's
// context ends, the token it hands back must not lift the bucket above
// its capacity (it made 101 of 100).
func TestAdaptiveCancelledWaiterClampsToCapacity(t *testing.T) {
	a, clk := tinyRate(t, 0.5)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := a.Acquire(ctx, false)
		got <- err
	}()
	clk.BlockUntil(1) // reserved: tokens -1, waiting 2 s
	a.mu.Lock()
	a.setRate(clk.Now(), 100) // answers raised the rate: 100/s, capacity 100
	a.mu.Unlock()
	clk.Advance(1500 * time.Millisecond) // before the waiter's timer
	a.mu.Lock()
	a.refill(clk.Now()) // as the next attempt or answer does
	full, capacity := a.tokens, a.capacity
	a.mu.Unlock()
	if full != capacity {
		t.Fatalf("test premise: the bucket holds %v of %v", full, capacity)
	}
	cancel()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v, want the context's error", err)
	}
	if st := a.Stats(); st.Tokens > capacity {
		t.Fatalf("the bucket holds %v tokens, above its capacity %v", st.Tokens, capacity)
	}
}

// panicClock is a fake clock whose Now panics while armed.
type panicClock struct {
	*clocktest.Fake
	armed bool
}

func (c *panicClock) Now() time.Time {
	if c.armed {
		panic("clock: boom")
	}
	return c.Fake.Now()
}

// TestAdaptivePanickingClockDoesNotWedge (sweep: callback panics): a
// Clock whose Now panics during Acquire or an answer must not leave the
// limiter's mutex locked, which would stop every later attempt.
func TestAdaptivePanickingClockDoesNotWedge(t *testing.T) {
	clk := &panicClock{Fake: clocktest.NewFakeAt(time.Unix(100, 0))}
	a := NewAdaptive(AdaptiveConfig{Clock: clk})
	a.record(errTestOverload{}) // enabled: Acquire reads the clock
	for name, f := range map[string]func(){
		"Acquire": func() { _, _ = a.Acquire(context.Background(), false) },
		"answer":  func() { a.record(nil) },
	} {
		func() {
			clk.armed = true
			defer func() {
				clk.armed = false
				if v := recover(); v == nil {
					t.Fatalf("%s: the clock's panic did not go on", name)
				}
			}()
			f()
		}()
		if !a.mu.TryLock() {
			t.Fatalf("%s: a panicking clock left the limiter locked", name)
		}
		a.mu.Unlock()
	}
}
