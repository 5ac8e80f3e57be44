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

// Example_brownout is the README's brownout snippet (issue #22), compiled
// so that it cannot drift. It is not run: it takes 3 s of real traffic.
func Example_brownout() {
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
