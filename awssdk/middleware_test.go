package awssdk_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// withMiddleware makes a DynamoDB client on the endpoint whose retryer is
// side (wrapping r) and whose stack has r's middleware.
func (e *endpoint) withMiddleware(t *testing.T, r *awssdk.Retryer, side aws.RetryerV2) *dynamodb.Client {
	t.Helper()
	return e.client(t, config.WithRetryer(func() aws.Retryer { return side }),
		config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
}

func getItemCtx(ctx context.Context, c *dynamodb.Client) error {
	_, err := c.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}},
	})
	return err
}

// TestMiddlewareNumbersAttemptsAndEndsTheCall (review: the Observer saw
// attempt 1 or 2 only, and no CallEnd): with the Retryer's middleware on
// the real SDK client, AttemptStart and AttemptEnd carry 1, 2, 3, and a
// CallEnd reports the attempts and why the call stopped.
func TestMiddlewareNumbersAttemptsAndEndsTheCall(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Observer, policy.Clock = "ddb", obs, clk
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	if n := e.play([]reply{internal, internal, internal}, func() { _ = getItem(c) }); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	want := "start 1; end 1 error; retry 2 after 50ms; start 2; end 2 error; retry 3 after 100ms; start 3; end 3 error; call end 3 attempts; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	obs.b.Reset()
	if n := e.play([]reply{internal, ok200}, func() { _ = getItem(c) }); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	want = "start 1; end 1 error; retry 2 after 50ms; start 2; end 2 ok; call end 2 success; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// TestMaxElapsedRefusesALateRetry (review: MaxElapsed was not applied):
// no retry whose wait would end past start+MaxElapsed; the error matches
// retry.ErrElapsed, CallEnd says deadline, and the budget is not charged
// for the refused retry.
func TestMaxElapsedRefusesALateRetry(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	quota := policy.Budget.(*budget.Ratio)
	policy.Operation, policy.Observer, policy.Clock = "ddb", obs, clk
	policy.MaxElapsed = 1500 * time.Millisecond // holds the 1 s wait after a throttle, not the 2 s after the next
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	var err error
	if n := e.play([]reply{throttling, throttling, ok200}, func() { err = getItem(c) }); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	if !errors.Is(err, retry.ErrElapsed) || !errors.Is(err, awssdk.ErrElapsed) {
		t.Fatalf("error %v, want ErrElapsed", err)
	}
	want := "start 1; end 1 error; retry 2 after 1s; start 2; end 2 error; call end 2 deadline; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if got := quota.Available(); got != 500-5 {
		t.Errorf("quota %v, want one throttle retry paid (495)", got)
	}
}

