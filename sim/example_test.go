package sim_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/sim"
)

// Run one model with two policies: a server that fails 30% of attempts.
// Three immediate retries turn 70% success into 1-0.3⁴ ≈ 99%, for
// 1+0.3+0.09+0.027 ≈ 1.42 attempts per call; a 10% token bucket keeps the
// load near 1.1, for a little more than the 70% no retry would give.
func ExampleRun() {
	m := sim.Model{
		Clients:  50,
		Arrival:  sim.Arrival{Kind: sim.Poisson, Rate: 20},
		Duration: 60 * time.Second,
		Tiers:    []sim.Tier{{Name: "api", FailProb: 0.3, Latency: sim.Exp(5 * time.Millisecond)}},
	}
	retries := sim.Policy{Name: "3 retries", MaxAttempts: 4}
	bucket := sim.Policy{Name: "3 retries, 10% budget", MaxAttempts: 4, Budget: sim.RatioBudget(budget.TenPercent())}
	for _, p := range []sim.Policy{retries, bucket} {
		r, err := sim.Run(&m, sim.Single(p), 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("%-22s success %.0f%%, %.2f attempts per call\n", p.Name, 100*r.Metrics.SuccessRate, r.Metrics.AttemptsPerCall)
	}
	// Output:
	// 3 retries              success 99%, 1.41 attempts per call
	// 3 retries, 10% budget  success 76%, 1.08 attempts per call
}

// The AWS contention model: 50 clients racing to update one row.
func ExampleRunOCC() {
	sc, _ := sim.Lookup("aws-occ")
	rep, err := sc.Run(context.Background(), sim.Options{Seed: 1, Trials: 50, Clients: 50, Policies: []string{"no-jitter", "full"}})
	if err != nil {
		panic(err)
	}
	main := rep.Cases[0]
	for _, row := range main.Rows {
		fmt.Printf("%-12s %.1f calls per client\n", row.Policy, row.OCC.CallsPerClient)
	}
	// Output:
	// exponential  12.4 calls per client
	// full         6.6 calls per client
}

// Measure a run recorded elsewhere (a load test, a replayed log) by the
// simulator's definitions: 10s of 100ms buckets at 100 attempts/s, with
// 30 retries in one bucket during a 1s outage at t=5s.
func ExampleRecording() {
	rec := sim.NewRecording(100*time.Millisecond, 100)
	for b := range rec.Len() {
		rec.Attempts[b], rec.CallsOK[b], rec.AttemptsOK[b] = 10, 10, 10
	}
	b := rec.Index(5 * time.Second)
	rec.Attempts[b], rec.Retries[b] = 40, 30
	rec.AttemptsOK[b], rec.AttemptsFailed[b] = 10, 30
	rec.Calls = 1000

	m := rec.Metrics(time.Second, 10*time.Second, []sim.Fault{{Kind: sim.FaultUnavailable, Start: 5 * time.Second, End: 6 * time.Second}})
	fmt.Printf("baseline %.0f/s, peak %.0f/s (%.1fx), %.2f attempts per call, %.0f%% of retries in a spike\n",
		m.BaselineLoad, m.PeakLoad, m.Amplification, m.AttemptsPerCall, 100*m.SyncShare)
	t := sim.MetricsTable("one run", []sim.Column{mustColumn("amp"), mustColumn("apc"), mustColumn("recovery")},
		[]sim.Row{{Policy: "recorded", Metrics: &m}})
	t.WriteTo(os.Stdout)
	// Output:
	// baseline 100/s, peak 130/s (1.3x), 1.03 attempts per call, 100% of retries in a spike
	// one run
	// policy    peak×  att/call  recovery
	// -----------------------------------
	// recorded   1.3x      1.03      0.0s
}

func mustColumn(key string) sim.Column {
	c, ok := sim.LookupColumn(key)
	if !ok {
		panic("no column " + key)
	}
	return c
}
