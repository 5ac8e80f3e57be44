// Package throttle sheds attempts on the client, before they cost the
// downstream anything: SRE, the adaptive throttling of Google's SRE book,
// and Adaptive, the client rate limiter of the AWS SDKs' adaptive retry
// mode. Both are retry.Limiter implementations, set as a Policy's
// Limiter, so retry.Do, httpretry and grpcretry use them with no other
// plumbing:
//
//	users := throttle.NewSRE(throttle.SREConfig{}) // one per downstream
//	policy := &retry.Policy{Limiter: users, Budget: ..., Breaker: ...}
//
// A retry budget caps retries; it does nothing about first attempts, which
// keep hammering a backend that is refusing most of them. A limiter sees
// every attempt, first and retry alike:
//
//   - SRE rejects an attempt locally with probability
//     max(0, (requests − K·accepts)/(requests + 1)) over the last two
//     minutes (once the window holds 16 requests), so the backend is
//     offered about K times what it accepts.
//     A rejection ends the call at once with ErrThrottled.
//   - Adaptive makes each attempt wait for a token of a bucket whose rate
//     CUBIC drives from throttling answers (decrease to 0.7×, cubic
//     growth back). A wait that cannot end before the caller's deadline is
//     refused at once with ErrWaitTooLong.
//
// Retry.Do asks the Limiter before the Breaker; a refusal ends the call
// with reason "throttled" and the limiter's error as the sentinel. done
// hears every admitted attempt's result, also the breaker's refusal (the
// limiters take such an attempt back: it was never sent) and a panic.
//
// # What counts as overload
//
// Both limiters judge answers with IsOverload unless told otherwise
// (SREConfig.Overload, AdaptiveConfig.Throttled): the retry package's
// "overloaded, don't retry" marker (retry.Overloaded), an error
// implementing OverloadReporter, HTTP 429 and 503 (httpretry.StatusError).
// gRPC RESOURCE_EXHAUSTED and UNAVAILABLE count once grpcretry's
// AttemptError implements OverloadReporter; this package does not import
// gRPC. Everything else — success, a 500, a timeout, a reset — is an
// answer that was not a refusal for lack of capacity, and counts as
// accepted. AWS services throttle mostly with an HTTP 400 and an error
// code (ThrottlingException), which IsOverload does not see: in front of
// them set AdaptiveConfig.Throttled to awsretry.IsThrottle.
//
// # Why a package of its own, not the breaker
//
// SRE throttling looks like a breaker — both stop calls to a struggling
// backend — but it has none of a breaker's parts: no states, no open
// period, no probes, no trip condition. It rejects a varying share of
// calls, continuously, from counts of overload answers, where the breaker
// refuses all calls or none from counts of downstream faults
// (retry.IsDownstreamFault, which also counts 500s and timeouts). Folding
// it into breaker.Config would give the breaker two unrelated modes and a
// second classification. It shares its seam (retry.Limiter: admit, then
// hear the result) and its classification with the AWS rate limiter,
// which is not a breaker at all, so the two live together here. A
// Policy may use a Limiter and a Breaker together: the limiter sheds load
// while the backend is merely overloaded, the breaker stops calls to a
// backend that is down.
//
// # Concurrency and cost
//
// SRE's Allow and done take no lock, read no clock and do not allocate:
// the window is a ring of buckets of packed atomic words, and a timer
// moves the current slot at each bucket boundary while requests come (it
// stops when they stop; the next request catches up from the clock). See
// BenchmarkSREAllowDoneParallel. Adaptive takes a mutex per attempt and
// answer, as the SDKs do, and allocates only when an attempt waits.
//
// Time comes from the injectable clock (clock.Clock), and SRE's draws from
// a seedable rand.Source, so the storm lab drives both in virtual time.
package throttle
