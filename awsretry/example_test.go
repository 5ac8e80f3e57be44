package awsretry_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/httpretry"
)

// apiError is an AWS API error with its code over the HTTP answer, as the
// AWS SDKs report service errors (smithy-go's APIError has ErrorCode).
type apiError struct {
	code string
	err  error
}

func (e *apiError) Error() string     { return e.code + ": " + e.err.Error() }
func (e *apiError) Unwrap() error     { return e.err }
func (e *apiError) ErrorCode() string { return e.code }

// answer is an HTTP answer as httpretry reports it, with an x-amz-retry-after
// header when retryAfter is not empty.
func answer(status int, retryAfter string) error {
	resp := &http.Response{StatusCode: status, Header: http.Header{}}
	if retryAfter != "" {
		resp.Header.Set(awsretry.RetryAfterHeader, retryAfter)
	}
	return &httpretry.StatusError{StatusCode: status, Response: resp}
}

// Rules builds the AWS SDKs' 2026 standard retry policy; its waits are 50
// ms doubling after transient errors, from 1 s after a throttle, and an
// x-amz-retry-after advice clamped to the backoff plus 5 s.
func Example() {
	rules := awsretry.Rules{Rand: maxJitter{}} // jitter fixed at its top, for the example
	p := rules.Policy()                        // set p.Budget to a Ratio shared by every client of the service
	fmt.Println("attempts:", p.AttemptLimit(), "quota:", p.Budget.(*budget.Ratio).Available())
	fmt.Println(rules.DelayAfter(1, 0, answer(500, "")), rules.DelayAfter(2, 0, answer(500, "")))
	throttled := &apiError{code: "ThrottlingException", err: answer(400, "")}
	fmt.Println(rules.DelayAfter(1, 0, throttled), awsretry.IsThrottle(throttled), awsretry.IsRetryable(throttled))
	fmt.Println(rules.DelayAfter(1, 0, answer(503, "60000")))
	fmt.Println("404 retried:", awsretry.IsRetryable(answer(404, "")))
	// Output:
	// attempts: 3 quota: 500
	// 50ms 100ms
	// 1s true true
	// 5.05s
	// 404 retried: false
}

// The 2026 quota: 500 tokens, 14 per retry, 5 per retry after a throttle,
// refunded when the retry succeeds.
func ExampleStandard2026() {
	b := budget.NewRatio(awsretry.Standard2026())
	b.Withdraw(errors.New("connection reset"))
	fmt.Println("after a retry:", b.Available())
	b.Withdraw(&apiError{code: "ThrottlingException", err: answer(400, "")})
	fmt.Println("after a retry on a throttle:", b.Available())
	// Output:
	// after a retry: 486
	// after a retry on a throttle: 481
}

// The legacy quota: 500 tokens, 5 per retry, 10 per retry after a timeout,
// refunded when the retry succeeds.
func ExampleStandardLegacy() {
	b := budget.NewRatio(awsretry.StandardLegacy())
	b.Withdraw(errors.New("throttled"))
	fmt.Println("after a retry:", b.Available())
	b.Withdraw(context.DeadlineExceeded)
	fmt.Println("after a retry on a timeout:", b.Available())
	b.Record(true, nil)
	fmt.Println("after a retry succeeded:", b.Available())
	// Output:
	// after a retry: 495
	// after a retry on a timeout: 485
	// after a retry succeeded: 490
}
