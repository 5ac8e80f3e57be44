package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// errAbandoned is what the abandoning middleware returns to its caller.
var errAbandoned = errors.New("test: abandoned")

// abandoner is a user's Finalize middleware between the Retryer's
// operation middleware and the SDK's Retry middleware that runs the
// retry loop in a goroutine and returns without waiting for it (as a
// middleware returning on a timeout of its own does): the operation ends
// while its attempts go on.
type abandoner struct {
	// wait, when not nil, is received from before returning (the test
	// closes it once the loop is where it wants it).
	wait chan struct{}
	// loopDone is closed when the abandoned loop has returned, with its
	// error in loopErr.
	loopDone chan struct{}
	loopErr  error
}

func newAbandoner(wait chan struct{}) *abandoner {
	return &abandoner{wait: wait, loopDone: make(chan struct{})}
}

func (a *abandoner) insert(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("test.Abandon",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			go func() {
				defer close(a.loopDone)
				_, _, a.loopErr = next.HandleFinalize(ctx, in)
			}()
			if a.wait != nil {
				<-a.wait
			}
			return middleware.FinalizeOutput{}, middleware.Metadata{}, errAbandoned
		}), "Retry", middleware.Before)
}

// abandoningClient is a DynamoDB client on the endpoint e with r as its
// retryer (wrapped in side) and r's middleware, the abandoner between the
// operation middleware and the SDK's Retry middleware, and meter as its
// MeterProvider.
func abandoningClient(t *testing.T, e *endpoint, r *awssdk.Retryer, side aws.RetryerV2, a *abandoner, meter *errorMeter) *dynamodb.Client {
	t.Helper()
	o := e.withMiddleware(t, r, side).Options()
	o.APIOptions = append(o.APIOptions, a.insert)
	if meter != nil {
		o.MeterProvider = meter
	}
	return dynamodb.New(o)
}

// TestAttemptOutlivingItsOperationIsRaceFree (s6 aws, defect 1): the
// attempts of an operation abandoned by a user's middleware go on in a
// goroutine while the operation ends (its CallEnd, its grants given
// back); nothing either side touches is a plain field the other touches
// too (run under -race), and whichever comes first, every permit, slot
// and grant comes back and every attempt the Observer heard start it
// hears end.
func TestAttemptOutlivingItsOperationIsRaceFree(t *testing.T) {
	e := newEndpoint(t)
	held0, wrapping0 := awssdk.HoldCounts()
	for i := range 30 {
		clk := clocktest.NewFake()
		conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
		lim := &countingLimiter{}
		obs := &events{}
		policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
		policy.Operation, policy.Clock, policy.Budget, policy.Limiter, policy.Observer = "ddb", clk, conc, lim, obs
		r := awssdk.NewRetryer(policy)
		a := newAbandoner(nil)
		c := abandoningClient(t, e, r, &sleepless{clk: clk, RetryerV2: r}, a, nil)
		e.play([]reply{internal, internal, ok200}, func() {
			if err := getItemCtx(context.Background(), c); !errors.Is(err, errAbandoned) {
				t.Fatalf("round %d: the operation ended with %v, want the abandoner's error", i, err)
			}
			<-a.loopDone
		})
		if req, ret := conc.Active(); req != 0 || ret != 0 {
			t.Errorf("round %d: Active() = %d requests, %d retries, want 0, 0", i, req, ret)
		}
		if st := conc.Stats(); st.Granted != st.Retries+st.Refunded {
			t.Errorf("round %d: stats %+v: every grant must be recorded or refunded once", i, st)
		}
		if n := lim.out.Load(); n != 0 {
			t.Errorf("round %d: %d Limiter permits not given back", i, n)
		}
		ev := obs.String()
		if s, en := strings.Count(ev, "start "), strings.Count(ev, "end ")-strings.Count(ev, "call end"); s != en {
			t.Errorf("round %d: %d attempts started, %d ended: %s", i, s, en, ev)
		}
		if strings.Count(ev, "call end") != 1 {
			t.Errorf("round %d: want one CallEnd: %s", i, ev)
		}
		if held, w := awssdk.HoldCounts(); held != held0 || w != wrapping0 {
			t.Errorf("round %d: %d error values held, %d operations wrapping, want %d, %d", i, held, w, held0, wrapping0)
		}
	}
}

