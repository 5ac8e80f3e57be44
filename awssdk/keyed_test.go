package awssdk_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/stormguard/stormguard/awsretry"
	"github.com/stormguard/stormguard/awssdk"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

type limiterFunc func(context.Context, bool) (func(error), error)

func (f limiterFunc) Acquire(ctx context.Context, retry bool) (func(error), error) {
	return f(ctx, retry)
}

// concurrencyGroup returns a keyed group of budget.Concurrency members
// (one retry at a time each).
func concurrencyGroup(t *testing.T, clk *clocktest.Fake) *keyed.Budgets {
	t.Helper()
	group, err := keyed.NewBudgets(keyed.Config{Clock: clk}, func() retry.Budget {
		return budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	})
	if err != nil {
		t.Fatal(err)
	}
	return group
}

// TestKeyedConcurrencyBudgetGivesGrantsBack (outside review r2aws): the
// Retryer never resolved a keyed group (retry.ResolveGroups, as httpretry
// and grpcretry do), so a keyed.Budgets of budget.Concurrency members was
// its default member for every call, and, the group itself being no
// BudgetTracker, no grant was ever given back: one retry whose attempt
// the Limiter refused held the only retry slot for good, and every later
// operation's retry was refused (ErrBudgetExhausted). Each operation now
// draws on its key's member, and a refused retry's grant goes back.
func TestKeyedConcurrencyBudgetGivesGrantsBack(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	group := concurrencyGroup(t, clk)
	refuse := true
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Operation, policy.Clock, policy.Budget = "ddb", clk, group
	policy.Limiter = limiterFunc(func(_ context.Context, retry bool) (func(error), error) {
		if retry && refuse {
			return nil, errNoRetries
		}
		return func(error) {}, nil
	})
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	ctx := keyed.WithKey(context.Background(), "table-a")
	var err error
	e.play([]reply{internal, ok200}, func() { err = getItemCtx(ctx, c) })
	if !errors.Is(err, errNoRetries) {
		t.Fatalf("first operation: %v, want the Limiter's refusal of its retry", err)
	}
	refuse = false
	e.play([]reply{internal, ok200}, func() { err = getItemCtx(ctx, c) })
	if err != nil {
		t.Errorf("second operation: %v; want its retry granted (the first's grant given back)", err)
	}
	a := group.Get("table-a").(*budget.Concurrency)
	if req, ret := a.Active(); req != 0 || ret != 0 {
		t.Errorf("key's member: Active() = %d, %d, want 0, 0 (stats %+v)", req, ret, a.Stats())
	}
	if st := a.Stats(); st.Requests != 2 || st.Retries != 1 || st.Granted != 2 || st.Refunded != 1 {
		t.Errorf("key's member: stats %+v, want 2 requests, 1 retry, 2 grants, 1 refund", st)
	}
	if st := group.Default().(*budget.Concurrency).Stats(); st != (budget.Stats{}) {
		t.Errorf("default member used by a keyed operation: stats %+v", st)
	}
}

