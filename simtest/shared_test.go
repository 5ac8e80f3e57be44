package simtest_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/simtest"
)

// A breaker or ratio budget marked shared: NAME (the fleet's state, a
// Redis store in production) made FromFile refuse the file ("no shared
// store"), so check exited 2 on a file the service loads. Each run's
// client instances now share one breaker and one budget, and no state
// crosses from one run to another.
func TestSharedBreakerAndBudgetAreTheFleets(t *testing.T) {
	const file = "policies:\n  fleet:\n    max_attempts: 3\n    budget: {kind: ratio, preset: ten_percent, shared: redis}\n" +
		"    breaker: {kind: consecutive, failures: 5, open_timeout: 1s, shared: redis}\n"
	f, err := config.Parse("shared.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := simtest.FromFile(f)
	if err != nil {
		t.Fatalf("FromFile: %v", err)
	}
	run1, run2 := clocktest.NewFake(), clocktest.NewFake()
	a := ps[0].New(sim.Env{Clock: run1, Rand: rand.NewPCG(1, 2)})
	b := ps[0].New(sim.Env{Clock: run1, Rand: rand.NewPCG(3, 4)})
	c := ps[0].New(sim.Env{Clock: run2, Rand: rand.NewPCG(5, 6)})
	if a.Budget == nil || a.Breaker == nil {
		t.Fatalf("no budget or breaker: %+v", a)
	}
	if a.Budget != b.Budget || a.Breaker != b.Breaker {
		t.Error("two client instances of one run have budgets or breakers of their own")
	}
	if a.Budget == c.Budget || a.Breaker == c.Breaker {
		t.Error("two runs share a budget or breaker")
	}
	path := writeFile(t, "shared.yaml", file)
	if code, _, errs := run(t, "--storms", "errors-10", path); code == simtest.ExitUsage || strings.Contains(errs, "not checked") {
		t.Errorf("check: exit %d\n%s", code, errs)
	}
}
