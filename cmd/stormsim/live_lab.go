package main

import (
	"context"
	"slices"
	"time"

	"github.com/stormguard/stormguard/live"
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
against before it, the bad host's attempts per call, and sim.RunHosts at the same parameters. Run by name.`,
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
	})
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
