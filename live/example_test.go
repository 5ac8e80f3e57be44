package live_test

import (
	"context"
	"fmt"
	"time"

	"github.com/stormguard/stormguard/live"
	"github.com/stormguard/stormguard/sim"
)

// A live run of a scenario of your own: four clients calling a server on
// 127.0.0.1 once each, through httpretry with the simulator's "full"
// policy.
func ExampleRun() {
	sc := live.Scenario{
		Name:     "hello",
		Clients:  4,
		Arrival:  sim.Arrival{Kind: sim.Periodic, Interval: 200 * time.Millisecond},
		Duration: 200 * time.Millisecond,
		Server:   live.Server{Service: sim.Const(5 * time.Millisecond)},
		Policies: []string{"full-jitter"},
	}
	rep, err := live.Run(context.Background(), sc, live.Options{Seed: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, row := range rep.Rows {
		e := row.Extra
		fmt.Printf("%s: %.0f calls, %.0f succeeded; %d attempts sent, %d received; %d keys executed\n",
			row.Policy, row.Metrics.Calls, row.Metrics.Succeeded, e.ClientSent, e.ServerAttempts, e.Duplicates.Keys)
	}
	// Output:
	// full: 4 calls, 4 succeeded; 4 attempts sent, 4 received; 4 keys executed
}

// The built-in scenarios, and how to run one from a program (the stormsim
// command's "live" subcommand does the same).
func ExampleLookup() {
	// sc, _ := live.Lookup("gateway-restart")
	// rep, err := live.Run(ctx, sc, live.Options{Clients: 500, Duration: 20 * time.Second})
	for _, name := range live.Names() {
		sc, _ := live.Lookup(name)
		fmt.Printf("%s: %d clients, %s, capacity %.0f/s\n", sc.Name, sc.Clients, sc.Duration, sc.CapacityPerS())
	}
	// Output:
	// gateway-restart: 500 clients, 20s, capacity 380/s
	// slow-downstream: 100 clients, 15s, capacity 150/s
}
