package live

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// DefaultSampleEvery is how often the server's queue and busy workers are
// sampled unless Options.SampleEvery says otherwise.
const DefaultSampleEvery = 100 * time.Millisecond

// progressEvery is how often Run reports progress.
const progressEvery = 250 * time.Millisecond

// Options adjust a live run. Zero fields take the scenario's values or the
// documented defaults.
type Options struct {
	// Seed determines the clients' arrival times (the same for every
	// policy), the server's service-time draws and the jitter.
	Seed uint64
	// Clients, Duration and Drain override the scenario's.
	Clients  int
	Duration time.Duration
	Drain    time.Duration
	// Policies selects the policies compared, by name or alias. nil: the
	// scenario's.
	Policies []string
	// Scope says who shares a policy's budget and breaker. The zero value
	// is Shared.
	Scope Scope
	// Sequential runs the policies one after another, each alone on the
	// machine. By default they run at the same time, each against its own
	// server with its own clients, so that a run lasts one scenario's time
	// whatever the number of policies.
	Sequential bool
	// MaxClients is the most clients a run may start.
	// 0: DefaultMaxClients; at most MaxClientsLimit.
	MaxClients int
	// MaxConns is the most connections each policy's clients hold open to
	// their server, in use or idle; a request beyond it waits for a
	// connection, as it would in a client's pool. It keeps a harness that
	// falls behind from dialling thousands of connections at once.
	// 0: Clients (one per client); at most MaxClientsLimit.
	MaxConns int
	// SampleEvery is how often the server's queue and busy workers are
	// sampled, in [1ms, 1s]. 0: DefaultSampleEvery.
	SampleEvery time.Duration
	// Progress, if set, is called from Run's goroutine about four times a
	// second with the run's elapsed and planned wall time, in milliseconds.
	Progress func(done, total int)
}

