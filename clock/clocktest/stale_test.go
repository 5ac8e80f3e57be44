package clocktest_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// timerModes gives each test body the real clock and a fake one, with how
// to let time pass on each: the fake must behave as time.Timer does.
var timerModes = []struct {
	name string
	new  func() (clock.Clock, func(time.Duration))
}{
	{"real", func() (clock.Clock, func(time.Duration)) { return clock.Real, func(d time.Duration) { time.Sleep(d) } }},
	{"fake", func() (clock.Clock, func(time.Duration)) { f := clocktest.NewFake(); return f, f.Advance }},
}

func eachClock(t *testing.T, body func(t *testing.T, c clock.Clock, pass func(time.Duration))) {
	for _, m := range timerModes {
		t.Run(m.name, func(t *testing.T) {
			c, pass := m.new()
			body(t, c, pass)
		})
	}
}

const tick = 2 * time.Millisecond

func noValue(t *testing.T, tm clock.Timer, when string) {
	t.Helper()
	select {
	case v := <-tm.C():
		t.Fatalf("%s: received a stale tick %v", when, v)
	default:
	}
}

// TestStopAfterFireDropsTick: a timer that fired, its value unreceived,
// delivers nothing after Stop, and Stop reports it stopped the timer.
func TestStopAfterFireDropsTick(t *testing.T) {
	eachClock(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		tm := c.NewTimer(tick)
		pass(2 * tick)
		stopped := tm.Stop()
		noValue(t, tm, "after Stop")
		if !stopped {
			t.Fatal("Stop of a fired, unreceived timer = false, want true (Go 1.23 timers)")
		}
		pass(2 * tick)
		noValue(t, tm, "later")
		if tm.Stop() {
			t.Fatal("second Stop = true")
		}
	})
}

// TestResetAfterFireDropsTick: after Reset only the new expiry is seen.
func TestResetAfterFireDropsTick(t *testing.T) {
	eachClock(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		tm := c.NewTimer(tick)
		pass(2 * tick)
		if !tm.Reset(time.Hour) {
			t.Fatal("Reset of a fired, unreceived timer = false, want true (Go 1.23 timers)")
		}
		noValue(t, tm, "after Reset")
		if !tm.Reset(tick) {
			t.Fatal("Reset of an active timer = false")
		}
		pass(2 * tick)
		select {
		case <-tm.C():
		case <-time.After(10 * time.Second):
			t.Fatal("reset timer never fired")
		}
		noValue(t, tm, "after the one tick")
	})
}

// TestStopBeforeFire: a stopped timer never fires.
func TestStopBeforeFire(t *testing.T) {
	eachClock(t, func(t *testing.T, c clock.Clock, pass func(time.Duration)) {
		tm := c.NewTimer(tick)
		if !tm.Stop() {
			t.Fatal("Stop of an active timer = false")
		}
		pass(2 * tick)
		noValue(t, tm, "after the deadline")
	})
}
