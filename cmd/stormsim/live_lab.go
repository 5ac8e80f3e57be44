package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// The live runs of the lab's named scenarios (sim's bad-host,
// metastable-server and fail-at-scale on loopback). Like sim's, they run
// by name only: "stormsim live" with no name leaves them out.
func init() {
	liveTopologies = append(liveTopologies, &liveTopology{
		name:  live.BadHostScenario,
		title: "one bad host among ten: sim's bad-host on ten real servers, shared against per-host (keyed) breakers and budgets (live.RunBadHost)",
		doc: `Ten faultinject servers on 127.0.0.1 per policy (5% of requests answered 500, host 0 answering 503 from 20s
to 50s of 70s); client processes (4 by default, --clients) at 50 calls/s each through httpretry with
WithKey(HostKey). --duration scales the whole timeline (and the breakers' window and open period) from its
70s. The table gives the healthy hosts' success, goodput and retries per failed first try during the outage
against before it, the bad host's attempts per call, and sim.RunHosts at the same parameters. Every client
process owns its breaker or budget, as sim's clients do (--scope does not apply). Run by name.`,
		policies: func() []string {
			var out []string
			for _, p := range live.BadHostPolicies() {
				out = append(out, p.Name)
			}
			return out
		},
		noIgnoreCancel: "its servers stop at once when a caller leaves, and the run measures isolation, not wasted work",
		byName:         true,
		run:            runLiveBadHost,
	}, &liveTopology{
		name:  live.MetastableServerScenario,
		title: "metastable failure, server-side control only: sim's metastable-server on a real server behind layer.Adaptive, layer.Limit or nothing (live.RunOverload)",
		doc: `One real server per control: 8 workers of [60ms, 100ms] (100/s, a third of sim's database), naive clients
at 93 calls/s retrying once at once after a 503 or their 1s timeout. Two cases: every leg 1s slower from 20s
to 30s of 90s (the paper's trigger), and twice the calls from 20s to 30s. --duration scales the timeline from
its 90s (not the service, the timeout or the trigger's latency); --clients and --scope do not apply. Each
table sets the live figures (goodput, served in time, queue wait, shed, recovery) beside sim.RunOverload at
the same parameters. Run by name.`,
		policies:       func() []string { return controlNames(live.MetastableServerControls(live.DefaultOverloadWorkers)) },
		noIgnoreCancel: "its database serves every request it has taken, whether or not the caller is still there (sim's model)",
		byName:         true,
		run: func(ctx context.Context, cfg *config, policies []string) (liveTopologyReport, time.Duration, error) {
			return runLiveOverload(ctx, cfg, live.MetastableServerScenario, 90*time.Second, live.MetastableServerControls(live.DefaultOverloadWorkers), policies)
		},
	}, &liveTopology{
		name:  live.FailAtScaleScenario,
		title: "Fail at Scale's queue at 2x overload: sim's fail-at-scale on a real server, a plain FIFO queue against layer.Adaptive's CoDel and adaptive LIFO (live.RunOverload)",
		doc: `One real server per control: 8 workers of [60ms, 100ms] (100/s), 93 calls/s and 200/s from 20s to 50s of
70s, one attempt each under a 1s deadline; every control has a queue of 333 (a 3.3s wait once full).
--duration scales the timeline from its 70s; --clients and --scope do not apply. The table sets the live
figures beside sim.RunOverload at the same parameters. Run by name.`,
		policies:       func() []string { return controlNames(live.FailAtScaleControls(live.DefaultOverloadWorkers)) },
		noIgnoreCancel: "its database serves every request it has taken, whether or not the caller is still there (sim's model)",
		byName:         true,
		run: func(ctx context.Context, cfg *config, policies []string) (liveTopologyReport, time.Duration, error) {
			return runLiveOverload(ctx, cfg, live.FailAtScaleScenario, 70*time.Second, live.FailAtScaleControls(live.DefaultOverloadWorkers), policies)
		},
	})
}

func controlNames(cs []sim.ServerControl) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}

// runLiveOverload runs live.RunOverload for scenario with --duration (the
// timeline, scaled from full), --seed, --sequential and --policies (the
// controls); --clients does not apply: the load follows the capacity.
func runLiveOverload(ctx context.Context, cfg *config, scenario string, full time.Duration, controls []sim.ServerControl, policies []string) (liveTopologyReport, time.Duration, error) {
	if cfg.clients > 0 {
		return nil, 0, fmt.Errorf("%w: %s: --clients does not apply: the clients' rate follows the database's capacity (%d workers, %.0f%% of it)",
			live.ErrScenario, scenario, live.DefaultOverloadWorkers, 100*280.0/300)
	}
	o := live.OverloadOptions{Scenario: scenario, Seed: cfg.seed, Sequential: cfg.sequential}
	if cfg.duration > 0 {
		o.Scale = cfg.duration.Seconds() / full.Seconds()
	}
	for _, c := range controls {
		if policies == nil || slices.Contains(policies, c.Name) {
			o.Controls = append(o.Controls, c)
		}
	}
	r, err := live.RunOverload(ctx, o)
	if err != nil {
		return nil, 0, err
	}
	var lag time.Duration
	for _, c := range r.Cases {
		for _, row := range c.Rows {
			lag = max(lag, row.StartLagMax)
		}
	}
	return r, lag, nil
}

// runLiveBadHost runs live.RunBadHost with --clients (the client
// processes), --duration (the timeline, scaled from 70s), --seed,
// --sequential and --policies.
func runLiveBadHost(ctx context.Context, cfg *config, policies []string) (liveTopologyReport, time.Duration, error) {
	o := live.BadHostOptions{Clients: cfg.clients, Rate: defaultLiveBadHostRate, Seed: cfg.seed, Sequential: cfg.sequential}
	if o.Clients == 0 {
		o.Clients = defaultLiveBadHostClients
	}
	if cfg.duration > 0 {
		o.Scale = cfg.duration.Seconds() / 70
	}
	for _, p := range live.BadHostPolicies() {
		if policies == nil || slices.Contains(policies, p.Name) {
			o.Policies = append(o.Policies, p)
		}
	}
	r, err := live.RunBadHost(ctx, o)
	if err != nil {
		return nil, 0, err
	}
	var lag time.Duration
	for _, row := range r.Rows {
		lag = max(lag, row.StartLagMax)
	}
	return r, lag, nil
}

// The command's bad-host fleet: 4 client processes at 50 calls/s (200/s,
// what loopback on two loaded cores carries for four policies at once).
// With 50 calls/s a client's per-host breaker sees about 50 attempts to a
// healthy host in its 10s window, so the 5% of failures almost never
// reach its 20%; with 10 clients at 20/s it would see 20, and trip now and
// then by chance.
const (
	defaultLiveBadHostClients = 4
	defaultLiveBadHostRate    = 50
)
