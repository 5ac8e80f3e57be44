// Package throttlebench compares stormguard's SRE adaptive throttling
// (throttle.SRE) with failsafe-go's adaptivethrottler, which implements
// the same SRE-book formula, on identical workloads.
//
// The two are configured alike: K = 2 is failsafe-go's failure-rate
// threshold 0.5 (it lets through successes/0.5 executions), both over a
// two-minute window, capped at a 0.9 rejection rate, and rejecting nothing
// below 16 requests (stormguard's MinRequests, failsafe-go's execution
// threshold).
// TestEquivalentRejection checks that they then compute the same
// probability from the same counts. They differ in what they count:
// failsafe-go counts an execution when its result is recorded and does not
// count its rejections, stormguard counts a request when it is admitted and
// counts rejections as requests (the book's rule), so under load their
// probabilities part; the benchmarks measure cost only.
//
// Benchmarks are named Benchmark<Workload>/<mode>/lib=<library>, as in the
// parent bench package.
package throttlebench
