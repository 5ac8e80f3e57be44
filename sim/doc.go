// Package sim is stormguard's storm lab: a discrete-event simulator in
// virtual time that drives the real backoff, budget and breaker code
// against models of servers, networks and faults, to show what each retry
// policy does to a struggling system.
//
// # Engine
//
// Sim is the engine: a 4-ary heap of plain event values ordered by time,
// ties broken by scheduling order, a seeded random generator, and handlers
// registered once and called with two integer arguments, so that running an
// event allocates nothing. Time moves from event to event. Clock exposes
// the virtual time as a clock.Clock; budgets and breakers built on it
// (their Config.Clock) measure windows and open periods in simulated time,
// and AfterFunc callbacks run as events. Nothing blocks: a simulated client
// that waits schedules an event instead.
//
// # The service model
//
// Model describes clients and a chain of servers (tiers). Each client
// process has an arrival stream (Poisson or periodic with a random phase)
// drawn from its own seeded generator (Arrival.Stream), so every policy
// meets exactly the same calls. A tier has a pool of workers, a FIFO queue with a limit
// (a full queue answers 503 at once), a service-time distribution (Dist:
// constant, exponential, folded normal, uniform, log-normal), an optional
// degradation (service slows down as the queue grows past a knee), an
// independent failure probability, and a network latency for each leg into
// it. With several tiers, a request served by tier i holds its worker while
// tier i makes a call, with its own policy, to tier i+1.
//
// Faults change a tier during a window: answer 503, restart (drop every
// request it holds, then answer 503), hang (never answer), lose a share of
// the attempts in the network, lose a share of the replies (after the
// work), add latency, drop capacity to a share of the workers, or fail a
// share of the attempts.
//
// Callers follow retry.Do's sequence exactly, with the real strategy,
// budget and breaker (Policy): breaker Allow, budget Start (for trackers),
// the attempt with its timeout, breaker done, budget Record; after a
// failure, the attempt limit, backoff.Strategy.Delay(n, prev), the
// MaxElapsed check, breaker Ready, budget Withdraw, then the wait as an
// event. Every client process owns its budget and breaker; a tier calling
// the next one owns one of each. A server does not learn that a caller gave
// up: a timed-out request still occupies a worker when its turn comes
// (which is what makes retries feed a metastable overload). A hedge's
// losers are the exception, as in the library: the caller cancels them
// when another attempt wins, and the tier gives them up (see Hedge).
//
// # Metrics
//
// Metrics documents each measure: amplification (peak 1s offered load ÷
// the baseline's: in a scenario, one baseline for every policy of a case,
// that of the same workload with no fault and no retries) and the steady
// load before any fault against it, work (attempts) and attempts per
// call, goodput, success rate, peak concurrency and queue at the measured
// tier, peak connections, recovery time after the last fault (and the
// rule that calls a run stuck only after the recovery tolerance + 10s of
// traffic after the fault, unobserved before), call latency percentiles,
// the share of retries in synchronized spikes, and the kurtosis of the
// load series. Each definition is in the doc comment of its Metrics field.
// Over several trials a report gives their means, with 95% confidence
// intervals from Student's t for the number of trials (TQuantile95).
//
// A run records its events in a Recording (counts and Gauge peaks per 10ms
// bucket, the calls' latencies), and Recording.Metrics and
// Recording.Series compute the measures from it. They are exported, with
// the formulas they apply (PeakRate, RecoveryTime, SyncShare, Kurtosis,
// Percentile, BaselineWindow), so that a harness measuring real traffic
// reports the same numbers by the same code: the live package does. Table,
// Column, MetricsTable, FormatMS and FormatShare render them as the
// stormsim command prints them.
//
// # Scenarios
//
// Scenarios returns the built-in experiments, each comparing policies on
// the same seeded workload (Scenario.Doc repeats each model, and stormsim
// list prints it):
//
//   - aws-occ: the AWS "Exponential Backoff and Jitter" contention model
//     (see OCC). N clients (default 100) each update one row once with
//     optimistic concurrency, all starting at t=0; an attempt is four
//     network legs of |Normal(10ms, 2ms)| (read request, read reply with the
//     version, write request with it, write reply); the server is instant
//     and a write with the current version succeeds. Retries wait one leg
//     plus backoff.Exponential{Base: 5ms, Max: 2s} with the policy's jitter.
//     Reported: mean calls (server writes) and completion time of the last
//     client over 1,000 trials, and a sweep of N from 10 to 190.
//   - retry-budget: the open-loop model of the token-bucket experiments.
//     100 clients, each Poisson at 10 calls/s for 10s; legs Exp(10ms); an
//     unlimited server failing each attempt with probability p in {1%, 10%,
//     20%, 50%, 75%}. No retries; 3 immediate retries (success 1-p⁴, load
//     1+p+p²+p³); 3 retries through a per-client budget.Ratio (5 tokens,
//     +0.1 per successful first try, a retry costs 1 and needs more than
//     1); 3 retries behind a per-client breaker, consulted for retries only,
//     that opens at 10% failures over 10s; and the post's own models
//     (sim/published.go) beside the real ones. Reported: success and
//     load. A second sweep spreads 1,000 calls/s over 10, 100 or 1,000
//     clients at 50% failures: the per-client bucket lets more retries
//     through as clients get smaller, the breaker does not, and a
//     fleet-shared bucket (Policy.ShareBudget) holds 1.1x throughout.
//   - gateway-restart: 5,000 telemetry agents report every 10s from random
//     phases (500/s) to a collector with 75 workers, service uniform in
//     [50ms, 150ms] (750/s, 1.5x the steady rate), a queue of 750, legs
//     |Normal(20ms, 5ms)| and a 2s attempt timeout. At 20s the collector
//     restarts (drops what it holds) and answers 503 for 3s. Agents retry
//     for up to 60s with backoff from 1s capped at 30s, without jitter, with
//     equal or full jitter, or with full jitter and a 3-token budget.
//   - packet-loss: 50 processes at 100 calls/s (5,000 QPS) through a
//     server with 100 workers; legs |Normal(2ms, 0.5ms)|; from 10s to 30s
//     10% of the packets of one direction are lost; the client times out
//     after 500ms. Two cases: requests lost at 70% utilisation (Exp(14ms),
//     queue 2,000: no storm), and replies lost after the work at 95%
//     (Exp(19ms)) in front of a queue of 10,000, deep enough for waits to
//     outgrow the timeout (a storm: about 4 attempts per call, stuck).
//     Three immediate retries against full jitter (from 50ms) alone and
//     with a 20% (and a 10%) token bucket.
//   - metastable: 10 app instances at 28 calls/s (280/s) to a database with
//     24 workers, service time uniform in [60ms, 100ms] (300/s); 1s attempt
//     timeout, and the database serves timed-out requests anyway. Three
//     cases separate the mechanisms that hold a system down after its
//     trigger: blip (a queue of 3,000, a slowdown of up to 1.5x once more
//     than 150 requests queue, the network dropping every attempt from 20s
//     to 30s: retries and slowdown together); paper (Bronson et al.'s own
//     example: no slowdown, queries 1s slower to reach the database for
//     10s, and the paper's client, retry-once: retries alone, at twice
//     the offered load); stall (the blip's database stalled for 2s: the
//     slowdown alone, which no retry policy cures).
//   - cascade: 100 users at 3 calls/s → edge (1,000 workers, 2ms) →
//     service (1,000 workers, 5ms) → database (20 workers, Exp(40ms),
//     500/s, queue 1,000); timeouts 4s, 1s and 250ms; from 20s to 50s the
//     database keeps half its workers (partial case) or answers 503 to
//     everything (total case). Every hop retrying 3 times (up to 4³ = 64
//     database attempts per call), only the service retrying, every hop
//     retrying through a 10% token bucket, and the SRE book's two figures
//     at the users: 3 attempts per request (3x at worst) and a 10%
//     per-client retry budget (1.1x). The "in fault" column
//     (Metrics.FaultAttemptsPerCall) is the load multiplier during the
//     fault, which the total case takes to its closed form. The guard
//     (retry at one layer): layer-rule puts every hop under the core's
//     layer rule (Policy.LayerRule, retry.NestedOneLayer: a hop serving
//     a caller that retries makes one attempt), so 4 attempts reach every
//     tier instead of 4, 16 and 64 ("by tier",
//     Metrics.FaultTierAttemptsPerCall); layer-rule+marker+budget adds
//     the overload marker on the database's shedding
//     (Policy.OverloadMarker: never retried, passed up by every tier) and
//     a 10% token bucket per caller: at most 1.5x at every tier.
//   - brownout: 20 clients at 18 calls/s (360/s) to a backend of 20
//     workers, Exp(50ms) (400/s), a queue of 20; from 30s to 90s it keeps
//     half its workers (200/s). No retries, retries through a budget,
//     behind a breaker, behind the SRE book's adaptive throttling
//     (Policy.Limiter = SRELimiter, K=2 and K=1.1) and behind the AWS
//     adaptive mode (AdaptiveLimiter, whose waits run on the virtual
//     clock, each attempt short of a token reserving one). The note under
//     the table sets the lab's offered load ÷ accepted rate beside the
//     book's K (BrownoutOfferedAndAccepted, over the run's own window and
//     every trial). Its recovery tolerance is 30s: a policy not recovered
//     30s after the brownout, the default run's end, is unobserved, not
//     stuck.
//   - straggler: 50 clients at 20 calls/s (1,000/s) to a service with
//     unlimited workers whose requests take [4ms, 12ms], 1% of them
//     (Tier.StragglerProb) [200ms, 2s]. No hedging, a hedge after 10ms,
//     after the p95 (Policy.Hedge with the real hedge.Adaptive) and the
//     same under a 10% token bucket; "The Tail at Scale"'s figure is set
//     beside the lab's. A second case slows the service by 20ms for
//     everyone for 30s: the fixed hedge doubles the load, the budgeted
//     one does not.
//
// NewModelScenario turns any Model and set of policies into a Scenario;
// the stormsim command builds scenario files with it.
//
// Every policy compared meets the same workload: the arrivals come from
// per-client streams, and every draw about an attempt (its loss, its
// network legs, its service time, its failure) from a generator seeded by
// the run's seed, the attempt's identity (client, call number, attempt
// number, and for a tier's call the attempt it serves) and the kind of
// draw: common random numbers per call, so that two policies differ only
// by what they do, not by luck.
//
// A run is deterministic: the same Options.Seed gives the same Report, and
// the same JSON bytes, whatever the number of worker goroutines.
package sim
