package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
	"github.com/aws/smithy-go/metrics"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// errorMeter is a smithy-go MeterProvider that records the exception.type
// of every client.call.errors the SDK counts (its Retry middleware counts
// one for each failed attempt).
type errorMeter struct {
	metrics.NopMeter
	mu    sync.Mutex
	types []string
}

func (m *errorMeter) Meter(string, ...metrics.MeterOption) metrics.Meter { return m }

func (m *errorMeter) Int64Counter(name string, _ ...metrics.InstrumentOption) (metrics.Int64Counter, error) {
	if name != "client.call.errors" {
		return m.NopMeter.Int64Counter(name)
	}
	return errorCounter{m}, nil
}

type errorCounter struct{ m *errorMeter }

func (c errorCounter) Add(_ context.Context, _ int64, opts ...metrics.RecordMetricOption) {
	var o metrics.RecordMetricOptions
	for _, f := range opts {
		f(&o)
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	c.m.types = append(c.m.types, fmt.Sprint(o.Properties.Get("exception.type")))
}

// typeSeer wraps a retryer, as a user's aws.Retryer wrapper does, and
// records the type of each error the SDK's Retry middleware hands it.
type typeSeer struct {
	*sleepless
	seen []string
}

func (s *typeSeer) IsErrorRetryable(err error) bool {
	s.seen = append(s.seen, fmt.Sprintf("%T", err))
	return s.sleepless.IsErrorRetryable(err)
}

// TestSDKSeesItsOwnAttemptErrors (s5 awssdk): between the attempts, the
// SDK's Retry middleware hands each failed attempt's error to its metrics
// (client.call.errors{exception.type}: the API error code, else the Go
// type, %T), to the logger (ClientLogMode retries) and to the retryer (and
// so to a user's wrapper of it). With the Retryer's middleware they must
// see exactly what they see without it: the SDK's own error values, not
// the middleware's *awssdk.attemptError (a transport error was counted as
// exception.type "*awssdk.attemptError" instead of "*http.ResponseError").
func TestSDKSeesItsOwnAttemptErrors(t *testing.T) {
	e := newEndpoint(t)
	skew := reply{status: 400, errType: "InvalidSignatureException", skewed: true}
	scripts := map[string][]reply{
		"throttled, dropped, then success": {provision, {drop: true}, ok200},
		"dropped until exhausted":          {{drop: true}, {drop: true}, internal, {drop: true}},
		"clock skew, then success":         {skew, {drop: true}, ok200},
	}
	for name, script := range scripts {
		run := func(withMiddleware bool) (types, seen []string, logs string) {
			clk := clocktest.NewFake()
			policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
			policy.Clock, policy.Observer = clk, &events{}
			policy.Classify = func(err error) bool { // a dropped connection and clock skew too
				var send *smithyhttp.RequestSendError
				var marked interface{ RetryableError() bool }
				return awsretry.IsRetryable(err) || errors.As(err, &send) || errors.As(err, &marked) && marked.RetryableError()
			}
			r := awssdk.NewRetryer(policy)
			seer := &typeSeer{sleepless: &sleepless{clk: clk, RetryerV2: r}}
			meter := &errorMeter{}
			var logBuf strings.Builder
			opts := []func(*config.LoadOptions) error{
				config.WithRetryer(func() aws.Retryer { return seer }),
				config.WithClientLogMode(aws.LogRetries),
				config.WithLogger(logging.LoggerFunc(func(c logging.Classification, format string, v ...any) {
					fmt.Fprintf(&logBuf, format+"\n", v...)
				})),
			}
			if withMiddleware {
				opts = append(opts, config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
			}
			o := e.client(t, opts...).Options()
			o.MeterProvider = meter
			c := dynamodb.New(o)
			e.play(script, func() { _ = getItemCtx(context.Background(), c) })
			return meter.types, seer.seen, logBuf.String()
		}
		wantTypes, wantSeen, wantLogs := run(false)
		types, seen, logs := run(true)
		if len(wantTypes) < 2 || fmt.Sprint(types) != fmt.Sprint(wantTypes) {
			t.Errorf("%s: exception.type of the failed attempts with the middleware %q, without %q", name, types, wantTypes)
		}
		if len(wantSeen) < 2 || fmt.Sprint(seen) != fmt.Sprint(wantSeen) {
			t.Errorf("%s: the retryer's wrapper saw %q with the middleware, %q without", name, seen, wantSeen)
		}
		if logs != wantLogs {
			t.Errorf("%s: the SDK logged\n%s\nwith the middleware, without\n%s", name, logs, wantLogs)
		}
		if all := fmt.Sprint(types, seen, logs); strings.Contains(all, "awssdk") {
			t.Errorf("%s: the SDK saw the middleware's error: %s", name, all)
		}
	}
}
