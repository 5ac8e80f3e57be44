package retry

import (
	"context"
	"testing"
)

// countBudget counts what it hears; it is a BudgetTracker.
type countBudget struct{ records, starts int }

func (b *countBudget) Record(bool, error)  { b.records++ }
func (b *countBudget) Withdraw(error) bool { return true }
func (b *countBudget) Start(bool)          { b.starts++ }
func (b *countBudget) Refund()             {}

// trackerGroup is a BudgetGroup that is itself a BudgetTracker: Do must
// resolve it, never use it as the call's budget.
type trackerGroup struct {
	countBudget
	member countBudget
	asked  int
}

func (g *trackerGroup) BudgetFor(context.Context) Budget { g.asked++; return &g.member }

type countBreaker struct{ allows, dones int }

func (b *countBreaker) Allow() (func(error), error) {
	b.allows++
	return func(error) { b.dones++ }, nil
}
func (b *countBreaker) Ready() error { return nil }

type breakerGroup struct {
	countBreaker
	member countBreaker
	asked  int
}

func (g *breakerGroup) BreakerFor(context.Context) Breaker { g.asked++; return &g.member }

// A Policy with only a budget or only a breaker takes Do's inline first
// attempt; a group there must still be resolved to its member, a group
// that is also a BudgetTracker included.
func TestInlineFirstResolvesGroups(t *testing.T) {
	ok := func(context.Context) (int, error) { return 1, nil }
	bg := &trackerGroup{}
	if _, err := Do(context.Background(), &Policy{Budget: bg}, ok); err != nil {
		t.Fatal(err)
	}
	if bg.asked != 1 || bg.member.records != 1 || bg.member.starts != 1 || bg.records != 0 || bg.starts != 0 {
		t.Fatalf("budget group: asked %d; member heard %d records, %d starts; group %d, %d", bg.asked, bg.member.records, bg.member.starts, bg.records, bg.starts)
	}
	kg := &breakerGroup{}
	if _, err := Do(context.Background(), &Policy{Breaker: kg}, ok); err != nil {
		t.Fatal(err)
	}
	if kg.asked != 1 || kg.member.allows != 1 || kg.member.dones != 1 || kg.allows != 0 {
		t.Fatalf("breaker group: asked %d; member %d allows, %d dones; group %d allows", kg.asked, kg.member.allows, kg.member.dones, kg.allows)
	}
	// A plain tracker is told of the inline attempt.
	tb := &countBudget{}
	if _, err := Do(context.Background(), &Policy{Budget: tb}, ok); err != nil || tb.starts != 1 || tb.records != 1 {
		t.Fatalf("tracker: %v, %d starts, %d records", err, tb.starts, tb.records)
	}
}

// BeginInline refuses a Policy whose budget or breaker is a group (the
// caller resolves it first), a group that is also a BudgetTracker
// included, and tells a plain tracker of the attempt.
func TestBeginInlineRefusesGroups(t *testing.T) {
	for _, p := range []*Policy{{Budget: &trackerGroup{}}, {Breaker: &breakerGroup{}}} {
		if _, ok, err := BeginInline(context.Background(), p); ok || err != nil {
			t.Fatalf("BeginInline(%+v) = %v, %v; want it refused", p, ok, err)
		}
	}
	tb := &countBudget{}
	in, ok, err := BeginInline(context.Background(), &Policy{Budget: tb})
	if !ok || err != nil || tb.starts != 1 {
		t.Fatalf("tracker: %v, %v, %d starts", ok, err, tb.starts)
	}
	in.Succeed(&Policy{Budget: tb})
	if tb.records != 1 {
		t.Fatalf("tracker: %d records after Succeed", tb.records)
	}
}
