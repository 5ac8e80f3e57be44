package live_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/stormguard/stormguard/live"
)

// Example_readme is the README's "From a program" snippet, compiled so
// that it cannot drift (TestREADMESnippetsAreCompiled). It is not run: it
// takes 30 s of real traffic.
func Example_readme() {
	ctx := context.Background()
	sc, _ := live.Lookup("gateway-restart")
	rep, err := live.Run(ctx, sc, live.Options{Clients: 500, Duration: 20 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range rep.Tables {
		fmt.Println(t.Title) // sim.Table values: the stormsim printers draw them
	}
	simRep := rep.Sim() // the same numbers as a *sim.Report (JSON, HTML charts)
	row, _ := rep.Row("full+budget")
	fmt.Println(row.Metrics.Amplification, // sim.Metrics, measured on the wire
		row.Extra.Wasted.WastedS,                 // handler time after the caller gave up
		row.Extra.Duplicates.MaxConcurrentPerKey, // executions of one key at once
		row.Extra.Entry.Rising,                   // first attempts still rising after errors began
		len(simRep.Cases))
}

// Example_cascade is the README's cascade snippet (issue #20), compiled
// so that it cannot drift. It is not run: it takes 3 s of real traffic.
func Example_cascade() {
	ctx := context.Background()
	rep, err := live.RunCascade(ctx, live.CascadeOptions{Clients: 20, Duration: 3 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	rep.WriteTo(os.Stdout) // the table below
	naive, _ := rep.Row(live.CascadeNaive)
	fmt.Println(naive.Amplification[2], // requests at the bottom per call during the outage
		naive.FaultSuccess, naive.P99)
}

// Example_slowdownHedging is the README's slowdown-hedging snippet (issue #22), compiled
// so that it cannot drift. It is not run: it takes 3 s of real traffic.
func Example_slowdownHedging() {
	ctx := context.Background()
	rep, err := live.RunSlowdownHedging(ctx, live.SlowdownHedgingOptions{Clients: 20, Duration: 3 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	rep.WriteTo(os.Stdout) // the table below
	h, _ := rep.Row(live.SlowdownHedge)
	b, _ := rep.Row(live.SlowdownHedgeBudget)
	fmt.Println(h.SlowLoad, b.SlowLoad) // requests per call during the slowdown: about 2 and 1.1
}

// Example_badHost is the README's bad-host snippet (issue #37), compiled
// so that it cannot drift. It is not run: it takes 7 s of real traffic.
func Example_badHost() {
	ctx := context.Background()
	rep, err := live.RunBadHost(ctx, live.BadHostOptions{Scale: 0.1}) // 7s: host 0 down from 2s to 5s
	if err != nil {
		log.Fatal(err)
	}
	rep.WriteTo(os.Stdout)
	shared, _ := rep.Row("shared-breaker")
	perHost, _ := rep.Row("per-host-breaker")
	fmt.Println(shared.Healthy.Success(), perHost.Healthy.Success(), // the healthy hosts during the outage
		perHost.Bad.AttemptsPerCall(), // the bad host, isolated
		perHost.Virtual.Healthy.Success(), rep.Verdict())
}

// Example_overload is the README's server-side snippet (issue #38),
// compiled so that it cannot drift. It is not run: it takes 80 s of real
// traffic.
func Example_overload() {
	ctx := context.Background()
	rep, err := live.RunOverload(ctx, live.OverloadOptions{Scenario: live.FailAtScaleScenario})
	if err != nil {
		log.Fatal(err)
	}
	rep.WriteTo(os.Stdout)
	kase := rep.Cases[0].Case.Name
	codel, _ := rep.Row(kase, "codel+lifo")
	fmt.Println(codel.Stats.GoodputShare, codel.Stats.WaitP50ms, // live
		codel.Virtual.Stats.GoodputShare, codel.Virtual.Stats.WaitP50ms, // sim.RunOverload, same parameters
		rep.Verdict())
}
