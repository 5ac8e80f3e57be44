package config

import (
	"fmt"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// KeyedSharedStore is a SharedStore that also splits its parts per key,
// for a breaker or budget block with both shared: NAME and per: host or
// per: method. Each key's member is shared by the fleet on its own (one
// dead host opens its breaker for every process, the others stay closed),
// and the group is bounded by kc (the block's max_keys and idle, on
// Options.Clock). A store that is only a SharedStore refuses such a block,
// naming it.
//
// The Registry keeps the group whole across reloads while the block's
// settings, per, max_keys and idle are unchanged, so its keys keep their
// state; a reload that changes any of them builds a new group under the
// same name (whose members join the state the fleet keeps per key) and
// closes the old one.
type KeyedSharedStore interface {
	SharedStore
	// SharedBreakerGroup returns a group of breakers with the settings c,
	// one per key, shared under name, bounded by kc.
	SharedBreakerGroup(name string, c breaker.Config, kc kg.Config) (g retry.BreakerGroup, close func(), err error)
	// SharedBudgetGroup returns a group of budget.Ratio-like token
	// buckets with the settings c, one per key, shared under name.
	SharedBudgetGroup(name string, c budget.RatioConfig, kc kg.Config) (g retry.BudgetGroup, close func(), err error)
}

// keyedStore returns the KeyedSharedStore a keyed shared block asks for,
// or a file error naming field. It must be called with r.mu held.
func (r *Registry) keyedStore(file, field, name string) (KeyedSharedStore, error) {
	st, err := r.sharedStore(file, field+".shared", name)
	if err != nil {
		return nil, err
	}
	ks, ok := st.(KeyedSharedStore)
	if !ok {
		return nil, &Error{[]Problem{{File: file, Path: field + ".per",
			Msg: fmt.Sprintf("store %q (%T) does not split shared parts per key (it is not a config.KeyedSharedStore): drop per or shared", name, st)}}}
	}
	return ks, nil
}

// breakerGroupOf returns the groupMaker of the keyed breaker block s of
// the policy name (field names it in errors): breakerGroup, or for a
// shared block its store's SharedBreakerGroup.
func (r *Registry) breakerGroupOf(file, field, name string, s *BreakerSpec) groupMaker[retry.Breaker] {
	if s.Shared == "" {
		return breakerGroup
	}
	return func(kc kg.Config, _ retry.Breaker, _ func() retry.Breaker) (retry.Breaker, func(), error) {
		st, err := r.keyedStore(file, field, s.Shared)
		if err != nil {
			return nil, nil, err
		}
		c := s.Config
		c.Clock = r.opts.Clock
		g, closeFn, err := st.SharedBreakerGroup(name, c, kc)
		if err != nil {
			return nil, nil, sharedError(file, field, s.Shared, err)
		}
		return g, closeFn, nil
	}
}

// budgetGroupOf is breakerGroupOf for a keyed budget block.
func (r *Registry) budgetGroupOf(file, field, name string, s *BudgetSpec) groupMaker[retry.Budget] {
	if s.Shared == "" {
		return budgetGroup
	}
	return func(kc kg.Config, _ retry.Budget, _ func() retry.Budget) (retry.Budget, func(), error) {
		st, err := r.keyedStore(file, field, s.Shared)
		if err != nil {
			return nil, nil, err
		}
		g, closeFn, err := st.SharedBudgetGroup(name, s.Ratio, kc)
		if err != nil {
			return nil, nil, sharedError(file, field, s.Shared, err)
		}
		return g, closeFn, nil
	}
}
