package otelretry

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// BudgetSource is what WatchBudget reads from a budget that has it: the
// budget package's Ratio, Window and Concurrency and redisstore's Budget
// implement it.
type BudgetSource interface {
	// Available returns the retries the budget would grant now (tokens).
	Available() float64
}

// BreakerState is what WatchBreaker reads for stormguard.breaker.state
// from a breaker that has it: *breaker.Breaker and redisstore's Breaker
// implement it.
type BreakerState interface {
	// State returns the breaker's current state.
	State() breaker.State
}

// BreakerSource is a BreakerState that also announces its state changes,
// which WatchBreaker counts in stormguard.breaker.transitions:
// *breaker.Breaker implements it.
type BreakerSource interface {
	BreakerState
	// Subscribe registers a listener for state changes and returns a
	// function that removes it.
	Subscribe(func(from, to breaker.State)) (unsubscribe func())
}

type budgetWatch struct {
	src  BudgetSource
	opts []metric.ObserveOption
}

type breakerWatch struct {
	src    BreakerState
	label  string // the operation's label
	key    any    // the breaker, to find the operations sharing it (nil: not comparable)
	seq    uint64 // order of the watches, for the state of a label with several breakers
	part   *breakerPart
	op     attribute.KeyValue
	states [numStates][]metric.ObserveOption // {operation, state} per state
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
// operation value it is reported under now.
type breakerPart struct {
	label       atomic.Pointer[string]
	unsubscribe func()
	once        sync.Once
}

// numStates is the number of breaker states known to this package.
const numStates = int(breaker.Open) + 1

// keyState is the state attribute of stormguard.breaker.state.
const keyState = attribute.Key("state")

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

// WatchBudget reports b's Available tokens as the observable gauge
// stormguard.retry_budget.tokens{operation}, read at every collection.
// It takes any retry.Budget and degrades gracefully: a budget that is not
// a BudgetSource reports no tokens (its refusals are still counted from
// the calls). Watching another budget under the same operation replaces
// the first one. The returned function stops watching; it is safe to call
// more than once. A nil Observer or budget does nothing.
//
// The Observer is a config.BudgetWatcher: given as config.Options.Observer
// (alone or in a retry.Multi), it is told each operation's budget under
// the operation's name, so the tokens join the call metrics on operation.
func (o *Observer) WatchBudget(operation string, b retry.Budget) (unwatch func()) {
	if un, ok := o.watchedKeyed(operation, b); ok {
		return un
	}
	src, ok := b.(BudgetSource)
	if o == nil || !ok {
		return func() {}
	}
	label := o.ops.Get(operation).label
	w := &budgetWatch{src: src, opts: []metric.ObserveOption{
		metric.WithAttributeSet(attribute.NewSet(keyOperation.String(label)))}}
	o.mu.Lock()
	o.budgets[label] = w
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		if o.budgets[label] == w {
			delete(o.budgets, label)
		}
		o.mu.Unlock()
	}
}

