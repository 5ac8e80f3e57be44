package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// retryRefuser is a Limiter that admits first attempts and refuses every
// retry.
type retryRefuser struct{}

var errNoRetries = errors.New("test: no retries")

func (retryRefuser) Acquire(_ context.Context, retry bool) (func(error), error) {
	if retry {
		return nil, errNoRetries
	}
	return func(error) {}, nil
}

// cancelling wraps a retryer: it cancels the caller's context when the
// SDK asks for the wait, so that the next attempt never starts, and hands
// the SDK no wait at all (as sleepless does).
type cancelling struct {
	aws.RetryerV2
	cancel context.CancelFunc
}

func (c *cancelling) RetryDelay(attempt int, err error) (time.Duration, error) {
	if _, derr := c.RetryerV2.RetryDelay(attempt, err); derr != nil {
		return 0, derr
	}
	c.cancel()
	return -5 * time.Second, nil
}

// TestRetryGrantNotRunIsGivenBack (review: a retry granted by a
// BudgetTracker whose attempt never ran held its slot for good, the SDK
// dropping the retry token's release): with the middleware, a grant whose
// attempt the Limiter refuses, or whose caller gives up before it starts,
// is refunded when the operation ends, with or without an Observer.
func TestRetryGrantNotRunIsGivenBack(t *testing.T) {
	for _, tc := range []struct {
		name     string
		observer bool
		limiter  retry.Limiter
		cancel   bool
	}{
		{"limiter refuses the retry", false, retryRefuser{}, false},
		{"limiter refuses the retry, with an observer", true, retryRefuser{}, false},
		{"caller gives up before the retry", false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEndpoint(t)
			clk := clocktest.NewFake()
			conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
			policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
			policy.Clock, policy.Budget = clk, conc
			if tc.limiter != nil {
				policy.Limiter = tc.limiter
			}
			if tc.observer {
				policy.Observer = &events{}
			}
			r := awssdk.NewRetryer(policy)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var side aws.RetryerV2 = &sleepless{clk: clk, RetryerV2: r}
			if tc.cancel {
				side = &cancelling{RetryerV2: r, cancel: cancel}
			}
			c := e.withMiddleware(t, r, side)
			var err error
			if n := e.play([]reply{internal, ok200}, func() { err = getItemCtx(ctx, c) }); n != 1 {
				t.Fatalf("%d requests, want 1 (the retry never runs)", n)
			}
			if err == nil {
				t.Fatal("the operation succeeded; want the retry refused")
			}
			if got := conc.Available(); got != 1 {
				t.Errorf("Available() = %v after the operation, want 1 (the grant given back)", got)
			}
			if req, ret := conc.Active(); req != 0 || ret != 0 {
				t.Errorf("Active() = %d requests, %d retries after the operation, want 0, 0", req, ret)
			}
		})
	}
}

// startPanicker panics in AttemptStart of attempt n.
type startPanicker struct {
	retry.NopObserver
	n int
}

func (o startPanicker) AttemptStart(ctx context.Context, e retry.AttemptStart) context.Context {
	if e.Attempt == o.n {
		panic("attempt start")
	}
	return ctx
}

// TestAttemptStartPanicEndsTheTrackedRequest (review: a panic after the
// BudgetTracker's Start left an active request counted for good): when
// AttemptStart panics, the panic goes on and the tracker hears the
// attempt end, for a first attempt and for a retry (whose grant is then
// neither held nor given back twice).
func TestAttemptStartPanicEndsTheTrackedRequest(t *testing.T) {
	for _, n := range []int{1, 2} {
		t.Run(fmt.Sprintf("attempt %d", n), func(t *testing.T) {
			e := newEndpoint(t)
			clk := clocktest.NewFake()
			conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
			policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
			policy.Clock, policy.Budget, policy.Observer = clk, conc, startPanicker{n: n}
			r := awssdk.NewRetryer(policy)
			c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
			e.play([]reply{internal, ok200}, func() {
				defer func() {
					if got := recover(); got != "attempt start" {
						t.Errorf("recovered %v, want the Observer's panic", got)
					}
				}()
				_ = getItem(c)
			})
			if req, ret := conc.Active(); req != 0 || ret != 0 {
				t.Errorf("Active() = %d requests, %d retries after the panic, want 0, 0", req, ret)
			}
			if st := conc.Stats(); st.Granted != st.Retries+st.Refunded {
				t.Errorf("stats %+v: every grant must be recorded or refunded once", st)
			}
		})
	}
}

