package awssdk_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

type retryScheduledPanics struct{ events }

func (*retryScheduledPanics) RetryScheduled(context.Context, retry.RetryScheduled) {
	panic("retry scheduled")
}

type callEndPanics struct{ events }

func (*callEndPanics) CallEnd(context.Context, retry.CallEnd) { panic("call end") }

type backoffPanics struct{}

func (backoffPanics) Delay(int, time.Duration) time.Duration { panic("backoff") }

// TestRetryStepPanicsLeaveNothing (outside review r2aws, a sweep): a
// panicking RetryScheduled (after the Budget's grant), Classify, CallEnd
// or Backoff goes on to the caller and leaves no tracker slot, Limiter
// permit or error hold behind.
func TestRetryStepPanicsLeaveNothing(t *testing.T) {
	for _, which := range []string{"retry scheduled", "classify", "call end", "backoff"} {
		t.Run(which, func(t *testing.T) {
			e := newEndpoint(t)
			held0, wrapped0 := awssdk.HoldCounts()
			clk := clocktest.NewFake()
			conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
			lim := &countingLimiter{}
			policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
			policy.Operation, policy.Clock, policy.Budget, policy.Limiter = "ddb", clk, conc, lim
			switch which {
			case "retry scheduled":
				policy.Observer = &retryScheduledPanics{}
			case "call end":
				policy.Observer = &callEndPanics{}
			case "classify":
				policy.Classify = func(error) bool { panic("classify") }
			case "backoff":
				policy.Backoff = backoffPanics{}
			}
			r := awssdk.NewRetryer(policy)
			c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
			var p any
			e.play([]reply{internal, ok200}, func() {
				defer func() { p = recover() }()
				_ = getItemCtx(context.Background(), c)
			})
			if p != which {
				t.Fatalf("recovered %v, want the %s panic", p, which)
			}
			if req, ret := conc.Active(); req != 0 || ret != 0 {
				t.Errorf("tracker Active() = %d, %d, want 0, 0 (stats %+v)", req, ret, conc.Stats())
			}
			if st := conc.Stats(); st.Granted != st.Retries+st.Refunded {
				t.Errorf("tracker stats %+v: a grant neither used nor given back", st)
			}
			if n := lim.out.Load(); n != 0 {
				t.Errorf("%d Limiter permits out", n)
			}
			if held, wrapped := awssdk.HoldCounts(); held != held0 || wrapped != wrapped0 {
				t.Errorf("holds %d, wrapping %d, want %d, %d", held, wrapped, held0, wrapped0)
			}
		})
	}
}
