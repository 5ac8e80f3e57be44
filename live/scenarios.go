package live

import (
	"fmt"
	"time"

	"github.com/stormguard/stormguard/faultinject"
	"github.com/stormguard/stormguard/sim"
)

// Scenarios returns the built-in live scenarios, fresh copies each time.
func Scenarios() []Scenario {
	return []Scenario{GatewayRestart(), SlowDownstream()}
}

// Lookup returns a copy of the built-in scenario called name.
func Lookup(name string) (Scenario, bool) {
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc, true
		}
	}
	return Scenario{}, false
}

// Names returns the names of the built-in scenarios.
func Names() []string {
	var out []string
	for _, sc := range Scenarios() {
		out = append(out, sc.Name)
	}
	return out
}

// GatewayRestart is sim's gateway-restart scenario with its timeline
// compressed to fit a 20s run.
func GatewayRestart() Scenario {
	return Scenario{
		Name:  "gateway-restart",
		Title: "Telemetry gateway restart, live: 500 agents, 3s of 503s",
		TitleFor: func(sc *Scenario) string {
			return fmt.Sprintf("Telemetry gateway restart, live: %s agents, 503s %s", sim.Commas(sc.Clients), sim.FaultSpan(sc.Faults[0], sc.Duration))
		},
		Doc: `sim's gateway-restart on a real loopback server, its timeline compressed to fit 20s.
500 agents (client goroutines) each report every 2s from a random phase (250 calls/s), as a
POST carrying an Idempotency-Key. The collector has 38 workers (faultinject limit) and a queue
of 380; service time is uniform in [50ms, 150ms] (capacity 380/s, 1.5x the steady rate); a
request finding the queue full is refused with 503. An attempt times out after 2s and a call
after 8s. From t=5s to t=8s the collector restarts: every request is answered 503 at once
(no Retry-After). Policies, as in sim (backoff from 1s, doubling, capped at 30s, retrying
until the call's deadline): exponential without jitter, full jitter, full jitter plus a retry
budget (budget.TenPercent: 10 tokens, +0.1 per successful call), and the same plus a breaker;
naive immediate retries (3 of them, no backoff, no budget) show the storm. The budget and the
breaker are shared by all agents of a policy unless Options.Scope is PerClient.
Each agent keeps its reports in a real queue.Queue (10 reports, drop-oldest, batches of up to
10, one delivery at a time) under its policy, as seed 004's agents do: a delivery is one call
of up to 8s (the policy's MaxElapsed); one that gives up (the budget refusing its retry, the
breaker open, its 8s spent) puts its reports back and the queue pauses for the policy's next
backoff, so a refused retry delays reports instead of losing them. The table's
delivered/late/dropped column counts the reports; calls and success count the deliveries.`,
		Reports:     &sim.ReportQueue{Capacity: 10},
		Clients:     500,
		Arrival:     sim.Arrival{Kind: sim.Periodic, Interval: 2 * time.Second},
		Duration:    20 * time.Second,
		Warmup:      2 * time.Second,
		CallTimeout: 8 * time.Second,
		Server: Server{
			Limit:   faultinject.Limit{Concurrency: 38, Queue: 380},
			Service: sim.Uniform(50*time.Millisecond, 150*time.Millisecond),
			Timeout: 2 * time.Second,
		},
		Faults:   []sim.Fault{{Kind: sim.FaultUnavailable, Start: 5 * time.Second, End: 8 * time.Second}},
		Params:   sim.PolicyParams{MaxAttempts: -1, Base: time.Second, Max: 30 * time.Second, MaxElapsed: 8 * time.Second},
		Policies: DefaultPolicies(),
		// naive: sim's immediate policy, 3 retries whatever MaxAttempts says.
	}
}

// SlowDownstream is an overload with timeouts: the downstream's latency
// rises above the callers' deadline for 4s.
func SlowDownstream() Scenario {
	return Scenario{
		Name:  "slow-downstream",
		Title: "Downstream slower than the deadline for 4s: timeouts, cancellation, reissues",
		TitleFor: func(sc *Scenario) string {
			return fmt.Sprintf("Downstream slower than the deadline %s: %s clients, timeouts, cancellation, reissues",
				sim.FaultSpan(sc.Faults[0], sc.Duration), sim.Commas(sc.Clients))
		},
		Doc: `100 clients each call as a Poisson process at 1 call/s (100 calls/s), a POST carrying an
Idempotency-Key. The server has 15 workers and a queue of 15, service time uniform in
[50ms, 150ms] (capacity 150/s, 1.5x the load). An attempt times out after 500ms, a call after
2s. From t=5s to t=9s every request takes 2s more to serve (holding its worker): above both
deadlines, so every attempt served in the window times out, its caller cancels it, and a
server that honours cancellation frees the worker at once (set Server.IgnoreCancel to see
the wasted work of one that does not). A caller whose call fails issues it once more with
the same key (the layer above retrying), so entry traffic rises after errors begin, whatever
the retry policy. Policies: immediate retries, exponential backoff from 100ms without and
with full jitter, full jitter with a shared retry budget (budget.TenPercent), and the same
plus a breaker; at most 4 attempts per call.`,
		Clients:     100,
		Arrival:     sim.Arrival{Kind: sim.Poisson, Rate: 1},
		Duration:    15 * time.Second,
		Warmup:      2 * time.Second,
		CallTimeout: 2 * time.Second,
		Reissue:     1,
		Server: Server{
			Limit:   faultinject.Limit{Concurrency: 15, Queue: 15},
			Service: sim.Uniform(50*time.Millisecond, 150*time.Millisecond),
			Timeout: 500 * time.Millisecond,
		},
		Faults: []sim.Fault{{Kind: sim.FaultSlow, Start: 5 * time.Second, End: 9 * time.Second,
			Extra: sim.Const(2 * time.Second)}},
		Params:   sim.PolicyParams{MaxAttempts: 4, Base: 100 * time.Millisecond, Max: 2 * time.Second},
		Policies: DefaultPolicies(),
	}
}
