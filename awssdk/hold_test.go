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
// value (errFlaky) that an operation with it holds, parked between the
// SDK's GetRetryToken and RetryDelay: the first may take the second's wait
// in RetryDelay (the documented limit), but under -race nothing it reaches
// of the other is unguarded, and both end with errFlaky after their
// attempts, with no wrapper reaching either caller.
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
	t.Logf("scheduled: %s", obs.take())
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
