package live

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stormguard/stormguard/sim"
)

func TestSchedulePeriodic(t *testing.T) {
	sc := &Scenario{Clients: 40, Duration: 3 * time.Second, Arrival: sim.Arrival{Kind: sim.Periodic, Interval: 500 * time.Millisecond}}
	calls := schedule(sc, 1)
	if len(calls) != 40*6 {
		t.Fatalf("%d calls, want 240 (6 per client)", len(calls))
	}
	if !slices.IsSortedFunc(calls, func(a, b arrival) int { return int(a.At - b.At) }) {
		t.Error("schedule not in time order")
	}
	phase := map[int32]time.Duration{}
	for _, c := range calls {
		if c.Seq == 1 {
			phase[c.Client] = c.At
			if c.At < 0 || c.At >= 500*time.Millisecond {
				t.Errorf("client %d starts at %v, outside [0, 500ms)", c.Client, c.At)
			}
		}
	}
	for _, c := range calls {
		if want := phase[c.Client] + time.Duration(c.Seq-1)*500*time.Millisecond; c.At != want {
			t.Fatalf("client %d call %d at %v, want %v", c.Client, c.Seq, c.At, want)
		}
	}
	if !slices.Equal(calls, schedule(sc, 1)) {
		t.Error("the same seed gave another schedule")
	}
	if slices.Equal(calls, schedule(sc, 2)) {
		t.Error("another seed gave the same schedule")
	}
}

func TestSchedulePoisson(t *testing.T) {
	sc := &Scenario{Clients: 200, Duration: 10 * time.Second, Arrival: sim.Arrival{Kind: sim.Poisson, Rate: 2}}
	calls := schedule(sc, 9)
	// 4000 expected; the count is Poisson: sd about 63.
	if n := float64(len(calls)); math.Abs(n-4000) > 5*math.Sqrt(4000) {
		t.Errorf("%v calls, want about 4000", n)
	}
	for _, c := range calls {
		if c.At < 0 || c.At >= sc.Duration {
			t.Fatalf("call at %v, outside [0, %v)", c.At, sc.Duration)
		}
	}
}

// The count bound holds whatever the draws: four times the expected calls
// plus 16 per client.
func TestScheduleBounded(t *testing.T) {
	sc := &Scenario{Clients: 1, Duration: time.Second, Arrival: sim.Arrival{Kind: sim.Periodic, Interval: time.Nanosecond}}
	// A 1ns period asks for a billion calls; the rate check in Validate
	// refuses it, and schedule itself caps each client.
	if err := sc.Validate(0); err == nil {
		t.Error("Validate accepted a billion calls per second")
	}
	sc.Arrival.Interval = 10 * time.Millisecond
	if n := len(schedule(sc, 1)); n != 100 {
		t.Errorf("%d calls, want 100", n)
	}
}