// TestKeyedBudgetTrackerNeedsTheMiddleware: a keyed group whose members
// are BudgetTrackers needs the middleware, as a BudgetTracker does (its
// grants could not be given back without it): an operation of a client
// without it fails with ErrMiddlewareMissing.
func TestKeyedBudgetTrackerNeedsTheMiddleware(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	group := concurrencyGroup(t, clk)
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Budget = clk, group
	r := awssdk.NewRetryer(policy)
	c := e.client(t, config.WithRetryer(func() aws.Retryer { return r })) // no middleware
	var err error
	n := e.play([]reply{ok200}, func() { err = getItemCtx(keyed.WithKey(context.Background(), "table-a"), c) })
	if !errors.Is(err, awssdk.ErrMiddlewareMissing) {
		t.Errorf("operation without the middleware: %v, want ErrMiddlewareMissing", err)
	}
	if n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestKeyedBreakersOpenPerKey: with a keyed.Breakers as the Policy's
// Breaker, one key's failures open that key's breaker alone; before the
// Retryer resolved groups, every operation used the default member, and
// one key's failures refused every other's.
func TestKeyedBreakersOpenPerKey(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	group, err := keyed.NewBreakers(keyed.Config{Clock: clk}, breaker.Config{
		ConsecutiveFailures: 2, Clock: clk, IsFailure: func(error) bool { return true },
	})
	if err != nil {
		t.Fatal(err)
	}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Breaker, policy.MaxAttempts = clk, group, 2
	r := awssdk.NewRetryer(policy)
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	bad := keyed.WithKey(context.Background(), "table-bad")
	good := keyed.WithKey(context.Background(), "table-good")
	e.play([]reply{internal, internal}, func() { err = getItemCtx(bad, c) }) // two failures: table-bad's breaker opens
	if err == nil {
		t.Fatal("failing operation succeeded")
	}
	if s := group.Get("table-bad").State(); s != breaker.Open {
		t.Fatalf("table-bad's breaker %v after two failures, want open", s)
	}
	n := e.play([]reply{ok200}, func() { err = getItemCtx(good, c) })
	if err != nil || n != 1 {
		t.Errorf("another key's operation: %v after %d requests, want success after 1", err, n)
	}
	n = e.play([]reply{ok200}, func() { err = getItemCtx(bad, c) })
	if !errors.Is(err, breaker.ErrOpen) || n != 0 {
		t.Errorf("the failing key's operation: %v after %d requests, want breaker.ErrOpen after none", err, n)
	}
	if s := group.Default().State(); s != breaker.Closed {
		t.Errorf("default member %v, want closed (no operation used it)", s)
	}
}

// countingGroup is a retry.BudgetGroup that counts BudgetFor's calls per
// key and panics for the key "panic".
type countingGroup struct {
	retry.Budget // the default member
	members      map[string]retry.Budget
	calls        map[string]int
}

func (g *countingGroup) BudgetFor(ctx context.Context) retry.Budget {
	k := keyed.KeyFrom(ctx)
	g.calls[k]++
	if k == "panic" {
		panic("budget for")
	}
	if m, ok := g.members[k]; ok {
		return m
	}
	return g.Budget
}

// TestGroupResolvedOncePerOperation: the Retryer asks a group for its
// member once per operation, with the operation's context, and uses that
// member for every attempt and retry of it; a member function that panics
// panics the operation with nothing held, and the Observer hears its
// CallEnd (ReasonPanic).
func TestGroupResolvedOncePerOperation(t *testing.T) {
	e := newEndpoint(t)
	clk := clocktest.NewFake()
	conc := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	def := budget.NewConcurrency(budget.ConcurrencyConfig{MinConcurrency: 1, Ratio: -1})
	g := &countingGroup{Budget: def, members: map[string]retry.Budget{"a": conc}, calls: map[string]int{}}
	obs := &events{}
	policy := awsretry.Rules{Rand: maxJitter{}}.Policy()
	policy.Clock, policy.Budget, policy.Observer = clk, g, obs
	r := awssdk.NewRetryer(policy) // asks the default member whether it tracks
	g.calls = map[string]int{}
	c := e.withMiddleware(t, r, &sleepless{clk: clk, RetryerV2: r})
	var err error
	e.play([]reply{internal, internal, ok200}, func() { err = getItemCtx(keyed.WithKey(context.Background(), "a"), c) })
	if err != nil {
		t.Fatal(err)
	}
	if g.calls["a"] != 1 || len(g.calls) != 1 {
		t.Errorf("BudgetFor calls %v, want one, for key a", g.calls)
	}
	if st := conc.Stats(); st.Requests != 1 || st.Retries != 2 || st.Granted != 2 {
		t.Errorf("key a's member: stats %+v, want 1 request, 2 retries, 2 grants", st)
	}
	if st := def.Stats(); st != (budget.Stats{}) {
		t.Errorf("default member: stats %+v, want untouched", st)
	}
	var p any
	e.play([]reply{ok200}, func() {
		defer func() { p = recover() }()
		_ = getItemCtx(keyed.WithKey(context.Background(), "panic"), c)
	})
	if p != "budget for" {
		t.Fatalf("recovered %v, want the group's panic", p)
	}
	if got := obs.String(); !strings.HasSuffix(got, "call end 0 panic; ") {
		t.Errorf("observer: %q, want a CallEnd with no attempt, ReasonPanic, last", got)
	}
	for _, m := range []*budget.Concurrency{conc, def} {
		if req, ret := m.Active(); req != 0 || ret != 0 {
			t.Errorf("Active() = %d, %d, want 0, 0", req, ret)
		}
	}
}
