package otelretry_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/otelretry"
)

// panicSubscribe is a BreakerSource whose Subscribe panics.
type panicSubscribe struct{}

func (panicSubscribe) Allow() (func(error), error) { return func(error) {}, nil }
func (panicSubscribe) Ready() error                { return nil }
func (panicSubscribe) State() breaker.State        { return breaker.Closed }
func (panicSubscribe) Subscribe(func(from, to breaker.State)) func() {
	panic("Subscribe")
}

// TestWatchBreakerSubscribePanicOTel: a breaker whose Subscribe panics
// makes WatchBreaker panic, leaving the Observer unlocked and without the
// half-made watch.
func TestWatchBreakerSubscribePanicOTel(t *testing.T) {
	h := newHarness(t, otelretry.Config{})
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("WatchBreaker did not pass the panic on")
			}
		}()
		h.obs.WatchBreaker("op", panicSubscribe{})
	}()
	done := make(chan map[string]float64, 1)
	go func() {
		h.obs.WatchBreaker("other", breaker.New(breaker.Config{}))()
		done <- h.points(t, "stormguard.breaker.state")
	}()
	select {
	case st := <-done:
		for k := range st {
			if k == "operation=op,state=closed" {
				t.Errorf("the watch whose Subscribe panicked is reported: %v", st)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the Observer stayed locked after Subscribe panicked")
	}
}
