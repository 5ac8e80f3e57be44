package awssdk_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdkretry "github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// countedBackoff returns n µs on its n-th call, so that a wait shows which
// call computed it, and counts the calls.
type countedBackoff struct{ calls atomic.Int64 }

func (b *countedBackoff) Delay(int, time.Duration) time.Duration {
	return time.Duration(b.calls.Add(1)) * time.Microsecond
}

// scheduledWaits records the wait and the call (callKey) of each
// RetryScheduled.
type scheduledWaits struct {
	retry.NopObserver
	mu sync.Mutex
	b  strings.Builder
}

func (s *scheduledWaits) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(&s.b, "%v %v; ", ctx.Value(callKey{}), e.Delay)
}

func (s *scheduledWaits) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.b.String()
	s.b.Reset()
	return out
}

// TestHeldErrorValueReachesItsRetryDelay (s5 awssdk): an attempt's error
// is handed to the SDK as it is, even one error value that every attempt
// of every operation returns (errFlaky), and the wait GetRetryToken
// computed for the attempt still reaches its RetryDelay (the Backoff is
// asked once per retry, RetryScheduled gets that wait and the caller's
// context), through the SDK's clock skew marker too. A panic in the
// Policy's Classify and a Goexit in it, while the operation holds the
// value, let go of it: the next operation is handed errFlaky itself
// again.
func TestHeldErrorValueReachesItsRetryDelay(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	bo := &countedBackoff{}
	obs := &scheduledWaits{}
	var trap atomic.Value // func(), called by Classify once
	policy := &retry.Policy{
		MaxAttempts: 3, Backoff: bo, Clock: clk, Observer: obs,
		Classify: func(err error) bool {
			if f, _ := trap.Swap(func() {}).(func()); f != nil {
				f()
			}
			var marked interface{ RetryableError() bool }
			return errors.Is(err, errFlaky) || errors.As(err, &marked) && marked.RetryableError()
		},
	}
	trap.Store(func() {})
	r := awssdk.NewRetryer(policy)
	seer := &typeSeer{sleepless: &sleepless{clk: clk, RetryerV2: r}}
	flaky := e.client(t, config.WithRetryer(func() aws.Retryer { return seer }),
		config.WithAPIOptions([]func(*middleware.Stack) error{
			r.AddMiddleware,
			func(s *middleware.Stack) error { return s.Deserialize.Add(sentinelErrors{}, middleware.Before) },
		}))
	skewed := e.client(t, config.WithRetryer(func() aws.Retryer { return seer }),
		config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware}))
	call := func(c *dynamodb.Client, name string, script []reply) {
		t.Helper()
		seer.seen = nil
		e.play(script, func() { _ = getItemCtx(context.WithValue(context.Background(), callKey{}, name), c) })
	}
	check := func(name, wantSeen, wantScheduled string, wantCalls int64) {
		t.Helper()
		if got := fmt.Sprint(seer.seen); got != wantSeen {
			t.Errorf("%s: the SDK handed the retryer %s, want %s", name, got, wantSeen)
		}
		if got := obs.take(); got != wantScheduled {
			t.Errorf("%s: scheduled %q, want %q", name, got, wantScheduled)
		}
		if got := bo.calls.Swap(0); got != wantCalls {
			t.Errorf("%s: the Backoff was asked %d times, want %d (once per retry)", name, got, wantCalls)
		}
	}

	call(flaky, "A", []reply{internal, internal, ok200})
	check("A", "[*errors.errorString *errors.errorString]", "A 1µs; A 2µs; ", 2)

	skew := reply{status: 400, errType: "InvalidSignatureException", skewed: true}
	call(skewed, "S", []reply{skew, ok200})
	check("S", "[*retry.retryableClockSkewError]", "S 1µs; ", 1)

	trap.Store(func() { panic("classify") })
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the Classify panic did not reach the caller")
			}
		}()
		call(flaky, "P", []reply{internal, ok200})
	}()
	check("P", "[*errors.errorString]", "", 0)

	trap.Store(func() { runtime.Goexit() })
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(flaky, "G", []reply{internal, ok200})
	}()
	<-done
	check("G", "[*errors.errorString]", "", 0)

	call(flaky, "B", []reply{internal, ok200})
	check("B", "[*errors.errorString]", "B 1µs; ", 1)
}

// valueErr is an error that is not a pointer: the Retryer cannot hold it
// for RetryDelay.
type valueErr struct{ code int }

func (v valueErr) Error() string { return fmt.Sprintf("value error %d", v.code) }

// valueErrors turns every failed response into a valueErr.
type valueErrors struct{}

func (valueErrors) ID() string { return "test.ValueErrors" }

