package budget_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

func checkAvailable(t *testing.T, b interface{ Available() float64 }, want float64) {
	t.Helper()
	if got := b.Available(); got != want {
		t.Fatalf("Available() = %v, want %v", got, want)
	}
}

func TestWindowDefaults(t *testing.T) {
	clk := clocktest.NewFake()
	w := budget.NewWindow(budget.WindowConfig{Clock: clk})
	// No traffic: the floor of 10 retries/s over 10s.
	checkAvailable(t, w, 100)
	if got := withdrawN(w, 150, errDown); got != 100 {
		t.Fatalf("granted %d retries with no requests, want 100 (the floor)", got)
	}
	// 1000 requests add 20%: 200 more. The outcome does not matter.
	for i := range 1000 {
		var err error
		if i%2 == 0 {
			err = errDown
		}
		w.Record(false, err)
	}
	w.Record(true, nil) // retry attempts are not requests
	checkAvailable(t, w, 200)
	if got := withdrawN(w, 250, errDown); got != 200 {
		t.Fatalf("granted %d more retries after 1000 requests, want 200", got)
	}
	want := budget.Stats{Requests: 1000, Retries: 1, Deposits: 1000, Granted: 300, Refused: 100}
	if got := w.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func TestWindowSlides(t *testing.T) {
	clk := clocktest.NewFake()
	// 10 buckets of 1s; 50% of requests; no floor.
	w := budget.NewWindow(budget.WindowConfig{Clock: clk, Ratio: 0.5, MinRetriesPerSecond: -1})
	checkAvailable(t, w, 0)
	if w.Withdraw(errDown) {
		t.Fatal("retry granted with no requests and no floor")
	}
	for range 10 {
		w.Record(false, nil) // at 0s: 10 requests → 5 retries
	}
	clk.Advance(4500 * time.Millisecond)
	for range 4 {
		w.Record(false, nil) // at 4.5s: 14 requests → 7 retries
	}
	if got := withdrawN(w, 3, errDown); got != 3 {
		t.Fatalf("granted %d, want 3", got)
	}
	checkAvailable(t, w, 4)
	clk.Advance(5499 * time.Millisecond) // 9.999s: the first bucket is still in
	checkAvailable(t, w, 4)
	clk.Advance(time.Millisecond) // 10s: the 10 requests at 0s leave
	checkAvailable(t, w, 0)       // 4 requests → 2 allowed, 3 used
	clk.Advance(4 * time.Second)  // 14s: still in
	checkAvailable(t, w, 0)
	clk.Advance(time.Second) // 15s: the 4.5s bucket leaves too
	checkAvailable(t, w, 0)
	for range 2 {
		w.Record(false, nil)
	}
	checkAvailable(t, w, 1)
	clk.Advance(time.Hour) // a long silence forgets everything
	checkAvailable(t, w, 0)
	for range 2 {
		w.Record(false, nil)
	}
	checkAvailable(t, w, 1)
}

func TestWindowNeverExceedsAFractionalShare(t *testing.T) {
	// 0.1 × 30 is 3.0000000000000004 in float64; the budget must still
	// allow exactly 3, and 0.6 of a retry is no retry.
	clk := clocktest.NewFake()
	w := budget.NewWindow(budget.WindowConfig{Clock: clk, Ratio: 0.1, MinRetriesPerSecond: -1})
	for range 30 {
		w.Record(false, nil)
	}
	if got := withdrawN(w, 10, errDown); got != 3 {
		t.Fatalf("granted %d retries for 30 requests at 10%%, want 3", got)
	}
	w = budget.NewWindow(budget.WindowConfig{Clock: clk, Ratio: 0.2, MinRetriesPerSecond: -1})
	for range 3 {
		w.Record(false, nil)
	}
	if w.Withdraw(errDown) {
		t.Fatal("granted a retry for 0.6 of one")
	}
}

func TestWindowFloorOnly(t *testing.T) {
	clk := clocktest.NewFake()
	w := budget.NewWindow(budget.WindowConfig{Clock: clk, Window: 2 * time.Second, Buckets: 4, Ratio: -1, MinRetriesPerSecond: 1.5})
	for range 100 {
		w.Record(false, nil)
	}
	if got := withdrawN(w, 10, errDown); got != 3 { // 1.5/s × 2s
		t.Fatalf("granted %d, want 3", got)
	}
	clk.Advance(2 * time.Second)
	if got := withdrawN(w, 10, errDown); got != 3 {
		t.Fatalf("granted %d in the next window, want 3", got)
	}
}

func TestWindowRealClock(t *testing.T) {
	w := budget.NewWindow(budget.WindowConfig{})
	if got := withdrawN(w, 10, errDown); got != 10 {
		t.Fatalf("granted %d on the real clock, want 10", got)
	}
}

func TestWindowConfigValidate(t *testing.T) {
	for _, c := range []budget.WindowConfig{{}, {Ratio: -1, MinRetriesPerSecond: -1}, {Window: time.Millisecond, Buckets: 1000}, {Ratio: budget.MaxRatio}} {
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", c, err)
		}
	}
	for name, c := range map[string]budget.WindowConfig{
		"negative window":   {Window: -time.Second},
		"negative buckets":  {Buckets: -1},
		"too many buckets":  {Buckets: budget.MaxBuckets + 1},
		"NaN percent":       {Ratio: math.NaN()},
		"huge percent":      {Ratio: budget.MaxRatio * 2},
		"a percentage":      {Ratio: 20},
		"infinite floor":    {MinRetriesPerSecond: math.Inf(1)},
		"huge floor":        {MinRetriesPerSecond: 1e12},
		"buckets too small": {Window: 5 * time.Nanosecond, Buckets: 10},
	} {
		t.Run(name, func(t *testing.T) {
			err := c.Validate()
			if !errors.Is(err, budget.ErrInvalidConfig) || !strings.HasPrefix(err.Error(), "budget: ") {
				t.Fatalf("Validate(%+v) = %v, want a budget: ErrInvalidConfig", c, err)
			}
			checkPanics(t, err, func() { budget.NewWindow(c) })
		})
	}
}

// manualClock is a clock.Clock whose time is set by the test, backwards too.
type manualClock struct {
	clock.Clock
	now time.Time
}

func (m *manualClock) Now() time.Time                  { return m.now }
func (m *manualClock) Since(t time.Time) time.Duration { return m.now.Sub(t) }

func TestWindowClockGoingBack(t *testing.T) {
	clk := &manualClock{now: clocktest.Epoch}
	w := budget.NewWindow(budget.WindowConfig{Clock: clk, Ratio: 1, MinRetriesPerSecond: -1})
	clk.now = clk.now.Add(5 * time.Second)
	w.Record(false, nil)
	clk.now = clocktest.Epoch.Add(-time.Hour) // before the Window was made
	w.Record(false, nil)                      // counts in the current bucket
	checkAvailable(t, w, 2)
	clk.now = clocktest.Epoch.Add(14 * time.Second) // 5s bucket still in
	checkAvailable(t, w, 2)
	clk.now = clocktest.Epoch.Add(15 * time.Second)
	checkAvailable(t, w, 0)
}
