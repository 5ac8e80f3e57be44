package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

// The simulator's layer rule (Policy.LayerRule, AnnouncesRetry) is the
// core's: for every inbound fact, attempt limit and rule, the real
// retry.Call makes the attempts the simulator makes and announces, on
// each attempt, what AnnouncesRetry says.
func TestLayerRuleMatchesRetryCall(t *testing.T) {
	errFail := errors.New("fail")
	for _, rule := range []retry.NestedRule{retry.NestedOneLayer, retry.NestedIgnore} {
		for _, limit := range []int{1, 2, 4} {
			for _, in := range []struct {
				set bool
				in  retry.Inbound
			}{{false, retry.Inbound{}}, {true, retry.Inbound{Attempt: 1}}, {true, retry.Inbound{Attempt: 1, Retries: true}},
				{true, retry.Inbound{Attempt: 3}}, {true, retry.Inbound{Attempt: 4, Retries: false}}} {
				name := fmt.Sprintf("%v/max%d/%+v/%v", rule, limit, in.in, in.set)
				ctx := context.Background()
				if in.set {
					ctx = retry.WithInbound(ctx, in.in)
				}
				inRetries := in.set && (in.in.Retries || in.in.Attempt > 1)
				p := &retry.Policy{MaxAttempts: limit, Nested: rule, Backoff: backoff.Constant{}}
				c := retry.NewCall(ctx, p)
				attempts := 0
				for {
					a, err := c.Begin()
					if err != nil {
						t.Fatalf("%s: Begin: %v", name, err)
					}
					attempts++
					if got, want := c.WillRetry(), AnnouncesRetry(a.N, limit, inRetries); got != want {
						t.Errorf("%s: attempt %d: retry.Call announces %v, sim %v", name, a.N, got, want)
					}
					if _, err := c.Next(c.End(&a, errFail)); err != nil {
						break
					}
				}
				want := limit // the simulator's count
				if rule == retry.NestedOneLayer && inRetries {
					want = 1 // Policy.LayerRule
				}
				if attempts != want {
					t.Errorf("%s: retry.Call made %d attempts, the simulator's rule %d", name, attempts, want)
				}
			}
		}
	}
}

// The cascade with the guard (issue 20), every call meeting a database
// down for the whole run: retries at every tier multiply to 4³ = 64 at
// the database; the layer rule leaves retrying to the users, 4 attempts
// reaching every tier; the layer rule, the marker and a 10% budget hold
// every tier at most 1.5x.
func TestCascadeGuardClosedForms(t *testing.T) {
	fullModel(t)
	m, vs := cascadeTotal(t)
	for _, c := range []struct {
		policy string
		want   []float64 // attempts per call at edge, service, database
		tol    float64
	}{
		{"retry-every-tier", []float64{4, 16, 64}, 0},
		{PolicyLayerRule, []float64{4, 4, 4}, 0},
		{PolicyLayerGuard, []float64{1.5, 1.5, 1.5}, -1}, // at most
	} {
		res, err := Run(&m, vs[c.policy], 11)
		if err != nil {
			t.Fatal(err)
		}
		got := res.Metrics.FaultTierAttemptsPerCall
		if got.Len() != 3 || res.Metrics.Calls < 1000 {
			t.Fatalf("%s: %d tiers measured, %v calls", c.policy, got.Len(), res.Metrics.Calls)
		}
		for i, w := range c.want {
			if c.tol < 0 && (got.At(i) > w || got.At(i) < 1) || c.tol >= 0 && got.At(i) != w {
				t.Errorf("%s: tier %d: %.3f attempts per call, want %v (%s)", c.policy, i, got.At(i), w, map[bool]string{true: "at most", false: "exactly"}[c.tol < 0])
			}
		}
		if got.At(2) != res.Metrics.FaultAttemptsPerCall {
			t.Errorf("%s: by-tier database %.3f, in fault %.3f: want the same", c.policy, got.At(2), res.Metrics.FaultAttemptsPerCall)
		}
	}
}

// The overload marker: a database that sheds with the marker (no queue,
// every worker busy) stops every retry at every tier, and the marker
// travels up, where the same shedding without it is retried by every
// hop.
func TestOverloadMarkerStopsRetriesAtEveryTier(t *testing.T) {
	m := Model{
		Clients: 20, Arrival: Arrival{Kind: Poisson, Rate: 10}, Duration: 10 * time.Second, Drain: 5 * time.Second,
		Tiers: []Tier{
			{Name: "edge", Latency: Const(time.Millisecond), Service: Const(time.Millisecond)},
			{Name: "service", Latency: Const(time.Millisecond), Service: Const(time.Millisecond)},
			// Workers 0 of Queue -1 would never shed: a tier that is full.
			{Name: "database", Workers: 1, Queue: -1, Latency: Const(time.Millisecond), Service: Const(time.Hour)},
		},
		Faults: []Fault{{Kind: FaultErrors, Tier: 0, Start: time.Second, End: 2 * time.Second, Prob: 1e-9}},
	}
	mk := func(marker bool) Variant {
		v := Variant{Name: "v"}
		for range 3 {
			v.Policies = append(v.Policies, Policy{Name: "v", MaxAttempts: 4, AttemptTimeout: 2 * time.Hour})
		}
		v.Policies[2].OverloadMarker = marker
		return v
	}
	plain, err := Run(&m, mk(false), 3)
	if err != nil {
		t.Fatal(err)
	}
	marked, err := Run(&m, mk(true), 3)
	if err != nil {
		t.Fatal(err)
	}
	// Every call but the first one ever is shed by the full database.
	if got := marked.Metrics.FaultTierAttemptsPerCall; got.At(0) != 1 || got.At(1) != 1 || got.At(2) != 1 {
		t.Errorf("with the marker: %v attempts per call by tier, want 1/1/1", got.Slice())
	}
	if got := plain.Metrics.FaultTierAttemptsPerCall; got.At(2) != 64 {
		t.Errorf("without the marker: %v attempts per call by tier, want 64 at the database", got.Slice())
	}
}

// In the partial case (the database at half its workers sheds from a
// full queue) the guard recovers where the layer rule alone stays stuck,
// and keeps the database's multiplier near the budget's 1.1.
func TestCascadeGuardRecoversFromThePartialFault(t *testing.T) {
	fullModel(t)
	if testing.Short() {
		t.Skip("runs the cascade's partial case")
	}
	rep := runScenario(t, "cascade", Options{Seed: 1, Policies: []string{PolicyLayerRule, PolicyLayerGuard}})
	partial := rep.Cases[0]
	layer, guard := row(t, partial, PolicyLayerRule), row(t, partial, PolicyLayerGuard)
	if layer.Recovered != 0 || guard.Recovered != 1 {
		t.Errorf("recovered: layer-rule %v, guard %v: want stuck and recovered", layer.Recovered, guard.Recovered)
	}
	if g := guard.FaultAttemptsPerCall; g > 1.5 || math.Abs(layer.FaultAttemptsPerCall-4) > 0.2 {
		t.Errorf("in fault: guard %.2f (want at most 1.5), layer-rule %.2f (want about 4)", g, layer.FaultAttemptsPerCall)
	}
	if guard.Goodput < 2*layer.Goodput {
		t.Errorf("goodput: guard %.0f/s, layer-rule %.0f/s: want the guard far ahead", guard.Goodput, layer.Goodput)
	}
}
