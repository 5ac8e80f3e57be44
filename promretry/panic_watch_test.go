package promretry_test

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/promretry"
)

// panicSubscribe is a BreakerSource whose Subscribe panics.
type panicSubscribe struct{}

func (panicSubscribe) Allow() (func(error), error) { return func(error) {}, nil }
func (panicSubscribe) Ready() error                { return nil }
func (panicSubscribe) State() breaker.State        { return breaker.Closed }
func (panicSubscribe) Subscribe(func(from, to breaker.State)) func() {
	panic("Subscribe")
}

// TestWatchBreakerSubscribePanic: a breaker whose Subscribe panics makes
// WatchBreaker panic, leaving the Collector unlocked and without the
// half-made watch: the next scrape and watch work.
func TestWatchBreakerSubscribePanic(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("WatchBreaker did not pass the panic on")
			}
		}()
		c.WatchBreaker("op", panicSubscribe{})
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = reg.Gather()
		c.WatchBreaker("other", breaker.New(breaker.Config{}))()
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the Collector stayed locked after Subscribe panicked")
	}
	if m := find(t, reg, "stormguard_breaker_state", "operation", "op"); m != nil {
		t.Error("the watch whose Subscribe panicked is exported")
	}
}
