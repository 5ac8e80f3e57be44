package simtest_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
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

// TestSharedPerKeyPartsAreTheFleets (sweep, file forms): a shared breaker
// or budget split per key (shared: NAME with per: host), which the
// service loads through a KeyedSharedStore (redisstore's), made FromFile
// refuse the file ("does not split shared parts per key"), so check
// exited 2 on it. Each run's instances now share one group of each, and
// runs share nothing.
func TestSharedPerKeyPartsAreTheFleets(t *testing.T) {
	const file = "policies:\n  fleet:\n    max_attempts: 3\n    budget: {kind: ratio, preset: ten_percent, shared: redis, per: host}\n" +
		"    breaker: {kind: consecutive, failures: 5, open_timeout: 1s, shared: redis, per: host, max_keys: 50}\n"
	f, err := config.Parse("keyed.yaml", []byte(file))
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
	if _, ok := a.Breaker.(retry.BreakerGroup); !ok {
		t.Fatalf("breaker %T, want a group per key", a.Breaker)
	}
	if _, ok := a.Budget.(retry.BudgetGroup); !ok {
		t.Fatalf("budget %T, want a group per key", a.Budget)
	}
	if a.Budget != b.Budget || a.Breaker != b.Breaker {
		t.Error("two client instances of one run have groups of their own")
	}
	if a.Budget == c.Budget || a.Breaker == c.Breaker {
		t.Error("two runs share a group")
	}
	path := writeFile(t, "keyed.yaml", file)
	if code, _, errs := run(t, "--storms", "errors-10", path); code == simtest.ExitUsage || strings.Contains(errs, "not checked") {
		t.Errorf("check: exit %d\n%s", code, errs)
	}
}
