package hedge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// panicClock is a fake clock whose Now or AfterFunc panics.
type panicClock struct {
	*clocktest.Fake
	now, afterFunc bool
}

func (c *panicClock) Now() time.Time {
	if c.now {
		panic("now")
	}
	return c.Fake.Now()
}

func (c *panicClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if c.afterFunc {
		panic("afterfunc")
	}
	return c.Fake.AfterFunc(d, f)
}

// TestClockPanicBeforeOpReturnsPermit: between the first attempt's
// begin and op, hedge.Do reads the Clock (the Adaptive delay's start)
// and arms the hedge timer on it. A Clock that panicked there left the
// attempt's breaker permit out, and AfterFunc's panic left the call's
// lock held. The attempt now ends as one whose op panicked.
func TestClockPanicBeforeOpReturnsPermit(t *testing.T) {
	for _, c := range []struct {
		name  string
		clk   *panicClock
		adapt bool
		want  string
	}{
		{"Now", &panicClock{Fake: clocktest.NewFake(), now: true}, true, "now"},
		{"AfterFunc", &panicClock{Fake: clocktest.NewFake(), afterFunc: true}, false, "afterfunc"},
	} {
		t.Run(c.name, func(t *testing.T) {
			br := &countingBreaker{}
			h := &hedge.Hedger{Policy: &retry.Policy{MaxAttempts: 3, Breaker: br, Clock: c.clk}, Delay: time.Hour}
			if c.adapt {
				h.Adaptive = hedge.NewAdaptive(hedge.AdaptiveConfig{Clock: c.clk.Fake})
			}
			ran := false
			func() {
				defer func() {
					if r := recover(); r != c.want {
						t.Fatalf("recovered %v, want the Clock's panic %q", r, c.want)
					}
				}()
				hedge.Do(context.Background(), h, func(context.Context) (int, error) { ran = true; return 1, nil }, nil)
			}()
			if ran {
				t.Fatal("op ran after the Clock panicked")
			}
			if br.allows != br.dones {
				t.Fatalf("breaker: %d allowed, %d done: a permit is left out", br.allows, br.dones)
			}
		})
	}
}
