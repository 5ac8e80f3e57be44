package live

import (
	"context"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/sim"
)

// loopbackLeg is the one-way network latency a virtual run of a live
// scenario gives each leg: about what a request over a loopback
// connection takes.
const loopbackLeg = 100 * time.Microsecond

// SimModel returns the model a virtual run of sc simulates: the same
// clients, arrivals, duration, warm-up, report queue and faults, and one
// tier for the server: Limit.Concurrency workers (0: unlimited), a queue
// of Limit.Queue (live's 0, no queue, is sim's -1), the same service time,
// failure probability and attempt timeout, and legs of 100µs. A live
// call's CallTimeout has no virtual equivalent: give the policies a
// MaxElapsed instead.
func (sc Scenario) SimModel() sim.Model {
	q := sc.Server.Limit.Queue
	if q == 0 {
		q = -1
	}
	return sim.Model{
		Clients: sc.Clients, Arrival: sc.Arrival, Duration: sc.Duration, Drain: sc.drain(), Warmup: sc.Warmup,
		Reports: sc.Reports,
		Tiers: []sim.Tier{{
			Name: "server", Workers: sc.Server.Limit.Concurrency, Queue: q,
			Service: sc.Server.Service, FailProb: sc.Server.FailProb, Timeout: sc.Server.Timeout,
			Latency: sim.Const(loopbackLeg),
		}},
		Faults: sc.Faults,
	}
}

// RunVirtual runs sc's model in virtual time (SimModel), one trial of
// each of the policies Run would compare, with the budgets and breakers
// shared by the clients as o.Scope says: the virtual twin of a live run,
// to set the two side by side. o.Clients and o.Duration apply; the other
// live-only options do not.
func RunVirtual(ctx context.Context, sc Scenario, o Options) (*sim.Report, error) {
	if o.Clients > 0 {
		sc.Clients = o.Clients
	}
	if o.Duration > 0 {
		sc.Duration = o.Duration
	}
	names, err := sc.policyNames(o.Policies)
	if err != nil {
		return nil, err
	}
	var custom []sim.Variant
	for _, n := range names {
		p, err := sc.policy(n)
		if err != nil {
			return nil, err
		}
		p.Name = n
		p.ShareBudget = o.Scope == Shared
		p.ShareBreaker = o.Scope == Shared
		custom = append(custom, sim.Single(p))
	}
	spec := sim.ModelSpec{
		Name: "virtual:" + sc.Name, Title: fmt.Sprintf("%s, virtual twin (%s)", sc.Name, o.Scope),
		Doc: "The live scenario's model in virtual time (see live.Scenario.SimModel).", Model: sc.SimModel(),
		Policies: names, Custom: custom, Trials: 1,
	}
	vs, err := sim.NewModelScenario(spec)
	if err != nil {
		return nil, err
	}
	return vs.Run(ctx, sim.Options{Seed: o.Seed, Trials: 1, Policies: names})
}
