package breaker_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// panicNowClock is a fake clock whose Now panics once when armed.
type panicNowClock struct {
	*clocktest.Fake
	arm atomic.Bool
}

func (c *panicNowClock) Now() time.Time {
	if c.arm.CompareAndSwap(true, false) {
		panic("clock")
	}
	return c.Fake.Now()
}

func (c *panicNowClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestHalfOpenClockPanicTakesNoProbe: a half-open breaker that times slow
// calls reads its Clock as it admits a probe; a Clock whose Now panics
// there takes no probe slot, so the breaker does not refuse every later
// call with ErrTooManyProbes (a review found it wedged half-open for good).
func TestHalfOpenClockPanicTakesNoProbe(t *testing.T) {
	clk := &panicNowClock{Fake: clocktest.NewFake()}
	br := breaker.New(breaker.Config{
		Window:      breaker.Window{Calls: 4, MinCalls: 1, FailureRatio: 0.5, SlowCallDuration: time.Hour},
		OpenTimeout: time.Second, OpenJitter: -1, Clock: clk,
	})
	for br.State() != breaker.Open {
		done, err := br.Allow()
		if err != nil {
			t.Fatal(err)
		}
		done(errors.New("boom"))
	}
	clk.Advance(2 * time.Second)
	if br.State() != breaker.HalfOpen {
		t.Fatalf("state %v, want half-open", br.State())
	}
	clk.arm.Store(true)
	func() {
		defer func() {
			if v := recover(); v != "clock" {
				t.Fatalf("recovered %v, want the clock's panic", v)
			}
		}()
		br.Allow()
	}()
	done, err := br.Allow()
	if err != nil {
		t.Fatalf("after the clock's panic Allow = %v (state %v), want a probe admitted", err, br.State())
	}
	done(nil)
}
