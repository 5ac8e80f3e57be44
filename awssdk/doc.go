// Package awssdk puts a stormguard retry.Policy behind every client of the
// AWS SDK for Go v2 (github.com/aws/aws-sdk-go-v2): its Retryer is an
// aws.RetryerV2, so that one line,
//
//	policy := awsretry.Rules{DynamoDB: true}.Policy() // the SDKs' 2026 rules
//	policy.Budget = fleetBudget                        // e.g. a redisstore budget shared by the fleet
//	policy.Breaker = breaker.New(breaker.Config{})
//	policy.Observer = metrics                          // a promretry.Collector: the stormguard_* metrics
//	cfg, err := config.LoadDefaultConfig(ctx, awssdk.LoadOptions(policy)...)
//
// gives every client made from cfg the AWS SDKs' standard retry rules
// (awsretry: attempts, backoff, throttle codes, the retry quota), a budget
// that can be shared by every client and every process, a circuit breaker,
// client-side throttling and the metrics, with the SDK's own retry loop.
// LoadOptions also adds the Retryer's middleware to every operation, which
// numbers the attempts, reports the end of each operation (CallEnd),
// applies Policy.AttemptTimeout and MaxElapsed, resolves the Policy's keyed
// groups (keyed.Budgets, keyed.Breakers, keyed.Limiters) once per
// operation with its context (keyed.WithKey), gives back a
// budget.Concurrency's grants of retries that never ran, reports an
// attempt whose sending panicked, makes no attempt or retry for an
// operation that has ended while a middleware of the user's left its
// retry loop running (ErrOperationEnded), and sends each attempt with a
// context that does not carry its operation, so that an SDK call made
// inside it by a client without the middleware is an operation of its
// own; config.WithRetryer(
// awssdk.Provider(policy)) alone gives the rest (see Retryer for what it
// cannot do; a Policy that needs the middleware fails every operation with
// ErrMiddlewareMissing without it).
//
// The rules themselves live in the root module (awsretry, standard library
// only); this module holds only the SDK glue, so that users who take the
// core take no AWS dependency.
package awssdk
