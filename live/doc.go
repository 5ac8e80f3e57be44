// Package live is the storm lab's live mode: it runs a scenario against a
// real HTTP server on 127.0.0.1 with real client goroutines, once per
// retry policy, and reports the simulator's metrics measured on the wire,
// plus what only a real server shows: work wasted on callers that gave up,
// duplicate executions of one Idempotency-Key, and whether callers' entry
// traffic keeps rising after errors begin.
//
// # When to use it
//
// Use the sim package to compare policies fast, deterministically and at
// any scale (thousands of clients, minutes of virtual time in a second).
// Use live to check that the real stack behaves as the model says: the
// net/http client and server, connection pools, the httpretry transport,
// cancellation crossing the wire, timers on a real clock. A live run takes
// as long as its scenario (about 20s for gateway-restart, every policy at
// once), is bounded in clients, calls and time, and never leaves loopback.
//
// # A run
//
// Run(ctx, scenario, options) does, for each policy (by default all at
// the same time, each with its own server and clients, on the same
// schedule):
//
//   - A server: an http.Server on 127.0.0.1:0 whose handler counts each
//     attempt as it arrives, reads the request (so that net/http notices
//     at once when the caller goes away), and hands it to a faultinject
//     middleware (the capacity limit and queue of Server.Limit, and the
//     scenario's 503 or hang windows) around a work handler that holds
//     the request for its service time on a real timer, stopping when the
//     request's context ends unless Server.IgnoreCancel is set. The
//     handler records each execution: its Idempotency-Key, how long it
//     ran, and whether (and when) it saw its caller give up.
//   - Clients: the scenario's calls (Clients arrival streams, periodic or
//     Poisson, drawn from the seed by sim.Arrival.Stream, as sim draws
//     them), each a POST with an Idempotency-Key through
//     http.Client{Transport: httpretry.New(wire, policy,
//     httpretry.WithRetry500())}
//     (500 is retried, like sim.ErrServer) under the caller's deadline
//     (Scenario.CallTimeout). wire counts every attempt the clients send.
//   - Policies: the simulator's definitions (sim.StandardPolicy with the
//     scenario's PolicyParams, or the scenario's Custom sim.Policy values),
//     turned into retry.Policy values on the real clock by RetryPolicy.
//     Options.Scope says whether a policy's budget and breaker are shared
//     by every client (Shared, the default: one process, one downstream)
//     or owned by each client (PerClient, like sim's separate agents).
//
// The run stops starting calls at Duration, and ends when every call has
// ended or at Duration+Drain, when the calls still open are cancelled.
// Servers are shut down, idle connections closed, and every goroutine the
// run started has exited before Run returns.
//
// # What it reports
//
// Each Row carries a sim.Metrics and a sim.Series computed by the
// simulator's own code, sim.Recording, from the run's 10ms buckets
// (amplification is the peak of attempts arriving at the server over a 1s
// window ÷ their rate in the baseline window; recovery, latency
// percentiles, synchronized retries and so on likewise), and Extra, the
// live measures:
//
//   - accounting: attempts sent by the clients and received by the server;
//   - Wasted: handler time after the caller had given up (from the moment
//     the handler saw its context end, or all of it when the caller had
//     left before service began); with cancellation propagated it is next
//     to nothing, without it is the rest of every cut-off service time;
//   - Duplicates: per Idempotency-Key, executions beyond the first, the
//     most executions and completions of one key, and the most executions
//     of one key running at once;
//   - Entry: first attempts per second before and after the first error,
//     with their peak and trend: rising entry traffic means a layer above
//     is retrying, which no client-side budget bounds;
//   - the injector's counters, and the clients' start lag, a check that
//     the machine kept up with the schedule.
//
// Report.Tables and Report.Plots present them; Report.Sim returns the same
// data as a sim.Report for the stormsim command's printers and charts.
// "stormsim live [scenario ...]" runs the built-in scenarios from the
// command line, with tables, JSON and the HTML report.
//
// # Scenarios
//
// Scenarios lists the built-in ones: gateway-restart (sim's scenario with
// its timeline compressed to 20s: 500 agents, a collector with 1.5x
// headroom answering 503 for 3s) and slow-downstream (the downstream's
// latency rises above the callers' deadlines for 4s: timeouts,
// cancellation, reissues). A Scenario is a plain struct: copy one and
// change it, or write your own.
//
// # Cascade
//
// RunCascade is issue #20's multi-tier run, apart from the one-server
// Scenario registry: sim's cascade in its total case ("stormsim live
// cascade"), three real servers on 127.0.0.1 (tier 1 → tier 2 → bottom)
// behind layer.Middleware, each tier calling the next through httpretry,
// the bottom failing for a window, under CascadePolicies (retries at
// every tier, the layer rule, the layer rule with the overload marker and
// a budget, named as sim's cascade names them). The callers follow an
// open-loop schedule drawn from CascadeOptions.Seed, the same calls for
// every policy. Its CascadeReport gives, per tier, the requests counted
// on the wire per client call made during the outage, end-to-end success
// (comparable across policies) and latency.
//
// # Slowdown with hedging
//
// RunSlowdownHedging is issue #22's hedging run ("stormsim live
// slowdown-hedging": not sim's brownout, which is a capacity loss fought
// with limiters): a real server on 127.0.0.1 that slows for everyone for
// a window, open-loop clients through hedge.Transport unbudgeted or under
// one shared 10% budget, and a no-hedge baseline (SlowdownHedgingPolicies). Its
// SlowdownHedgingReport gives the requests per call on the wire before and
// during the slowdown, the losers cancelled, the work wasted on them
// when the server ignores cancellation, the server's peak in flight,
// success and latency. (Its former name, RunBrownout, and its types'
// Brownout names remain as deprecated aliases.)
//
// # One bad host among ten
//
// RunBadHost is issue #37's isolation run ("stormsim live bad-host"):
// sim's bad-host scenario on ten faultinject servers on 127.0.0.1 per
// policy (5% of requests answered 500, host 0 answering 503 while it is
// down), client processes sending GETs through httpretry with
// WithKey(HostKey), each with its own breaker or budget, shared by every
// host or one per host (keyed.Breakers, keyed.Budgets: BadHostPolicies).
// BadHostOptions.Scale runs the same timeline, breakers included, in less
// time. Its BadHostReport gives, for the healthy hosts and the bad one,
// success, goodput and retries per failed first try during the outage
// against before it (the no-fault level, in the same run), and beside
// them sim.RunHosts at the same parameters.
//
// # Server-side control
//
// RunOverload is issue #38's server-side comparison ("stormsim live
// metastable-server", "stormsim live fail-at-scale"): one real server per
// control, a faultinject worker pool with a real service time behind
// layer.Adaptive (the real admission.Limiter: adaptive limit, CoDel,
// adaptive LIFO), layer.Limit or nothing, and naive clients that retry at
// once after any failure; the cases and controls are sim's
// (MetastableServerCases, FailAtScaleCase, MetastableServerControls,
// FailAtScaleControls), sized to a smaller database. Its OverloadReport
// gives sim's OverloadStats (goodput, served in time, queue waits, shed)
// and Metrics measured on the wire, beside sim.RunOverload at the same
// parameters, and says where the two differ by more than 20%.
//
// All four encode as JSON with sim's conventions (snake_case keys,
// seconds), and their Sim methods give them as sim.Reports for the
// command's HTML report.
//
// Live runs are not reproducible bit for bit: the schedule is, but the
// machine's timing is not. Run policies at the same time (the default) to
// give them the same conditions; Options.Sequential runs each alone.
package live