// TestAttemptTimeoutCutsAnAttempt (review: AttemptTimeout was not
// applied): an attempt that hangs is cut at AttemptTimeout on the
// Policy's clock, counted as a timeout, and retried.
func TestAttemptTimeoutCutsAnAttempt(t *testing.T) {
	clk := clocktest.NewFake()
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if requests.Add(1) == 1 {
			arrived <- struct{}{}
			select { // hang until the client gives up
			case <-req.Context().Done():
			case <-release:
			}
			return
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.Header().Set("X-Amz-Crc32", "2745614147") // crc32 of {}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	defer close(release)
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Observer, policy.Clock = "ddb", obs, clk
	policy.AttemptTimeout = 2 * time.Second
	r := awssdk.NewRetryer(policy)
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")),
		config.WithSharedConfigFiles([]string{}), config.WithSharedCredentialsFiles([]string{}),
		config.WithRetryer(func() aws.Retryer { return &sleepless{clk: clk, RetryerV2: r} }),
		config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
	if err != nil {
		t.Fatal(err)
	}
	c := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	done := make(chan error, 1)
	go func() { done <- getItemCtx(context.Background(), c) }()
	<-arrived
	clk.Advance(2 * time.Second)
	if err := <-done; err != nil {
		t.Fatalf("the retry after the cut attempt failed: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
	want := "start 1; end 1 timeout; retry 2 after 50ms; start 2; end 2 ok; call end 2 success; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// TestBoundsWithoutMiddlewareFailSafe: a Policy with AttemptTimeout or
// MaxElapsed on a client without the Retryer's middleware fails the
// operation at once with ErrMiddlewareMissing, before any request,
// rather than run unbounded.
func TestBoundsWithoutMiddlewareFailSafe(t *testing.T) {
	e := newEndpoint(t)
	for _, set := range []func(*retry.Policy){
		func(p *retry.Policy) { p.AttemptTimeout = time.Second },
		func(p *retry.Policy) { p.MaxElapsed = time.Second },
	} {
		policy := awsretry.Rules{}.Policy()
		set(policy)
		c := e.client(t, config.WithRetryer(awssdk.Provider(policy)))
		var err error
		if n := e.play(nil, func() { err = getItem(c) }); n != 0 {
			t.Fatalf("%d requests without the middleware", n)
		}
		if !errors.Is(err, awssdk.ErrMiddlewareMissing) {
			t.Fatalf("error %v, want ErrMiddlewareMissing", err)
		}
	}
}

// TestNestedOneLayerLeavesRetryingToTheCaller (review: Nested was not
// applied): a call made while serving an inbound request whose caller
// retries makes one attempt, with or without the middleware.
func TestNestedOneLayerLeavesRetryingToTheCaller(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	quota := policy.Budget.(*budget.Ratio)
	policy.Operation, policy.Observer, policy.Clock = "ddb", obs, clk
	r := awssdk.NewRetryer(policy)
	ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	for _, c := range []*dynamodb.Client{
		e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r}),
		e.client(t, config.WithRetryer(func() aws.Retryer { return &sleepless{clk: clk, RetryerV2: r} })),
	} {
		var err error
		if n := e.play([]reply{internal, ok200}, func() { err = getItemCtx(ctx, c) }); n != 1 {
			t.Fatalf("%d requests, want 1", n)
		}
		if !errors.Is(err, retry.ErrNestedRetry) {
			t.Fatalf("error %v, want ErrNestedRetry", err)
		}
	}
	want := "start 1; end 1 error; call end 1 nested; start 1; end 1 error; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	if got := quota.Available(); got != 500 {
		t.Errorf("quota %v: a refused retry was charged", got)
	}
	// Without a retrying caller the same call retries.
	if n := e.play([]reply{internal, ok200}, func() { _ = getItem(e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})) }); n != 2 {
		t.Fatalf("%d requests without an inbound caller, want 2", n)
	}
}

// TestLoadOptionsInstallsRetryerAndMiddleware: LoadOptions alone gives
// every client of the aws.Config the Retryer and its middleware (the
// exact attempt numbers and CallEnd show it), and a stack without the
// SDK's Retry middleware is left as it is.
func TestLoadOptionsInstallsRetryerAndMiddleware(t *testing.T) {
	e := newEndpoint(t)
	obs := &events{}
	policy := awsretry.Rules{}.Policy()
	policy.Backoff = backoff.Func(func(int, time.Duration) time.Duration { return 0 }) // no sleep
	policy.Operation, policy.Observer = "ddb", obs
	policy.MaxElapsed = time.Hour
	c := e.client(t, awssdk.LoadOptions(policy)...)
	if n := e.play([]reply{internal, internal, ok200}, func() {
		if err := getItem(c); err != nil {
			t.Errorf("call: %v", err)
		}
	}); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	want := "start 1; end 1 error; retry 2 after 0s; start 2; end 2 error; retry 3 after 0s; start 3; end 3 ok; call end 3 success; "
	if got := obs.String(); got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
	stack := middleware.NewStack("empty", func() any { return nil })
	if err := awssdk.NewRetryer(policy).AddMiddleware(stack); err != nil {
		t.Fatal(err)
	}
	if ids := stack.Finalize.List(); len(ids) != 0 {
		t.Fatalf("a stack without Retry got %v", ids)
	}
}

// TestClassifyPanicEndsTheCall: a Classify that panics goes on to the
// SDK's caller; the attempt was reported first and the middleware sends
// CallEnd with ReasonPanic.
func TestClassifyPanicEndsTheCall(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Observer, policy.Clock = "ddb", obs, clk
	policy.Classify = func(error) bool { panic("classify") }
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	e.play([]reply{internal}, func() {
		defer func() {
			if recover() != "classify" {
				t.Error("the panic did not reach the caller")
			}
		}()
		_ = getItem(c)
	})
	if got, want := obs.String(), "start 1; end 1 error; call end 1 panic; "; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

type spanKey struct{}

type callerKey struct{}

// spanObserver marks the context AttemptStart returns, as a tracer's span
// does, and records whether AttemptEnd gets it back.
type spanObserver struct {
	retry.NopObserver
	ended, endedWithSpan           atomic.Int32
	scheduled, scheduledWithCaller atomic.Int32
}

func (o *spanObserver) RetryScheduled(ctx context.Context, _ retry.RetryScheduled) {
	o.scheduled.Add(1)
	if ctx.Value(callerKey{}) != nil {
		o.scheduledWithCaller.Add(1)
	}
}

func (o *spanObserver) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	return context.WithValue(ctx, spanKey{}, e.Attempt)
}

