package awsretry_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// maxJitter is a rand.Source whose every draw is the largest: a full
// jitter draw from [0, d] then returns d, as the AWS conformance tables fix
// the jitter at 1 ("exponentialBase: 1").
type maxJitter struct{}

func (maxJitter) Uint64() uint64 { return math.MaxUint64 }

// awsResponse is one step's response.
type awsResponse struct {
	status     int
	code       string // an AWS error code, "" for none
	retryAfter string // the x-amz-retry-after header, "" for none
	timeout    bool   // no answer: the attempt timed out (status unused)
}

// awsAPIError is an AWS API error with a code, over the HTTP status error,
// as the AWS SDKs report service errors.
type awsAPIError struct {
	code string
	err  error
}

func (e *awsAPIError) Error() string     { return e.code + ": " + e.err.Error() }
func (e *awsAPIError) Unwrap() error     { return e.err }
func (e *awsAPIError) ErrorCode() string { return e.code }

func (r awsResponse) err() error {
	if r.timeout {
		return fmt.Errorf("read: %w", retry.ErrAttemptTimeout)
	}
	if r.status < 300 {
		return nil
	}
	resp := &http.Response{StatusCode: r.status, Header: http.Header{}}
	if r.retryAfter != "" {
		resp.Header.Set("x-amz-retry-after", r.retryAfter)
	}
	var err error = &httpretry.StatusError{StatusCode: r.status, Response: resp}
	if r.code != "" {
		err = &awsAPIError{code: r.code, err: err}
	}
	return err
}

type outcome int

const (
	success outcome = iota
	retryRequest
	maxAttemptsExceeded
	quotaExceeded
	failRequest
)

type awsStep struct {
	resp  awsResponse
	want  outcome
	quota float64
	delay time.Duration // for retryRequest
}

type awsCase struct {
	name        string
	maxAttempts int
	initial     float64 // initial tokens; -1 for none (an empty bucket)
	maxBackoff  time.Duration
	dynamoDB    bool
	fixedJitter bool
	steps       []awsStep
}

// rules is what a step table runs: the policy (its attempt limit,
// classification and backoff) and the quota.
type rules struct {
	policy *retry.Policy
	quota  budget.RatioConfig
}

// runAWSTable runs step tables as aws-sdk-go-v2's retry2026_test.go does,
// through retry.Call as Do runs them: each step is one attempt's response,
// recorded with End; a failure is then handed to Next, whose answer is the
// step's outcome (a retry granted by the quota, with its delay, or the
// reason to stop); the quota is checked after every step; a call that ends
// (success or not) makes the next step start a new one. The Ratio is
// shared by the calls of a case, as a client's quota is.
func runAWSTable(t *testing.T, cases []awsCase, mk func(awsCase) rules) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mk(tc)
			q := r.quota
			switch {
			case tc.initial < 0:
				q.StartEmpty = true
			case tc.initial > 0:
				q.InitialTokens = tc.initial
			}
			b := budget.NewRatio(q)
			p := *r.policy
			p.Budget = b
			var c *retry.Call
			for i, s := range tc.steps {
				if c == nil {
					c = retry.NewCall(context.Background(), &p)
				}
				a, err := c.Begin()
				if err != nil {
					t.Fatalf("step %d: Begin: %v", i, err)
				}
				err = c.End(&a, s.resp.err())
				got := success
				var d time.Duration
				if err == nil {
					c.Succeed()
				} else {
					var stop error
					d, stop = c.Next(err)
					switch {
					case stop == nil:
						got = retryRequest
					case errors.Is(stop, retry.ErrAttemptsExhausted):
						got = maxAttemptsExceeded
					case errors.Is(stop, retry.ErrBudgetExhausted):
						got = quotaExceeded
					default:
						got = failRequest
					}
				}
				if got != s.want {
					t.Fatalf("step %d (attempt %d, %v): outcome %v, want %v", i, a.N, err, got, s.want)
				}
				if got == retryRequest && d != s.delay {
					t.Errorf("step %d: delay %v, want %v", i, d, s.delay)
				}
				if q := b.Available(); q != s.quota {
					t.Errorf("step %d: quota %v, want %v", i, q, s.quota)
				}
				if got != retryRequest {
					c = nil
				}
			}
		})
	}
}

