package simtest

import (
	"math/rand/v2"
	"sync"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// A breaker or ratio budget marked shared: NAME is one state for the
// whole fleet (config.Options.Shared: a Redis store in production). In a
// run, every client instance is built on the run's one virtual clock, so
// fleetStores gives each run (each clock) a store of its own whose parts
// every instance of that run shares: the fleet shares one breaker and
// one budget, as it does through the service's store, and no state
// crosses from one run to another. A run's store is let go when the run
// ends (endRun, from the end function simPolicy returns to Run), so a
// policy checked over many runs holds only the stores of the runs under
// way; a caller of Policy.New outside Run keeps one store per clock it
// passes, for as long as the policy.
type fleetStores struct {
	names []string // the store names the file uses
	mu    sync.Mutex
	runs  map[clock.Clock]*fleetStore
}

// sharedNames returns the store names the policies of f name.
func sharedNames(f *config.File) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range f.Policies {
		for _, n := range []string{sharedOf(p.Budget), sharedOfBreaker(p.Breaker)} {
			if n != "" && !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

func sharedOf(b *config.BudgetSpec) string {
	if b == nil {
		return ""
	}
	return b.Shared
}

func sharedOfBreaker(b *config.BreakerSpec) string {
	if b == nil {
		return ""
	}
	return b.Shared
}

// options returns the registry options for one client instance on clk:
// every store name mapped to the run's store, whose breakers draw their
// jitter from rnd (the run's seeded source: a run is one goroutine).
func (fs *fleetStores) options(clk clock.Clock, rnd rand.Source) config.Options {
	o := config.Options{Clock: clk}
	if len(fs.names) == 0 {
		return o
	}
	fs.mu.Lock()
	st := fs.runs[clk]
	if st == nil {
		st = &fleetStore{parts: map[string]any{}, rand: rnd}
		if fs.runs == nil {
			fs.runs = map[clock.Clock]*fleetStore{}
		}
		fs.runs[clk] = st
	}
	fs.mu.Unlock()
	o.Shared = map[string]config.SharedStore{}
	for _, n := range fs.names {
		o.Shared[n] = st
	}
	return o
}

// endRun lets go of the store of the run on clk, once the run has ended:
// nothing of that run asks for it again (a later options call on clk
// would start a new store). Without it every finished run's store, and
// its clock and parts, would stay for as long as the policy.
func (fs *fleetStores) endRun(clk clock.Clock) {
	fs.mu.Lock()
	delete(fs.runs, clk)
	fs.mu.Unlock()
}

// fleetStore is one run's shared parts, by kind and name.
type fleetStore struct {
	mu    sync.Mutex
	parts map[string]any
	rand  rand.Source
}

func (s *fleetStore) SharedBreaker(name string, c breaker.Config) (retry.Breaker, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.parts["breaker:"+name].(*breaker.Breaker); ok {
		return b, func() {}, nil
	}
	c.Rand = s.rand
	b := breaker.New(c)
	s.parts["breaker:"+name] = b
	return b, func() {}, nil
}

func (s *fleetStore) SharedBudget(name string, c budget.RatioConfig) (retry.Budget, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b, ok := s.parts["budget:"+name].(*budget.Ratio); ok {
		return b, func() {}, nil
	}
	b := budget.NewRatio(c)
	s.parts["budget:"+name] = b
	return b, func() {}, nil
}

// fleetStore is a config.KeyedSharedStore: a shared block split per key
// (shared: NAME with per: host, which redisstore's store serves) is one
// group of the run, which every instance of the run shares. The
// simulator's calls carry no key, so they all use the group's default
// member, as calls to one host would.
var _ config.KeyedSharedStore = (*fleetStore)(nil)

func (s *fleetStore) SharedBreakerGroup(name string, c breaker.Config, kc keyed.Config) (retry.BreakerGroup, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.parts["breakers:"+name].(*keyed.Breakers); ok {
		return g, func() {}, nil
	}
	c.Rand = s.rand
	g, err := keyed.NewBreakers(kc, c)
	if err != nil {
		return nil, nil, err
	}
	s.parts["breakers:"+name] = g
	return g, func() {}, nil
}

func (s *fleetStore) SharedBudgetGroup(name string, c budget.RatioConfig, kc keyed.Config) (retry.BudgetGroup, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g, ok := s.parts["budgets:"+name].(*keyed.Budgets); ok {
		return g, func() {}, nil
	}
	g, err := keyed.NewBudgets(kc, func() retry.Budget { return budget.NewRatio(c) })
	if err != nil {
		return nil, nil, err
	}
	s.parts["budgets:"+name] = g
	return g, func() {}, nil
}
