package promretry

import (
	"sync"
	"sync/atomic"

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
	op   string // the operation's label
	name string // the operation it was watched under
	src  BreakerState
	key  any    // the breaker, to find the operations sharing it (nil: not comparable)
	seq  uint64 // order of the watches, for the state of a label with several breakers
	part *breakerPart
}

// id is the identity of the watched breaker: its key, or the watch itself.
func (w *breakerWatch) id() any {
	if w.key != nil {
		return w.key
	}
	return w
}

// breakerPart is one watched breaker, however many operations share it:
// it holds the one subscription that counts its transitions, under the
// label it is exported under now.
type breakerPart struct {
	label       atomic.Pointer[string]
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
// function stops exporting the state under the operation, and
// unsubscribes once no operation watches the breaker (the transition
// counts stay); it is safe to call more than once. A nil Collector or
// breaker does nothing.
//
// A breaker watched under several operations (one policy's, shared by the
// operations that use it) has its transitions counted once, under a label
// of its own, SharedPrefix and the operations' labels
// ("_shared:checkout,search"), not once per operation; each operation's
// breaker_state still shows the state of the breaker it uses.
// stormguard_breaker_info{operation,breaker} is 1 for every watched
// operation and the label its breaker's transitions are counted under
// (the operation's own for a breaker of its own), to join on. Past
// MaxOperations, the state under OverflowOperation is that of the breaker
// watched last, and every breaker's transitions are counted.
//
// The Collector is a config.BreakerWatcher: given as
// config.Options.Observer, it is told each operation's breaker under the
// operation's name (see WatchBudget).
func (c *Collector) WatchBreaker(operation string, b retry.Breaker) (unwatch func()) {
	if un, ok := c.watchedKeyed(operation, b); ok {
		return un
	}
	st, ok := b.(BreakerState)
	if c == nil || !ok {
		return func() {}
	}
	w := &breakerWatch{op: c.ops.Get(operation).name, name: operation, src: st, key: partKey(b)}
	c.mu.Lock()
	c.seq++
	w.seq = c.seq
	prev := c.breakers[operation]
	c.breakers[operation] = w
	id := w.id()
	p := c.breakerParts[id]
	created := p == nil
	if created {
		p = &breakerPart{}
		c.breakerParts[id] = p
	}
	c.relabelBreakerLocked(id, p)
	w.part = p
	var stop *breakerPart
	if prev != nil {
		stop = c.dropBreakerLocked(prev)
	}
	c.mu.Unlock()
	stop.stop()
	if sub, ok := b.(BreakerSource); ok && created {
		// Subscribe is the breaker's code: called without our lock, and
		// if it panics the watch is taken back before the panic goes on.
		subscribed := false
		defer func() {
			if !subscribed {
				c.mu.Lock()
				var stop *breakerPart
				if c.breakers[operation] == w {
					delete(c.breakers, operation)
					stop = c.dropBreakerLocked(w)
				}
				c.mu.Unlock()
				stop.stop()
			}
		}()
		unsub := sub.Subscribe(func(from, to breaker.State) {
			if from != to {
				c.transitions.WithLabelValues(*p.label.Load(), from.String(), to.String()).Inc()
			}
		})
		subscribed = true
		c.mu.Lock()
		if c.breakerParts[id] == p {
			p.unsubscribe, unsub = unsub, nil
		}
		c.mu.Unlock()
		if unsub != nil { // unwatched meanwhile
			unsub()
		}
	}
	return func() {
		var stop *breakerPart
		c.mu.Lock()
		if c.breakers[operation] == w {
			delete(c.breakers, operation)
			stop = c.dropBreakerLocked(w)
		}
		c.mu.Unlock()
		stop.stop()
	}
}

// relabelBreakerLocked sets the label breaker id's transitions are counted
// under, from the operations watching it now, creating its series at zero.
func (c *Collector) relabelBreakerLocked(id any, p *breakerPart) {
	var labels []string
	for _, w := range c.breakers {
		if w.id() == id {
			labels = append(labels, w.op)
		}
	}
	label := partLabel(labels)
	if old := p.label.Load(); old != nil && *old == label {
		return
	}
	for from := range numStates {
		for to := range numStates {
			if from != to {
				c.transitions.WithLabelValues(label, breaker.State(from).String(), breaker.State(to).String())
			}
		}
	}
	p.label.Store(&label)
}

// dropBreakerLocked takes watch w's breaker out of the operation, and
// returns its part to stop when no operation watches it any longer.
func (c *Collector) dropBreakerLocked(w *breakerWatch) *breakerPart {
	id := w.id()
	for _, o := range c.breakers {
		if o.id() == id {
			c.relabelBreakerLocked(id, w.part)
			return nil
		}
	}
	delete(c.breakerParts, id)
	return w.part
}

// breakerWatchesLocked returns the breakers whose state a scrape exports,
// one per label (the one watched last), and the breaker_info pairs.
func (c *Collector) breakerWatchesLocked() ([]*breakerWatch, map[[2]string]bool) {
	latest := make(map[string]*breakerWatch, len(c.breakers))
	info := make(map[[2]string]bool, len(c.breakers))
	for _, w := range c.breakers {
		if l, ok := latest[w.op]; !ok || w.seq > l.seq {
			latest[w.op] = w
		}
		if _, ok := w.src.(BreakerSource); ok {
			info[[2]string{w.op, *w.part.label.Load()}] = true
		}
	}
	out := make([]*breakerWatch, 0, len(latest))
	for _, w := range latest {
		out = append(out, w)
	}
	return out, info
}

// stop unsubscribes once; a nil part does nothing.
func (p *breakerPart) stop() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		if p.unsubscribe != nil {
			p.unsubscribe()
		}
	})
}
