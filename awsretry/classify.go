package awsretry

import (
	"strconv"
	"strings"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// ThrottleErrorCodes are the AWS error codes that mean "throttled", as the
// AWS SDKs list them (aws-sdk-go-v2 retry.DefaultThrottleErrorCodes).
var ThrottleErrorCodes = []string{
	"Throttling", "ThrottlingException", "ThrottledException", "RequestThrottledException",
	"TooManyRequestsException", "ProvisionedThroughputExceededException", "TransactionInProgressException",
	"RequestLimitExceeded", "BandwidthLimitExceeded", "LimitExceededException", "RequestThrottled",
	"SlowDown", "PriorRequestNotComplete", "EC2ThrottledException",
}

// transientCodes are the AWS error codes retried as transient errors
// (aws-sdk-go-v2 retry.DefaultRetryableErrorCodes).
var transientCodes = []string{"RequestTimeout", "RequestTimeoutException"}

// IsThrottle reports whether err is a throttling answer: an error whose
// ErrorCode method (retry.CodeReporter: the AWS SDKs' API errors have one)
// returns one of ThrottleErrorCodes, or one that retry.IsThrottle accepts
// (a retry.ThrottleReporter that says so, such as httpretry.StatusError
// for a 429, or an HTTP status 429 from a retry.StatusReporter, such as
// the AWS SDK's response errors). A budget.Ratio made from Standard2026
// charges ThrottleCost for retries after such failures (see Throttles),
// and Rules waits longer after them.
func IsThrottle(err error) bool {
	if err == nil {
		return false
	}
	if code, ok := retry.ErrorCode(err); ok {
		for _, c := range ThrottleErrorCodes {
			if code == c {
				return true
			}
		}
	}
	return retry.IsThrottle(err)
}

// IsRetryable is the AWS SDKs' standard classification as a retry.Policy's
// Classify: throttling answers (IsThrottle), HTTP 500, 502, 503 and 504
// (from a retry.StatusReporter such as httpretry.StatusError or the AWS
// SDK's response errors), the error codes RequestTimeout and
// RequestTimeoutException, and transient network errors
// (retry.IsTransientNetError) are retried; nothing else is. (httpretry
// classifies responses with its own status rules, which retry the same
// statuses.)
func IsRetryable(err error) bool {
	if err == nil {
		return false
	}
	if IsThrottle(err) || retry.IsTransientNetError(err) {
		return true
	}
	if code, ok := retry.ErrorCode(err); ok {
		for _, c := range transientCodes {
			if code == c {
				return true
			}
		}
	}
	if status, ok := retry.HTTPStatusCode(err); ok {
		switch status {
		case 500, 502, 503, 504:
			return true
		}
	}
	return false
}

// RetryAfterHeader is the header in which AWS services advise a retry
// delay, in milliseconds.
const RetryAfterHeader = "X-Amz-Retry-After"

// RetryAfter returns the delay advised by the x-amz-retry-after header of
// the answer in err (the first retry.HeaderReporter of its chain, such as
// httpretry.StatusError), in milliseconds; ok is false when there is none
// or it is not a decimal number of milliseconds >= 0. A value above 24 h,
// however large (beyond int64 too), reads as 24 h: the server asked for a
// long wait, which Rules.DelayAfter clamps to the backoff + 5 s.
//
// The AWS SDK's errors do not report their header this way: the SDK's
// retry middleware applies x-amz-retry-after itself, after the retryer's
// delay (see the awssdk module).
func RetryAfter(err error) (d time.Duration, ok bool) {
	h, found := retry.ResponseHeader(err, RetryAfterHeader)
	if !found {
		return 0, false
	}
	v := strings.TrimPrefix(strings.TrimSpace(h), "+")
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
