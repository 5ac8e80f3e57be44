// Package retry runs an operation again when it fails transiently, without
// letting the retries themselves become the outage.
//
//	v, err := retry.Do(ctx, &policy, func(ctx context.Context) (T, error) { ... })
//
// A Policy says how many attempts to make, how long to wait between them
// (a backoff.Strategy), how long one attempt may take, which errors are worth
// another try, and which shared limits apply: a Budget that caps retries as
// a share of normal traffic and a Breaker that stops calling a dependency
// that is down. A zero Policy (or a nil one) works: at most
// DefaultMaxAttempts (3) attempts, full-jitter exponential backoff from
// 100ms to 10s, and the DefaultClassifier. No default retries forever:
// MaxAttempts: Unlimited asks for that explicitly, and the call then stops
// on the caller's context, MaxElapsed, the budget, the breaker or a
// permanent error.
//
// The order of checks for each call is fixed and documented so that it can
// be reasoned about under load:
//
//  1. Before every attempt: the caller's context, then the Limiter, then
//     the Breaker (open: return at once, no wait, no budget spent).
//  2. The attempt runs with a context bounded by AttemptTimeout. Its outcome
//     goes to the Observer, then the Breaker, then the Limiter, then the
//     Budget (which hears an error the Policy would not retry marked
//     Permanent, so it does not charge it). An attempt whose operation
//     panics is reported to all of them as failed, with a *PanicError,
//     before the panic goes on; so is an attempt during whose start or end
//     a callback panics (Classify, the Observer, a breaker listener, the
//     Limiter's done): every permit, probe and budget slot is given back.
//  3. After a failure, Do stops when the caller's context is done, the error
//     is not retryable (Permanent, or the Classifier says so; an attempt
//     cut by AttemptTimeout always is), or MaxAttempts is reached.
//  4. The wait is computed from the Backoff, raised to a server's advice
//     (After, Retry-After, gRPC pushback); advice beyond MaxRetryAfter
//     stops the call with ErrAdviceExceedsCap.
//  5. If the caller's deadline (or MaxElapsed) cannot hold that wait plus
//     MinAttemptTime, Do stops now rather than sleep only to fail, with
//     ErrDeadlineTooClose (ErrElapsed for MaxElapsed).
//  6. The Breaker is asked whether it would admit the retry, then the
//     NestedBudget when the layer rule asks it, then the Budget; a refusal
//     means stop now (a NestedBudget grant already made is given back).
//  7. The wait runs on the policy's clock and ends early if the caller's
//     context ends.
//
// Every failed call returns an *Error that wraps the last attempt's error and
// at most one sentinel saying why Do stopped (ErrAttemptsExhausted,
// ErrBudgetExhausted, ErrElapsed, ErrDeadlineTooClose, ErrAdviceExceedsCap,
// breaker.ErrOpen, or the context's error, with the context's cause when
// it has one of its own), so errors.Is finds each.
//
// Do is safe for concurrent use with a shared Policy, whatever sources its
// Rand and Backoff hold, and does not allocate when the first attempt
// succeeds.
package retry
