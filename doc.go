// Package stormguard keeps client retries from turning a short downstream
// blip into an outage.
//
// The library lives in the sub-packages; this package holds only the
// project's documentation and the test that keeps the root module free of
// dependencies:
//
//   - backoff: delay strategies (constant, linear, exponential) and jitter
//     (none, full, equal, decorrelated, proportional)
//   - retry: Do[T] and Run, the executor, with classification, attempt
//     timeouts, deadline-aware stopping, server advice and observers
//   - budget: retry budgets (ratio token bucket, time window, concurrency)
//   - breaker: circuit breakers (consecutive, count and time windows, slow calls)
//   - httpretry: an http.RoundTripper that retries safely
//   - queue: a bounded drop-oldest delivery queue and a background retry scheduler
//   - faultinject: fault injection for real HTTP traffic
//   - sim: the discrete-event storm simulator behind cmd/stormsim
//   - clock: the injectable clock (clocktest.Fake for tests)
//
// Integrations with Prometheus, OpenTelemetry, gRPC, Redis and policy files
// are separate modules so that this one imports only the standard library.
package stormguard