func (valueErrors) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	out middleware.DeserializeOutput, md middleware.Metadata, err error,
) {
	out, md, err = next.HandleDeserialize(ctx, in)
	if err != nil {
		err = valueErr{7}
	}
	return out, md, err
}

// TestUnheldErrorStillKeepsItsWait (s5 awssdk): an error value the
// Retryer cannot hold (not a pointer) is handed to the SDK in the
// middleware's own wrapper, the documented exception: the wait still
// reaches its RetryDelay, and the caller gets the SDK's error chain.
func TestUnheldErrorStillKeepsItsWait(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	bo := &countedBackoff{}
	obs := &scheduledWaits{}
	r := awssdk.NewRetryer(&retry.Policy{
		MaxAttempts: 3, Backoff: bo, Clock: clk, Observer: obs,
		Classify: func(err error) bool { return errors.As(err, new(valueErr)) },
	})
	seer := &typeSeer{sleepless: &sleepless{clk: clk, RetryerV2: r}}
	c := e.client(t, config.WithRetryer(func() aws.Retryer { return seer }),
		config.WithAPIOptions([]func(*middleware.Stack) error{
			r.AddMiddleware,
			func(s *middleware.Stack) error { return s.Deserialize.Add(valueErrors{}, middleware.Before) },
		}))
	var err error
	e.play([]reply{internal, internal, internal}, func() {
		err = getItemCtx(context.WithValue(context.Background(), callKey{}, "V"), c)
	})
	if got, want := obs.take(), "V 1µs; V 2µs; "; got != want || bo.calls.Load() != 2 {
		t.Errorf("scheduled %q after %d Backoff calls, want %q after 2", got, bo.calls.Load(), want)
	}
	if got := fmt.Sprint(seer.seen); got != "[*awssdk.attemptError *awssdk.attemptError *awssdk.attemptError]" {
		t.Errorf("the SDK handed the retryer %s", got)
	}
	if ch := chain(err); strings.Contains(ch, "attemptError") || !strings.Contains(ch, "awssdk_test.valueErr") {
		t.Errorf("the caller got\n%s", ch)
	}
}

// TestClientsSharingAnErrorValueRace (s5 awssdk): an operation without
// the Retryer's middleware on the same Retryer fails with the very error
// value (errFlaky) that an operation with it holds, for the same attempt
// number, parked between the SDK's GetRetryToken and RetryDelay: the
// first takes the second's wait and context in RetryDelay, and the second
// computes its wait afresh (the documented limit), but under -race
// nothing it reaches of the other is unguarded, and both end with
// errFlaky after their attempts, with no wrapper reaching either caller.
func TestClientsSharingAnErrorValueRace(t *testing.T) {
	e := newEndpoint(t)
	obs := &scheduledWaits{}
	policy := &retry.Policy{
		MaxAttempts: 2,
		Backoff:     backoff.Func(func(n int, _ time.Duration) time.Duration { return time.Duration(n) * time.Microsecond }),
		Classify:    func(err error) bool { return errors.Is(err, errFlaky) },
		Observer:    obs,
	}
	r := awssdk.NewRetryer(policy)
	gate := &pauseFirstDelay{RetryerV2: r, paused: make(chan struct{}), resume: make(chan struct{})}
	sentinel := func(s *middleware.Stack) error { return s.Deserialize.Add(sentinelErrors{}, middleware.Before) }
	with := e.client(t, config.WithRetryer(func() aws.Retryer { return gate }),
		config.WithAPIOptions([]func(*middleware.Stack) error{r.AddMiddleware, sentinel}))
	without := e.client(t, config.WithRetryer(func() aws.Retryer { return gate }),
		config.WithAPIOptions([]func(*middleware.Stack) error{sentinel}))
	e.mu.Lock()
	for range 4 {
		e.script = append(e.script, internal)
	}
	e.mu.Unlock()
	done := make(chan error)
	go func() { done <- getItemCtx(context.WithValue(context.Background(), callKey{}, "A"), with) }()
	select {
	case <-gate.paused:
	case err := <-done:
		t.Fatalf("call A ended (%v) without a retry", err)
	}
	errN := getItemCtx(context.WithValue(context.Background(), callKey{}, "N"), without)
	close(gate.resume)
	errA := <-done
	for _, err := range []error{errA, errN} {
		var maxErr *sdkretry.MaxAttemptsError
		if !errors.Is(err, errFlaky) || !errors.As(err, &maxErr) || strings.Contains(chain(err), "attemptError") {
			t.Errorf("error\n%s\nwant errFlaky after the attempts", chain(err))
		}
	}
	// The documented limit, exactly: N (attempt 1, as A's held attempt)
	// took A's kept wait and context; A computed its wait afresh, without
	// its context.
	if got, want := obs.take(), "A 1µs; <nil> 1µs; "; got != want {
		t.Errorf("scheduled %q, want %q", got, want)
	}
}

