package hedge_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// noBudget refuses every withdrawal.
type noBudget struct{}

func (noBudget) Withdraw(error) bool { return false }
func (noBudget) Record(bool, error)  {}

// secondRefused admits the first attempt and refuses every later one in
// Allow (Ready says yes): a hedge's Begin is refused after its budgets
// granted it.
type secondRefused struct {
	mu sync.Mutex
	n  int
}

func (b *secondRefused) Allow() (func(error), error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n++; b.n > 1 {
		return nil, errors.New("test: refused")
	}
	return func(error) {}, nil
}
func (b *secondRefused) Ready() error { return nil }

// Under the layer rule NestedBudget a hedge withdraws from the
// NestedBudget, then from the Budget. When the Budget then refused, or
// the hedge's Begin was refused, the NestedBudget's grant was never
// refunded: a BudgetTracker kept the retry reserved for good. Every grant
// not used by an attempt is now refunded, as retry.Call refunds a retry's.
func TestHedgeRefusalRefundsNestedGrant(t *testing.T) {
	for _, tc := range []struct {
		name    string
		budget  func() retry.Budget
		breaker retry.Breaker
	}{
		{"budget refuses", func() retry.Budget { return noBudget{} }, nil},
		{"begin refused", func() retry.Budget { return budget.NewConcurrency(budget.ConcurrencyConfig{}) }, &secondRefused{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktest.NewFake()
			nb := budget.NewConcurrency(budget.ConcurrencyConfig{})
			b := tc.budget()
			ev := new(events)
			p := &retry.Policy{MaxAttempts: 5, Clock: clk, Nested: retry.NestedBudget, NestedBudget: nb, Budget: b, Breaker: tc.breaker, Observer: ev}
			h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
			s := newScript()
			ctx := retry.WithInbound(context.Background(), retry.Inbound{Retries: true})
			out := make(chan result, 1)
			go func() {
				v, err := hedge.Do(ctx, h, s.op, s.release)
				out <- result{v, err}
			}()
			s.wait(t, 1)
			clk.BlockUntil(1)
			clk.Advance(10 * time.Millisecond)
			ev.waitFor(t, "refused:")
			s.answer(1, "v1", nil)
			if r := get(t, out); r.err != nil || r.v != "v1" {
				t.Fatalf("Do = %q, %v; want v1", r.v, r.err)
			}
			if req, ret := nb.Active(); req != 0 || ret != 0 {
				t.Fatalf("NestedBudget after the call: %d requests, %d retries active; want none (%s)", req, ret, ev)
			}
			if cb, ok := b.(*budget.Concurrency); ok {
				if req, ret := cb.Active(); req != 0 || ret != 0 {
					t.Fatalf("Budget after the call: %d requests, %d retries active; want none", req, ret)
				}
			}
		})
	}
}

// A hedge whose Begin the breaker refused (Ready said yes, Allow then
// refused) ended the call's retry.Call for the Observer: its CallEnd was
// dropped (the call goes on), and the call's real end was never heard.
// The Observer now hears the call end once, when it ends.
func TestRefusedHedgeBeginKeepsCallEnd(t *testing.T) {
	clk := clocktest.NewFake()
	ev := new(events)
	p := &retry.Policy{MaxAttempts: 5, Clock: clk, Breaker: &secondRefused{}, Observer: ev}
	h := &hedge.Hedger{Policy: p, Delay: 10 * time.Millisecond}
	s := newScript()
	out := run(h, s)
	s.wait(t, 1)
	clk.BlockUntil(1)
	clk.Advance(10 * time.Millisecond)
	ev.waitFor(t, "refused:breaker")
	s.answer(1, "v1", nil)
	if r := get(t, out); r.err != nil || r.v != "v1" {
		t.Fatalf("Do = %q, %v; want v1", r.v, r.err)
	}
	if got, want := ev.String(), "[start#1 refused:breaker end#1:success callend:success/1]"; got != want {
		t.Fatalf("events\n got %s\nwant %s", got, want)
	}
}