// TestConcurrentAbandonedOperations (s6 aws, defects 1 and 2, with
// concurrent callers): operations of one client, from several
// goroutines at once, each abandoned by a user's middleware while its
// attempts go on, share the Retryer, its BudgetTracker, Limiter, Breaker
// and Observer: once every retry loop has returned, every permit, slot
// and grant has come back, every attempt the Observer heard start it
// heard end, each operation ended once, and nothing is held.
func TestConcurrentAbandonedOperations(t *testing.T) {
	const workers, rounds = 4, 8
	e := newEndpoint(t)
	held0, wrapping0 := awssdk.HoldCounts()
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: workers, Ratio: -1})
	lim := &countingLimiter{}
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget, policy.Limiter, policy.Observer = "ddb", clk, conc, lim, obs
	policy.Breaker = breaker.New(breaker.Config{Clock: clk})
	r := awssdk.NewRetryer(policy)
	var script []reply
	for range workers * rounds {
		script = append(script, internal, internal, ok200)
	}
	e.play(script, func() {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					a := newAbandoner(nil)
					c := abandoningClient(t, e, r, &sleepless{clk: clk, RetryerV2: r}, a, nil)
					if err := getItemCtx(context.Background(), c); !errors.Is(err, errAbandoned) {
						t.Errorf("worker %d round %d: the operation ended with %v, want the abandoner's error", w, i, err)
					}
					<-a.loopDone
				}
			})
		}
		wg.Wait()
	})
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("Active() = %d requests, %d retries, want 0, 0", req, ret)
	}
	if st := conc.Stats(); st.Granted != st.Retries+st.Refunded {
		t.Errorf("stats %+v: every grant must be recorded or refunded once", st)
	}
	if n := lim.out.Load(); n != 0 {
		t.Errorf("%d Limiter permits not given back", n)
	}
	ev := obs.String()
	if s, en := strings.Count(ev, "start "), strings.Count(ev, "end ")-strings.Count(ev, "call end"); s != en {
		t.Errorf("%d attempts started, %d ended", s, en)
	}
	if n := strings.Count(ev, "call end"); n != workers*rounds {
		t.Errorf("%d CallEnds, want %d", n, workers*rounds)
	}
	if held, w := awssdk.HoldCounts(); held != held0 || w != wrapping0 {
		t.Errorf("%d error values held, %d operations wrapping, want %d, %d", held, w, held0, wrapping0)
	}
}