// WatchBreaker reports b's state as the observable gauge
// stormguard.breaker.state{operation,state}, a StateSet read at every
// collection: one point per state (closed, half-open, open), 1 for the
// current state and 0 for the others, as the promretry module exports
// it. It counts its changes in
// stormguard.breaker.transitions{operation,from,to} through b.Subscribe.
// Watching another breaker under the same operation replaces the first
// one. The returned function stops reporting the state under the
// operation, and unsubscribes once no operation watches the breaker; it
// is safe to call more than once. It takes any retry.Breaker and degrades
// gracefully: one that is a BreakerState but not a BreakerSource reports
// its state and no transitions, one that is neither nothing. A nil
// Observer or breaker does nothing.
//
// A breaker watched under several operations (one policy's, shared by the
// operations that use it) has its transitions counted once, under an
// operation value of its own, SharedPrefix and the operations' labels
// ("_shared:checkout,search"); each operation's breaker.state still shows
// the state of the breaker it uses. stormguard.breaker.info{operation,
// breaker} is 1 for every watched operation and the value its breaker's
// transitions are counted under, to join on. Past MaxOperations, the
// state under OverflowOperation is that of the breaker watched last, and
// every breaker's transitions are counted.
//
// The Observer is a config.BreakerWatcher: given as
// config.Options.Observer, it is told each operation's breaker under the
// operation's name (see WatchBudget).
func (o *Observer) WatchBreaker(operation string, b retry.Breaker) (unwatch func()) {
	if un, ok := o.watchedKeyed(operation, b); ok {
		return un
	}
	st, ok := b.(BreakerState)
	if o == nil || !ok {
		return func() {}
	}
	label := o.ops.Get(operation).label
	opAttr := keyOperation.String(label)
	w := &breakerWatch{src: st, label: label, key: partKey(b), op: opAttr}
	for st := range numStates {
		w.states[st] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(opAttr,
			keyState.String(breaker.State(st).String())))}
	}
	o.mu.Lock()
	o.seq++
	w.seq = o.seq
	prev := o.breakers[operation]
	o.breakers[operation] = w
	id := w.id()
	p := o.breakerParts[id]
	created := p == nil
	if created {
		p = &breakerPart{}
		o.breakerParts[id] = p
	}
	o.relabelBreakerLocked(id, p)
	w.part = p
	var stop *breakerPart
	if prev != nil {
		stop = o.dropBreakerLocked(prev)
	}
	o.mu.Unlock()
	stop.stop()
	if sub, ok := b.(BreakerSource); ok && created {
		// Subscribe is the breaker's code: called without our lock, and
		// if it panics the watch is taken back before the panic goes on.
		subscribed := false
		defer func() {
			if !subscribed {
				o.mu.Lock()
				var stop *breakerPart
				if o.breakers[operation] == w {
					delete(o.breakers, operation)
					stop = o.dropBreakerLocked(w)
				}
				o.mu.Unlock()
				stop.stop()
			}
		}()
		unsub := sub.Subscribe(func(from, to breaker.State) {
			o.transitions.Add(context.Background(), 1, metric.WithAttributes(keyOperation.String(*p.label.Load()),
				keyFrom.String(from.String()), keyTo.String(to.String())))
		})
		subscribed = true
		o.mu.Lock()
		if o.breakerParts[id] == p {
			p.unsubscribe, unsub = unsub, nil
		}
		o.mu.Unlock()
		if unsub != nil { // unwatched meanwhile
			unsub()
		}
	}
	return func() {
		var stop *breakerPart
		o.mu.Lock()
		if o.breakers[operation] == w {
			delete(o.breakers, operation)
			stop = o.dropBreakerLocked(w)
		}
		o.mu.Unlock()
		stop.stop()
	}
}

// relabelBreakerLocked sets the value breaker id's transitions are counted
// under, from the operations watching it now.
func (o *Observer) relabelBreakerLocked(id any, p *breakerPart) {
	var labels []string
	for _, w := range o.breakers {
		if w.id() == id {
			labels = append(labels, w.label)
		}
	}
	label := partLabel(labels)
	p.label.Store(&label)
}

// dropBreakerLocked takes watch w's breaker out of the operation, and
// returns its part to stop when no operation watches it any longer.
func (o *Observer) dropBreakerLocked(w *breakerWatch) *breakerPart {
	id := w.id()
	for _, x := range o.breakers {
		if x.id() == id {
			o.relabelBreakerLocked(id, w.part)
			return nil
		}
	}
	delete(o.breakerParts, id)
	return w.part
}

// observeBreakerInfo is breaker.info's callback.
func (o *Observer) observeBreakerInfo(_ context.Context, obs metric.Int64Observer) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := make(map[[2]string]bool, len(o.breakers))
	for _, w := range o.breakers {
		if w.part.unsubscribe == nil {
			continue // no transitions to join
		}
		pair := [2]string{w.label, *w.part.label.Load()}
		if !seen[pair] {
			seen[pair] = true
			obs.Observe(1, metric.WithAttributes(keyOperation.String(pair[0]), keyBreaker.String(pair[1])))
		}
	}
	return nil
}

// observeBudgets is the tokens gauge's callback.
func (o *Observer) observeBudgets(_ context.Context, obs metric.Float64Observer) error {
	o.mu.Lock()
	ws := slices.Collect(maps.Values(o.budgets))
	o.mu.Unlock()
	for _, w := range ws {
		obs.Observe(w.src.Available(), w.opts...)
	}
	return nil
}

// observeBreakers is the state gauge's callback: a StateSet per operation
// label (past MaxOperations, of the breaker watched last).
func (o *Observer) observeBreakers(_ context.Context, obs metric.Int64Observer) error {
	o.mu.Lock()
	latest := make(map[string]*breakerWatch, len(o.breakers))
	for _, w := range o.breakers {
		if l, ok := latest[w.label]; !ok || w.seq > l.seq {
			latest[w.label] = w
		}
	}
	o.mu.Unlock()
	ws := slices.Collect(maps.Values(latest))
	for _, w := range ws {
		cur := w.src.State()
		for st := range numStates {
			v := int64(0)
			if breaker.State(st) == cur {
				v = 1
			}
			obs.Observe(v, w.states[st]...)
		}
		if int(cur) >= numStates { // a state of a newer core
			obs.Observe(1, metric.WithAttributes(w.op, keyState.String(cur.String())))
		}
	}
	return nil
}
