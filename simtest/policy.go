package simtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/throttle"
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
	// AttemptTimeout, MinAttemptTime, Budget, Breaker and Limiter, in
	// retry.Do's order, and hands Classify (nil: retry.DefaultClassifier)
	// each failed attempt as an *Answer of its kind (a timeout, a 503, a
	// 500, a 429), as the HTTP adapter reports it. A throttle.Adaptive
	// limiter built here is asked never to wait (an attempt short of a
	// token is refused); sim.AdaptiveLimiter's waits on the virtual clock.
	// No server advice is sent, so MaxRetryAfter has no effect; the
	// clients' calls carry no inbound call, so Nested has no effect;
	// Observer is not called. A panic in New is raised again by Run (and
	// Check) on the caller's goroutine, after every run has stopped.
	New func(env sim.Env) *retry.Policy
	// Hedge, when set, makes every client hedge its calls under this
	// policy (sim.Hedge: package hedge's rule). FromFile sets it from the
	// policy's hedge: block.
	Hedge *sim.Hedge

	spec   *config.PolicySpec // FromFile's: the limiter and retry_on are rebuilt from it
	grpc   bool               // classify by retry_on.grpc_codes (FromFile's gRPC run)
	stores *fleetStores       // FromFile's: each run's shared parts, let go as the run ends
}

// FromFile returns the policies of a file loaded by config.Parse, each
// built per client instance by a config.Registry of its own on the run's
// virtual clock: the same retry.Policy, with the same budget and breaker
// settings, that the service's Registry serves. operations, if given,
// picks the policies serving those operations (as Registry.Policy resolves
// them, File.PolicyOf); otherwise every policy of the file is returned, by name.
//
// Two settings are taken from the run rather than from the registry, so
// that a seed reproduces a report: the backoff strategy and the breaker
// are rebuilt from the policy's spec with the registered constructors
// (backoff.New, breaker.New) given the run's seeded random source
// (config.Options has no Rand to hand them).
//
// A breaker or ratio budget marked shared: is one state for the whole
// simulated fleet in each run, as the service's store (Options.Shared)
// makes it one for the whole fleet.
func FromFile(f *config.File, operations ...string) ([]Policy, error) {
	stores := &fleetStores{names: sharedNames(f)}
	reg := config.NewRegistry(stores.options(nil, nil))
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
			// The policy's key, as the Registry resolves it (a File built
			// in code may leave PolicySpec.Name empty).
			name := f.PolicyOf(op)
			if name == "" {
				return nil, fmt.Errorf("%w %q: the file gives it no policy (it is not listed under operations, is not a policy's name, and there is no default)", ErrOperation, op)
			}
			picks = append(picks, pick{name: name, op: op})
		}
	}
	// Each policy is served from a copy of the file holding it alone (and
	// the operation it was picked for): every client instance of every run
	// builds a Registry, which then builds one policy rather than the whole
	// file's. A policy picked by name has no operations, so that an
	// operation named like another policy does not stand in for it.
	stores.endRun(nil) // reg's: it is done with
	out := make([]Policy, 0, len(picks))
	for _, p := range picks {
		name, key := p.name, p.op
		one := *f
		one.Policies = map[string]*config.PolicySpec{name: f.Policies[name]}
		one.Operations, one.Default = map[string]string{}, ""
		if key == "" || key == name {
			key = name
		} else {
			one.Operations[key] = name
		}
		file := &one
		spec := f.Policies[name]
		label := name
		if p.op != "" && p.op != name {
			label = p.op + " (" + name + ")"
		}
		pol := Policy{Name: label, Operation: p.op, spec: spec, stores: stores, New: func(env sim.Env) *retry.Policy {
			r := config.NewRegistry(stores.options(env.Clock, env.Rand))
			if err := r.Apply(file); err != nil {
				return nil // f was applied above; cannot happen
			}
			cp := *r.Policy(key).Policy()
			params := spec.Backoff.Params
			params.Rand = env.Rand
			switch b := cp.Backoff.(type) {
			case awsretry.Rules: // a preset's: its jitter from the run's source too
				b.Rand = env.Rand
				cp.Backoff = b
			case awsretry.LegacyRules:
				b.Rand = env.Rand
				cp.Backoff = b
			default:
				if b, err := backoff.New(spec.Backoff.Strategy, params); err == nil {
					cp.Backoff = b
				}
			}
			if spec.Breaker != nil && spec.Breaker.Shared == "" { // a shared one is the run's (fleetStores)
				c := spec.Breaker.Config
				c.Clock, c.Rand = env.Clock, env.Rand
				if old, ok := cp.Breaker.(*breaker.Breaker); ok {
					old.Close()
				}
				cp.Breaker = breaker.New(c)
			}
			return &cp
		}}
		if h := spec.Hedge; h != nil {
			pol.Hedge = &sim.Hedge{Delay: h.Delay, MaxHedges: h.MaxHedges}
			if h.Adaptive != nil {
				a := *h.Adaptive
				pol.Hedge.Adaptive = &a
			}
		}
		switch http, grpc := len(spec.RetryOn.HTTPStatus) > 0, len(spec.RetryOn.GRPCCodes) > 0; {
		case http && grpc:
			// Both adapters may serve it: check each client's list.
			h, g := pol, pol
			h.Name, g.Name, g.grpc = label+" (http)", label+" (grpc)", true
			out = append(out, h, g)
		case grpc:
			pol.grpc = true
			out = append(out, pol)
		default:
			out = append(out, pol)
		}
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
	limiter   bool
	hedge     bool
	classify  bool // retries only some failures (retry_on, a preset, Classify)
	noJitter  bool
	noBackoff bool
	timeout   time.Duration
	notes     []string
}