// TestRetryAfterTheOperationEndedIsNotGranted (s6 aws, defects 2 and 4):
// an attempt that fails after its operation ended (the operation
// abandoned by a user's middleware while the attempt was in flight) gets
// no retry: nobody waits for it, and a BudgetTracker's grant made then
// could be given back by nobody (the next attempt refused by the Limiter,
// the SDK dropping the retry token's release) and held its slot for
// good. The SDK's own metrics see the SDK's error type for that attempt,
// not the Retryer's wrapper.
func TestRetryAfterTheOperationEndedIsNotGranted(t *testing.T) {
	e := newEndpoint(t)
	held0, wrapping0 := awssdk.HoldCounts()
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget, policy.Limiter, policy.Observer = "ddb", clk, conc, retryRefuser{}, &events{}
	policy.Classify = func(error) bool { return true } // a dropped connection too
	r := awssdk.NewRetryer(policy)
	wait, arrived, answer := make(chan struct{}), make(chan struct{}), make(chan struct{})
	a := newAbandoner(wait)
	meter := &errorMeter{}
	c := abandoningClient(t, e, r, &sleepless{clk: clk, RetryerV2: r}, a, meter)
	// The first request is answered once the operation has ended.
	e.mu.Lock()
	e.hook = func(n int) {
		if n == 1 {
			close(arrived)
			<-answer
		}
	}
	e.mu.Unlock()
	go func() { <-arrived; close(wait) }()
	// A dropped connection: the SDK counts its error by its Go type.
	n := e.play([]reply{{drop: true}, ok200}, func() {
		if err := getItemCtx(context.Background(), c); !errors.Is(err, errAbandoned) {
			t.Fatalf("the operation ended with %v, want the abandoner's error", err)
		}
		close(answer)
		<-a.loopDone
	})
	if n != 1 {
		t.Errorf("%d requests, want 1: no retry after the operation ended", n)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("Active() = %d requests, %d retries, want 0, 0 (a grant held for good)", req, ret)
	}
	if st := conc.Stats(); st.Granted != st.Retries+st.Refunded {
		t.Errorf("stats %+v: every grant must be recorded or refunded once", st)
	}
	if !errors.Is(a.loopErr, awssdk.ErrOperationEnded) {
		t.Errorf("the abandoned loop ended with %v, want ErrOperationEnded", a.loopErr)
	}
	if got := errorTypes(a.loopErr); strings.Contains(got, "attemptError") || !strings.Contains(got, "(*http.ResponseError ") {
		t.Errorf("the abandoned loop's error is %s, want the SDK's own, without the Retryer's wrapper", got)
	}
	if held, w := awssdk.HoldCounts(); held != held0 || w != wrapping0 {
		t.Errorf("%d error values held, %d operations wrapping, want %d, %d", held, w, held0, wrapping0)
	}
	meter.mu.Lock()
	defer meter.mu.Unlock()
	// The SDK counts the error its attempt returned: for a refused retry,
	// its errors.Join of the attempt's error and the refusal.
	if len(meter.types) != 1 || meter.types[0] != "*errors.joinError" {
		t.Errorf("the SDK counted the failed attempts as %q, want the SDK's own error type once", meter.types)
	}
}

// errorTypes lists the types of err's tree, depth first.
func errorTypes(err error) string {
	if err == nil {
		return ""
	}
	s := fmt.Sprintf("%T", err)
	switch x := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range x.Unwrap() {
			s += " (" + errorTypes(e) + ")"
		}
	case interface{ Unwrap() error }:
		if e := x.Unwrap(); e != nil {
			s += " " + errorTypes(e)
		}
	}
	return s
}

// doFunc is an HTTP client made of a function.
type doFunc func(*http.Request) (*http.Response, error)

func (f doFunc) Do(req *http.Request) (*http.Response, error) { return f(req) }

// nestingObserver is an Observer that calls nested with the context of
// each AttemptEnd.
type nestingObserver struct {
	*events
	nested func(context.Context)
}

func (o nestingObserver) AttemptEnd(ctx context.Context, e retry.AttemptEnd) {
	o.events.AttemptEnd(ctx, e)
	o.nested(ctx)
}