// Run runs the scenario once per policy: for each, a fresh server on
// 127.0.0.1 and a fresh fleet of clients calling it through
// httpretry.New(transport, policy). It returns when every run has ended:
// its clients stopped starting calls at Duration and every call ended, or
// Duration+Drain passed and the calls still open were cancelled. Servers
// are shut down, idle connections closed, and every goroutine Run started
// has exited before it returns.
//
// Run returns an error wrapping ErrScenario or sim.ErrPolicy for an
// invalid scenario or options, and ctx's error if ctx ends first.
func Run(ctx context.Context, sc Scenario, o Options) (*Report, error) {
	if o.Clients < 0 || o.Duration < 0 || o.Drain < 0 {
		return nil, fmt.Errorf("%w: clients, duration and drain must not be negative", ErrScenario)
	}
	// The run reads the scenario's slices from many goroutines: its own
	// copies, so that the caller may reuse the scenario.
	sc.Faults = slices.Clone(sc.Faults)
	sc.Custom = slices.Clone(sc.Custom)
	sc.Policies = slices.Clone(sc.Policies)
	defClients, defDuration := sc.Clients, sc.Duration
	if o.Clients > 0 {
		sc.Clients = o.Clients
	}
	if o.Duration > 0 {
		sc.Duration = o.Duration
	}
	if o.Drain > 0 {
		sc.Drain = o.Drain
	}
	if o.Scope > PerClient {
		return nil, fmt.Errorf("%w: unknown scope %d", ErrScenario, o.Scope)
	}
	if o.MaxConns < 0 || o.MaxConns > MaxClientsLimit {
		return nil, fmt.Errorf("%w: max connections %d is outside [0, %d]", ErrScenario, o.MaxConns, MaxClientsLimit)
	}
	every := o.SampleEvery
	if every == 0 {
		every = DefaultSampleEvery
	}
	if every < time.Millisecond || every > time.Second {
		return nil, fmt.Errorf("%w: sample interval %s is outside [1ms, 1s]", ErrScenario, every)
	}
	if err := sc.Validate(o.MaxClients); err != nil {
		return nil, err
	}
	names, err := sc.policyNames(o.Policies)
	if err != nil {
		return nil, err
	}
	units := make([]*policyRun, len(names))
	defer func() {
		for _, u := range units {
			if u != nil && u.set != nil {
				u.set.close()
			}
		}
	}()
	for i, name := range names {
		p, err := sc.policy(name)
		if err != nil {
			return nil, err
		}
		p.Name = name
		set, err := buildPolicies(p, o.Scope, sc.Clients, sc.Server.Timeout, o.Seed)
		if err != nil {
			return nil, err
		}
		units[i] = &policyRun{set: set}
	}

	calls := schedule(&sc, o.Seed)
	began := time.Now()
	groups := [][]*policyRun{units}
	if o.Sequential {
		groups = groups[:0]
		for _, u := range units {
			groups = append(groups, []*policyRun{u})
		}
	}
	pr := progress{fn: o.Progress, total: time.Duration(len(groups)) * sc.horizon()}
	for _, g := range groups {
		if err := runGroup(ctx, &sc, g, calls, &o, every, &pr); err != nil {
			return nil, err
		}
		pr.done += sc.horizon()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	rep := newReport(&sc, o)
	if sc.Clients != defClients || sc.Duration != defDuration {
		rep.Description = fmt.Sprintf("As run: %s clients for %v (the text below describes the defaults, %s clients for %v).\n",
			sim.Commas(sc.Clients), sc.Duration, sim.Commas(defClients), defDuration) + rep.Description
	}
	rep.ElapsedS = time.Since(began).Seconds()
	for _, u := range units {
		m, s, e, l := measure(&sc, u.raw, u.end, u.counters, u.dup)
		rep.Rows = append(rep.Rows, Row{Policy: u.set.name, Metrics: m, Extra: e, Series: s, Live: l})
	}
	for _, u := range units {
		if doc := sc.policyDoc(u.set.name); doc != "" {
			if p := u.set.policies[0]; p.Budget != nil || p.Breaker != nil {
				doc += map[Scope]string{Shared: "; one budget and breaker shared by all clients", PerClient: "; a budget and breaker per client"}[o.Scope]
			}
			rep.PolicyLegend = append(rep.PolicyLegend, [2]string{u.set.name, doc})
		}
	}
	rep.present()
	return rep, nil
}

// policyRun is one policy's run.
type policyRun struct {
	set      *policySet
	end      time.Duration // when its server had stopped, from its start
	raw      *raw
	counters faultinject.Counters
	dup      Duplicates
}

// runGroup runs units at the same time, each with its own server and
// clients, on the same schedule.
func runGroup(ctx context.Context, sc *Scenario, units []*policyRun, calls []arrival, o *Options, every time.Duration, pr *progress) error {
	seed := o.Seed
	conns := o.MaxConns
	if conns == 0 {
		conns = sc.Clients
	}
	servers := make([]*server, len(units))
	for i := range units {
		s, err := newServer(sc, seed)
		if err != nil {
			for _, s := range servers[:i] {
				s.ln.Close()
			}
			return err
		}
		servers[i] = s
	}
	start := time.Now()
	horizon := sc.horizon()
	recs := make([]*recorder, len(units))
	fleets := make([]*fleet, len(units))
	for i, s := range servers {
		recs[i] = newRecorder(start, sim.DefaultBucket, horizon)
		recs[i].queueSlack = sim.QueueSlackFor(sc.Server.Limit.Concurrency)
		s.start(recs[i], seed, every)
		fleets[i] = newFleet(sc, s.url, recs[i], units[i].set, conns)
	}
	hard, cancel := context.WithDeadline(ctx, start.Add(horizon))
	defer cancel()
	var wg sync.WaitGroup
	for _, f := range fleets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.run(hard, calls)
		}()
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-tick.C:
			pr.report(time.Since(start))
		}
	}
	cancel()
	grace := start.Add(horizon)
	if g := time.Now().Add(minGrace); g.After(grace) {
		grace = g
	}
	for i, s := range servers {
		units[i].counters = s.stop(grace)
		units[i].end = recs[i].since()
		units[i].dup = s.keys.result()
		units[i].raw = recs[i].finish()
	}
	return nil
}

// progress reports a run's progress through Options.Progress.
type progress struct {
	fn          func(done, total int)
	done, total time.Duration
}

func (p *progress) report(elapsed time.Duration) {
	if p.fn != nil {
		p.fn(int((p.done + elapsed).Milliseconds()), int(p.total.Milliseconds()))
	}
}
