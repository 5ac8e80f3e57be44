package retry_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

var errTransient = errors.New("transient")

func TestPolicyIsItsOwnSource(t *testing.T) {
	p := &retry.Policy{MaxAttempts: 4}
	var src retry.PolicySource = p
	if src.Policy() != p {
		t.Fatal("a *Policy must give itself")
	}
	var nilp *retry.Policy
	if nilp.Policy() != nil {
		t.Fatal("a nil *Policy must give nil (the zero Policy)")
	}
}

// verdict is an error reporting its own health verdict.
type verdict bool

func (v verdict) Error() string         { return fmt.Sprintf("verdict %v", bool(v)) }
func (v verdict) DownstreamFault() bool { return bool(v) }

func TestIsDownstreamFault(t *testing.T) {
	plain := errors.New("boom")
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", plain, true},
		{"permanent", retry.Permanent(plain), false},
		{"fault of permanent", retry.Fault(retry.Permanent(plain)), true},
		{"permanent of fault", retry.Permanent(retry.Fault(plain)), true},
		{"reporter says fault, permanent", retry.Permanent(verdict(true)), true},
		{"reporter says healthy", verdict(false), false},
		{"reporter says healthy, wrapped", fmt.Errorf("call: %w", verdict(false)), false},
		{"caller cancel", context.Canceled, false},
		{"deadline", context.DeadlineExceeded, true},
		{"attempt timeout", fmt.Errorf("%w: %w", retry.ErrAttemptTimeout, context.Canceled), true},
		{"overloaded", retry.Overloaded(plain), true},
		{"joined: healthy first", errors.Join(verdict(false), verdict(true)), false},
	} {
		if got := retry.IsDownstreamFault(c.err); got != c.want {
			t.Errorf("%s: IsDownstreamFault = %v, want %v", c.name, got, c.want)
		}
	}
	if retry.Fault(nil) != nil || retry.Overloaded(nil) != nil {
		t.Error("Fault(nil) and Overloaded(nil) must be nil")
	}
}

type reloadish interface{ Reloaded() }

type plainObs struct{ retry.NopObserver }
type reloadObs struct {
	retry.NopObserver
	n *int
}

func (r reloadObs) Reloaded() { *r.n++ }

func TestEachObserverFindsInterfacesInsideMulti(t *testing.T) {
	n := 0
	inner := retry.Multi(plainObs{}, reloadObs{n: &n})
	outer := retry.Multi(reloadObs{n: &n}, inner, nil)
	if _, ok := outer.(reloadish); ok {
		t.Fatal("test premise: the Multi itself does not implement the optional interface")
	}
	visited := 0
	retry.EachObserver(outer, func(o retry.Observer) {
		visited++
		if r, ok := o.(reloadish); ok {
			r.Reloaded()
		}
	})
	if visited != 3 || n != 2 {
		t.Fatalf("visited %d observers and reached %d reload observers, want 3 and 2", visited, n)
	}
	retry.EachObserver(nil, func(retry.Observer) { t.Fatal("nil observer visited") })
	single := 0
	retry.EachObserver(reloadObs{n: &single}, func(o retry.Observer) { o.(reloadish).Reloaded() })
	if single != 1 {
		t.Fatal("a lone observer must be visited")
	}
}