// TestAWSStandard2026Conformance is aws-sdk-go-v2's TestRetry2026StandardMode
// table (aws/retry/retry2026_test.go, with AWS_NEW_RETRIES_2026=true) but
// its four long-polling (SQS) cases: for each response, the quota and the
// delay the 2026 rules expect, with the jitter fixed at 1 except in the
// first x-amz-retry-after case, where any jitter gives the same answer.
func TestAWSStandard2026Conformance(t *testing.T) {
	ms := time.Millisecond
	s500 := awsResponse{status: 500}
	s502 := awsResponse{status: 502}
	ok := awsResponse{status: 200}
	throttled := awsResponse{status: 400, code: "Throttling"}
	cases := []awsCase{
		{name: "retry eventually succeeds", fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 486, 50 * ms},
			{s500, retryRequest, 472, 100 * ms},
			{ok, success, 486, 0},
		}},
		{name: "fail due to max attempts reached", fixedJitter: true, steps: []awsStep{
			{s502, retryRequest, 486, 50 * ms},
			{s502, retryRequest, 472, 100 * ms},
			{s502, maxAttemptsExceeded, 472, 0},
		}},
		{name: "retry quota reached after a single retry", initial: 14, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 0, 50 * ms},
			{s500, quotaExceeded, 0, 0},
		}},
		{name: "no retries at all if retry quota is 0", initial: -1, fixedJitter: true, steps: []awsStep{
			{s500, quotaExceeded, 0, 0},
		}},
		{name: "verifying exponential backoff timing", maxAttempts: 5, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 486, 50 * ms},
			{s500, retryRequest, 472, 100 * ms},
			{s500, retryRequest, 458, 200 * ms},
			{s500, retryRequest, 444, 400 * ms},
			{s500, maxAttemptsExceeded, 444, 0},
		}},
		{name: "verify max backoff time", maxAttempts: 5, maxBackoff: 200 * ms, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 486, 50 * ms},
			{s500, retryRequest, 472, 100 * ms},
			{s500, retryRequest, 458, 200 * ms},
			{s500, retryRequest, 444, 200 * ms},
			{s500, maxAttemptsExceeded, 444, 0},
		}},
		{name: "retry stops after retry quota exhaustion", maxAttempts: 5, initial: 20, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 6, 50 * ms},
			{s502, quotaExceeded, 6, 0},
		}},
		{name: "retry quota recovery after successful responses", maxAttempts: 5, initial: 30, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 16, 50 * ms},
			{s502, retryRequest, 2, 100 * ms},
			{ok, success, 16, 0},
			{s500, retryRequest, 2, 50 * ms},
			{ok, success, 16, 0},
		}},
		{name: "throttling error token bucket drain and backoff duration", fixedJitter: true, steps: []awsStep{
			{throttled, retryRequest, 495, time.Second},
			{ok, success, 500, 0},
		}},
		{name: "dynamodb base backoff and increased retries", dynamoDB: true, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 486, 25 * ms},
			{s500, retryRequest, 472, 50 * ms},
			{s500, retryRequest, 458, 100 * ms},
			{s500, maxAttemptsExceeded, 458, 0},
		}},
		{name: "honor x-amz-retry-after header", steps: []awsStep{
			{awsResponse{status: 500, retryAfter: "1500"}, retryRequest, 486, 1500 * ms},
			{ok, success, 500, 0},
		}},
		{name: "x-amz-retry-after minimum is exponential backoff duration", fixedJitter: true, steps: []awsStep{
			{awsResponse{status: 500, retryAfter: "0"}, retryRequest, 486, 50 * ms},
			{ok, success, 500, 0},
		}},
		{name: "x-amz-retry-after maximum is 5+exponential backoff duration", fixedJitter: true, steps: []awsStep{
			{awsResponse{status: 500, retryAfter: "10000"}, retryRequest, 486, 5050 * ms},
			{ok, success, 500, 0},
		}},
		{name: "invalid x-amz-retry-after falls back to exponential backoff", fixedJitter: true, steps: []awsStep{
			{awsResponse{status: 500, retryAfter: "invalid"}, retryRequest, 486, 50 * ms},
			{ok, success, 500, 0},
		}},
		// Issue 31 item 20: a server asking for more than 24 h, or for more
		// milliseconds than an int64 holds, gets the longest wait the rule
		// allows (backoff + 5 s), not the bare backoff.
		{name: "x-amz-retry-after above 24 h is clamped to 5+exponential backoff", fixedJitter: true, steps: []awsStep{
			{awsResponse{status: 500, retryAfter: "86400001"}, retryRequest, 486, 5050 * ms},
			{awsResponse{status: 500, retryAfter: "9223372036854775807"}, retryRequest, 472, 5100 * ms},
			{ok, success, 486, 0},
		}},
		{name: "x-amz-retry-after beyond int64 is clamped to 5+exponential backoff", fixedJitter: true, steps: []awsStep{
			{awsResponse{status: 500, retryAfter: "99999999999999999999999"}, retryRequest, 486, 5050 * ms},
			{ok, success, 500, 0},
		}},
		// Not in the SDK's table: a non-retryable answer, and the
		// throttle cost on a bucket that is not full.
		{name: "non-retryable error", initial: 100, steps: []awsStep{
			{awsResponse{status: 404}, failRequest, 100, 0},
		}},
		{name: "throttle then transient", initial: 100, fixedJitter: true, maxAttempts: 4, steps: []awsStep{
			{awsResponse{status: 429}, retryRequest, 95, time.Second},
			{throttled, retryRequest, 90, 2 * time.Second},
			{s503(), retryRequest, 76, 200 * ms},
			{ok, success, 90, 0},
		}},
		// Issue 31 item 18: a successful retry gives back what it paid,
		// 5 after a throttle (not the 14 of other retries), as the SDKs'
		// retry token does: from 100 tokens the quota comes back to 100.
		{name: "a throttled retry that succeeds gives back the 5 it paid", initial: 100, fixedJitter: true, steps: []awsStep{
			{throttled, retryRequest, 95, time.Second},
			{ok, success, 100, 0},
		}},
		{name: "each successful retry gives back its own cost", initial: 100, fixedJitter: true, maxAttempts: 4, steps: []awsStep{
			{s503(), retryRequest, 86, 50 * ms},
			{throttled, retryRequest, 81, 2 * time.Second},
			{ok, success, 86, 0},
			{throttled, retryRequest, 81, time.Second},
			{s500, retryRequest, 67, 100 * ms},
			{ok, success, 81, 0},
		}},
		{name: "a throttling storm drains the quota", initial: 100, fixedJitter: true, steps: []awsStep{
			{throttled, retryRequest, 95, time.Second},
			{throttled, retryRequest, 90, 2 * time.Second},
			{ok, success, 95, 0},
			{throttled, retryRequest, 90, time.Second},
			{ok, success, 95, 0},
		}},
	}
	runAWSTable(t, cases, func(tc awsCase) rules {
		r := awsretry.Rules{DynamoDB: tc.dynamoDB, MaxAttempts: tc.maxAttempts, MaxBackoff: tc.maxBackoff}
		if tc.fixedJitter {
			r.Rand = maxJitter{}
		}
		return rules{policy: r.Policy(), quota: r.Budget()}
	})
}

