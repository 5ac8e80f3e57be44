package awsretry

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// Constants of the AWS SDKs' 2026 standard retry rules.
const (
	// BaseDelay is the base of the backoff after a transient error.
	BaseDelay = 50 * time.Millisecond
	// DynamoDBBaseDelay is the base of the backoff after a transient
	// error, for DynamoDB and DynamoDB Streams.
	DynamoDBBaseDelay = 25 * time.Millisecond
	// ThrottleBaseDelay is the base of the backoff after a throttling
	// answer (IsThrottle), for every service.
	ThrottleBaseDelay = time.Second
	// MaxBackoff caps the computed wait before the jitter draw.
	MaxBackoff = 20 * time.Second
	// MaxAdviceExtra is the most an x-amz-retry-after advice may add to
	// the computed wait.
	MaxAdviceExtra = 5 * time.Second
	// MaxAttempts is the attempt limit, the first attempt included.
	MaxAttempts = 3
	// DynamoDBAttempts is the attempt limit for DynamoDB and DynamoDB
	// Streams.
	DynamoDBAttempts = 4
)

// Rules are the AWS SDKs' standard retry rules of 2026 (SEP 2.1), as
// implemented by aws-sdk-go-v2 (aws/retry, with AWS_NEW_RETRIES_2026) and
// aws-sdk-dotnet (StandardRetryPolicy.CalculateRetryDelay):
//
//   - at most 3 attempts (4 for DynamoDB);
//   - the quota of Standard2026;
//   - retry n waits a full-jitter draw from [0, min(base·2^(n−1), 20 s)],
//     base 1 s after a throttling answer and 50 ms otherwise (25 ms for
//     DynamoDB);
//   - an x-amz-retry-after header (milliseconds) replaces that wait,
//     clamped to [wait, wait + 5 s].
//
// The zero Rules are the rules for any service but DynamoDB. Rules is a
// backoff.Strategy, whose Delay is the wait after a transient error, and a
// retry.ErrorBackoff, whose DelayAfter is the full rule that retry.Do
// follows. Policy builds a *retry.Policy.
type Rules struct {
	// DynamoDB selects the rules of DynamoDB and DynamoDB Streams:
	// 4 attempts and a 25 ms base delay.
	DynamoDB bool
	// MaxAttempts overrides the attempt limit. 0: 3, or 4 with DynamoDB.
	// Negative: no count limit (retry.Unlimited), as in retry.Policy.
	MaxAttempts int
	// MaxBackoff overrides the cap of the computed wait. 0: 20 s.
	MaxBackoff time.Duration
	// Rand draws the jitter. nil: math/rand/v2's generator. Any source may
	// be shared (see backoff.Uniform).
	Rand rand.Source
}

// Attempts returns the attempt limit, the first attempt included.
func (r Rules) Attempts() int {
	switch {
	case r.MaxAttempts != 0:
		return r.MaxAttempts
	case r.DynamoDB:
		return DynamoDBAttempts
	}
	return MaxAttempts
}

func (r Rules) maxBackoff() time.Duration {
	if r.MaxBackoff > 0 {
		return r.MaxBackoff
	}
	return MaxBackoff
}

// Delay returns the wait before retry n (1 for the first) after a
// transient error: a full-jitter draw from [0, min(base·2^(n−1), max)].
// prev is not used. It implements backoff.Strategy.
func (r Rules) Delay(n int, _ time.Duration) time.Duration {
	base := BaseDelay
	if r.DynamoDB {
		base = DynamoDBBaseDelay
	}
	return r.jittered(base, n)
}

func (r Rules) jittered(base time.Duration, n int) time.Duration {
	ceiling := r.maxBackoff()
	if n < 1 {
		n = 1
	}
	// base·2^(n−1), when below the cap: compared without the shift, which
	// would wrap around for a large n.
	if n-1 < 63 && base <= ceiling>>(n-1) {
		ceiling = base << (n - 1)
	}
	return time.Duration(backoff.Uniform(r.Rand, uint64(ceiling)))
}

// DelayAfter returns the wait before retry n (1 for the first) after the
// failure err, by the whole rule: the jittered backoff from a base of 1 s
// after a throttling answer (IsThrottle) or of Delay's base otherwise, then
// an x-amz-retry-after advice (RetryAfter) in its place, clamped to
// [backoff, backoff + 5 s].
func (r Rules) DelayAfter(n int, prev time.Duration, err error) time.Duration {
	var d time.Duration
	if IsThrottle(err) {
		d = r.jittered(ThrottleBaseDelay, n)
	} else {
		d = r.Delay(n, prev)
	}
	if advice, ok := RetryAfter(err); ok {
		most := d + MaxAdviceExtra
		if most < d { // a MaxBackoff near the largest Duration
			most = math.MaxInt64
		}
		return min(max(advice, d), most)
	}
	return d
}

// Budget returns the quota of the rules, Standard2026.
func (r Rules) Budget() budget.RatioConfig { return Standard2026() }

// Policy returns a retry.Policy following the rules: the attempt limit,
// the quota (a new Ratio: share the Policy, or set its Budget to a Ratio
// shared by every client of the service), the AWS classification
// (IsRetryable) and the rules' backoff, which implements
// retry.ErrorBackoff so that Do waits as DelayAfter says: the 1 s base
// after a throttling answer and the x-amz-retry-after clamp.
func (r Rules) Policy() *retry.Policy {
	return &retry.Policy{
		MaxAttempts: r.Attempts(),
		Backoff:     r,
		Budget:      budget.NewRatio(r.Budget()),
		Classify:    IsRetryable,
		Rand:        r.Rand,
	}
}

// LegacyRules are the AWS SDKs' standard retry rules before 2026, for
// the conformance of StandardLegacy: at most 3 attempts; retry n waits
// a full-jitter draw from [0, min(1 s·2^(n−1), 20 s)] whatever the error;
// the quota of StandardLegacy.
type LegacyRules struct {
	// Rand draws the jitter. nil: math/rand/v2's generator.
	Rand rand.Source
}

// Delay returns the wait before retry n (1 for the first). It implements
// backoff.Strategy.
func (r LegacyRules) Delay(n int, _ time.Duration) time.Duration {
	return Rules{Rand: r.Rand}.jittered(time.Second, n)
}

// Budget returns the quota of the rules, StandardLegacy.
func (LegacyRules) Budget() budget.RatioConfig { return StandardLegacy() }

// Policy returns a retry.Policy following the legacy rules: 3 attempts,
// the legacy quota, the AWS classification and the legacy backoff.
func (r LegacyRules) Policy() *retry.Policy {
	return &retry.Policy{
		MaxAttempts: MaxAttempts,
		Backoff:     r,
		Budget:      budget.NewRatio(r.Budget()),
		Classify:    IsRetryable,
		Rand:        r.Rand,
	}
}