// simPolicy turns p into the simulator's description for one run of
// storm: the static settings read from one instance, and constructors
// that build a fresh instance for each client (budget, breaker, limiter)
// and for each run (the strategy), each behind the run's seams (see
// seams) so that they hear the downstream's answers by kind.
//
// end ends the run: call it once the run is over (also when it failed).
// It lets go of what FromFile's policy holds for the run's clocks (the
// shared parts of fleetStores).
func simPolicy(p Policy, storm Storm, counts *runCounts) (sp sim.Policy, f features, end func()) {
	var mu sync.Mutex
	clocks := map[clock.Clock]bool{} // the clocks the run built instances on
	end = func() {
		mu.Lock()
		cs := clocks
		clocks = map[clock.Clock]bool{}
		mu.Unlock()
		for c := range cs {
			p.stores.endRun(c)
		}
	}
	build := func(env sim.Env) *retry.Policy {
		if p.New == nil {
			return &retry.Policy{}
		}
		if p.stores != nil {
			mu.Lock()
			clocks[env.Clock] = true
			mu.Unlock()
		}
		if q := p.New(env); q != nil {
			return q
		}
		return &retry.Policy{}
	}
	probeSim := sim.New(0)
	probe := build(sim.Env{Clock: probeSim.Clock(), Rand: rand.NewPCG(1, 2)})
	limit := probe.AttemptLimit()
	sp = sim.Policy{
		Name:           p.Name,
		MaxAttempts:    max(limit, 0),
		AttemptTimeout: probe.AttemptTimeout,
		MaxElapsed:     probe.MaxElapsed,
		MinAttemptTime: probe.MinAttemptTime,
	}
	f = features{attempts: limit, budget: probe.Budget != nil, breaker: probe.Breaker != nil, timeout: probe.AttemptTimeout}
	sm := &seams{throttle: storm.throttle, counts: counts}
	if probe.Classify != nil {
		sm.classify = probe.Classify
	}
	if p.grpc && p.spec != nil {
		sm.classify = grpcClassifier(p.spec.RetryOn.GRPCCodes)
	}
	f.classify = sm.classify != nil
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
	// Every client has the seams' budget and breaker: they count hedges
	// and end the calls whose failure the policy does not retry, and are
	// transparent otherwise.
	sp.Budget = func(env sim.Env) retry.Budget {
		var inner retry.Budget
		if probe.Budget != nil {
			inner = build(env).Budget
		}
		return sm.budget(inner, env)
	}
	sp.Breaker = func(env sim.Env) retry.Breaker {
		var inner retry.Breaker
		if probe.Breaker != nil {
			inner = build(env).Breaker
		}
		return &classBreaker{inner: inner, s: sm, clk: env.Clock}
	}
	switch {
	case p.spec != nil && p.spec.Limiter != nil:
		f.limiter = true
		sp.Limiter = specLimiter(p.spec.Limiter, sm)
	case probe.Limiter != nil:
		f.limiter = true
		sp.Limiter = func(env sim.Env) retry.Limiter {
			l := build(env).Limiter
			if _, ok := l.(*throttle.Adaptive); ok {
				// Its Acquire would wait on a timer of the virtual clock,
				// which nothing advances while the run waits: it is asked
				// never to wait.
				return &noWaitLimiter{inner: l, clk: env.Clock}
			}
			return &seamLimiter{inner: l, s: sm}
		}
		if _, ok := probe.Limiter.(*throttle.Adaptive); ok {
			f.notes = append(f.notes, "the throttle.Adaptive limiter built in Go hears the simulator's own errors (sim.ErrOverloaded, sim.ErrServer), "+
				"not HTTP answers, and is asked never to wait: an attempt short of a token is refused; "+
				"build it with sim.AdaptiveLimiter, or load the policy from a file, for the waits")
		}
	}
	if p.Hedge != nil {
		h := *p.Hedge
		sp.Hedge, f.hedge = &h, true
		if f.limiter {
			f.notes = append(f.notes, "hedge: is not used with a limiter (package hedge refuses to hedge behind a Limiter), so no hedges are sent")
		}
	}
	if b, ok := probe.Breaker.(*breaker.Breaker); ok {
		b.Close()
	}
	return sp, f, end
}

// specLimiter builds a file's limiter per client on the run's clock and
// seeded random source, hearing the downstream's answers by kind and
// judging them with the classification the Registry gives the limiter
// (LimiterSpec.ThrottleClassifier: throttle_on, else the kind's default,
// so an aws_adaptive limiter counts a 429 and not a 503).
func specLimiter(ls *config.LimiterSpec, sm *seams) func(sim.Env) retry.Limiter {
	th := ls.ThrottleClassifier()
	switch ls.Kind {
	case config.LimiterAWSAdaptive:
		return func(env sim.Env) retry.Limiter {
			c := ls.Adaptive
			c.Clock = env.Clock
			c.Throttled = func(err error) bool { return th(answer(err, sm.throttle)) }
			// sim's: Acquire reserves the token and the run waits for it
			// on the virtual clock (a plain Adaptive would block the run).
			return sim.AdaptiveLimiter(c)(env)
		}
	default:
		return func(env sim.Env) retry.Limiter {
			c := ls.SRE
			c.Clock = env.Clock
			c.Overload = th // seamLimiter hands it Answers
			c.Rand = rand.NewPCG(rand.New(env.Rand).Uint64(), 0x853c49e6748fea9b)
			return &seamLimiter{inner: throttle.NewSRE(c), s: sm}
		}
	}
}
