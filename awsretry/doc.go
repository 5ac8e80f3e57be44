// Package awsretry holds the AWS SDKs' standard retry rules, so that code
// calling AWS services through stormguard (retry.Do, httpretry, the awssdk
// module's retryer for aws-sdk-go-v2) retries exactly as the SDKs do.
//
// It composes the mechanisms and adds only what is AWS's:
//
//   - the retry quotas, as budget.RatioConfig for budget.NewRatio:
//     Standard2026 (500 tokens, 14 per retry, 5 after a throttle, a
//     successful retry refunded) and StandardLegacy (the mode before 2026:
//     5 per retry, 10 after a timeout);
//   - the classification: IsThrottle (the AWS throttling error codes,
//     ThrottleErrorCodes, and HTTP 429) and IsRetryable (throttles, HTTP
//     500, 502, 503, 504, RequestTimeout, transient network errors);
//   - the server's advice: RetryAfter reads x-amz-retry-after;
//   - the whole policy: Rules (2026, with DynamoDB's 4 attempts and 25 ms
//     base) and LegacyRules, whose Policy method builds a *retry.Policy.
//
// The facts it reads come through the retry package's fact interfaces
// (retry.CodeReporter for the error code, retry.StatusReporter for the
// status, retry.HeaderReporter for the header), which httpretry's
// StatusError and the AWS SDK's errors implement, so the package imports
// no adapter.
//
// The rules are tested against the step tables of aws-sdk-go-v2's
// retry2026_test.go (quota and delay after each response).
package awsretry