func s503() awsResponse { return awsResponse{status: 503} }

// TestAWSStandardLegacyConformance is the step table of the standard mode
// before 2026 (aws-sdk-go-v2 StandardOptions defaults: 500 tokens, retry
// cost 5, timeout cost 10, no-retry increment 1, max backoff 20 s; the
// legacy delay of aws-sdk-dotnet's CalculateRetryDelay: jitter·2^(n−1) s):
// the same responses as the 2026 table where they apply, with the legacy
// answers.
func TestAWSStandardLegacyConformance(t *testing.T) {
	s500 := awsResponse{status: 500}
	ok := awsResponse{status: 200}
	timedOut := awsResponse{timeout: true}
	cases := []awsCase{
		{name: "retry eventually succeeds", fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 495, time.Second},
			{s500, retryRequest, 490, 2 * time.Second},
			{ok, success, 495, 0},
		}},
		{name: "fail due to max attempts reached", fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 495, time.Second},
			{s500, retryRequest, 490, 2 * time.Second},
			{s500, maxAttemptsExceeded, 490, 0},
		}},
		{name: "retry quota reached after a single retry", initial: 5, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 0, time.Second},
			{s500, quotaExceeded, 0, 0},
		}},
		{name: "no retries at all if retry quota is 0", initial: -1, fixedJitter: true, steps: []awsStep{
			{s500, quotaExceeded, 0, 0},
		}},
		{name: "verify max backoff time", maxAttempts: 7, fixedJitter: true, steps: []awsStep{
			{s500, retryRequest, 495, time.Second},
			{s500, retryRequest, 490, 2 * time.Second},
			{s500, retryRequest, 485, 4 * time.Second},
			{s500, retryRequest, 480, 8 * time.Second},
			{s500, retryRequest, 475, 16 * time.Second},
			{s500, retryRequest, 470, 20 * time.Second},
			{s500, maxAttemptsExceeded, 470, 0},
		}},
		{name: "throttling costs as any retry", fixedJitter: true, initial: 100, steps: []awsStep{
			{awsResponse{status: 400, code: "Throttling"}, retryRequest, 95, time.Second},
			{ok, success, 100, 0},
		}},
		{name: "a success adds 1", initial: 100, steps: []awsStep{
			{ok, success, 101, 0},
			{ok, success, 102, 0},
		}},
		// Issue 31 item 19: a retry after a timeout pays 10, and gives
		// back the 10 it paid when it succeeds (500, 490, 500).
		{name: "a timed-out retry that succeeds gives back the 10 it paid", fixedJitter: true, steps: []awsStep{
			{timedOut, retryRequest, 490, time.Second},
			{ok, success, 500, 0},
		}},
		{name: "each successful retry gives back its own cost", fixedJitter: true, initial: 100, steps: []awsStep{
			{s500, retryRequest, 95, time.Second},
			{timedOut, retryRequest, 85, 2 * time.Second},
			{ok, success, 95, 0},
			{timedOut, retryRequest, 85, time.Second},
			{s500, retryRequest, 80, 2 * time.Second},
			{ok, success, 85, 0},
			{s500, retryRequest, 80, time.Second},
			{timedOut, retryRequest, 70, 2 * time.Second},
			{timedOut, maxAttemptsExceeded, 70, 0},
		}},
	}
	runAWSTable(t, cases, func(tc awsCase) rules {
		r := awsretry.LegacyRules{}
		if tc.fixedJitter {
			r.Rand = maxJitter{}
		}
		p := r.Policy()
		if tc.maxAttempts != 0 {
			p.MaxAttempts = tc.maxAttempts
		}
		return rules{policy: p, quota: r.Budget()}
	})
}