// TestNestedCallWithoutTheMiddlewareIsItsOwn (s6 aws, defect 3): an SDK
// call made inside an attempt, with the attempt's context (from the HTTP
// client, from a Finalize middleware between the SDK's Retry middleware
// and the Retryer's attempt middleware, or from the Observer's
// AttemptEnd, after the attempt's release), by a client without
// the Retryer's middleware, is an operation of its own without the
// middleware: it does not count among the outer operation's attempts nor
// take its waits, and a Policy that needs the middleware refuses it
// (ErrMiddlewareMissing) instead of using the outer operation's.
func TestNestedCallWithoutTheMiddlewareIsItsOwn(t *testing.T) {
	for _, from := range []string{"http client", "middleware after Retry", "observer's AttemptEnd"} {
		for _, tracked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s, tracker %v", from, tracked), func(t *testing.T) {
				e := newEndpoint(t)
				clk := clocktest.NewFake()
				outerObs, innerObs := &events{}, &events{}
				var nested func(ctx context.Context)
				outerPolicy := awsretry.Rules{Rand: maxJitter{}}.Policy()
				outerPolicy.Operation, outerPolicy.Clock, outerPolicy.Observer = "ddb", clk, outerObs
				if from == "observer's AttemptEnd" {
					outerPolicy.Observer = nestingObserver{outerObs, func(ctx context.Context) { nested(ctx) }}
				}
				outer := awssdk.NewRetryer(outerPolicy)
				innerPolicy := awsretry.Rules{Rand: maxJitter{}}.Policy()
				innerPolicy.Operation, innerPolicy.Clock, innerPolicy.Observer = "ddb", clk, innerObs
				if tracked {
					innerPolicy.Budget = budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
				}
				inner := e.client(t, config.WithRetryer(func() aws.Retryer {
					return &sleepless{clk: clk, RetryerV2: awssdk.NewRetryer(innerPolicy)}
				}))
				var once sync.Once
				var innerErr error
				nested = func(ctx context.Context) {
					once.Do(func() { innerErr = getItemCtx(ctx, inner) })
				}
				o := e.withMiddleware(t, outer, &sleepless{clk: clk, RetryerV2: outer}).Options()
				if from == "http client" {
					o.HTTPClient = doFunc(func(req *http.Request) (*http.Response, error) {
						nested(req.Context())
						return http.DefaultTransport.RoundTrip(req)
					})
				} else if from == "middleware after Retry" {
					o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
						return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("test.Nested",
							func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
								nested(ctx)
								return next.HandleFinalize(ctx, in)
							}), "Retry", middleware.After)
					})
				}
				c := dynamodb.New(o)
				script := []reply{internal, ok200, internal, ok200} // inner 500, 200; outer 500, 200
				if from == "observer's AttemptEnd" {
					script = []reply{internal, internal, ok200, ok200} // outer 500; inner 500, 200; outer 200
				}
				wantInner := "start 1; end 1 error; retry 2 after 50ms; start 2; end 2 ok; "
				if tracked {
					script = []reply{internal, ok200} // the inner call makes no request
					wantInner = ""
				}
				var err error
				if n := e.play(script, func() { err = getItemCtx(context.Background(), c) }); n != len(script) {
					t.Errorf("%d requests, want %d", n, len(script))
				}
				if err != nil {
					t.Errorf("the outer operation failed: %v", err)
				}
				if tracked != errors.Is(innerErr, awssdk.ErrMiddlewareMissing) {
					t.Errorf("the inner call ended with %v", innerErr)
				}
				if !tracked && innerErr != nil {
					t.Errorf("the inner call failed: %v", innerErr)
				}
				want := "start 1; end 1 error; retry 2 after 50ms; start 2; end 2 ok; call end 2 success; "
				if got := outerObs.String(); got != want {
					t.Errorf("outer events:\n got %s\nwant %s", got, want)
				}
				if got := innerObs.String(); got != wantInner {
					t.Errorf("inner events:\n got %s\nwant %s", got, wantInner)
				}
			})
		}
	}
}

// tokenPanicker wraps a retryer: its GetAttemptToken panics once the
// wrapped one has admitted the attempt, so that the SDK never sends it
// nor releases its token.
type tokenPanicker struct{ aws.RetryerV2 }

func (p tokenPanicker) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if _, err := p.RetryerV2.GetAttemptToken(ctx); err != nil {
		return nil, err
	}
	panic("token")
}

// TestWrapperPanicAfterTheAttemptTokenReleasesIt (s6 aws, callbacks that
// panic): a wrapper of the Retryer that panics after the Retryer admitted
// an attempt (the SDK then neither sends it nor releases its token)
// leaves nothing taken: the operation's end reports the attempt as not
// made, so the Limiter's permit and the BudgetTracker's slot come back
// and the Observer hears the attempt end, then the call end with
// ReasonPanic.
func TestWrapperPanicAfterTheAttemptTokenReleasesIt(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	lim := &countingLimiter{}
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget, policy.Limiter, policy.Observer = "ddb", clk, conc, lim, obs
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, tokenPanicker{r})
	if n := e.play([]reply{ok200}, func() {
		defer func() {
			if got := recover(); got != "token" {
				t.Errorf("recovered %v, want the wrapper's panic", got)
			}
		}()
		_ = getItem(c)
	}); n != 0 {
		t.Errorf("%d requests, want 0", n)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("Active() = %d requests, %d retries, want 0, 0", req, ret)
	}
	if n := lim.out.Load(); n != 0 {
		t.Errorf("%d Limiter permits not given back", n)
	}
	if got, want := obs.String(), "start 1; end 1 error; call end 1 panic; "; got != want {
		t.Errorf("events %q, want %q", got, want)
	}
}