// TestRefusedAttemptIsNotCounted (review: CallEnd.Attempts counted an
// attempt the Limiter refused): CallEnd reports the attempts admitted,
// as retry.Do does.
func TestRefusedAttemptIsNotCounted(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Observer, policy.Clock, policy.Limiter = "ddb", obs, clk, retryRefuser{}
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	var err error
	if n := e.play([]reply{internal, ok200}, func() { err = getItem(c) }); n != 1 {
		t.Fatalf("%d requests, want 1", n)
	}
	if !errors.Is(err, errNoRetries) {
		t.Fatalf("error %v, want the Limiter's refusal", err)
	}
	if got, want := obs.String(), "start 1; end 1 error; retry 2 after 50ms; call end 1 throttled; "; got != want {
		t.Errorf("events:\n got %s\nwant %s", got, want)
	}
}

// panicTimers is a clock whose AfterFunc panics.
type panicTimers struct{ *clocktest.Fake }

func (panicTimers) AfterFunc(time.Duration, func()) clock.Timer { panic("after func") }

// watchCtx is an attempt context that counts the contexts derived from it
// and not yet ended (context.AfterFunc registrations not stopped).
type watchCtx struct {
	context.Context
	done chan struct{}
	live *atomic.Int32
}

func (w watchCtx) Done() <-chan struct{} { return w.done }

func (w watchCtx) AfterFunc(func()) func() bool {
	w.live.Add(1)
	return func() bool { w.live.Add(-1); return true }
}

// watchObserver runs every attempt under a watchCtx.
type watchObserver struct {
	retry.NopObserver
	live *atomic.Int32
}

func (o watchObserver) AttemptStart(ctx context.Context, _ retry.AttemptStart) context.Context {
	return watchCtx{Context: ctx, done: make(chan struct{}), live: o.live}
}

// TestAttemptTimerPanicEndsTheAttemptContext (review: a panicking
// Clock.AfterFunc leaked the attempt's context, whose cancel was deferred
// only after the timer was made): the panic goes on and the context
// derived for the attempt is ended.
func TestAttemptTimerPanicEndsTheAttemptContext(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	var live atomic.Int32
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Observer = panicTimers{clk}, watchObserver{live: &live}
	policy.AttemptTimeout = time.Second
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	e.play([]reply{ok200}, func() {
		defer func() {
			if got := recover(); got != "after func" {
				t.Errorf("recovered %v, want the clock's panic", got)
			}
		}()
		_ = getItem(c)
	})
	if n := live.Load(); n != 0 {
		t.Errorf("%d attempt contexts not ended after the panic, want 0", n)
	}
}

// trackingClient is an HTTP client that counts the response bodies not
// yet closed.
type trackingClient struct{ open atomic.Int32 }

func (c *trackingClient) Do(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && resp.Body != nil {
		c.open.Add(1)
		resp.Body = &trackedBody{ReadCloser: resp.Body, c: c}
	}
	return resp, err
}

type trackedBody struct {
	io.ReadCloser
	c    *trackingClient
	once sync.Once
}

func (b *trackedBody) Close() error {
	b.once.Do(func() { b.c.open.Add(-1) })
	return b.ReadCloser.Close()
}

// lateTimeout is a Deserialize middleware that, once the first response
// is deserialized, advances the clock by the attempt timeout: the timer
// fires after the headers arrived, before the attempt ends.
type lateTimeout struct {
	clk   *clocktest.Fake
	d     time.Duration
	fired atomic.Bool
}

func (*lateTimeout) ID() string { return "test.LateTimeout" }

func (l *lateTimeout) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if !l.fired.Swap(true) {
		l.clk.Advance(l.d)
	}
	return out, md, err
}

// keepOpen, between the deserializer and the Retryer's body middleware,
// hides the body's Close from the deserializer, so that the body is left
// open to the caller, as a streamed response's is.
type keepOpen struct{}

func (keepOpen) ID() string { return "test.KeepOpen" }

func (keepOpen) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Body != nil {
		resp.Body = noClose{resp.Body}
	}
	return out, md, err
}

