package promretry_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/promretry"
)

// trip fails n calls through b.
func trip(t *testing.T, b *breaker.Breaker, n int) {
	t.Helper()
	for range n {
		done, err := b.Allow()
		if err != nil {
			t.Fatalf("Allow: %v", err)
		}
		done(errTransient)
	}
}

func TestCollectorWatchBreaker(t *testing.T) {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 2, OpenTimeout: time.Second, OpenJitter: -1, Clock: clk})
	defer b.Close()
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	unwatch := c.WatchBreaker("pay", b)

	// state returns the state the StateSet reports, as the number of the
	// breaker.State, after checking that it has one series per state and
	// exactly one of them at 1.
	state := func() float64 {
		t.Helper()
		cur := -1.0
		for i, s := range []string{"closed", "half-open", "open"} {
			switch v := value(t, reg, "stormguard_breaker_state", "operation", "pay", "state", s); {
			case v == 1 && cur < 0:
				cur = float64(i)
			case v != 0:
				t.Fatalf("breaker_state{state=%q} = %v with state %v", s, v, cur)
			}
		}
		return cur
	}
	transitions := func(from, to string) float64 {
		return value(t, reg, "stormguard_breaker_transitions_total", "operation", "pay", "from", from, "to", to)
	}
	if got := state(); got != 0 {
		t.Errorf("state = %v, want 0 (closed)", got)
	}
	trip(t, b, 2)
	if got := state(); got != 2 {
		t.Errorf("state after tripping = %v, want 2 (open)", got)
	}
	// The open period ends; the scrape itself sees the breaker move to
	// half-open, and counts that transition in the same scrape.
	clk.Advance(time.Second)
	if got := state(); got != 1 {
		t.Errorf("state after the open period = %v, want 1 (half-open)", got)
	}
	if got := transitions("open", "half-open"); got != 1 {
		t.Errorf("open→half-open = %v, want 1", got)
	}
	trip(t, b, 1) // the probe fails: open again
	if got, want := transitions("half-open", "open"), 1.0; got != want {
		t.Errorf("half-open→open = %v, want %v", got, want)
	}
	if got := transitions("closed", "open"); got != 1 {
		t.Errorf("closed→open = %v, want 1", got)
	}

	// A second breaker under the same name replaces the first: the first
	// one's changes are no longer counted.
	b2 := breaker.New(breaker.Config{ConsecutiveFailures: 1, Clock: clk})
	defer b2.Close()
	unwatch2 := c.WatchBreaker("pay", b2)
	if got := state(); got != 0 {
		t.Errorf("state of the replacing breaker = %v, want 0", got)
	}
	clk.Advance(time.Minute)
	_ = b.State() // the first breaker moves to half-open, unseen
	if got := transitions("open", "half-open"); got != 1 {
		t.Errorf("open→half-open after replacing = %v, want 1", got)
	}
	unwatch() // the old watch's unwatch leaves the new one alone
	trip(t, b2, 1)
	if got := transitions("closed", "open"); got != 2 {
		t.Errorf("closed→open with the second breaker = %v, want 2", got)
	}
	unwatch2()
	unwatch2()
	if m := find(t, reg, "stormguard_breaker_state"); m != nil {
		t.Errorf("breaker_state left after unwatch: %v", m)
	}
	clk.Advance(2 * time.Minute)
	_ = b2.State()
	if got := transitions("open", "half-open"); got != 1 {
		t.Errorf("a change after unwatch was counted: open→half-open = %v", got)
	}
	var nilCollector *promretry.Collector
	nilCollector.WatchBreaker("x", b)()
	c.WatchBreaker("x", nil)()
}

// TestBreakerStateSet is the regression test of issue 18 item 16
// (StateSet): the state is exported as one series per state, 1 for the
// current one, in the exposition format.
func TestBreakerStateSet(t *testing.T) {
	clk := clocktest.NewFake()
	b := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: clk})
	defer b.Close()
	c := promretry.New(promretry.Config{})
	defer c.WatchBreaker("pay", b)()
	want := func(closed, halfOpen, open int) string {
		return fmt.Sprintf(`
# HELP stormguard_breaker_state Circuit breaker state, read at scrape time, as a StateSet: 1 for the current state (closed, half-open or open), 0 for the others.
# TYPE stormguard_breaker_state gauge
stormguard_breaker_state{operation="pay",state="closed"} %d
stormguard_breaker_state{operation="pay",state="half-open"} %d
stormguard_breaker_state{operation="pay",state="open"} %d
`, closed, halfOpen, open)
	}
	if err := testutil.CollectAndCompare(c, strings.NewReader(want(1, 0, 0)), "stormguard_breaker_state"); err != nil {
		t.Error(err)
	}
	trip(t, b, 1)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want(0, 0, 1)), "stormguard_breaker_state"); err != nil {
		t.Error(err)
	}
	clk.Advance(time.Second)
	if err := testutil.CollectAndCompare(c, strings.NewReader(want(0, 1, 0)), "stormguard_breaker_state"); err != nil {
		t.Error(err)
	}
}

// bareBudget is a retry.Budget that exposes nothing more (a Redis-backed
// or user budget without Available).
type bareBudget struct{}

func (bareBudget) Record(bool, error)  {}
func (bareBudget) Withdraw(error) bool { return false }

// stateOnly is a breaker that reports its state but no state changes.
type stateOnly struct{ st breaker.State }

func (s stateOnly) Allow() (func(error), error) { return func(error) {}, nil }
func (s stateOnly) Ready() error                { return nil }
func (s stateOnly) State() breaker.State        { return s.st }

// bareBreaker is a retry.Breaker that exposes nothing more.
type bareBreaker struct{}

func (bareBreaker) Allow() (func(error), error) { return func(error) {}, nil }
func (bareBreaker) Ready() error                { return nil }

// TestWatchDegradesGracefully (issue #25 papercut 6): WatchBudget and
// WatchBreaker take the retry interfaces, so config can hand over any
// budget or breaker without a type assertion, and export what each one
// can tell: a budget without Available exports no tokens, a breaker
// without Subscribe its state but no transitions, a bare breaker nothing.
func TestWatchDegradesGracefully(t *testing.T) {
	c := promretry.New(promretry.Config{})
	reg := registry(t, c)
	defer c.WatchBudget("bare", bareBudget{})()
	defer c.WatchBreaker("state-only", stateOnly{breaker.Open})()
	defer c.WatchBreaker("bare", bareBreaker{})()
	if m := find(t, reg, "stormguard_retry_budget_tokens"); m != nil {
		t.Errorf("tokens of a budget without Available: %v", m)
	}
	if got := value(t, reg, "stormguard_breaker_state", "operation", "state-only", "state", "open"); got != 1 {
		t.Errorf("state-only breaker: open = %v, want 1", got)
	}
	if got := value(t, reg, "stormguard_breaker_state", "operation", "state-only", "state", "closed"); got != 0 {
		t.Errorf("state-only breaker: closed = %v, want 0", got)
	}
	if n := testutil.CollectAndCount(c, "stormguard_breaker_state"); n != 3 {
		t.Errorf("%d breaker_state series, want the state-only breaker's 3 (nothing for the bare one)", n)
	}
}
