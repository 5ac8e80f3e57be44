package config

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// TestNestedRuleFromFile (issue #25 item 6): a policy's nested key sets
// retry.Policy.Nested, and rule budget builds Policy.NestedBudget from its
// budget spec; left out, the rule is one_layer (the core's safe default).
// A nested budget whose settings are unchanged survives a reload.
func TestNestedRuleFromFile(t *testing.T) {
	src := `
policies:
  plain: {max_attempts: 4, backoff: {strategy: constant, base: 0s}}
  inner: {max_attempts: 4, backoff: {strategy: constant, base: 0s}, nested: one_layer}
  edge: {max_attempts: 4, backoff: {strategy: constant, base: 0s}, nested: ignore}
  shared:
    max_attempts: 4
    backoff: {strategy: constant, base: 0s}
    nested:
      rule: budget
      budget: {kind: ratio, max_tokens: 2, initial_tokens: 2, retry_cost: 1, refill: 0.1}
`
	f := mustParse(t, src)
	want := map[string]retry.NestedRule{"plain": retry.NestedOneLayer, "inner": retry.NestedOneLayer, "edge": retry.NestedIgnore, "shared": retry.NestedBudget}
	for name, rule := range want {
		if got := f.Policies[name].Nested.Rule; got != rule {
			t.Errorf("%s: rule %v, want %v", name, got, rule)
		}
	}
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	shared := r.Policy("shared").Policy()
	if shared.Nested != retry.NestedBudget || shared.NestedBudget == nil {
		t.Fatalf("shared: Nested %v, NestedBudget %v", shared.Nested, shared.NestedBudget)
	}
	if _, ok := shared.NestedBudget.(*budget.Ratio); !ok || r.Policy("edge").Policy().NestedBudget != nil {
		t.Fatal("the nested budget is built only for rule budget, of its kind")
	}

	// Real calls made while serving a request whose caller retries.
	inbound := retry.WithInbound(context.Background(), retry.Inbound{Attempt: 1, Retries: true})
	fail := errors.New("connection reset")
	attempts := func(name string) (int, error) {
		n := 0
		err := retry.Run(inbound, r.Policy(name).Policy(), func(context.Context) error { n++; return fail })
		return n, err
	}
	if n, err := attempts("plain"); n != 1 || !errors.Is(err, retry.ErrNestedRetry) {
		t.Errorf("plain (one_layer by default): %d attempts, %v; want 1 and ErrNestedRetry", n, err)
	}
	if n, err := attempts("edge"); n != 4 || !errors.Is(err, retry.ErrAttemptsExhausted) {
		t.Errorf("edge (ignore): %d attempts, %v; want 4", n, err)
	}
	if n, _ := attempts("shared"); n < 2 || n > 3 {
		t.Errorf("shared (budget of 2 tokens): %d attempts, want the budget's retries and no more", n)
	}

	// An unchanged nested budget is kept across a reload; a changed one is not.
	kept := shared.NestedBudget
	r.Apply(mustParse(t, src+"operations: {x: plain}\n"))
	if r.Policy("shared").Policy().NestedBudget != kept {
		t.Error("an unchanged nested budget was rebuilt")
	}
	r.Apply(mustParse(t, `
policies:
  plain: {}
  inner: {}
  edge: {}
  shared: {nested: {rule: budget, budget: {kind: concurrency}}}
operations: {x: plain}
`))
	if nb := r.Policy("shared").Policy().NestedBudget; nb == kept || nb == nil {
		t.Error("a changed nested budget was kept")
	}
}
