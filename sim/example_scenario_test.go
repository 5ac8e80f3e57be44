//go:build !race

// The example runs the whole metastable scenario: like the tests marked
// fullModel, it is left out of the race detector's build and run by make
// test's sim-full job.

package sim_test

import (
	"context"
	"fmt"

	"github.com/stormguard/stormguard/sim"
)

// Run a built-in scenario and print its table.
func ExampleScenario_Run() {
	sc, _ := sim.Lookup("metastable")
	rep, err := sc.Run(context.Background(), sim.Options{Seed: 1, Policies: []string{"no-retry", "immediate", "full+budget"}})
	if err != nil {
		panic(err)
	}
	for _, row := range rep.Cases[0].Rows {
		state := "recovered"
		if row.Metrics.Recovered == 0 {
			state = "stuck"
		}
		fmt.Printf("%-12s %.2f attempts per call, %s\n", row.Policy, row.Metrics.AttemptsPerCall, state)
	}
	// Output:
	// no-retry     1.00 attempts per call, recovered
	// immediate    3.49 attempts per call, stuck
	// full+budget  1.00 attempts per call, recovered
}
