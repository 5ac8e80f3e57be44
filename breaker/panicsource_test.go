package breaker

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// panicSource is a rand.Source that panics on every draw.
type panicSource struct{}

func (panicSource) Uint64() uint64 { panic("boom") }

// TestPanickingSourceDoesNotWedgeOpenJitter: a rand source that panicked
// in a locked draw elsewhere in the process (a backoff's jitter), or a
// breaker's own Config.Rand that panics while it trips, must leave the
// source lock and the breaker's mutex free: another breaker still draws
// its open-period jitter and opens, and the breaker that panicked still
// answers.
func TestPanickingSourceDoesNotWedgeOpenJitter(t *testing.T) {
	mustPanic(t, func() { backoff.Uniform(panicSource{}, 10) })
	mustPanic(t, func() { backoff.Exponential{Jitter: backoff.Full, Rand: panicSource{}}.Delay(2, 0) })
	clk := clocktest.NewFake()
	bad := New(Config{ConsecutiveFailures: 1, OpenJitter: 0.5, Rand: panicSource{}, Clock: clk})
	done, err := bad.Allow()
	if err != nil {
		t.Fatal(err)
	}
	if v := mustPanic(t, func() { done(errBreakerTestFail) }); v != "boom" {
		t.Fatalf("recovered %v, want the source's panic to go on", v)
	}
	if s := bad.State(); s != Closed { // it could not draw the open period
		t.Fatalf("state %v", s)
	}
	good := New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: 0.5, Rand: rand.NewPCG(1, 2), Clock: clk})
	done, err = good.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errBreakerTestFail) // draws its jitter under the shared source lock
	if s := good.State(); s != Open {
		t.Fatalf("state %v, want open", s)
	}
}

var errBreakerTestFail = errors.New("downstream failed")
