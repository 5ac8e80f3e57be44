package budget

import (
	"errors"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// AWSStandard2026 returns the retry quota of the AWS SDKs' standard retry
// mode as revised in 2026 (the SDKs' "new retries 2026", SEP 2.1): a
// bucket of 500 tokens that starts full; a retry costs 14 tokens, or 5
// after a throttling answer (IsThrottle); a successful first attempt adds
// 1 (NoRetryIncrement); a successful retry gives back the cost it paid
// (5 or 14: retry.Do and retry.Call report it through RecordPriced, see
// RatioConfig.RefundRetrySuccess); a retry is refused when its cost cannot
// be paid. Timeouts pay the 14 of any other retry
// (aws-sdk-dotnet's 2026 CapacityManager keeps a timeout cost of 10; the
// aws-sdk-go-v2 conformance table this package follows does not test
// timeouts). AWSRules builds the complete policy around it.
func AWSStandard2026() RatioConfig {
	return RatioConfig{
		MaxTokens:          500,
		Refill:             1,
		RetryCost:          14,
		ThrottleCost:       5,
		RefundRetrySuccess: true,
	}
}

// AWSStandardLegacy returns the retry quota of the AWS SDKs' standard
// retry mode before 2026: a bucket of 500 tokens that starts full; a
// retry costs 5, or 10 after a timeout; a successful first attempt adds 1
// and a successful retry gives back the cost it paid (5 or 10, see
// RatioConfig.RefundRetrySuccess); a retry is refused when its cost cannot
// be paid.
func AWSStandardLegacy() RatioConfig {
	return RatioConfig{
		MaxTokens:          500,
		Refill:             1,
		RetryCost:          5,
		TimeoutCost:        10,
		RefundRetrySuccess: true,
	}
}

// AWSStandard is AWSStandardLegacy, under the name it had before the AWS
// SDKs revised their standard mode in 2026. It is kept so that existing
// code and policy files ("aws") keep their meaning; new code should name
// AWSStandardLegacy or AWSStandard2026.
func AWSStandard() RatioConfig { return AWSStandardLegacy() }

// AWSThrottleCodes are the AWS error codes that mean "throttled", as the
// AWS SDKs list them (aws-sdk-go-v2 retry.DefaultThrottleErrorCodes).
var AWSThrottleCodes = []string{
	"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
	"TooManyRequestsException", "ProvisionedThroughputExceededException", "TransactionInProgressException",
	"RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled",
	"SlowDown", "PriorRequestNotComplete", "EC2ThrottledException",
}

// awsTransientCodes are the AWS error codes retried as transient errors
// (aws-sdk-go-v2 retry.DefaultRetryableErrorCodes).
var awsTransientCodes = []string{"RequestTimeout", "RequestTimeoutException"}

// codedError is an error carrying an AWS error code, as the AWS SDKs' API
// errors do (smithy-go's APIError has ErrorCode).
type codedError interface {
	error
	ErrorCode() string
}

// awsCode returns the error code of the first error in err's chain that
// has one.
func awsCode(err error) (string, bool) {
	if ce, ok := errors.AsType[codedError](err); ok {
		return ce.ErrorCode(), true
	}
	return "", false
}

func statusOf(err error) (*httpretry.StatusError, bool) {
	return errors.AsType[*httpretry.StatusError](err)
}

// IsThrottle reports whether err is a throttling answer: an HTTP 429
// (httpretry.StatusError), or an error whose ErrorCode method (the AWS
// SDKs' API errors have one) returns one of AWSThrottleCodes. Ratio
// charges ThrottleCost for retries after such failures, and AWSRules
// waits longer after them.
func IsThrottle(err error) bool {
	if err == nil {
		return false
	}
	if code, ok := awsCode(err); ok {
		for _, c := range AWSThrottleCodes {
			if code == c {
				return true
			}
		}
	}
	se, ok := statusOf(err)
	return ok && se.StatusCode == http.StatusTooManyRequests
}

// IsAWSRetryable is the AWS SDKs' standard classification as a
// retry.Policy's Classify: throttling answers (IsThrottle), HTTP 500, 502,
// 503 and 504, the error codes RequestTimeout and RequestTimeoutException,
// and transient network errors (retry.IsTransientNetError) are retried;
// nothing else is. (httpretry classifies responses with its own status
// rules, which retry the same statuses.)
func IsAWSRetryable(err error) bool {
	if err == nil {
		return false
	}
	if IsThrottle(err) || retry.IsTransientNetError(err) {
		return true
	}
	if code, ok := awsCode(err); ok {
		for _, c := range awsTransientCodes {
			if code == c {
				return true
			}
		}
	}
	if se, ok := statusOf(err); ok {
		switch se.StatusCode {
		case 500, 502, 503, 504:
			return true
		}
	}
	return false
}

// AWSRetryAfterHeader is the header in which AWS services advise a retry
// delay, in milliseconds.
const AWSRetryAfterHeader = "X-Amz-Retry-After"

// AWSRetryAfter returns the delay advised by the x-amz-retry-after header
// of the response in err (an httpretry.StatusError), in milliseconds; ok
// is false when there is none or it is not a decimal number of
// milliseconds >= 0. A value above 24 h, however large (beyond int64
// too), reads as 24 h: the server asked for a long wait, which DelayAfter
// clamps to the backoff + 5 s.
func AWSRetryAfter(err error) (d time.Duration, ok bool) {
	se, found := statusOf(err)
	if !found || se.Response == nil {
		return 0, false
	}
	v := strings.TrimPrefix(strings.TrimSpace(se.Response.Header.Get(AWSRetryAfterHeader)), "+")
	if v == "" || strings.TrimLeft(v, "0123456789") != "" {
		return 0, false
	}
	// Digits only: the one error left is a value beyond 64 bits.
	if ms, perr := strconv.ParseUint(v, 10, 64); perr == nil && ms <= uint64(maxAdvice/time.Millisecond) {
		return time.Duration(ms) * time.Millisecond, true
	}
	return maxAdvice, true
}

// maxAdvice bounds the x-amz-retry-after values read, so that a huge
// value cannot overflow a Duration: larger ones read as maxAdvice.
const maxAdvice = 24 * time.Hour

// Constants of the AWS SDKs' 2026 standard retry rules.
const (
	AWSBaseDelay         = 50 * time.Millisecond // after a transient error
	AWSDynamoDBBaseDelay = 25 * time.Millisecond // after a transient error, DynamoDB and DynamoDB Streams
	AWSThrottleBaseDelay = time.Second           // after a throttling answer
	AWSMaxBackoff        = 20 * time.Second
	AWSMaxAdviceExtra    = 5 * time.Second // x-amz-retry-after may add at most this to the backoff
	AWSMaxAttempts       = 3
	AWSDynamoDBAttempts  = 4
)

// AWSRules are the AWS SDKs' standard retry rules of 2026 (SEP 2.1), as
// implemented by aws-sdk-go-v2 (aws/retry, with AWS_NEW_RETRIES_2026) and
// aws-sdk-dotnet (StandardRetryPolicy.CalculateRetryDelay):
//
//   - at most 3 attempts (4 for DynamoDB);
//   - the quota of AWSStandard2026;
//   - retry n waits a full-jitter draw from [0, min(base·2^(n−1), 20 s)],
//     base 1 s after a throttling answer and 50 ms otherwise (25 ms for
//     DynamoDB);
//   - an x-amz-retry-after header (milliseconds) replaces that wait,
//     clamped to [wait, wait + 5 s].
//
// The zero AWSRules are the rules for any service but DynamoDB. AWSRules
// is a backoff.Strategy: Delay is the wait after a transient error, the
// only one a retry.Policy's Backoff can express today (it does not see the
// error); DelayAfter is the full rule. Policy builds a *retry.Policy.
type AWSRules struct {
	// DynamoDB selects the rules of DynamoDB and DynamoDB Streams:
	// 4 attempts and a 25 ms base delay.
	DynamoDB bool
	// MaxAttempts overrides the attempt limit. 0: 3, or 4 with DynamoDB.
	MaxAttempts int
	// MaxBackoff overrides the cap of the computed wait. 0: 20 s.
	MaxBackoff time.Duration
	// Rand draws the jitter. nil: math/rand/v2's generator. Any source may
	// be shared (see backoff.Uniform).
	Rand rand.Source
}

// Attempts returns the attempt limit, the first attempt included.
func (r AWSRules) Attempts() int {
	switch {
	case r.MaxAttempts != 0:
		return r.MaxAttempts
	case r.DynamoDB:
		return AWSDynamoDBAttempts
	}
	return AWSMaxAttempts
}

func (r AWSRules) maxBackoff() time.Duration {
	if r.MaxBackoff > 0 {
		return r.MaxBackoff
	}
	return AWSMaxBackoff
}

// Delay returns the wait before retry n (1 for the first) after a
// transient error: a full-jitter draw from [0, min(base·2^(n−1), max)].
// prev is not used. It implements backoff.Strategy.
func (r AWSRules) Delay(n int, _ time.Duration) time.Duration {
	base := AWSBaseDelay
	if r.DynamoDB {
		base = AWSDynamoDBBaseDelay
	}
	return r.jittered(base, n)
}

func (r AWSRules) jittered(base time.Duration, n int) time.Duration {
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
// an x-amz-retry-after advice (AWSRetryAfter) in its place, clamped to
// [backoff, backoff + 5 s].
func (r AWSRules) DelayAfter(n int, prev time.Duration, err error) time.Duration {
	var d time.Duration
	if IsThrottle(err) {
		d = r.jittered(AWSThrottleBaseDelay, n)
	} else {
		d = r.Delay(n, prev)
	}
	if advice, ok := AWSRetryAfter(err); ok {
		most := d + AWSMaxAdviceExtra
		if most < d { // a MaxBackoff near the largest Duration
			most = math.MaxInt64
		}
		return min(max(advice, d), most)
	}
	return d
}

// Budget returns the quota of the rules, AWSStandard2026.
func (r AWSRules) Budget() RatioConfig { return AWSStandard2026() }

// Policy returns a retry.Policy following the rules: the attempt limit,
// the quota (a new Ratio: share the Policy, or set its Budget to a Ratio
// shared by every client of the service), the AWS classification
// (IsAWSRetryable) and the rules' backoff, which implements
// retry.ErrorBackoff so that Do waits as DelayAfter says: the 1 s base
// after a throttling answer and the x-amz-retry-after clamp.
func (r AWSRules) Policy() *retry.Policy {
	return &retry.Policy{
		MaxAttempts: r.Attempts(),
		Backoff:     r,
		Budget:      NewRatio(r.Budget()),
		Classify:    IsAWSRetryable,
		Rand:        r.Rand,
	}
}

// AWSLegacyRules are the AWS SDKs' standard retry rules before 2026, for
// the conformance of AWSStandardLegacy: at most 3 attempts; retry n waits
// a full-jitter draw from [0, min(1 s·2^(n−1), 20 s)] whatever the error;
// the quota of AWSStandardLegacy.
type AWSLegacyRules struct {
	// Rand draws the jitter. nil: math/rand/v2's generator.
	Rand rand.Source
}

// Delay returns the wait before retry n (1 for the first). It implements
// backoff.Strategy.
func (r AWSLegacyRules) Delay(n int, _ time.Duration) time.Duration {
	return AWSRules{Rand: r.Rand}.jittered(time.Second, n)
}

// Budget returns the quota of the rules, AWSStandardLegacy.
func (AWSLegacyRules) Budget() RatioConfig { return AWSStandardLegacy() }

// Policy returns a retry.Policy following the legacy rules: 3 attempts,
// the legacy quota, the AWS classification and the legacy backoff.
func (r AWSLegacyRules) Policy() *retry.Policy {
	return &retry.Policy{
		MaxAttempts: AWSMaxAttempts,
		Backoff:     r,
		Budget:      NewRatio(r.Budget()),
		Classify:    IsAWSRetryable,
		Rand:        r.Rand,
	}
}
