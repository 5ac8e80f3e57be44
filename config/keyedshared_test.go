package config

import (
	"context"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	kg "github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// fakeKeyedStore is a fakeStore that also splits its parts per key.
type fakeKeyedStore struct {
	fakeStore
	kcs map[string]kg.Config
}

func newFakeKeyedStore() *fakeKeyedStore {
	return &fakeKeyedStore{fakeStore{built: map[string]int{}, closed: map[string]int{}}, map[string]kg.Config{}}
}

type fakeBreakerGroup struct {
	*kg.Breakers
	name string
}

type fakeBudgetGroup struct {
	*kg.Budgets
	name string
}

func (s *fakeKeyedStore) SharedBreakerGroup(name string, c breaker.Config, kc kg.Config) (retry.BreakerGroup, func(), error) {
	g, err := kg.NewBreakers(kc, c)
	if err != nil {
		return nil, nil, err
	}
	s.built["breakers "+name]++
	s.kcs["breakers "+name] = kc
	return &fakeBreakerGroup{g, name}, func() { s.closed["breakers "+name]++; g.Close() }, nil
}

func (s *fakeKeyedStore) SharedBudgetGroup(name string, c budget.RatioConfig, kc kg.Config) (retry.BudgetGroup, func(), error) {
	g, err := kg.NewBudgets(kc, func() retry.Budget { return budget.NewRatio(c) })
	if err != nil {
		return nil, nil, err
	}
	s.built["budgets "+name]++
	return &fakeBudgetGroup{g, name}, func() { s.closed["budgets "+name]++ }, nil
}

// TestKeyedSharedPartsFromFile (issue #37 item 4): a breaker or budget
// block with shared: NAME and per: host is the store's group (a
// KeyedSharedStore), bounded by the block's max_keys; a reload that
// leaves the block alone keeps the group whole (its keys keep their
// state); one that changes max_keys builds a new group and closes the
// old; Registry.Close closes the groups in force.
func TestKeyedSharedPartsFromFile(t *testing.T) {
	st := newFakeKeyedStore()
	r := NewRegistry(Options{Logger: discard, Shared: map[string]SharedStore{"redis": st}})
	const base = "policies: {pay: {max_attempts: %s, breaker: {kind: consecutive, failures: 1, shared: redis, per: host, max_keys: %s}, budget: {kind: ratio, shared: redis, per: host}}}"
	apply := func(attempts, maxKeys string) {
		t.Helper()
		src := strings.Replace(strings.Replace(base, "%s", attempts, 1), "%s", maxKeys, 1)
		if err := r.Apply(mustParse(t, src)); err != nil {
			t.Fatal(err)
		}
	}
	apply("3", "50")
	h := r.Policy("pay")
	g, ok := h.Policy().Breaker.(*fakeBreakerGroup)
	if !ok || g.name != "pay" || st.kcs["breakers pay"].MaxKeys != 50 {
		t.Fatalf("breaker %T (%+v), want the store's group named after the policy, of 50 keys", h.Policy().Breaker, st.kcs)
	}
	if _, ok := h.Policy().Budget.(*fakeBudgetGroup); !ok {
		t.Fatalf("budget %T, want the store's group", h.Policy().Budget)
	}
	if st.built["breaker pay"] != 0 {
		t.Fatal("an unkeyed shared breaker was built for a keyed block")
	}
	retry.Run(kg.WithKey(context.Background(), "a"), h.Policy(), func(context.Context) error { return errDown })
	a := g.Get("a")
	if a.State() != breaker.Open || g.Get("b").State() != breaker.Closed {
		t.Fatal("the call keyed a did not open a's member only")
	}
	apply("4", "50") // an unrelated change
	if h.Policy().Breaker != g || g.Get("a") != a || st.built["breakers pay"] != 1 || st.closed["breakers pay"] != 0 {
		t.Fatalf("an unrelated reload rebuilt the group: built %v closed %v", st.built, st.closed)
	}
	apply("4", "60") // max_keys changed
	if h.Policy().Breaker == g || st.built["breakers pay"] != 2 || st.closed["breakers pay"] != 1 || st.kcs["breakers pay"].MaxKeys != 60 {
		t.Fatalf("max_keys changed: built %v closed %v", st.built, st.closed)
	}
	if st.closed["budgets pay"] != 0 {
		t.Fatal("the unchanged budget group was closed")
	}
	r.Close()
	if st.closed["breakers pay"] != 2 || st.closed["budgets pay"] != 1 {
		t.Fatalf("Close must stop the groups in force: closed %v", st.closed)
	}
}

// TestKeyedSharedNeedsKeyedStore: a shared block per key whose store is
// only a SharedStore is refused, naming the field and what is missing,
// and the parts built for the file are closed.
func TestKeyedSharedNeedsKeyedStore(t *testing.T) {
	st := &fakeStore{built: map[string]int{}, closed: map[string]int{}}
	r := NewRegistry(Options{Logger: discard, Shared: map[string]SharedStore{"redis": st}})
	defer r.Close()
	err := r.Apply(mustParse(t, "policies: {pay: {budget: {kind: ratio, shared: redis}, breaker: {kind: consecutive, shared: redis, per: host}}}"))
	if err == nil || !strings.Contains(err.Error(), "policies.pay.breaker.per") || !strings.Contains(err.Error(), "KeyedSharedStore") {
		t.Fatalf("got %v, want a refusal of policies.pay.breaker.per naming KeyedSharedStore", err)
	}
	if st.built["budget pay"] != 1 || st.closed["budget pay"] != 1 {
		t.Fatalf("the budget built for the refused file must be closed: built %v closed %v", st.built, st.closed)
	}
}
