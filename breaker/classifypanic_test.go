package breaker

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
)

// A closed-state call whose result IsFailure (or IsExcluded) panics on
// counts as a failure, under every trip condition and with slow-call
// timing, and the panic goes on.
func TestClassifyPanicCountsClosedCall(t *testing.T) {
	errOdd := errors.New("odd")
	panicky := func(err error) bool {
		if err == errOdd {
			panic("classify failed")
		}
		return true
	}
	conds := map[string]Config{
		"consecutive":  {ConsecutiveFailures: 1},
		"count window": {Window: Window{Calls: 10, MinCalls: 1, FailureRatio: 0.5}},
		"time window":  {Window: Window{Duration: 10 * time.Second, MinCalls: 1, FailureRatio: 0.5}},
		"custom":       {ReadyToTrip: func(c Counts) bool { return c.Failures >= 1 }},
		"slow calls":   {Window: Window{Calls: 10, MinCalls: 1, FailureRatio: 0.5, SlowCallDuration: time.Second}},
	}
	for name, cfg := range conds {
		for _, hook := range []string{"IsFailure", "IsExcluded"} {
			t.Run(name+"/"+hook, func(t *testing.T) {
				c := cfg
				c.OpenTimeout = time.Second
				if hook == "IsFailure" {
					c.IsFailure = panicky
				} else {
					c.IsExcluded = func(err error) bool { return !panicky(err) }
				}
				b, _ := newTest(t, c)
				done, err := b.Allow()
				if err != nil {
					t.Fatalf("closed breaker refused: %v", err)
				}
				if v := mustPanic(t, func() { done(errOdd) }); v != "classify failed" {
					t.Fatalf("panic %v, want the classifier's", v)
				}
				wantState(t, b, Open)
			})
		}
	}
}

// A Clock that panics when a closed-state call ends (read for the time
// window or the slow-call timing): the call counts as a failure, and the
// panic goes on.
func TestClockPanicCountsClosedCall(t *testing.T) {
	for name, cfg := range map[string]Config{
		"time window": {Window: Window{Duration: 10 * time.Second, MinCalls: 1, FailureRatio: 0.5}},
		"slow calls":  {Window: Window{Calls: 10, MinCalls: 1, FailureRatio: 0.5, SlowCallDuration: time.Second}},
	} {
		t.Run(name, func(t *testing.T) {
			pc := &panicOnce{Fake: clocktest.NewFake()}
			cfg.Clock, cfg.OpenTimeout, cfg.OpenJitter = pc, time.Second, -1
			b := New(cfg)
			t.Cleanup(b.Close)
			done, err := b.Allow()
			if err != nil {
				t.Fatalf("closed breaker refused: %v", err)
			}
			pc.armed.Store(true)
			if v := mustPanic(t, func() { done(errDown) }); v != "clock failed" {
				t.Fatalf("panic %v, want the clock's", v)
			}
			wantState(t, b, Open)
		})
	}
}

// panicOnce is a fake clock whose Now panics once when armed.
type panicOnce struct {
	*clocktest.Fake
	armed atomic.Bool
}

func (c *panicOnce) Now() time.Time {
	if c.armed.CompareAndSwap(true, false) {
		panic("clock failed")
	}
	return c.Fake.Now()
}