// TestStrippedErrorIsTheLastAttemptResult (s5 awssdk): when the attempt
// middleware had to wrap an attempt's error (a value error) and the SDK
// joined it with a refused retry (errors.Join), the caller's error and the
// last attempt result in the metadata are one stripped value, not two
// equal joins made apart.
func TestStrippedErrorIsTheLastAttemptResult(t *testing.T) {
	r := awssdk.NewRetryer(&retry.Policy{
		MaxAttempts: 3,
		Budget:      refuseAll{},
		Classify:    func(err error) bool { return errors.As(err, new(valueErr)) },
	})
	stack := middleware.NewStack("join", smithyhttp.NewStackRequest)
	if err := stack.Finalize.Add(sdkretry.NewAttemptMiddleware(r, smithyhttp.RequestCloner), middleware.After); err != nil {
		t.Fatal(err)
	}
	if err := r.AddMiddleware(stack); err != nil {
		t.Fatal(err)
	}
	send := middleware.HandlerFunc(func(context.Context, any) (any, middleware.Metadata, error) {
		return nil, middleware.Metadata{}, valueErr{3}
	})
	_, md, err := middleware.DecorateHandler(send, stack).Handle(context.Background(), nil)
	res, ok := sdkretry.GetAttemptResults(md)
	if !ok || len(res.Results) != 1 {
		t.Fatalf("attempt results %v, %v", res, ok)
	}
	last := res.Results[0].Err
	if _, join := err.(interface{ Unwrap() []error }); !join || !errors.Is(err, awssdk.ErrBudgetExhausted) || strings.Contains(chain(err), "attemptError") {
		t.Fatalf("error\n%s\nwant the SDK's join of valueErr and ErrBudgetExhausted", chain(err))
	}
	if last != err {
		t.Errorf("the last attempt result is a value apart from the caller's error:\n%s", chain(last))
	}
}

// rawStack is an operation's stack without a network: the SDK's Retry
// middleware over the retryer rt, r's middleware when r is not nil, and a
// send whose result is fail's for the attempt's number (read from the
// SDK's Amz-Sdk-Request header).
func rawStack(t *testing.T, rt aws.RetryerV2, r *awssdk.Retryer, fail func(ctx context.Context, n int) error) middleware.Handler {
	t.Helper()
	stack := middleware.NewStack("raw", smithyhttp.NewStackRequest)
	if err := stack.Finalize.Add(sdkretry.NewAttemptMiddleware(rt, smithyhttp.RequestCloner), middleware.After); err != nil {
		t.Fatal(err)
	}
	if r != nil {
		if err := r.AddMiddleware(stack); err != nil {
			t.Fatal(err)
		}
	}
	send := middleware.HandlerFunc(func(ctx context.Context, in any) (any, middleware.Metadata, error) {
		var n int
		if _, err := fmt.Sscanf(in.(*smithyhttp.Request).Header.Get("Amz-Sdk-Request"), "attempt=%d;", &n); err != nil {
			return nil, middleware.Metadata{}, err
		}
		return nil, middleware.Metadata{}, fail(ctx, n)
	})
	return middleware.DecorateHandler(send, stack)
}

// ctxObs records each RetryScheduled with the call its context names.
type ctxObs struct {
	retry.NopObserver
	mu sync.Mutex
	b  strings.Builder
}

func (s *ctxObs) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(&s.b, "%v:retry %d after %v; ", ctx.Value(callKey{}), e.Attempt, e.Delay)
}

func (s *ctxObs) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// pauseDelayAt wraps a retryer: the RetryDelay after attempt n waits for
// resume (once) before it asks the retryer.
type pauseDelayAt struct {
	aws.RetryerV2
	n              int
	once           sync.Once
	paused, resume chan struct{}
}

func (p *pauseDelayAt) RetryDelay(attempt int, err error) (time.Duration, error) {
	if attempt == p.n {
		p.once.Do(func() { close(p.paused); <-p.resume })
	}
	return p.RetryerV2.RetryDelay(attempt, err)
}