// TestAWSPolicyWithDo runs the 2026 policy through retry.Do: the quota
// moves as the table says for a call that succeeds on its third attempt.
func TestAWSPolicyWithDo(t *testing.T) {
	r := awsretry.Rules{Rand: maxJitter{}}
	p := r.Policy()
	p.Backoff = backoff.Func(func(int, time.Duration) time.Duration { return 0 }) // the delays are the tables' business
	n := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, awsResponse{status: 500}.err()
		}
		return 1, nil
	})
	if err != nil || n != 3 {
		t.Fatalf("err %v after %d attempts", err, n)
	}
	if got := p.Budget.(*budget.Ratio).Available(); got != 486 {
		t.Fatalf("quota %v, want 486", got)
	}
	if p.AttemptLimit() != 3 || (awsretry.Rules{DynamoDB: true}).Policy().AttemptLimit() != 4 {
		t.Fatal("attempt limits")
	}
	// A 404 is not retried, and leaves the quota alone.
	n = 0
	_, err = retry.Do(context.Background(), p, func(context.Context) (int, error) {
		n++
		return 0, awsResponse{status: 404}.err()
	})
	if err == nil || n != 1 {
		t.Fatalf("404: err %v after %d attempts", err, n)
	}
}

func TestIsThrottle(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{awsResponse{status: 429}.err(), true},
		{awsResponse{status: 503}.err(), false},
		{awsResponse{status: 400, code: "ThrottlingException"}.err(), true},
		{awsResponse{status: 503, code: "SlowDown"}.err(), true},
		{awsResponse{status: 400, code: "ValidationException"}.err(), false},
		{errors.New("throttling"), false},
	} {
		if got := awsretry.IsThrottle(tc.err); got != tc.want {
			t.Errorf("IsThrottle(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	if d, ok := awsretry.RetryAfter(awsResponse{status: 500, retryAfter: "-5"}.err()); ok {
		t.Errorf("negative x-amz-retry-after read as %v", d)
	}
}

// TestAWSRetryAfterHugeIsClamped (issue 31 item 20): an
// x-amz-retry-after above 24 h, or beyond int64, reads as 24 h (which
// DelayAfter then clamps to the backoff + 5 s) instead of being ignored;
// what is not milliseconds >= 0 is still ignored.
func TestAWSRetryAfterHugeIsClamped(t *testing.T) {
	for _, v := range []string{"-99999999999999999999", "1e3", "12.5", ""} {
		if d, ok := awsretry.RetryAfter(awsResponse{status: 500, retryAfter: v}.err()); ok {
			t.Errorf("x-amz-retry-after %q read as %v, want ignored", v, d)
		}
	}
	for _, v := range []string{"86400000", "86400001", "9223372036854775807", "99999999999999999999"} {
		if d, ok := awsretry.RetryAfter(awsResponse{status: 500, retryAfter: v}.err()); !ok || d != 24*time.Hour {
			t.Errorf("x-amz-retry-after %q read as %v %v, want 24h (clamped)", v, d, ok)
		}
	}
}

// FuzzAWSRetryAfter feeds arbitrary x-amz-retry-after values: the header
// never makes a wait below the backoff or above the backoff plus 5 s, and
// a value that is not milliseconds >= 0 is ignored.
func FuzzAWSRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "1500", "10000", "invalid", "-1", " 42 ", "99999999999999999999", "1e3", ""} {
		f.Add(s, 1)
	}
	r := awsretry.Rules{Rand: maxJitter{}}
	f.Fuzz(func(t *testing.T, header string, n int) {
		n = n%30 + 1
		if n < 1 {
			n += 30
		}
		plain := r.DelayAfter(n, 0, awsResponse{status: 500}.err())
		err := &httpretry.StatusError{StatusCode: 500, Response: &http.Response{Header: http.Header{"X-Amz-Retry-After": {header}}}}
		got := r.DelayAfter(n, 0, err)
		advice, ok := awsretry.RetryAfter(err)
		switch {
		case !ok && isMillis(header):
			t.Fatalf("header %q is milliseconds >= 0 and was ignored", header)
		case !ok && got != plain:
			t.Fatalf("ignored header %q changed the wait: %v, want %v", header, got, plain)
		case ok && (advice < 0 || got < plain || got > plain+awsretry.MaxAdviceExtra):
			t.Fatalf("header %q (advice %v): wait %v outside [%v, %v+5s]", header, advice, got, plain, plain)
		case plain < 0 || plain > awsretry.MaxBackoff:
			t.Fatalf("backoff %v outside [0, 20s]", plain)
		}
	})
}

