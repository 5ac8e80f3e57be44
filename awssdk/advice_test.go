package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// huge is an x-amz-retry-after beyond int64, which the SDK's own parse
// ignores.
const huge = "99999999999999999999"

// adviceRun is one call of the advice tests on a real DynamoDB client.
type adviceRun struct {
	requests int
	err      error
	waits    []time.Duration // what the SDK sleeps, read as it reads the header after RetryDelay
	events   string
	header   []string // x-amz-retry-after of the first attempt's response, after the call
}

func callAdvised(t *testing.T, maxRetryAfter time.Duration, withMiddleware bool, script []reply) adviceRun {
	t.Helper()
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Observer, policy.Clock, policy.MaxRetryAfter = "ddb", obs, clk, maxRetryAfter
	r := awssdk.NewRetryer(policy)
	side := &sleepless{clk: clk, RetryerV2: r}
	opts := []func(*config.LoadOptions) error{config.WithRetryer(func() aws.Retryer { return side })}
	if withMiddleware {
		opts = append(opts, config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
	}
	c := e.client(t, opts...)
	var run adviceRun
	run.requests = e.play(script, func() {
		var out *dynamodb.GetItemOutput
		out, run.err = c.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}},
		})
		if out != nil {
			res, _ := sdkretry.GetAttemptResults(out.ResultMetadata)
			var re *smithyhttp.ResponseError
			if len(res.Results) > 0 && errors.As(res.Results[0].Err, &re) {
				run.header = re.Response.Header.Values("X-Amz-Retry-After")
			}
		}
	})
	run.waits, run.events = side.waits, obs.String()
	return run
}

// TestRetryAfterBeyondMaxRetryAfterStops (s4 aws 3): an x-amz-retry-after
// longer than Policy.MaxRetryAfter (0: 30 s) is not retried, with or
// without the middleware: the SDK alone would come back after at most
// the backoff + 5 s, sooner than the server asked. A huge value (beyond
// int64, which the SDK ignores and so retries after the bare backoff) is
// read as 24 h and stops too.
func TestRetryAfterBeyondMaxRetryAfterStops(t *testing.T) {
	for _, tc := range []struct {
		name   string
		max    time.Duration
		advice string
	}{
		{"60 s over the default 30 s", 0, "60000"},
		{"huge over the default", 0, huge},
		{"2 s over a 1 s cap", time.Second, "2000"},
	} {
		for _, mw := range []bool{false, true} {
			run := callAdvised(t, tc.max, mw, []reply{advised(throttling, tc.advice), ok200})
			if run.requests != 1 || !errors.Is(run.err, retry.ErrAdviceExceedsCap) || !errors.Is(run.err, awssdk.ErrAdviceExceedsCap) {
				t.Errorf("%s (middleware %v): %d requests, error %v; want 1 and ErrAdviceExceedsCap", tc.name, mw, run.requests, run.err)
			}
			var apiErr interface{ ErrorCode() string }
			if !errors.As(run.err, &apiErr) || apiErr.ErrorCode() != "ThrottlingException" {
				t.Errorf("%s (middleware %v): error %v does not carry the throttling answer", tc.name, mw, run.err)
			}
			if mw && run.events != "start 1; end 1 error; call end 1 advice; " {
				t.Errorf("%s: events %s", tc.name, run.events)
			}
		}
	}
}

// TestHugeRetryAfterIsClampedNotIgnored (s4 aws 3): under a MaxRetryAfter
// above 24 h, an x-amz-retry-after beyond int64 reads as 24 h, and the
// SDK waits the backoff + 5 s (the advice clamped), not the bare backoff
// (the SDK's own parse ignores the value). With the middleware the
// caller's response keeps the header the server sent.
func TestHugeRetryAfterIsClampedNotIgnored(t *testing.T) {
	for _, mw := range []bool{false, true} {
		run := callAdvised(t, 48*time.Hour, mw, []reply{advised(throttling, huge), ok200})
		if run.err != nil || run.requests != 2 {
			t.Fatalf("middleware %v: %d requests, error %v; want 2 and success", mw, run.requests, run.err)
		}
		// The throttling backoff at the top of its jitter is 1 s.
		if want := []time.Duration{6 * time.Second}; fmt.Sprint(run.waits) != fmt.Sprint(want) {
			t.Errorf("middleware %v: the SDK waits %v, want %v", mw, run.waits, want)
		}
		if want := "start 1; end 1 error; retry 2 after 6s; start 2; end 2 ok; "; mw {
			want += "call end 2 success; "
			if run.events != want {
				t.Errorf("events:\n got %s\nwant %s", run.events, want)
			}
			if fmt.Sprint(run.header) != "["+huge+"]" {
				t.Errorf("the first response's x-amz-retry-after is %q after the call, want %q", run.header, huge)
			}
		}
	}
}

// TestNegativeMaxRetryAfterIgnoresTheAdvice (s4 aws 3): a negative
// Policy.MaxRetryAfter ignores x-amz-retry-after, as retry.Do ignores
// advice: the SDK waits the backoff alone, and with the middleware the
// caller's response keeps the header.
func TestNegativeMaxRetryAfterIgnoresTheAdvice(t *testing.T) {
	for _, mw := range []bool{false, true} {
		run := callAdvised(t, -1, mw, []reply{advised(internal, "3000"), ok200})
		if run.err != nil || run.requests != 2 {
			t.Fatalf("middleware %v: %d requests, error %v; want 2 and success", mw, run.requests, run.err)
		}
		if want := []time.Duration{50 * time.Millisecond}; fmt.Sprint(run.waits) != fmt.Sprint(want) {
			t.Errorf("middleware %v: the SDK waits %v, want %v", mw, run.waits, want)
		}
		if mw && fmt.Sprint(run.header) != "[3000]" {
			t.Errorf("the first response's x-amz-retry-after is %q after the call, want 3000", run.header)
		}
	}
}
