package promretry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// BreakerState is what WatchBreaker reads for stormguard_breaker_state
// from a breaker that has it: *breaker.Breaker and redisstore's Breaker
// implement it.
type BreakerState interface {
	// State returns the breaker's current state.
	State() breaker.State
}

// BreakerSource is a BreakerState that also announces its state changes,
// which WatchBreaker counts in stormguard_breaker_transitions_total:
// *breaker.Breaker implements it.
type BreakerSource interface {
	BreakerState
	// Subscribe registers a listener for state changes and returns a
	// function that removes it.
	Subscribe(func(from, to breaker.State)) (unsubscribe func())
}

type breakerWatch struct {
	op          string
	src         BreakerState
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
// b.Subscribe. It takes any retry.Breaker and degrades gracefully: one
// that is a BreakerState but not a BreakerSource exports its state and no
// transitions, one that is neither exports nothing. Watching another
// breaker under the same operation replaces the first one. The returned
// function unsubscribes and stops exporting the state (the transition
// counts stay); it is safe to call more than once. A nil Collector or
// breaker does nothing.
//
// The Collector is a config.BreakerWatcher: given as
// config.Options.Observer, it is told each operation's breaker under the
// operation's name (see WatchBudget).
func (c *Collector) WatchBreaker(operation string, b retry.Breaker) (unwatch func()) {
	st, ok := b.(BreakerState)
	if c == nil || !ok {
		return func() {}
	}
	label := c.ops.Get(operation).name
	var trans [numStates][numStates]prometheus.Counter
	for from := range numStates {
		for to := range numStates {
			if from != to {
				trans[from][to] = c.transitions.WithLabelValues(label,
					breaker.State(from).String(), breaker.State(to).String())
			}
		}
	}
	w := &breakerWatch{op: label, src: st}
	if sub, ok := b.(BreakerSource); ok {
		w.unsubscribe = sub.Subscribe(func(from, to breaker.State) {
			if int(from) < numStates && int(to) < numStates && from != to {
				trans[from][to].Inc()
				return
			}
			c.transitions.WithLabelValues(label, from.String(), to.String()).Inc()
		})
	}
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
