package awssdk_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// retryGate is a Limiter that counts its permits not yet given back and,
// for a retry, closes entered and waits for proceed before admitting it.
type retryGate struct {
	out     atomic.Int32
	entered chan struct{}
	proceed chan struct{}
}

func (l *retryGate) Acquire(_ context.Context, retry bool) (func(error), error) {
	if retry {
		close(l.entered)
		<-l.proceed
	}
	l.out.Add(1)
	return func(error) { l.out.Add(-1) }, nil
}

// countingBreaker is a Breaker that admits everything and counts the done
// functions not yet called.
type countingBreaker struct{ out atomic.Int32 }

func (b *countingBreaker) Allow() (func(error), error) {
	b.out.Add(1)
	return func(error) { b.out.Add(-1) }, nil
}
func (b *countingBreaker) Ready() error { return nil }

// TestUnsentAttemptLeavesNoFlagForTheNext (outside review r2aws): an
// attempt the attempt middleware never saw (a Finalize middleware between
// the SDK's Retry middleware and the attempt middleware failed it without
// calling next) left its "admitted, not yet sent" flag set after its
// token's release. The next attempt, between its admission and its
// publication, was then taken by the operation's end for one admitted and
// not sent: an operation ending then released it while GetAttemptToken
// was still admitting it, and the Limiter's permit, the Breaker's done
// and the tracker's Start taken afterwards were never given back.
func TestUnsentAttemptLeavesNoFlagForTheNext(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	lim := &retryGate{entered: make(chan struct{}), proceed: make(chan struct{})}
	brk := &countingBreaker{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget, policy.Limiter, policy.Breaker = "ddb", clk, conc, lim, brk
	policy.Classify = func(error) bool { return true }
	r := awssdk.NewRetryer(policy)
	wait := make(chan struct{})
	a := newAbandoner(wait)
	o := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r}).Options()
	var n atomic.Int32
	o.APIOptions = append(o.APIOptions, a.insert, func(s *middleware.Stack) error {
		// Between Retry and the attempt middleware: the first attempt
		// fails here (a signing or rewind step of the user's), unsent.
		return s.Finalize.Insert(middleware.FinalizeMiddlewareFunc("test.FailFirst",
			func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if n.Add(1) == 1 {
					return middleware.FinalizeOutput{}, middleware.Metadata{}, errors.New("test: not sent")
				}
				return next.HandleFinalize(ctx, in)
			}), "Retry", middleware.After)
	})
	c := dynamodb.New(o)
	done := make(chan error)
	requests := e.play([]reply{ok200}, func() {
		go func() { done <- getItemCtx(context.Background(), c) }()
		<-lim.entered // the retry's GetAttemptToken: in the Limiter, not yet published
		close(wait)   // the operation ends now
		if err := <-done; !errors.Is(err, errAbandoned) {
			t.Errorf("operation: %v, want errAbandoned", err)
		}
		close(lim.proceed)
		<-a.loopDone
	})
	if !errors.Is(a.loopErr, awssdk.ErrOperationEnded) {
		t.Errorf("abandoned retry loop: %v, want ErrOperationEnded", a.loopErr)
	}
	if requests != 0 {
		t.Errorf("%d requests sent for an ended operation", requests)
	}
	if got := lim.out.Load(); got != 0 {
		t.Errorf("%d Limiter permits never given back", got)
	}
	if got := brk.out.Load(); got != 0 {
		t.Errorf("%d Breaker done functions never called", got)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("tracker Active() = %d requests, %d retries, want 0, 0 (stats %+v)", req, ret, conc.Stats())
	}
}
