package prometheus

import (
	"sync"

	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/breaker"
)

// BreakerSource is what WatchBreaker reads: *breaker.Breaker implements it.
type BreakerSource interface {
	// State returns the breaker's current state.
	State() breaker.State
	// Subscribe registers a listener for state changes and returns a
	// function that removes it.
	Subscribe(func(from, to breaker.State)) (unsubscribe func())
}

type breakerWatch struct {
	op          string
	src         BreakerSource
	unsubscribe func()
	once        sync.Once
}

// numStates is the number of breaker states known to this package.
const numStates = int(breaker.Open) + 1

// WatchBreaker exports b's state as the StateSet
// stormguard_breaker_state{operation,state}, read at every scrape: one
// series per state (closed, half-open, open), 1 for the current state and
// 0 for the others, so that stormguard_breaker_state{state="open"} == 1
// selects open breakers. It counts its state changes in
// stormguard_breaker_transitions_total{operation,from,to} through
// b.Subscribe. Watching another breaker under the same operation replaces
// the first one. The returned function unsubscribes and stops exporting
// the state (the transition counts stay); it is safe to call more than
// once. A nil Collector or source does nothing.
func (c *Collector) WatchBreaker(operation string, b BreakerSource) (unwatch func()) {
	if c == nil || b == nil {
		return func() {}
	}
	label := c.ops.Get(operation).name
	var trans [numStates][numStates]prom.Counter
	for from := range numStates {
		for to := range numStates {
			if from != to {
				trans[from][to] = c.transitions.WithLabelValues(label,
					breaker.State(from).String(), breaker.State(to).String())
			}
		}
	}
	w := &breakerWatch{op: label, src: b}
	w.unsubscribe = b.Subscribe(func(from, to breaker.State) {
		if int(from) < numStates && int(to) < numStates && from != to {
			trans[from][to].Inc()
			return
		}
		c.transitions.WithLabelValues(label, from.String(), to.String()).Inc()
	})
	c.mu.Lock()
	prev := c.breakers[label]
	c.breakers[label] = w
	c.mu.Unlock()
	if prev != nil {
		prev.stop()
	}
	return func() {
		c.mu.Lock()
		if c.breakers[label] == w {
			delete(c.breakers, label)
		}
		c.mu.Unlock()
		w.stop()
	}
}

// stop unsubscribes once.
func (w *breakerWatch) stop() {
	w.once.Do(func() {
		if w.unsubscribe != nil {
			w.unsubscribe()
		}
	})
}