// TestTwoRetryersFindTheHold (s5 awssdk2, review 1): the SDK's retryer and
// the Retryer whose middleware is in the stack are two values of one
// Policy (config.WithRetryer(func() aws.Retryer { return
// awssdk.NewRetryer(p) }) makes one per client): RetryDelay of the one
// still finds the wait GetRetryToken kept for the attempt whose error the
// other's middleware holds (the Backoff is asked once per retry) and
// RetryScheduled gets the caller's context.
func TestTwoRetryersFindTheHold(t *testing.T) {
	bo := &countedBackoff{}
	obs := &ctxObs{}
	p := &retry.Policy{
		MaxAttempts: 3, Backoff: bo, Observer: obs,
		Classify: func(err error) bool { return errors.Is(err, errFlaky) },
	}
	r1, r2 := awssdk.NewRetryer(p), awssdk.NewRetryer(p)
	h := rawStack(t, r2, r1, func(_ context.Context, n int) error {
		if n < 3 {
			return fmt.Errorf("attempt %d: %w", n, errFlaky) // a value of its own, as the SDK's errors are
		}
		return nil
	})
	if _, _, err := h.Handle(context.WithValue(context.Background(), callKey{}, "A"), nil); err != nil {
		t.Fatal(err)
	}
	want := "A:retry 2 after 1µs; A:retry 3 after 2µs; "
	if got, c := obs.String(), bo.calls.Load(); got != want || c != 2 {
		t.Errorf("scheduled %q after %d Backoff calls, want %q after 2", got, c, want)
	}
}

// TestTwoRetryersClassifyGetsTheSDKError (s5 awssdk2, review 1): with the
// SDK's retryer and the middleware's Retryer two values, an operation
// handed over wrapped (its error value is held by another operation at
// that moment) still gives the Policy's Classify the SDK's error, never
// the middleware's wrapper.
func TestTwoRetryersClassifyGetsTheSDKError(t *testing.T) {
	var mu sync.Mutex
	var types []string
	p := &retry.Policy{
		MaxAttempts: 2,
		Backoff:     backoff.Func(func(int, time.Duration) time.Duration { return 0 }),
		Classify: func(err error) bool {
			mu.Lock()
			types = append(types, fmt.Sprintf("%T", err))
			mu.Unlock()
			return errors.Is(err, errFlaky)
		},
	}
	r1, r2 := awssdk.NewRetryer(p), awssdk.NewRetryer(p)
	gate := &pauseDelayAt{RetryerV2: r2, n: 1, paused: make(chan struct{}), resume: make(chan struct{})}
	hA := rawStack(t, gate, r1, func(context.Context, int) error { return errFlaky })
	hB := rawStack(t, r2, r1, func(_ context.Context, n int) error {
		if n == 1 {
			return errFlaky
		}
		return nil
	})
	done := make(chan struct{})
	go func() { defer close(done); _, _, _ = hA.Handle(context.Background(), nil) }()
	<-gate.paused // A holds errFlaky: B's is handed over wrapped
	_, _, _ = hB.Handle(context.Background(), nil)
	close(gate.resume)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if got := fmt.Sprint(types); got != "[*errors.errorString *errors.errorString *errors.errorString]" {
		t.Errorf("Classify got %s, want the SDK's error (errFlaky) each time", got)
	}
}

// TestHoldOfAnotherAttemptIsNotTaken (s5 awssdk2, review 2): an operation
// without the middleware failing with the very error value an operation
// with it holds, at another attempt number, neither takes that
// operation's hold (its kept wait and context) nor is taken for it: the
// first computes its own wait (with no context), and the other still gets
// the wait kept for its attempt, with its context.
func TestHoldOfAnotherAttemptIsNotTaken(t *testing.T) {
	bo := &countedBackoff{}
	obs := &ctxObs{}
	r := awssdk.NewRetryer(&retry.Policy{
		MaxAttempts: 3, Backoff: bo, Observer: obs,
		Classify: func(err error) bool { return errors.Is(err, errFlaky) },
	})
	gate := &pauseDelayAt{RetryerV2: r, n: 2, paused: make(chan struct{}), resume: make(chan struct{})}
	with := rawStack(t, gate, r, func(context.Context, int) error { return errFlaky })
	without := rawStack(t, r, nil, func(_ context.Context, n int) error {
		if n == 1 {
			return errFlaky
		}
		return nil
	})
	done := make(chan error)
	go func() {
		_, _, err := with.Handle(context.WithValue(context.Background(), callKey{}, "A"), nil)
		done <- err
	}()
	<-gate.paused // A holds errFlaky after attempt 2, its wait kept
	if _, _, err := without.Handle(context.WithValue(context.Background(), callKey{}, "N"), nil); err != nil {
		t.Errorf("N: %v", err)
	}
	close(gate.resume)
	if err := <-done; !errors.Is(err, errFlaky) {
		t.Errorf("A: %v, want errFlaky", err)
	}
	want := "A:retry 2 after 1µs; <nil>:retry 2 after 3µs; A:retry 3 after 2µs; "
	if got, c := obs.String(), bo.calls.Load(); got != want || c != 3 {
		t.Errorf("scheduled %q after %d Backoff calls, want %q after 3", got, c, want)
	}
}
