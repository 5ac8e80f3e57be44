package sim

import (
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// The retry-budget scenario's published models: the client-side token
// bucket and retry breaker of Marc Brooker's "Fixing retries with token
// buckets and circuit breakers" (2022), exactly as the post describes
// them, beside the lab's variants built from stormguard's own budget and
// breaker. They live only inside one simulated client (the simulator runs
// a trial on one goroutine), so they need no locking.

// Published token bucket settings.
const (
	pubBucketMax    = 5   // starts full at 5 tokens
	pubBucketRefill = 0.1 // gained on every first try, whatever its outcome
	pubRetryCost    = 1   // a retry costs 1 and needs more than 1
	pubBreakerShare = 0.1 // no retries while failures ÷ calls > 10%
)

// publishedBucket is the post's per-client token bucket: it starts full at
// 5 tokens and gains 0.1 on every first try (not only on successes); a
// retry costs 1 token and needs more than 1.
type publishedBucket struct{ tokens float64 }

// PublishedBucket returns a Policy.Budget constructor for the post's
// token bucket (per client: one per caller).
func PublishedBucket() func(Env) retry.Budget {
	return func(Env) retry.Budget { return &publishedBucket{tokens: pubBucketMax} }
}

func (b *publishedBucket) Record(isRetry bool, _ error) {
	if !isRetry {
		b.tokens = min(pubBucketMax, b.tokens+pubBucketRefill)
	}
}

func (b *publishedBucket) Withdraw(error) bool {
	if b.tokens > pubRetryCost {
		b.tokens -= pubRetryCost
		return true
	}
	return false
}

// publishedBreaker is the post's per-client retry breaker: it counts every
// attempt and its failures over the client's whole run (no window, no open
// period) and allows no retry while failures ÷ calls exceed 10%. First
// tries always go out (use it with Policy.BreakerRetriesOnly).
type publishedBreaker struct {
	calls, failures int
	done            func(error)
}

// PublishedBreaker returns a Policy.Breaker constructor for the post's
// retry breaker (per client).
func PublishedBreaker() func(Env) retry.Breaker {
	return func(Env) retry.Breaker {
		b := &publishedBreaker{}
		b.done = b.record // one closure per client, not per attempt
		return b
	}
}

func (b *publishedBreaker) record(err error) {
	b.calls++
	if err != nil {
		b.failures++
	}
}

// Allow admits every attempt and counts it.
func (b *publishedBreaker) Allow() (func(error), error) { return b.done, nil }

// Ready refuses retries while the cumulative failure share is above 10%.
func (b *publishedBreaker) Ready() error {
	if b.calls > 0 && float64(b.failures) > pubBreakerShare*float64(b.calls) {
		return breaker.ErrOpen
	}
	return nil
}
