package awssdk_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// TestBudgetTrackerWithoutMiddlewareFailSafe (s4 aws 4): without the
// Retryer's middleware the SDK gives a retryer no way to learn that a
// granted retry never ran (its token's release is dropped) nor that an
// attempt panicked while sent, so a retry.BudgetTracker's grant would
// hold its slot for good: a Policy whose Budget, or NestedBudget under
// NestedBudget, is a BudgetTracker fails every operation at once with
// ErrMiddlewareMissing, before any request and before the tracker counts
// anything. Before, the grant of a retry the Limiter refused leaked.
func TestBudgetTrackerWithoutMiddlewareFailSafe(t *testing.T) {
	for _, nested := range []bool{false, true} {
		e := newEndpoint(t)
		conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
		policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
		policy.Limiter = retryRefuser{}
		ctx := context.Background()
		if nested {
			policy.Nested, policy.NestedBudget = retry.NestedBudget, conc
			ctx = retry.WithInbound(ctx, retry.Inbound{Attempt: 1, Retries: true})
		} else {
			policy.Budget = conc
		}
		c := e.client(t, config.WithRetryer(awssdk.Provider(policy)))
		var err error
		if n := e.play([]reply{internal, ok200}, func() { err = getItemCtx(ctx, c) }); n != 0 {
			t.Errorf("nested %v: %d requests without the middleware, want 0", nested, n)
		}
		if !errors.Is(err, awssdk.ErrMiddlewareMissing) {
			t.Errorf("nested %v: error %v, want ErrMiddlewareMissing", nested, err)
		}
		if got := conc.Available(); got != 1 {
			t.Errorf("nested %v: Available() = %v after the operation, want 1", nested, got)
		}
		if req, ret := conc.Active(); req != 0 || ret != 0 {
			t.Errorf("nested %v: Active() = %d requests, %d retries, want 0, 0", nested, req, ret)
		}
	}
}

// schedulePanicker panics in RetryScheduled, which RetryDelay calls after
// GetRetryToken granted the retry.
type schedulePanicker struct{ retry.NopObserver }

func (schedulePanicker) RetryScheduled(context.Context, retry.RetryScheduled) {
	panic("retry scheduled")
}

// TestRetrySchedulePanicGivesTheGrantBack (s4 aws sweep): a panic in
// RetryDelay (the Observer's RetryScheduled) after GetRetryToken granted a
// BudgetTracker's retry goes on to the caller, the grant is given back
// when the operation ends and the x-amz-retry-after RetryDelay rewrote
// (huge, beyond int64) is put back in the response.
func TestRetrySchedulePanicGivesTheGrantBack(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Budget, policy.Observer, policy.MaxRetryAfter = clk, conc, schedulePanicker{}, 48*time.Hour
	r := awssdk.NewRetryer(policy)
	var header http.Header
	c := e.client(t, config.WithRetryer(func() aws.Retryer { return r }),
		config.WithAPIOptions([]func(*middleware.Stack) error{
			r.AddMiddleware,
			func(s *middleware.Stack) error { return s.Deserialize.Add(keepHeader{&header}, middleware.After) },
		}))
	if n := e.play([]reply{advised(internal, huge), ok200}, func() {
		defer func() {
			if got := recover(); got != "retry scheduled" {
				t.Errorf("recovered %v, want the Observer's panic", got)
			}
		}()
		_ = getItem(c)
	}); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
	if req, ret := conc.Active(); req != 0 || ret != 0 {
		t.Errorf("Active() = %d requests, %d retries after the panic, want 0, 0", req, ret)
	}
	if got := conc.Available(); got != 1 {
		t.Errorf("Available() = %v after the panic, want 1 (the grant given back)", got)
	}
	if got := header.Values("X-Amz-Retry-After"); len(got) != 1 || got[0] != huge {
		t.Errorf("x-amz-retry-after after the call: %q, want %q", got, huge)
	}
}

// keepHeader keeps the header of the raw response.
type keepHeader struct{ h *http.Header }

func (keepHeader) ID() string { return "test.KeepHeader" }

func (k keepHeader) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	out middleware.DeserializeOutput, md middleware.Metadata, err error,
) {
	out, md, err = next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok && resp.Response != nil {
		*k.h = resp.Header
	}
	return out, md, err
}
