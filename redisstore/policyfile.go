package redisstore

import (
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// Store builds shared Breakers and Budgets for a policy file: it is the
// config module's SharedStore, so that a breaker or ratio budget block
// marked shared: redis is a fleet-wide one, while the connection stays in
// code:
//
//	store := &redisstore.Store{Client: rdb, Namespace: "checkout"}
//	reg, err := config.Open(path, config.Options{Shared: map[string]config.SharedStore{"redis": store}})
//	...
//	defer reg.Close() // closes the Breakers and Budgets it built
//
// Each part is named after its policy, so processes whose files share a
// policy name share its state. A block that also says per: host or per:
// method is a group of them, one per key (KeyedBreakers, KeyedBudgets:
// Store is a config.KeyedSharedStore), bounded by the block's max_keys and
// idle. The Registry keeps a part across reloads
// while its settings are unchanged; a reload that changes them makes a
// new Breaker or Budget under the same name, which joins the state the
// fleet keeps in Redis, and closes the old one.
//
// The fields are those of BreakerConfig and BudgetConfig that are not
// settings of the policy; zero fields take their defaults there. This
// file implements the config seam without importing config (the interface
// uses only core types).
type Store struct {
	// Client is the Redis client. Required.
	Client redis.Scripter
	// Namespace prefixes every key (see BreakerConfig.Namespace).
	Namespace string
	// RefreshInterval, Timeout, KeyTTL: see BreakerConfig and BudgetConfig.
	RefreshInterval, Timeout, KeyTTL time.Duration
	// ProbeLease: see BreakerConfig.ProbeLease.
	ProbeLease time.Duration
	// LeaseTokens: see BudgetConfig.LeaseTokens.
	LeaseTokens float64
	// BatchRefresh: see BreakerConfig.BatchRefresh (per: host and per:
	// method breakers and budgets).
	BatchRefresh bool
	// Clock paces the exchanges. nil: for a Breaker, its settings' Clock
	// (the config Registry's Options.Clock), else clock.Real; for a
	// Budget, clock.Real.
	Clock clock.Clock
	// Logger and OnDegraded: see BreakerConfig. OnDegraded is told the
	// part's name ("breaker NAME" or "budget NAME") too.
	Logger     *slog.Logger
	OnDegraded func(part string, degraded bool, err error)
	// OnMemberDegraded is OnDegraded with the Member of a per: host or
	// per: method group that fell back or re-joined (Member{} for a part
	// that is not keyed); see BreakerConfig.OnMemberDegraded.
	OnMemberDegraded func(part string, m Member, degraded bool, err error)
	// OnMemberStateChange is told the part's name and the Member of every
	// change of a shared breaker's state (Member{} for a breaker that is
	// not keyed); see BreakerConfig.OnMemberStateChange.
	OnMemberStateChange func(part string, m Member, from, to breaker.State)
}

func (s *Store) onMemberState(part string) func(Member, breaker.State, breaker.State) {
	if s.OnMemberStateChange == nil {
		return nil
	}
	return func(m Member, from, to breaker.State) { s.OnMemberStateChange(part, m, from, to) }
}

func (s *Store) onMemberDegraded(part string) func(Member, bool, error) {
	if s.OnMemberDegraded == nil {
		return nil
	}
	return func(m Member, degraded bool, err error) { s.OnMemberDegraded(part, m, degraded, err) }
}

func (s *Store) onDegraded(part string) func(bool, error) {
	if s.OnDegraded == nil {
		return nil
	}
	return func(degraded bool, err error) { s.OnDegraded(part, degraded, err) }
}

func (s *Store) breakerConfig(name string, c breaker.Config) BreakerConfig {
	return BreakerConfig{
		Client: s.Client, Name: name, Namespace: s.Namespace, Breaker: c,
		RefreshInterval: s.RefreshInterval, Timeout: s.Timeout, KeyTTL: s.KeyTTL, ProbeLease: s.ProbeLease,
		BatchRefresh: s.BatchRefresh,
		Clock:        s.Clock, Logger: s.Logger, OnDegraded: s.onDegraded("breaker " + name),
		OnMemberDegraded:    s.onMemberDegraded("breaker " + name),
		OnMemberStateChange: s.onMemberState("breaker " + name),
	}
}

func (s *Store) budgetConfig(name string, c budget.RatioConfig) BudgetConfig {
	return BudgetConfig{
		Client: s.Client, Name: name, Namespace: s.Namespace, Ratio: c, LeaseTokens: s.LeaseTokens,
		BatchRefresh:    s.BatchRefresh,
		RefreshInterval: s.RefreshInterval, Timeout: s.Timeout, KeyTTL: s.KeyTTL,
		Clock: s.Clock, Logger: s.Logger, OnDegraded: s.onDegraded("budget " + name),
		OnMemberDegraded: s.onMemberDegraded("budget " + name),
	}
}

// SharedBreaker returns a Breaker named name with the settings c, and its
// Close.
func (s *Store) SharedBreaker(name string, c breaker.Config) (retry.Breaker, func(), error) {
	b, err := NewBreaker(s.breakerConfig(name, c))
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

// SharedBudget returns a Budget named name with the settings c, and its
// Close (which gives the leased tokens back).
func (s *Store) SharedBudget(name string, c budget.RatioConfig) (retry.Budget, func(), error) {
	b, err := NewBudget(s.budgetConfig(name, c))
	if err != nil {
		return nil, nil, err
	}
	return b, b.Close, nil
}

// SharedBreakerGroup returns KeyedBreakers named name with the settings
// c, bounded by kc, and their Close. Each member reports to OnDegraded on
// its own, under the part "breaker NAME".
func (s *Store) SharedBreakerGroup(name string, c breaker.Config, kc keyed.Config) (retry.BreakerGroup, func(), error) {
	k, err := NewKeyedBreakers(kc, s.breakerConfig(name, c))
	if err != nil {
		return nil, nil, err
	}
	return k, k.Close, nil
}

// SharedBudgetGroup returns KeyedBudgets named name with the settings c,
// bounded by kc, and their Close (which gives every member's lease back).
func (s *Store) SharedBudgetGroup(name string, c budget.RatioConfig, kc keyed.Config) (retry.BudgetGroup, func(), error) {
	k, err := NewKeyedBudgets(kc, s.budgetConfig(name, c))
	if err != nil {
		return nil, nil, err
	}
	return k, k.Close, nil
}