// Through retry.Do the rules' backoff hears the failed attempt's error
// (retry.ErrorBackoff): after a throttling answer the wait is drawn from
// the 1 s base, after a 500 from the 50 ms base.
func TestAWSPolicyWaitsByTheError(t *testing.T) {
	clk := clocktest.NewFake()
	for _, c := range []struct {
		name string
		resp awsResponse
		want time.Duration
	}{
		{"transient", awsResponse{status: 500}, awsretry.Rules{Rand: maxJitter{}}.DelayAfter(1, 0, awsResponse{status: 500}.err())},
		{"throttle", awsResponse{status: 400, code: "ThrottlingException"}, awsretry.Rules{Rand: maxJitter{}}.DelayAfter(1, 0, awsResponse{status: 400, code: "ThrottlingException"}.err())},
	} {
		p := awsretry.Rules{Rand: maxJitter{}}.Policy()
		p.Clock = clk
		var waits []time.Duration
		p.Observer = waitRecorder{&waits}
		n := 0
		done := make(chan error)
		go func() {
			_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
				n++
				if n == 1 {
					return 0, c.resp.err()
				}
				return 1, nil
			})
			done <- err
		}()
		clk.BlockUntil(1) // the wait's timer
		if d := clk.Deadlines(); len(d) != 1 || d[0] != c.want {
			t.Fatalf("%s: the wait's timer is due in %v, want %v", c.name, d, c.want)
		}
		clk.Advance(c.want)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if len(waits) != 1 || waits[0] != c.want {
			t.Fatalf("%s: waits %v, want [%v]", c.name, waits, c.want)
		}
	}
	r := awsretry.Rules{Rand: maxJitter{}}
	if a, b := r.DelayAfter(1, 0, awsResponse{status: 500}.err()), r.DelayAfter(1, 0, awsResponse{status: 400, code: "ThrottlingException"}.err()); a >= b {
		t.Fatalf("test premise: a throttle waits longer (%v) than a 500 (%v)", b, a)
	}
}