func TestLayerRule(t *testing.T) {
	grant := &trackingBudget{}
	refuse := &trackingBudget{refuse: true}
	for _, c := range []struct {
		name     string
		inbound  *retry.Inbound
		nested   retry.NestedRule
		nbudget  retry.Budget
		attempts int
		reason   retry.Reason
	}{
		{"no inbound facts", nil, retry.NestedOneLayer, nil, 4, retry.ReasonAttempts},
		{"caller does not retry", &retry.Inbound{Attempt: 1}, retry.NestedOneLayer, nil, 4, retry.ReasonAttempts},
		{"caller's last attempt", &retry.Inbound{Attempt: 3}, retry.NestedOneLayer, nil, 1, retry.ReasonNested},
		{"caller retries: one layer", &retry.Inbound{Attempt: 2, Retries: true}, retry.NestedOneLayer, nil, 1, retry.ReasonNested},
		{"caller retries: ignore", &retry.Inbound{Retries: true}, retry.NestedIgnore, nil, 4, retry.ReasonAttempts},
		{"caller retries: budget nil", &retry.Inbound{Retries: true}, retry.NestedBudget, nil, 1, retry.ReasonNested},
		{"caller retries: budget grants", &retry.Inbound{Retries: true}, retry.NestedBudget, grant, 4, retry.ReasonAttempts},
		{"caller retries: budget refuses", &retry.Inbound{Retries: true}, retry.NestedBudget, refuse, 1, retry.ReasonNested},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.inbound != nil {
				ctx = retry.WithInbound(ctx, *c.inbound)
			}
			rec := &recorder{}
			p := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}, Nested: c.nested, NestedBudget: c.nbudget, Observer: rec}
			n := 0
			var wills, mays []bool
			c2 := retry.NewCall(ctx, p)
			for {
				a, err := c2.Begin()
				if err != nil {
					t.Fatal(err)
				}
				wills = append(wills, c2.WillRetry())
				mays = append(mays, c2.MayRetry())
				n++
				err = c2.End(&a, errTransient)
				if _, err = c2.Next(err); err != nil {
					if c.reason == retry.ReasonNested && !errors.Is(err, retry.ErrNestedRetry) {
						t.Fatalf("err = %v, want ErrNestedRetry", err)
					}
					if !errors.Is(err, errTransient) {
						t.Fatalf("err = %v does not wrap the last error", err)
					}
					break
				}
			}
			if n != c.attempts {
				t.Fatalf("%d attempts, want %d", n, c.attempts)
			}
			calls := rec.Calls()
			if len(calls) != 1 || calls[0].Reason != c.reason {
				t.Fatalf("call ends %+v, want one with reason %v", calls, c.reason)
			}
			// WillRetry announces that a failure may be retried: here
			// while attempts remain, or above when the caller retries.
			for i, w := range wills {
				want := i < c.attempts-1 || (c.inbound != nil && (c.inbound.Retries || c.inbound.Attempt > 1))
				if w != want {
					t.Fatalf("WillRetry at attempt %d = %v, want %v", i+1, w, want)
				}
			}
			// MayRetry says what this call itself may do.
			for i, m := range mays {
				want := i < c.attempts-1 || (c.reason == retry.ReasonNested && c.nbudget != nil)
				if m != want {
					t.Fatalf("MayRetry at attempt %d = %v, want %v", i+1, m, want)
				}
			}
			// The same through Do.
			calls0 := 0
			_, err := retry.Do(ctx, &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}, Nested: c.nested, NestedBudget: c.nbudget},
				func(context.Context) (int, error) { calls0++; return 0, errTransient })
			if calls0 != c.attempts || err == nil {
				t.Fatalf("Do made %d attempts (err %v), want %d", calls0, err, c.attempts)
			}
		})
	}
}

func TestNestedBudgetHearsTheGovernedAttempts(t *testing.T) {
	nb := &trackingBudget{}
	ctx := retry.WithInbound(context.Background(), retry.Inbound{Retries: true})
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}, Nested: retry.NestedBudget, NestedBudget: nb}
	if _, err := retry.Do(ctx, p, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if nb.records.Load() != 1 {
		t.Fatalf("NestedBudget heard %d attempts of a governed success, want 1", nb.records.Load())
	}
	// An ungoverned call does not touch it.
	if _, err := retry.Do(context.Background(), p, func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if nb.records.Load() != 1 {
		t.Fatal("NestedBudget heard a call whose caller does not retry")
	}
}

func TestOverloadedIsNeverRetried(t *testing.T) {
	b := &trackingBudget{}
	rec := &recorder{}
	p := &retry.Policy{MaxAttempts: 5, Backoff: backoff.Constant{}, Budget: b, Observer: rec,
		Classify: func(error) bool { return true }, Nested: retry.NestedIgnore}
	n := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		n++
		return 0, fmt.Errorf("tier 2: %w", retry.Overloaded(errTransient))
	})
	if n != 1 {
		t.Fatalf("%d attempts of an overloaded answer, want 1", n)
	}
	if !errors.Is(err, retry.ErrOverloaded) || !retry.IsOverloaded(err) || !errors.Is(err, errTransient) {
		t.Fatalf("err = %v: want the marker and the cause", err)
	}
	if calls := rec.Calls(); len(calls) != 1 || calls[0].Reason != retry.ReasonOverloaded || calls[0].Reason.String() != "overloaded" {
		t.Fatalf("call ends %+v, want reason overloaded", calls)
	}
	if b.withdrawn.Load() != 0 {
		t.Fatal("the budget was asked for a retry of an overloaded answer")
	}
	if retry.IsOverloaded(errTransient) || !retry.IsOverloaded(fmt.Errorf("x: %w", retry.ErrOverloaded)) {
		t.Fatal("IsOverloaded must find the sentinel and nothing else")
	}
}

