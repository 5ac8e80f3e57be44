// Package bench compares stormguard with the libraries users would pick
// instead — failsafe-go, cenkalti/backoff, avast/retry-go, sethvargo/go-retry,
// sony/gobreaker and hashicorp/go-retryablehttp — on identical workloads in
// one run. It is its own module so that none of them enters stormguard's.
//
// Every benchmark is named Benchmark<Workload>/lib=<library>, so that
//
//	benchstat -col /lib results.txt
//
// prints one column per library with its ratio to stormguard (the first
// column). `make bench-compare` at the repository root runs it and rewrites
// BENCHMARKS.md.
package bench