// twoLoops is a user's Finalize middleware between the Retryer's
// operation middleware and the SDK's Retry middleware that runs two retry
// loops of the operation at once (a hedge of its own) and returns the
// first's result once both have returned.
func twoLoops(stack *middleware.Stack) error {
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("test.TwoLoops",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			var wg sync.WaitGroup
			wg.Go(func() { _, _, _ = next.HandleFinalize(ctx, in) })
			out, md, err := next.HandleFinalize(ctx, in)
			wg.Wait()
			return out, md, err
		}), "Retry", middleware.Before)
}

// TestTwoRetryLoopsOfOneOperation (s6 aws, concurrent callers): a user's
// middleware that runs two retry loops of one operation at once gets a
// loop the operation did not admit treated as a call without the
// middleware (refused under a Policy that needs it), races on nothing,
// and leaves every permit, slot and grant given back.
func TestTwoRetryLoopsOfOneOperation(t *testing.T) {
	e := newEndpoint(t)
	held0, wrapping0 := awssdk.HoldCounts()
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 2, Ratio: -1})
	lim := &countingLimiter{}
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget, policy.Limiter, policy.Observer = "ddb", clk, conc, lim, obs
	r := awssdk.NewRetryer(policy)
	o := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r}).Options()
	o.APIOptions = append(o.APIOptions, twoLoops)
	c := dynamodb.New(o)
	for i := range 50 {
		e.play([]reply{internal, internal, internal, ok200, ok200, ok200}, func() { _ = getItemCtx(context.Background(), c) })
		if req, ret := conc.Active(); req != 0 || ret != 0 {
			t.Errorf("round %d: Active() = %d requests, %d retries, want 0, 0", i, req, ret)
		}
		if st := conc.Stats(); st.Granted != st.Retries+st.Refunded {
			t.Errorf("round %d: stats %+v: every grant must be recorded or refunded once", i, st)
		}
		if n := lim.out.Load(); n != 0 {
			t.Errorf("round %d: %d Limiter permits not given back", i, n)
		}
		if held, w := awssdk.HoldCounts(); held != held0 || w != wrapping0 {
			t.Errorf("round %d: %d error values held, %d operations wrapping, want %d, %d", i, held, w, held0, wrapping0)
		}
	}
	ev := obs.String()
	if s, en := strings.Count(ev, "start "), strings.Count(ev, "end ")-strings.Count(ev, "call end"); s != en {
		t.Errorf("%d attempts started, %d ended", s, en)
	}
}

// firstTokenOnly wraps a retryer: it asks the wrapped one for the first
// attempt's token only, and makes every retry with a token of its own.
type firstTokenOnly struct {
	*sleepless
	calls int
}

func (f *firstTokenOnly) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if f.calls++; f.calls == 1 {
		return f.sleepless.GetAttemptToken(ctx)
	}
	return func(error) error { return nil }, nil
}

// TestGrantNoAttemptTookIsGivenBack (s6 aws, grants given back): under a
// retryer wrapping the Retryer that asks it for no retry's attempt token,
// each BudgetTracker grant GetRetryToken makes is taken by no attempt: the
// next grant, or the operation's end, gives it back, so that every grant
// is refunded once and the tracker holds nothing afterwards.
func TestGrantNoAttemptTookIsGivenBack(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Budget = clk, conc
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &firstTokenOnly{sleepless: &sleepless{clk: clk, RetryerV2: r}})
	if n := e.play([]reply{internal, internal, ok200}, func() {
		if err := getItem(c); err != nil {
			t.Errorf("the operation failed: %v", err)
		}
	}); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("Active() = %d requests, %d retries, want 0, 0", req, ret)
	}
	if st := conc.Stats(); st.Granted != 2 || st.Refunded != 2 {
		t.Errorf("stats %+v: want both grants refunded", st)
	}
}
