package awssdk_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// scheduledCaller is an Observer that makes an SDK call, with the context
// RetryScheduled gives it, from the first RetryScheduled (as a tracer or
// an audit hook using the SDK might).
type scheduledCaller struct {
	events
	call   func(ctx context.Context) error
	done   atomic.Bool
	nested error
}

func (o *scheduledCaller) RetryScheduled(ctx context.Context, e retry.RetryScheduled) {
	o.events.RetryScheduled(ctx, e)
	if !o.done.Swap(true) {
		o.nested = o.call(ctx)
	}
}

// TestRetryScheduledContextCarriesNoOperation (outside review r2aws):
// RetryScheduled got GetRetryToken's context, which carries the
// operation, unlike every other callback's: an SDK call made with it by a
// client of the same Retryer without the middleware was taken for an
// attempt of the outer operation (numbered, counted, given its retry
// grant) instead of being refused with ErrMiddlewareMissing, as a call
// of a client without the middleware is under a BudgetTracker.
func TestRetryScheduledContextCarriesNoOperation(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	obs := &scheduledCaller{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget, policy.Observer = "ddb", clk, conc, obs
	r := awssdk.NewRetryer(policy)
	bare := e.client(t, config.WithRetryer(func() aws.Retryer { return r })) // no middleware
	obs.call = func(ctx context.Context) error { return getItemCtx(ctx, bare) }
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	var err error
	n := e.play([]reply{internal, ok200}, func() { err = getItemCtx(context.Background(), c) })
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(obs.nested, awssdk.ErrMiddlewareMissing) {
		t.Errorf("call without the middleware from RetryScheduled: %v, want ErrMiddlewareMissing", obs.nested)
	}
	if n != 2 {
		t.Errorf("%d requests, want 2 (the outer operation's attempts alone)", n)
	}
	if st := conc.Stats(); st.Requests != 1 || st.Retries != 1 || st.Granted != 1 {
		t.Errorf("tracker stats %+v, want 1 request, 1 retry, 1 grant", st)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("tracker Active() = %d, %d, want 0, 0", req, ret)
	}
}
