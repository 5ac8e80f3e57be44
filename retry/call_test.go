package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// timeoutErr is an adapter's own timeout type, recognised through Is.
type timeoutErr struct{}

func (timeoutErr) Error() string        { return "adapter timeout" }
func (timeoutErr) Is(target error) bool { return target == retry.ErrAttemptTimeout }

func TestAdapterTimeoutTypeOutcome(t *testing.T) {
	rec := &recorder{}
	op, _ := script(timeoutErr{})
	retry.Do(context.Background(), &retry.Policy{Backoff: backoff.Constant{}, Observer: rec}, op)
	if got := rec.String(); got != "start#1 end#1:timeout retry#2 start#2 end#2:success callend:success" {
		t.Fatalf("events %q", got)
	}
}

// TestCallStepsMatchDo drives a Call by hand, as a stream adapter does,
// and checks it makes the calls Do makes for the same script.
func TestCallStepsMatchDo(t *testing.T) {
	policy := func(rec *recorder, tb *trackingBudget, br *stubBreaker) *retry.Policy {
		return &retry.Policy{Operation: "op", MaxAttempts: 3, Backoff: backoff.Constant{Interval: time.Millisecond},
			Observer: rec, Budget: tb, Breaker: br}
	}
	errs := []error{errFlaky, retry.After(errFlaky, 5*time.Millisecond), errFlaky}

	recDo, tbDo, brDo := &recorder{}, &trackingBudget{}, &stubBreaker{}
	op, _ := script(errs...)
	_, errDo := retry.Do(context.Background(), policy(recDo, tbDo, brDo), op)

	recC, tbC, brC := &recorder{}, &trackingBudget{}, &stubBreaker{}
	c := retry.NewCall(context.Background(), policy(recC, tbC, brC))
	var errC error
	var waits []time.Duration
	for i := 0; ; i++ {
		a, err := c.Begin()
		if err != nil {
			errC = err
			break
		}
		if a.N != i+1 || a.Context.Value(ctxKey{}) != a.N {
			t.Fatalf("attempt %d: N=%d, context not the observer's", i+1, a.N)
		}
		var res error
		if i < len(errs) {
			res = errs[i]
		}
		if c.End(&a, res) == nil {
			c.Succeed()
			break
		}
		d, err := c.Next(res)
		if err != nil {
			errC = err
			break
		}
		waits = append(waits, d)
	}
	if recDo.String() != recC.String() {
		t.Fatalf("events differ:\nDo:   %s\nCall: %s", recDo, recC)
	}
	if errDo.Error() != errC.Error() || !errors.Is(errC, retry.ErrAttemptsExhausted) || c.Attempts() != 3 {
		t.Fatalf("Do: %v, Call: %v (%d attempts)", errDo, errC, c.Attempts())
	}
	if tbDo.records.Load() != tbC.records.Load() || tbDo.withdrawn.Load() != tbC.withdrawn.Load() || len(brDo.results) != len(brC.results) {
		t.Fatal("budget or breaker calls differ")
	}
	if len(waits) != 2 || waits[0] != time.Millisecond || waits[1] < 5*time.Millisecond {
		t.Fatalf("waits %v", waits)
	}
}

func TestCallAbandonRefunds(t *testing.T) {
	tb := &trackingBudget{}
	rec := &recorder{}
	c := retry.NewCall(context.Background(), &retry.Policy{Budget: tb, Observer: rec, Backoff: backoff.Constant{}})
	a, _ := c.Begin()
	err := c.End(&a, errFlaky)
	if _, gerr := c.Next(err); gerr != nil {
		t.Fatal(gerr)
	}
	gave := c.Abandon()
	if tb.refunded.Load() != 1 || !errors.Is(gave, errFlaky) || rec.Calls()[0].Reason != retry.ReasonPermanent {
		t.Fatalf("refunded %d, err %v, reason %v", tb.refunded.Load(), gave, rec.Calls()[0].Reason)
	}
}

func TestCallWaitsOnPolicyClock(t *testing.T) {
	f := clocktest.NewFake()
	c := retry.NewCall(context.Background(), &retry.Policy{Clock: f})
	done := make(chan struct{})
	go func() { c.Wait(time.Minute); close(done) }()
	f.BlockUntil(1)
	f.Advance(time.Minute)
	<-done
}
