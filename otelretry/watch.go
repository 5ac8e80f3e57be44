package otelretry

import (
	"context"
	"maps"
	"slices"
	"sync"

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
	src         BreakerState
	op          attribute.KeyValue
	states      [numStates][]metric.ObserveOption // {operation, state} per state
	unsubscribe func()
	once        sync.Once
}

// numStates is the number of breaker states known to this package.
const numStates = int(breaker.Open) + 1

// keyState is the state attribute of stormguard.breaker.state.
const keyState = attribute.Key("state")

func (w *breakerWatch) stop() {
	w.once.Do(func() {
		if w.unsubscribe != nil {
			w.unsubscribe()
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
// one. The returned function unsubscribes and stops reporting the state;
// it is safe to call more than once. It takes any retry.Breaker and
// degrades gracefully: one that is a BreakerState but not a BreakerSource
// reports its state and no transitions, one that is neither nothing. A nil
// Observer or breaker does nothing.
//
// The Observer is a config.BreakerWatcher: given as
// config.Options.Observer, it is told each operation's breaker under the
// operation's name (see WatchBudget).
func (o *Observer) WatchBreaker(operation string, b retry.Breaker) (unwatch func()) {
	st, ok := b.(BreakerState)
	if o == nil || !ok {
		return func() {}
	}
	label := o.ops.Get(operation).label
	opAttr := keyOperation.String(label)
	w := &breakerWatch{src: st, op: opAttr}
	for st := range numStates {
		w.states[st] = []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(opAttr,
			keyState.String(breaker.State(st).String())))}
	}
	if sub, ok := b.(BreakerSource); ok {
		w.unsubscribe = sub.Subscribe(func(from, to breaker.State) {
			o.transitions.Add(context.Background(), 1, metric.WithAttributes(opAttr,
				keyFrom.String(from.String()), keyTo.String(to.String())))
		})
	}
	o.mu.Lock()
	prev := o.breakers[label]
	o.breakers[label] = w
	o.mu.Unlock()
	if prev != nil {
		prev.stop()
	}
	return func() {
		o.mu.Lock()
		if o.breakers[label] == w {
			delete(o.breakers, label)
		}
		o.mu.Unlock()
		w.stop()
	}
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

// observeBreakers is the state gauge's callback: a StateSet per breaker.
func (o *Observer) observeBreakers(_ context.Context, obs metric.Int64Observer) error {
	o.mu.Lock()
	ws := slices.Collect(maps.Values(o.breakers))
	o.mu.Unlock()
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
