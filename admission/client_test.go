package admission_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

func TestRetryLimiterJudgesAttempts(t *testing.T) {
	f := clocktest.NewFake()
	aimd, _ := admission.NewAIMD(admission.AIMDConfig{InitialLimit: 8, MinLimit: 1, MaxLimit: 8})
	l := newLimiter(t, admission.Config{Limit: aimd, Clock: f, ProbeInterval: -1, WindowSamples: 1, QueueLength: -1})
	p := &retry.Policy{MaxAttempts: 1, Limiter: l.RetryLimiter(), Clock: f}
	ctx := context.Background()
	if _, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	f.Advance(admission.DefaultWindow)
	// The downstream says it is overloaded: a drop, and the window
	// closes with it: AIMD halves.
	_, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 0, retry.Overloaded(errors.New("busy")) })
	if err == nil || l.InFlight() != 0 {
		t.Fatalf("err %v, in flight %d: want the error and the permit ended", err, l.InFlight())
	}
	if got := l.Limit(); got != 4 {
		t.Fatalf("limit %d after an overload answer, want AIMD's half of 8", got)
	}
	// At the limit, an attempt is refused before it is sent.
	var held []admission.Permit
	for range l.Limit() {
		held = append(held, mustAcquire(t, l))
	}
	called := false
	_, err = retry.Do(ctx, p, func(context.Context) (int, error) { called = true; return 0, nil })
	if !errors.Is(err, admission.ErrShed) || called {
		t.Fatalf("at the limit: err %v, op called %v; want ErrShed and no call", err, called)
	}
	for _, h := range held {
		h.Ignore()
	}
	// A panicking op still gives its permit back, and the panic goes on.
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the op's panic did not go on")
			}
		}()
		retry.Do(ctx, p, func(context.Context) (int, error) { panic("op bug") })
	}()
	if l.InFlight() != 0 {
		t.Fatalf("in flight %d after a panicking op", l.InFlight())
	}
}
