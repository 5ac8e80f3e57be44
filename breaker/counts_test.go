package breaker

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
)

func TestCountsRates(t *testing.T) {
	if (Counts{}).FailureRate() != 0 || (Counts{}).SlowCallRate() != 0 {
		t.Fatal("rates of no calls must be 0")
	}
	c := Counts{Successes: 3, Failures: 1, SlowCalls: 2}
	if c.Calls() != 4 || c.FailureRate() != 0.25 || c.SlowCallRate() != 0.5 {
		t.Fatalf("%+v: calls %d, failure rate %v, slow rate %v", c, c.Calls(), c.FailureRate(), c.SlowCallRate())
	}
}

// A clock that goes back (a virtual clock reset, a wall clock step) must
// not corrupt the time window: calls count in the newest bucket.
func TestTimeWindowClockGoesBack(t *testing.T) {
	base := clocktest.Epoch
	w := newTimeWindow(10*time.Second, 10, base)
	w.add(base.Add(5*time.Second), outFailure)
	w.add(base.Add(2*time.Second), outSuccess) // earlier than the last call
	if s, f, _ := w.sums(base.Add(5 * time.Second)); s != 1 || f != 1 {
		t.Fatalf("sums %d/%d, want both calls", s, f)
	}
	if s, f, _ := w.sums(base.Add(15 * time.Second)); s != 0 || f != 0 {
		t.Fatalf("sums %d/%d after the window, want none", s, f)
	}
}
