package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

type startKey struct{}

// starter is an Observer that gives each call a context of its own and
// checks that the attempts and the call's end see it.
type starter struct {
	retry.NopObserver
	name                         string
	starts, ends, attemptsWithIt int
}

func (s *starter) CallStart(ctx context.Context, e retry.CallStart) context.Context {
	s.starts++
	return context.WithValue(ctx, startKey{}, append(append([]string(nil), names(ctx)...), s.name+":"+e.Operation))
}

func names(ctx context.Context) []string { v, _ := ctx.Value(startKey{}).([]string); return v }

func (s *starter) AttemptStart(ctx context.Context, _ retry.AttemptStart) context.Context {
	if len(names(ctx)) > 0 {
		s.attemptsWithIt++
	}
	return ctx
}

func (s *starter) CallEnd(ctx context.Context, _ retry.CallEnd) {
	if len(names(ctx)) > 0 {
		s.ends++
	}
}

func TestCallStarterGivesTheCallItsContext(t *testing.T) {
	a, b := &starter{name: "a"}, &starter{name: "b"}
	p := &retry.Policy{Operation: "op", MaxAttempts: 3, Backoff: backoff.Constant{}, Observer: retry.Multi(a, b)}
	var seen []string
	_, err := retry.Do(context.Background(), p, func(ctx context.Context) (int, error) {
		seen = names(ctx)
		return 0, errors.New("transient")
	})
	if err == nil {
		t.Fatal("Do succeeded")
	}
	if len(seen) != 2 || seen[0] != "a:op" || seen[1] != "b:op" {
		t.Fatalf("the attempt saw %v, want both observers' call contexts in order", seen)
	}
	for _, s := range []*starter{a, b} {
		if s.starts != 1 || s.ends != 1 || s.attemptsWithIt != 3 {
			t.Errorf("%s: %d starts, %d ends with the call context, %d attempts with it; want 1, 1, 3", s.name, s.starts, s.ends, s.attemptsWithIt)
		}
	}
	// The caller's cancellation still holds through the call's context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 1, nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
}

func TestAttemptLimit(t *testing.T) {
	var nilPolicy *retry.Policy
	for _, tc := range []struct {
		p    *retry.Policy
		want int
	}{
		{nilPolicy, retry.DefaultMaxAttempts},
		{&retry.Policy{}, retry.DefaultMaxAttempts},
		{&retry.Policy{MaxAttempts: 1}, 1},
		{&retry.Policy{MaxAttempts: 7}, 7},
		{&retry.Policy{MaxAttempts: retry.Unlimited}, -1},
		{&retry.Policy{MaxAttempts: -5}, -1},
	} {
		if got := tc.p.AttemptLimit(); got != tc.want {
			t.Errorf("AttemptLimit(%+v) = %d, want %d", tc.p, got, tc.want)
		}
	}
}