func (o *spanObserver) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	o.ended.Add(1)
	if ctx.Value(spanKey{}) == e.Attempt {
		o.endedWithSpan.Add(1)
	}
}

// TestAttemptEndGetsTheAttemptContext: AttemptEnd is given the context
// AttemptStart returned, so that a tracer (otelretry) ends the attempt's
// span instead of leaving it open, with or without the middleware; with
// it, RetryScheduled gets the caller's context (its span).
func TestAttemptEndGetsTheAttemptContext(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	for _, withMW := range []bool{true, false} {
		obs := &spanObserver{}
		policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
		policy.Observer, policy.Clock = obs, clk
		r := awssdk.NewRetryer(policy)
		side := &sleepless{clk: clk, RetryerV2: r}
		c := e.client(t, config.WithRetryer(func() aws.Retryer { return side }))
		if withMW {
			c = e.withMiddleware(t, r, side)
		}
		ctx := context.WithValue(context.Background(), callerKey{}, true)
		e.play([]reply{internal, ok200}, func() { _ = getItemCtx(ctx, c) })
		if obs.ended.Load() != 2 || obs.endedWithSpan.Load() != 2 {
			t.Errorf("middleware %v: %d attempts ended, %d with AttemptStart's context", withMW, obs.ended.Load(), obs.endedWithSpan.Load())
		}
		if withMW && (obs.scheduled.Load() != 1 || obs.scheduledWithCaller.Load() != 1) {
			t.Errorf("%d retries scheduled, %d with the caller's context", obs.scheduled.Load(), obs.scheduledWithCaller.Load())
		}
	}
}

// TestNestedBudgetGrantsTheNestedRetries: under NestedBudget, a call
// whose inbound caller retries draws its retries on the NestedBudget,
// not on the Budget, and stops when the NestedBudget is spent.
func TestNestedBudgetGrantsTheNestedRetries(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	quota := policy.Budget.(*budget.Ratio)
	nested := budget.NewRatio(budget.RatioConfig{MaxTokens: 1, InitialTokens: 1, Refill: 0.1})
	policy.Clock, policy.Nested, policy.NestedBudget = clk, retry.NestedBudget, nested
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	ctx := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	var err error
	if n := e.play([]reply{internal, internal, ok200}, func() { err = getItemCtx(ctx, c) }); n != 2 {
		t.Fatalf("%d requests, want 2 (one nested retry granted)", n)
	}
	if !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("error %v, want ErrBudgetExhausted", err)
	}
	if got := quota.Available(); got != 500 {
		t.Errorf("the Budget paid for nested retries: %v", got)
	}
	if got := nested.Available(); got >= 1 {
		t.Errorf("the NestedBudget did not pay: %v", got)
	}
}

// TestDeadlineTooCloseStopsBeforeTheWait (the deadline rule: stop when the
// caller's deadline cannot hold the next wait plus MinAttemptTime): the
// retry is refused before the SDK sleeps, with an error matching
// retry.ErrDeadlineTooClose and context.DeadlineExceeded.
func TestDeadlineTooCloseStopsBeforeTheWait(t *testing.T) {
	e := newEndpoint(t)
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Observer = "ddb", obs
	policy.MinAttemptTime = 2 * time.Minute
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clocktest.NewFake(), RetryerV2: r})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // cannot hold 1 s + 2 min
	defer cancel()
	var err error
	if n := e.play([]reply{throttling, ok200}, func() { err = getItemCtx(ctx, c) }); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if !errors.Is(err, retry.ErrDeadlineTooClose) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, awssdk.ErrDeadlineTooClose) {
		t.Fatalf("error %v, want ErrDeadlineTooClose", err)
	}
	if got, want := obs.String(), "start 1; end 1 error; call end 1 deadline; "; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}