type noClose struct{ io.ReadCloser }

func (noClose) Close() error { return nil }

// TestAttemptTimeoutAfterHeadersCutsTheAttempt (review: an AttemptTimeout
// firing after the headers arrived, before the attempt ended, returned
// the response with its context cancelled, so a body left to the caller
// failed on read): the attempt is cut, its body closed, and it is
// retried. The stack keeps the body open as a streamed response does
// (keepOpen).
func TestAttemptTimeoutAfterHeadersCutsTheAttempt(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.AttemptTimeout = clk, time.Second
	r := awssdk.NewRetryer(policy)
	hc := &trackingClient{}
	late := &lateTimeout{clk: clk, d: policy.AttemptTimeout}
	stream := func(s *middleware.Stack) error {
		if err := s.Deserialize.Insert(keepOpen{}, awssdk.BodyMiddlewareID, middleware.Before); err != nil {
			return err
		}
		return s.Deserialize.Add(late, middleware.Before)
	}
	side := &sleepless{clk: clk, RetryerV2: r}
	c := e.client(t, config.WithRetryer(func() aws.Retryer { return side }),
		config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware, stream}))
	var err error
	call := func() {
		_, err = c.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}},
		}, func(o *dynamodb.Options) { o.HTTPClient = hc })
	}
	if n := e.play([]reply{ok200, ok200}, call); n != 2 {
		t.Fatalf("%d requests, want 2 (the late-cut attempt retried); error %v", n, err)
	}
	if err != nil {
		t.Fatalf("error %v, want the retry's success", err)
	}
	if n := hc.open.Load(); n != 1 {
		t.Errorf("%d response bodies open, want 1 (the retry's, left to the caller; the cut attempt's closed)", n)
	}
}

// retryRecordPanics is a Budget whose Record of a retry panics.
type retryRecordPanics struct{}

func (retryRecordPanics) Withdraw(error) bool { return true }
func (retryRecordPanics) Record(retry bool, _ error) {
	if retry {
		panic("record")
	}
}

// countingLimiter counts the permits not yet given back.
type countingLimiter struct{ out atomic.Int32 }

func (l *countingLimiter) Acquire(context.Context, bool) (func(error), error) {
	l.out.Add(1)
	return func(error) { l.out.Add(-1) }, nil
}

// TestRetryRecordPanicStillEndsTheAttempt (class sweep: the SDK releases
// the retry token, then the attempt token; a Budget whose Record of the
// retry panicked left the retry's Limiter permit held): the panic goes on
// and the Limiter gets its permit back.
func TestRetryRecordPanicStillEndsTheAttempt(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	lim := &countingLimiter{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Budget, policy.Limiter = clk, retryRecordPanics{}, lim
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	e.play([]reply{internal, ok200}, func() {
		defer func() {
			if got := recover(); got != "record" {
				t.Errorf("recovered %v, want the Budget's panic", got)
			}
		}()
		_ = getItem(c)
	})
	if n := lim.out.Load(); n != 0 {
		t.Errorf("%d Limiter permits held after the panic, want 0", n)
	}
}

// panicClient is an HTTP client that panics.
type panicClient struct{}

func (panicClient) Do(*http.Request) (*http.Response, error) { panic("transport") }

// TestSendPanicReleasesTheAttempt (class sweep: a panic while the attempt
// was sent, in the HTTP client or a middleware, made the SDK drop the
// attempt token's release, leaking the Limiter's permit and the
// BudgetTracker's active request): the panic goes on and every part hears
// the attempt end.
func TestSendPanicReleasesTheAttempt(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	lim := &countingLimiter{}
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Budget, policy.Limiter = clk, conc, lim
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	func() {
		defer func() {
			if got := recover(); got != "transport" {
				t.Errorf("recovered %v, want the HTTP client's panic", got)
			}
		}()
		_, _ = c.GetItem(context.Background(), &dynamodb.GetItemInput{
			TableName: aws.String("t"),
			Key:       map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}},
		}, func(o *dynamodb.Options) { o.HTTPClient = panicClient{} })
	}()
	if n := lim.out.Load(); n != 0 {
		t.Errorf("%d Limiter permits held after the panic, want 0", n)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("Active() = %d requests, %d retries after the panic, want 0, 0", req, ret)
	}
}
