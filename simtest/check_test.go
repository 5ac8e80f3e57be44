package simtest_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/simtest"
)

// recorder is a testing.TB that keeps what Check reports.
type recorder struct {
	testing.TB
	errors []string
	fatal  string
}

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// Check next to client code: a policy built in Go, one per client
// instance. Without a budget it fails the 1.5× gate at 50% failures; with
// a budget.Ratio of its own per instance it passes.
func TestCheckHelper(t *testing.T) {
	fullModel(t)
	newPolicy := func(withBudget bool) simtest.Policy {
		return simtest.Policy{Name: "client", New: func(env sim.Env) *retry.Policy {
			p := &retry.Policy{
				MaxAttempts:    4,
				AttemptTimeout: time.Second,
				Backoff:        backoff.Exponential{Base: 50 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full, Rand: env.Rand},
				Clock:          env.Clock,
			}
			if withBudget {
				p.Budget = budget.NewRatio(budget.TenPercent())
			}
			return p
		}}
	}
	gates := simtest.Gates{MaxAmplification: 1.5}

	rec := &recorder{TB: t}
	rep := simtest.Check(rec, newPolicy(false), simtest.Downstream{}, gates)
	if rec.fatal != "" || rep == nil {
		t.Fatalf("Check could not run: %s", rec.fatal)
	}
	found := false
	for _, e := range rec.errors {
		if strings.Contains(e, "client failed errors-50: peak amplification") {
			found = true
		}
	}
	if !found {
		t.Fatalf("no budget: Check reported %q", rec.errors)
	}

	rec = &recorder{TB: t}
	simtest.Check(rec, newPolicy(true), simtest.Downstream{}, gates)
	if rec.fatal != "" || len(rec.errors) > 0 {
		t.Fatalf("budget: Check reported %q %s", rec.errors, rec.fatal)
	}

	// A downstream Check cannot model is a t.Fatalf.
	rec = &recorder{TB: t}
	if simtest.Check(rec, newPolicy(true), simtest.Downstream{Workers: -1}, gates) != nil || !strings.Contains(rec.fatal, "workers must be") {
		t.Fatalf("bad downstream: fatal %q", rec.fatal)
	}
}

// The same policy loaded from the service's file and built in Go meets
// the same workload: the file's settings are the ones simulated (here its
// attempt limit: at most 4 attempts per call at 50% failures, where an
// unlimited policy keeps going).
func TestFromFileSettings(t *testing.T) {
	fullModel(t)
	f, err := config.Parse("p.yaml", []byte(`policies:
  four: {max_attempts: 4, backoff: {strategy: constant, base: 10ms}}
  one: {max_attempts: 1}
  default3: {backoff: {strategy: constant, base: 10ms}}
operations:
  one: four
`))
	if err != nil {
		t.Fatal(err)
	}
	pols, err := simtest.FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	// Capacity to spare (3,000/s against 600/s offered), so that every
	// retry is served and the closed form holds.
	rep, err := simtest.Run(t.Context(), pols, simtest.Downstream{Workers: 60}, simtest.Gates{MaxRecovery: simtest.NoRecoveryLimit}, simtest.Options{Storms: []string{simtest.StormErrors50}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, p := range rep.Policies {
		got[p.Policy] = p.Storms[0].StormAttemptsPerCall
	}
	// Attempts per call at failure share 0.5 with limit n: 1 + 0.5 + ... + 0.5^(n-1).
	// The operation named "one" does not stand in for the policy "one".
	// Since the simulator's common random numbers (model version 2) the
	// measured figures sit 3–6% below the closed form (1.70 and 1.78):
	// about one retry in fifteen of a failed first attempt is served
	// after the storm, which the closed form does not count. The limits
	// still tell 1, 3 and 4 attempts apart.
	want := map[string]float64{"one": 1, "default3": 1.75, "four": 1.875}
	for name, w := range want {
		if g := got[name]; g < w-0.12 || g > w+0.05 {
			t.Errorf("%s: %.3f attempts per call during the storm, want about %.3f", name, g, w)
		}
	}
}

// FromSpec: one policy of a file, as Handle.Spec gives it, checked with
// Check.
func TestFromSpec(t *testing.T) {
	fullModel(t)
	pf, err := simtest.LoadPolicyFile("testdata/infile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := config.NewRegistry(config.Options{})
	if err := reg.Apply(pf.File); err != nil {
		t.Fatal(err)
	}
	spec := reg.Policy("charge-card").Spec()
	p := simtest.FromSpec(spec)
	if p.Name != "budgeted" {
		t.Fatalf("name %q", p.Name)
	}
	d, g := pf.Sections.Downstream, pf.Sections.Gates
	rec := &recorder{TB: t}
	rep := simtest.Check(rec, p, d, g)
	if rec.fatal != "" || len(rec.errors) > 0 || !rep.Pass {
		t.Fatalf("budgeted with the file's downstream and gates: %q %s", rec.errors, rec.fatal)
	}
	rec = &recorder{TB: t}
	simtest.Check(rec, simtest.FromSpec(reg.Policy("get-profile").Spec()), d, g)
	if len(rec.errors) == 0 || !strings.Contains(strings.Join(rec.errors, "\n"), "nobudget failed errors-50: peak amplification") {
		t.Fatalf("nobudget: %q", rec.errors)
	}
}

// Issue 34 item 13: Check could not choose the storms, the trials or the
// seed; an Options chooses all three.
func TestCheckChoosesStormsTrialsAndSeed(t *testing.T) {
	p := simtest.Policy{Name: "client", New: func(env sim.Env) *retry.Policy {
		return &retry.Policy{MaxAttempts: 2, Backoff: backoff.Constant{Interval: 100 * time.Millisecond}, Clock: env.Clock,
			Budget: budget.NewRatio(budget.TenPercent())}
	}}
	rec := &recorder{TB: t}
	rep := simtest.Check(rec, p, simtest.Downstream{}, simtest.Gates{}, simtest.Options{Storms: []string{simtest.StormErrors10}, Trials: 4, Seed: 7})
	if rec.fatal != "" || rep == nil {
		t.Fatalf("Check could not run: %s", rec.fatal)
	}
	if len(rep.Storms) != 1 || rep.Storms[0].Name != simtest.StormErrors10 || rep.Trials != 4 || rep.Seed != 7 {
		t.Fatalf("storms %v, trials %d, seed %d; want errors-10, 4, 7", rep.Storms, rep.Trials, rep.Seed)
	}
	if tr := rep.Policies[0].Storms[0].Trials; len(tr) != 4 || tr[0].Seed != 7 {
		t.Errorf("trials %+v", tr)
	}
	// Without Options: every storm, the default trials, seed 1.
	rec = &recorder{TB: t}
	rep = simtest.Check(rec, p, simtest.Downstream{}, simtest.Gates{}, simtest.Options{Storms: []string{simtest.StormErrors10}})
	if rep == nil || rep.Seed != 1 || rep.Trials != simtest.DefaultTrials {
		t.Fatalf("zero Options: %+v", rep)
	}
	rec = &recorder{TB: t}
	if simtest.Check(rec, p, simtest.Downstream{}, simtest.Gates{}, simtest.Options{}, simtest.Options{}); rec.fatal == "" {
		t.Error("two Options accepted")
	}
}
