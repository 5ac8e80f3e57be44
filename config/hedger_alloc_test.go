package config

import (
	"testing"

	"github.com/stormguard/stormguard/hedge"
)

// TestHedgerWithoutHedgeBlockDoesNotAllocate: a policy without hedge:
// gives the same no-hedge Hedger on every call, so an interceptor that asks
// per call (to follow reloads) pays nothing for it.
func TestHedgerWithoutHedgeBlockDoesNotAllocate(t *testing.T) {
	f := mustParse(t, "policies: {a: {max_attempts: 2}}\noperations: {op: a}\n")
	r := NewRegistry(Options{Logger: discard})
	if err := r.Apply(f); err != nil {
		t.Fatal(err)
	}
	for _, h := range []*Handle{r.Policy("op"), r.Policy("unknown-operation")} {
		if hd := h.Hedger(); hd == nil || hd.MaxHedges != hedge.NoHedges || h.Hedger() != hd {
			t.Fatalf("Hedger() = %+v, want one no-hedge Hedger", hd)
		}
		if n := testing.AllocsPerRun(100, func() { _ = h.Hedger() }); n != 0 {
			t.Errorf("Hedger() allocates %v times per call", n)
		}
	}
}
