//go:build !race

// The README's snippets run whole storms on the default downstream, and a
// line of their own (fullModel) would break the copy in README.md: like
// the tests marked fullModel, they are left out of the race detector's
// build and run by make test's sim-full job.

package simtest_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/simtest"
)

// paymentsPackage stands for a team's own package that builds its client
// policy, as the README's snippet calls it.
type paymentsPackage struct{}

func (paymentsPackage) NewPolicy(clk clock.Clock, src rand.Source) *retry.Policy {
	return &retry.Policy{
		MaxAttempts:    3,
		AttemptTimeout: time.Second,
		Backoff:        backoff.Exponential{Base: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full, Rand: src},
		Budget:         budget.NewRatio(budget.TenPercent()),
		Clock:          clk,
	}
}

var payments paymentsPackage

// The README's "In Go tests" snippets, compiled and run here so that they
// cannot drift (TestREADMESnippetsAreCompiled).
func TestPaymentsPolicySurvivesStorms(t *testing.T) {
	simtest.Check(t, simtest.Policy{Name: "payments", New: func(env sim.Env) *retry.Policy {
		return payments.NewPolicy(env.Clock, env.Rand) // one per client instance, on the virtual clock
	}}, simtest.Downstream{Workers: 24, Service: sim.Uniform(60*time.Millisecond, 100*time.Millisecond), Rate: 200},
		simtest.Gates{MaxAmplification: 2, Storms: map[string]simtest.Gates{simtest.StormErrors10: {MinSuccess: 0.85}}})
}

func TestReadmePolicyFileInGoTest(t *testing.T) {
	downstream := simtest.Downstream{Workers: 24, Service: sim.Uniform(60*time.Millisecond, 100*time.Millisecond), Rate: 200}
	gates := simtest.Gates{MaxAmplification: 2, Storms: map[string]simtest.Gates{simtest.StormErrors10: {MinSuccess: 0.85}}}
	pf, err := simtest.LoadPolicyFile("testdata/budgeted.yaml") // config.Parse, plus any downstream/gates sections
	if err != nil {
		t.Fatal(err)
	}
	reg := config.NewRegistry(config.Options{})
	if err := reg.Apply(pf.File); err != nil {
		t.Fatal(err)
	}
	simtest.Check(t, simtest.FromSpec(reg.Policy("budgeted").Spec()), downstream, gates)
}