// stubLimiter admits until refuse is set and records the results.
type stubLimiter struct {
	mu      sync.Mutex
	refuse  error
	asked   []bool
	results []error
}

var errThrottled = errors.New("throttled")

func (l *stubLimiter) Acquire(_ context.Context, retry bool) (func(error), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, retry)
	if l.refuse != nil {
		return nil, l.refuse
	}
	return func(err error) {
		l.mu.Lock()
		l.results = append(l.results, err)
		l.mu.Unlock()
	}, nil
}

func TestLimiterSeesEveryAttempt(t *testing.T) {
	l := &stubLimiter{}
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}, Limiter: l}
	n := 0
	_, err := retry.Do(context.Background(), p, func(context.Context) (int, error) {
		n++
		if n < 3 {
			return 0, errTransient
		}
		return 1, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(l.asked) != "[false true true]" || len(l.results) != 3 || l.results[2] != nil || !errors.Is(l.results[0], errTransient) {
		t.Fatalf("limiter asked %v, results %v", l.asked, l.results)
	}
}

func TestLimiterRefusalEndsTheCall(t *testing.T) {
	l := &stubLimiter{refuse: errThrottled}
	rec := &recorder{}
	n := 0
	_, err := retry.Do(context.Background(), &retry.Policy{Limiter: l, Observer: rec}, func(context.Context) (int, error) { n++; return 0, nil })
	if n != 0 || !errors.Is(err, errThrottled) {
		t.Fatalf("ran %d attempts, err %v; want none and the limiter's error", n, err)
	}
	if calls := rec.Calls(); len(calls) != 1 || calls[0].Reason != retry.ReasonThrottled || calls[0].Reason.String() != "throttled" {
		t.Fatalf("call ends %+v, want reason throttled", calls)
	}
}

func TestLimiterHearsBreakerRefusalAndPanic(t *testing.T) {
	l := &stubLimiter{}
	br := &stubBreaker{allowErr: errOpen}
	_, err := retry.Do(context.Background(), &retry.Policy{Limiter: l, Breaker: br}, func(context.Context) (int, error) { return 0, nil })
	if !errors.Is(err, errOpen) || len(l.results) != 1 || l.results[0] != errOpen {
		t.Fatalf("err %v, limiter results %v: the limiter's done must hear the breaker's refusal", err, l.results)
	}
	l2 := &stubLimiter{}
	func() {
		defer func() { _ = recover() }()
		_ = retry.Run(context.Background(), &retry.Policy{Limiter: l2}, func(context.Context) error { panic("boom") })
	}()
	if len(l2.results) != 1 || !errors.Is(l2.results[0], retry.ErrPanicked) {
		t.Fatalf("limiter results %v, want one PanicError", l2.results)
	}
}

// NestedForbids is the rule Do applies, for adapters that start attempts
// of their own (hedges): it forbids them only when the caller retries (or
// has retried) and the rule leaves no budget.
func TestNestedForbids(t *testing.T) {
	retries := retry.WithInbound(context.Background(), retry.Inbound{Retries: true})
	retried := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 2})
	first := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1})
	for _, c := range []struct {
		name string
		ctx  context.Context
		p    *retry.Policy
		want bool
	}{
		{"nil policy, caller retries", retries, nil, true},
		{"one layer, caller retried", retried, &retry.Policy{}, true},
		{"one layer, first attempt of a caller that does not retry", first, &retry.Policy{}, false},
		{"no inbound facts", context.Background(), &retry.Policy{}, false},
		{"ignore", retries, &retry.Policy{Nested: retry.NestedIgnore}, false},
		{"budget without one", retries, &retry.Policy{Nested: retry.NestedBudget}, true},
		{"budget", retries, &retry.Policy{Nested: retry.NestedBudget, NestedBudget: &trackingBudget{}}, false},
	} {
		if got := c.p.NestedForbids(c.ctx); got != c.want {
			t.Errorf("%s: NestedForbids = %v, want %v", c.name, got, c.want)
		}
	}
	if !retry.CallerRetries(retried) || retry.CallerRetries(first) {
		t.Error("CallerRetries: a caller that retried retries; a first attempt of one that does not, does not")
	}
}
