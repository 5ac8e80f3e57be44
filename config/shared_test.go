package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// fakeStore is a SharedStore counting what it built and closed.
type fakeStore struct {
	built, closed map[string]int
	refuse        error
}

type fakeShared struct {
	retry.Breaker
	retry.Budget
	name string
}

func (s *fakeStore) SharedBreaker(name string, c breaker.Config) (retry.Breaker, func(), error) {
	if s.refuse != nil {
		return nil, nil, s.refuse
	}
	s.built["breaker "+name]++
	return &fakeShared{Breaker: breaker.New(c), name: name}, func() { s.closed["breaker "+name]++ }, nil
}

func (s *fakeStore) SharedBudget(name string, c budget.RatioConfig) (retry.Budget, func(), error) {
	s.built["budget "+name]++
	return &fakeShared{Budget: budget.NewRatio(c), name: name}, func() { s.closed["budget "+name]++ }, nil
}

// TestSharedPartsFromFile (issue #32 item 13): breaker and budget blocks
// marked shared: NAME are built by the SharedStore Options.Shared names,
// kept across reloads that leave their settings alone, closed when
// dropped, when their file is not applied, and by Registry.Close; a file
// naming an unknown store, or one the store refuses, is rejected with the
// field named.
func TestSharedPartsFromFile(t *testing.T) {
	st := &fakeStore{built: map[string]int{}, closed: map[string]int{}}
	r := NewRegistry(Options{Logger: discard, Shared: map[string]SharedStore{"redis": st}})
	apply := func(src string) error { return r.Apply(mustParse(t, src)) }
	const base = "policies: {pay: {max_attempts: %s, breaker: {kind: consecutive, failures: 5, shared: redis}, budget: {kind: ratio, preset: ten_percent, shared: redis}}}"
	if err := apply(strings.Replace(base, "%s", "3", 1)); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("pay")
	brk, bud := h.Policy().Breaker, h.Policy().Budget
	if b, ok := brk.(*fakeShared); !ok || b.name != "pay" {
		t.Fatalf("breaker %T, want the store's, named after the policy", brk)
	}
	if _, ok := bud.(*fakeShared); !ok {
		t.Fatalf("budget %T, want the store's", bud)
	}
	// A reload that changes other settings keeps the fleet parts.
	if err := apply(strings.Replace(base, "%s", "4", 1)); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Breaker != brk || h.Policy().Budget != bud || st.built["breaker pay"] != 1 || st.closed["breaker pay"] != 0 {
		t.Fatalf("an unrelated reload rebuilt the shared parts: built %v closed %v", st.built, st.closed)
	}
	// An unknown store refuses the file, naming the field.
	err := apply("policies: {pay: {breaker: {kind: consecutive, shared: memcached}}}")
	if err == nil || !strings.Contains(err.Error(), "policies.pay.breaker.shared") || !strings.Contains(err.Error(), `"memcached"`) {
		t.Fatalf("unknown store: %v", err)
	}
	// A store's refusal refuses the file, and the parts built for it are closed.
	st.refuse = errors.New("count windows cannot run in Redis")
	err = apply("policies: {pay: {budget: {kind: ratio, shared: redis, max_tokens: 50}, breaker: {kind: count_window, calls: 10, shared: redis}}}")
	if err == nil || !strings.Contains(err.Error(), "policies.pay.breaker") || !strings.Contains(err.Error(), "count windows") {
		t.Fatalf("refused by the store: %v", err)
	}
	if st.built["budget pay"] != 2 || st.closed["budget pay"] != 1 {
		t.Fatalf("the budget built for the refused file must be closed: built %v closed %v", st.built, st.closed)
	}
	st.refuse = nil
	if h.Policy().Breaker != brk || h.Policy().Budget != bud {
		t.Fatal("a refused file changed the parts in force")
	}
	// Settings changed: a new part under the same name, the old one closed.
	if err := apply("policies: {pay: {breaker: {kind: consecutive, failures: 9, shared: redis}, budget: {kind: ratio, preset: ten_percent, shared: redis}}}"); err != nil {
		t.Fatal(err)
	}
	if h.Policy().Breaker == brk || st.closed["breaker pay"] != 1 || h.Policy().Budget != bud {
		t.Fatalf("changed breaker: built %v closed %v", st.built, st.closed)
	}
	if _, err := Parse("p.yaml", []byte("policies: {a: {budget: {kind: window, shared: redis}}}")); err == nil || !strings.Contains(err.Error(), "does not apply to kind window") {
		t.Fatalf("shared window budget: %v", err)
	}
	r.Close()
	if st.closed["breaker pay"] != 2 || st.closed["budget pay"] != 2 {
		t.Fatalf("Close must stop the shared parts in force: closed %v", st.closed)
	}
	if err := apply(strings.Replace(base, "%s", "2", 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Apply after Close: %v", err)
	}
	r.Close() // again: nothing
}

// TestPanickingClassifyDuringReload: Options.Classify (or a SharedStore)
// panicking while a file is built is handled like a panicking watch hook:
// nothing applied, the parts built for the file closed, counted as
// rejected, the panic re-raised from Apply.
func TestPanickingClassifyDuringReload(t *testing.T) {
	st := &fakeStore{built: map[string]int{}, closed: map[string]int{}}
	var armed bool
	r := NewRegistry(Options{Logger: discard, Shared: map[string]SharedStore{"redis": st},
		Classify: func(s *PolicySpec) func(error) bool {
			if armed && s.Name == "b" {
				panic("classify exploded")
			}
			return nil
		}})
	if err := r.Apply(mustParse(t, "policies: {a: {max_attempts: 2}, b: {}}")); err != nil {
		t.Fatal(err)
	}
	h := r.Policy("a")
	armed = true
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Apply did not re-raise Classify's panic")
			}
		}()
		r.Apply(mustParse(t, "policies: {a: {max_attempts: 5, breaker: {kind: consecutive, shared: redis}}, b: {}}"))
	}()
	if h.Policy().MaxAttempts != 2 || h.Policy().Breaker != nil {
		t.Fatalf("a panicking Classify left attempts=%d breaker=%v in force", h.Policy().MaxAttempts, h.Policy().Breaker)
	}
	if st.built["breaker a"] != 1 || st.closed["breaker a"] != 1 {
		t.Fatalf("the shared breaker built for the file must be closed: built %v closed %v", st.built, st.closed)
	}
	if _, rejected := r.Stats(); rejected != 1 {
		t.Fatalf("rejected %d, want 1", rejected)
	}
}
