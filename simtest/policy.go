package simtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
)

// Policy is one retry policy under test: its name and how each client
// instance of the simulated fleet builds its own copy.
type Policy struct {
	// Name labels the policy in reports and gate failures.
	Name string
	// Operation is the operation the policy was picked for (--operation),
	// or "".
	Operation string
	// New builds the retry.Policy of one client instance, on the run's
	// virtual clock (env.Clock) and seeded random source (env.Rand): its
	// own budget and breaker, as each process of a real fleet has its own,
	// measuring time on env.Clock. Strategies, budgets and breakers that
	// draw random numbers should draw from env.Rand, so that the same
	// seed gives the same report. A nil result is the zero Policy.
	//
	// The simulator runs the policy's MaxAttempts, MaxElapsed, Backoff,
	// AttemptTimeout, MinAttemptTime, Budget and Breaker, in retry.Do's
	// order. It does not consult Classify (every simulated failure, a 503,
	// a 500 or a timeout, is retryable), nor Limiter, and sends no server
	// advice, so MaxRetryAfter has no effect; the clients' calls carry no
	// inbound call, so Nested has no effect; Observer is not called.
	New func(env sim.Env) *retry.Policy
}

// FromFile returns the policies of a file loaded by config.Parse, each
// built per client instance by a config.Registry of its own on the run's
// virtual clock: the same retry.Policy, with the same budget and breaker
// settings, that the service's Registry serves. operations, if given,
// picks the policies serving those operations (as Registry.Policy resolves
// them); otherwise every policy of the file is returned, by name.
//
// Two settings are taken from the run rather than from the registry, so
// that a seed reproduces a report: the backoff strategy and the breaker
// are rebuilt from the policy's spec with the registered constructors
// (backoff.New, breaker.New) given the run's seeded random source
// (config.Options has no Rand to hand them).
func FromFile(f *config.File, operations ...string) ([]Policy, error) {
	reg := config.NewRegistry(config.Options{})
	if err := reg.Apply(f); err != nil {
		return nil, err
	}
	type pick struct{ name, op string }
	var picks []pick
	if len(operations) == 0 {
		for _, n := range sortedKeys(f.Policies) {
			picks = append(picks, pick{name: n})
		}
	} else {
		for _, op := range operations {
			spec := reg.Policy(op).Spec()
			if spec == nil {
				return nil, fmt.Errorf("%w %q: the file gives it no policy (it is not listed under operations, is not a policy's name, and there is no default)", ErrOperation, op)
			}
			picks = append(picks, pick{name: spec.Name, op: op})
		}
	}
	// A policy picked by name is served from a copy of the file without
	// its operations, so that an operation named like another policy does
	// not stand in for it.
	byName := *f
	byName.Operations = map[string]string{}
	out := make([]Policy, 0, len(picks))
	for _, p := range picks {
		name, key, file := p.name, p.op, f
		if key == "" {
			key, file = name, &byName
		}
		spec := f.Policies[name]
		label := name
		if p.op != "" && p.op != name {
			label = p.op + " (" + name + ")"
		}
		out = append(out, Policy{Name: label, Operation: p.op, New: func(env sim.Env) *retry.Policy {
			r := config.NewRegistry(config.Options{Clock: env.Clock})
			if err := r.Apply(file); err != nil {
				return nil // f was applied above; cannot happen
			}
			cp := *r.Policy(key).Policy()
			params := spec.Backoff.Params
			params.Rand = env.Rand
			if b, err := backoff.New(spec.Backoff.Strategy, params); err == nil {
				cp.Backoff = b
			}
			if spec.Breaker != nil {
				c := spec.Breaker.Config
				c.Clock, c.Rand = env.Clock, env.Rand
				if old, ok := cp.Breaker.(*breaker.Breaker); ok {
					old.Close()
				}
				cp.Breaker = breaker.New(c)
			}
			return &cp
		}})
	}
	return out, nil
}

// FromSpec returns the policy of one spec, as config.Parse read it (a
// File's Policies, or Handle.Spec), built like FromFile's.
func FromSpec(spec *config.PolicySpec) Policy {
	name := spec.Name
	if name == "" {
		name = "policy"
	}
	s := *spec
	s.Name = name
	ps, err := FromFile(&config.File{Policies: map[string]*config.PolicySpec{name: &s}, Operations: map[string]string{}})
	if err != nil || len(ps) != 1 { // a one-policy file always applies
		return Policy{Name: name}
	}
	return ps[0]
}

// ErrOperation is wrapped by the error of FromFile for an operation the
// file gives no policy.
var ErrOperation = errors.New("simtest: unknown operation")

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// features are what a policy has, for the sentences about it.
type features struct {
	attempts  int // -1: no count limit
	budget    bool
	breaker   bool
	noJitter  bool
	noBackoff bool
	timeout   time.Duration
	notes     []string
}

// simPolicy turns p into the simulator's description: the static settings
// read from one instance, and constructors that build a fresh instance
// for each client (budget, breaker) and for each run (the strategy).
func simPolicy(p Policy) (sim.Policy, features) {
	build := func(env sim.Env) *retry.Policy {
		if p.New == nil {
			return &retry.Policy{}
		}
		if q := p.New(env); q != nil {
			return q
		}
		return &retry.Policy{}
	}
	probeSim := sim.New(0)
	probe := build(sim.Env{Clock: probeSim.Clock(), Rand: rand.NewPCG(1, 2)})
	limit := probe.AttemptLimit()
	sp := sim.Policy{
		Name:           p.Name,
		MaxAttempts:    max(limit, 0),
		AttemptTimeout: probe.AttemptTimeout,
		MaxElapsed:     probe.MaxElapsed,
		MinAttemptTime: probe.MinAttemptTime,
	}
	f := features{attempts: limit, budget: probe.Budget != nil, breaker: probe.Breaker != nil, timeout: probe.AttemptTimeout}
	if limit != 1 {
		sp.Backoff = func(src rand.Source) backoff.Strategy {
			q := build(sim.Env{Clock: probeSim.Clock(), Rand: src})
			if q.Backoff == nil {
				def := retry.DefaultBackoff.(backoff.Exponential)
				def.Rand = src
				return def
			}
			return q.Backoff
		}
	}
	switch b := probe.Backoff.(type) {
	case backoff.Exponential:
		f.noJitter = b.Jitter == backoff.None
	case backoff.Constant:
		f.noJitter = b.Jitter == backoff.None
		f.noBackoff = b.Interval == 0
	case backoff.Linear:
		f.noJitter = b.Jitter == backoff.None
	}
	if probe.Budget != nil {
		sp.Budget = func(env sim.Env) retry.Budget { return build(env).Budget }
	}
	if probe.Breaker != nil {
		sp.Breaker = func(env sim.Env) retry.Breaker { return build(env).Breaker }
	}
	if probe.Limiter != nil {
		f.notes = append(f.notes, "Limiter is not consulted: the simulator sends every attempt the policy would make")
	}
	if probe.Classify != nil {
		f.notes = append(f.notes, "Classify is not consulted: every simulated failure (503, 500, timeout) is retried")
	}
	if b, ok := probe.Breaker.(*breaker.Breaker); ok {
		b.Close()
	}
	return sp, f
}
