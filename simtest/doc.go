// Package simtest proves a team's own retry policies against retry storms
// before they ship: it is the `stormsim check` command (Main) and a Go
// test helper (Check) over the same code.
//
// The policy file is read by the config package's loader, the one the
// service uses (config.Parse, then a config.Registry), so a file check
// accepts is a file the service accepts, with the same validation and
// the same line-numbered messages. Each policy's real retry.Policy, built
// by a Registry on the simulator's virtual clock, drives every client
// instance of a simulated fleet: its attempt limit, backoff strategy,
// attempt timeout, elapsed bound, budget, breaker, limiter and hedging,
// in retry.Do's order (see the sim package), with every failure
// classified by its kind (a timeout, a 503, a 500, a 429) as the
// policy's retry_on or preset does. Every instance has its own budget and
// breaker, as every process of a real fleet does; one marked shared: is
// one for the whole fleet, as the service's store makes it.
//
// # The downstream and the storms
//
// Downstream models the service called and the fleet calling it:
// capacity (workers and service time, or a rate), queue, steady request
// rate, number of client instances, network latency and the client's
// timeout. It comes from a downstream: section (in the policy file or in
// a file of its own, --downstream), from flags, or from defaults: 10
// clients, 20 workers serving in uniform(10ms,30ms) (1,000 requests/s),
// 600 calls/s, a queue of two seconds of work, 1ms legs, a 1s timeout.
//
// Each policy meets every storm of the suite (Storms), each after 10s of
// steady traffic (the baseline) in a 40s run: a short outage (the
// gateway restarts, drops what it holds and answers 503 for 3s), a
// brownout (capacity halved for 10s), a latency spike past the client
// timeout for 5s (the metastable trigger), independent failures of 10%
// and 50% of attempts for 10s, and throttling (half the attempts answered
// 429 for 10s). Each storm runs over several trials (Options.Trials,
// default 3) with seeds derived from one, and each measure is judged on
// the trials' mean and its 95% interval (Estimate). A run is
// deterministic: the same seed gives the same report.
//
// # Measures and gates
//
// For each policy × storm the report gives the peak amplification
// (highest offered load over any 1s window ÷ the baseline load), the mean
// amplification while the trigger lasts, whether and how soon after the
// trigger ended the system recovered (sim.Metrics.RecoveryS), the
// share of calls that succeeded while the trigger lasted and after it,
// their p99 latency; and for each policy its weakest point in one
// sentence derived from the figures.
//
// Gates (a gates: section or flags) bound the peak amplification
// (default DefaultMaxAmplification, 2×), the recovery time (default 10s;
// a storm with no recovery fails) and the success during and after the
// storm (no default), for all storms or per storm. A result whose 95%
// interval crosses a gate is borderline: it fails unless
// Gates.PassBorderline. A policy whose retries run away (a run needing more than
// RunawayFactor times the work of steady traffic) fails that storm
// whatever the gates. Main checks one or more files (and globs), each on
// its own, and exits 0 when every gate is kept, 1 when one failed (a
// "file:line:col: FAIL policy failed storm: …" line on stderr, with the
// margin), 2 when the check could not run (bad flags or files: every
// problem a "file:line:col: message" line). Its --format writes text,
// JSON, JUnit XML, SARIF 2.1.0 or GitHub workflow annotations.
//
// README.md beside this file documents the file schema and the command.
package simtest
