package breaker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/retry/retrytest"
)

// openOnRealClock returns a breaker on the real clock that one failure has
// opened for an hour.
func openOnRealClock(t *testing.T) *breaker.Breaker {
	t.Helper()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
	t.Cleanup(b.Close)
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errors.New("down"))
	return b
}

// checkRefusal checks that err is Do's *Error for a first attempt refused
// by the breaker with want.
func checkRefusal(t *testing.T, err, want error) {
	t.Helper()
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 0 || re.Reason != want || re.Last != nil || re.Cause != nil {
		t.Fatalf("Do error %#v, want a *retry.Error of 0 attempts with Reason %v", err, want)
	}
	if !errors.Is(err, breaker.ErrOpen) || !errors.Is(err, want) {
		t.Fatalf("Do error %v does not match %v and ErrOpen", err, want)
	}
	if got, wantMsg := err.Error(), want.Error()+" (after 0 attempts)"; got != wantMsg {
		t.Fatalf("Do error %q, want %q", got, wantMsg)
	}
}

// A call that an open breaker refuses, the cost of every call during an
// outage, allocates nothing when nobody observes it: retry.Do returns the
// breaker's prebuilt *Error, as it would build it. With an Observer the
// refused call is still heard, with ReasonBreaker.
func TestOpenBreakerDoRefusalAllocs(t *testing.T) {
	ctx := context.Background()
	op := func(context.Context) (int, error) { t.Fatal("op ran through an open breaker"); return 0, nil }
	b := openOnRealClock(t)
	for name, p := range map[string]*retry.Policy{
		"bare":           {Breaker: b},
		"AttemptTimeout": {Breaker: b, AttemptTimeout: time.Second},
	} {
		_, err := retry.Do(ctx, p, op)
		checkRefusal(t, err, breaker.ErrOpen)
		if n := testing.AllocsPerRun(100, func() { retry.Do(ctx, p, op) }); n != 0 {
			t.Errorf("%s: retry.Do refused by an open breaker: %v allocs, want 0", name, n)
		}
		if n := testing.AllocsPerRun(100, func() { retry.BeginInline(ctx, p) }); n != 0 {
			t.Errorf("%s: retry.BeginInline refused by an open breaker: %v allocs, want 0", name, n)
		}
	}

	rec := &retrytest.Recorder{}
	_, err := retry.Do(ctx, &retry.Policy{Breaker: b, Observer: rec}, op)
	checkRefusal(t, err, breaker.ErrOpen)
	if ends := rec.Calls(); len(ends) != 1 || ends[0].Reason != retry.ReasonBreaker || ends[0].Err != err {
		t.Fatalf("the Observer heard %+v, want one call refused by the breaker", ends)
	}
}

// A call that an empty budget stops after one failed attempt, through a
// closed breaker, allocates at most once: the *Error it gives up with.
func TestEmptyBudgetRefusalThroughBreakerAllocs(t *testing.T) {
	ctx := context.Background()
	errDown := errors.New("down")
	op := func(context.Context) (int, error) { return 0, errDown }
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1 << 30})
	t.Cleanup(b.Close)
	p := &retry.Policy{Backoff: backoff.Constant{}, Budget: budget.NewRatio(budget.TenPercent()), Breaker: b}
	var err error
	for range 100 { // spend the budget's tokens
		if _, err = retry.Do(ctx, p, op); errors.Is(err, retry.ErrBudgetExhausted) {
			break
		}
	}
	var re *retry.Error
	if !errors.As(err, &re) || re.Attempts != 1 || re.Reason != retry.ErrBudgetExhausted || re.Last != errDown {
		t.Fatalf("Do error %#v, want ErrBudgetExhausted after 1 attempt", err)
	}
	if n := testing.AllocsPerRun(100, func() { retry.Do(ctx, p, op) }); n > 1 {
		t.Errorf("a call refused by an empty budget after one failure: %v allocs, want at most 1", n)
	}
}

// A half-open breaker whose probe slots are taken refuses with its
// prebuilt *Error for ErrTooManyProbes.
func TestTooManyProbesDoRefusalAllocs(t *testing.T) {
	ctx := context.Background()
	fc := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: fc})
	t.Cleanup(b.Close)
	done, _ := b.Allow()
	done(errors.New("down"))
	fc.Advance(time.Second)
	probe, err := b.Allow()
	if err != nil {
		t.Fatalf("half-open breaker refused the probe: %v", err)
	}
	defer probe(nil)
	p := &retry.Policy{Breaker: b}
	op := func(context.Context) (int, error) { t.Fatal("op ran"); return 0, nil }
	_, err = retry.Do(ctx, p, op)
	checkRefusal(t, err, breaker.ErrTooManyProbes)
	if n := testing.AllocsPerRun(100, func() { retry.Do(ctx, p, op) }); n != 0 {
		t.Errorf("retry.Do refused for too many probes: %v allocs, want 0", n)
	}
	if b.RefusalError(errors.New("other")) != nil || (*breaker.Breaker)(nil).RefusalError(breaker.ErrOpen) != nil {
		t.Error("RefusalError of an error that is no refusal, or of a nil Breaker, is not nil")
	}
}
