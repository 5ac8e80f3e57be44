// Package budget caps retries as a share of normal traffic, so that a fleet
// of clients can never multiply the load on a failing dependency: the main
// defence against retry storms.
//
// Without a budget, every client that retries 3 times turns an outage into
// four times the load, exactly when the dependency can least take it. A
// budget is shared by every caller of one downstream (one per downstream,
// not one per call) and set as retry.Policy.Budget:
//
//	users := budget.NewRatio(budget.TenPercent())
//	policy := retry.Policy{Budget: users, ...}
//
// retry.Do records every attempt with the budget and asks it before each
// retry's wait; when the budget refuses, Do returns at once with an error
// that matches both retry.ErrBudgetExhausted and the last attempt's error,
// without waiting and without another attempt.
//
// # Choosing a budget
//
// Ratio is a token bucket (gRPC A6 retry throttling, the AWS SDKs' retry
// quota, the "10% of traffic" bucket): successes pay tokens in, retries or
// failures take them out. It follows the downstream's health — when nearly
// everything fails it stops retrying at once, and it recovers as successes
// return — and needs no clock. Start with TenPercent; use GRPC to behave
// as a gRPC client with retryThrottling. The AWS SDKs' retry quotas, with
// the rest of their rules (backoff, classification, throttle codes,
// x-amz-retry-after), are in package awsretry (awsretry.Standard2026,
// awsretry.StandardLegacy, awsretry.Rules), built on Ratio.
//
// Window (Finagle's RetryBudget) allows retries up to a share (a fraction)
// of the requests of the last few seconds, plus a floor of retries per second. It
// budgets on traffic rather than outcomes, so the retry share is the same in
// good times and bad, and the floor lets quiet clients retry. It reads the
// clock; its memory is the window.
//
// Concurrency (Envoy's retry_budget) limits retries in flight, as a
// share (a fraction) of requests in flight with a minimum. Choose it when what hurts
// the downstream is concurrency — long or slow calls, connection pools,
// queues — rather than rate. It relies on the Start and Refund calls that
// retry.Do makes (retry.BudgetTracker).
//
// Budgets combine with a circuit breaker: the breaker stops all calls to a
// dead dependency, the budget bounds the extra load of retries while it is
// merely struggling.
//
// # Units
//
// Shares are fractions from 0 to 1, as everywhere in stormguard:
// WindowConfig.Ratio and ConcurrencyConfig.Ratio (0.2 is 20%) are at most
// MaxRatio (1, as many retries as requests), and Validate rejects a larger
// value with a message naming the field and the unit, so that a percentage
// written by mistake (Ratio: 20) fails instead of allowing 2000% retries.
// A Ratio bucket's amounts are tokens: Refill/RetryCost is its share
// (0.1/1 is 10%).
//
// # Which failures are charged
//
// retry.Do hands Record an error marked retry.Permanent when its Policy
// would not retry it. Ratio charges FailureCost only for failures
// CountsAsFailure accepts (never a retry.Permanent error nor the caller's
// cancellation) and pays in only for successes, so such a failure leaves
// the bucket as it was, as gRPC A6 prescribes (tokens fall on retryable
// failures only). Window counts every first attempt as a request whatever
// its result, and Concurrency ends the attempt's active request, as their
// models say.
//
// # Using budgets
//
// Every config struct's zero value works (each zero field has a documented
// default), Validate reports a bad config with an error wrapping
// ErrInvalidConfig, and the New functions panic on such a config. All
// budgets are safe for concurrent use, allocation-free, and answer Available
// (tokens or retries grantable now, for the stormguard_retry_budget_tokens
// gauge) and Stats (cumulative counters, exact once the calls they count
// have returned; read during calls they may be a few calls apart). A nil
// *Ratio, *Window or *Concurrency grants every retry.
//
// Users may write their own budget: anything implementing retry.Budget
// (Record after every attempt, Withdraw before every retry) can be a
// Policy's Budget. A budget whose retries cost different amounts and that
// gives a successful retry back what it paid implements
// retry.PricedBudget as Ratio does, so that retry.Do tells it which cost
// each retry paid.
package budget