// isMillis reports whether s is a decimal number >= 0 once trimmed, of
// any size.
func isMillis(s string) bool {
	s = strings.TrimPrefix(strings.TrimSpace(s), "+")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

type waitRecorder struct{ waits *[]time.Duration }

func (waitRecorder) AttemptStart(ctx context.Context, _ retry.AttemptStart) context.Context {
	return ctx
}
func (waitRecorder) AttemptEnd(context.Context, retry.AttemptEnd) {}
func (w waitRecorder) RetryScheduled(_ context.Context, e retry.RetryScheduled) {
	*w.waits = append(*w.waits, e.Delay)
}
func (waitRecorder) CallEnd(context.Context, retry.CallEnd) {}

// TestAWSRulesHugeMaxBackoffSaturates (sweep: arithmetic extremes): with a
// MaxBackoff near math.MaxInt64, the waits grow with n and never wrap
// around (base·2^(n−1) overflowed), and the x-amz-retry-after clamp
// (backoff + 5 s) saturates instead of turning negative.
func TestAWSRulesHugeMaxBackoffSaturates(t *testing.T) {
	for _, r := range []awsretry.Rules{
		{MaxBackoff: math.MaxInt64, Rand: maxJitter{}},
		{MaxBackoff: math.MaxInt64 - 1, DynamoDB: true, Rand: maxJitter{}},
	} {
		advised := awsResponse{status: 500, retryAfter: "10000"}.err()
		throttled := awsResponse{status: 400, code: "Throttling"}.err()
		var prev, prevT time.Duration
		for n := 1; n <= 100; n++ {
			d := r.Delay(n, 0)
			dt := r.DelayAfter(n, 0, throttled)
			if d < prev || dt < prevT {
				t.Fatalf("n %d: waits %v and %v (throttled) after %v and %v: not growing", n, d, dt, prev, prevT)
			}
			prev, prevT = d, dt
			if a := r.DelayAfter(n, 0, advised); a < d {
				t.Fatalf("n %d: advised wait %v below the backoff %v", n, a, d)
			}
		}
		if prev != math.MaxInt64 && prev != math.MaxInt64-1 {
			t.Fatalf("the wait stops growing at %v, want the cap", prev)
		}
	}
}

// TestDoThrottledRetryRefundsWhatItPaid (issue 31 item 18, moved from
// budget with the rules): through
// retry.Do, a call throttled once that then succeeds leaves the 2026 quota
// where it was: it paid 5 and gets 5 back (it got 14 back, 100 → 109).
// Item 19: a legacy retry after a timeout pays 10 and gets 10 back (it got
// 5 back, 500 → 495).
func TestDoThrottledRetryRefundsWhatItPaid(t *testing.T) {
	throttled := awsResponse{status: 400, code: "ThrottlingException"}.err()
	timedOut := fmt.Errorf("read: %w", retry.ErrAttemptTimeout)
	for _, tc := range []struct {
		name      string
		policy    *retry.Policy
		quota     budget.RatioConfig
		initial   float64
		first     error
		mid, want float64
	}{
		{"2026 throttle", awsretry.Rules{}.Policy(), awsretry.Standard2026(), 100, throttled, 95, 100},
		{"2026 transient", awsretry.Rules{}.Policy(), awsretry.Standard2026(), 100, awsResponse{status: 503}.err(), 86, 100},
		{"legacy timeout", awsretry.LegacyRules{}.Policy(), awsretry.StandardLegacy(), 0, timedOut, 490, 500},
		{"legacy transient", awsretry.LegacyRules{}.Policy(), awsretry.StandardLegacy(), 0, awsResponse{status: 500}.err(), 495, 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.quota.InitialTokens = tc.initial
			b := budget.NewRatio(tc.quota)
			p := tc.policy
			p.Budget = b
			p.Backoff = backoff.Constant{}
			n := 0
			var mid float64
			_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
				n++
				if n == 1 {
					return 0, tc.first
				}
				mid = b.Available()
				return 1, nil
			})
			if err != nil || n != 2 {
				t.Fatalf("err %v after %d attempts", err, n)
			}
			if mid != tc.mid || b.Available() != tc.want {
				t.Fatalf("quota %v during the retry and %v after, want %v and %v", mid, b.Available(), tc.mid, tc.want)
			}
		})
	}
}
