package simtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/simtest"
	"github.com/stormguard/stormguard/throttle"
)

// An aws_adaptive limiter without max_elapsed (testdata/suite's
// limiter-adaptive.yaml) blocked the run for ever: its Acquire waited on
// a timer of the virtual clock that nothing advanced while the run
// waited. A throttle.Adaptive built in Go hung likewise; it is asked
// never to wait.
func TestAdaptiveLimiterWithoutMaxElapsedDoesNotHang(t *testing.T) {
	fullModel(t)
	pf, err := simtest.LoadPolicyFile("testdata/suite/limiter-adaptive.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policies, err := simtest.FromFile(pf.File)
	if err != nil {
		t.Fatal(err)
	}
	goBuilt := simtest.Policy{Name: "go-adaptive", New: func(env sim.Env) *retry.Policy {
		return &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{Interval: 10 * time.Millisecond}, Clock: env.Clock,
			Limiter: throttle.NewAdaptive(throttle.AdaptiveConfig{Clock: env.Clock, Throttled: sim.IsSimOverload})}
	}}
	rep, err := simtest.Run(context.Background(), append(policies, goBuilt), simtest.Downstream{}, simtest.Gates{},
		simtest.Options{Seed: 1, Storms: []string{simtest.StormOutage, simtest.StormThrottle}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(rep.Policies); n != len(policies)+1 {
		t.Fatalf("%d policies reported", n)
	}
}

// A preset's backoff (awsretry.Rules) drew its jitter from math/rand's
// generator, not the run's seeded source: the same seed gave different
// reports for testdata/suite/preset.yaml.
func TestPresetBackoffIsSeeded(t *testing.T) {
	fullModel(t)
	var outs []string
	for range 2 {
		code, out, errs := run(t, "--json", "--storms", "outage,errors-50", "testdata/suite/preset.yaml")
		if code == simtest.ExitUsage {
			t.Fatalf("exit 2\n%s", errs)
		}
		outs = append(outs, out)
	}
	if outs[0] != outs[1] {
		t.Error("the same seed gave two reports")
	}
}
