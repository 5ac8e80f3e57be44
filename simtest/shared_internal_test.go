package simtest

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/config"
)

// liveStores returns the number of runs whose shared store stores holds.
func liveStores(fs *fleetStores) int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return len(fs.runs)
}

// TestFleetStoresDropFinishedRuns (review): the shared store of a run
// (fleetStores.runs, one per run's clock) is let go when the run ends, so
// that N runs of a policy with shared: parts hold no store once done,
// however large N. (Before: every finished run's store, and the run's
// clock and parts with it, stayed for as long as the policy.)
func TestFleetStoresDropFinishedRuns(t *testing.T) {
	const file = "policies:\n  fleet:\n    max_attempts: 3\n    budget: {kind: ratio, preset: ten_percent, shared: redis}\n" +
		"    breaker: {kind: consecutive, failures: 5, open_timeout: 1s, shared: redis}\n"
	f, err := config.Parse("shared.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	p := ps[0]
	if p.stores == nil {
		t.Fatal("FromFile's policy has no fleet stores")
	}
	if n := liveStores(p.stores); n != 0 {
		t.Fatalf("%d stores held before any run, want 0", n)
	}
	d, err := Downstream{}.Resolve()
	if err != nil {
		t.Fatal(err)
	}
	storm, err := pickStorms([]string{"errors-10"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := runOne(context.Background(), p, d, storm[0], TrialSeed(1, i)); err != nil {
			t.Fatal(err)
		}
		if n := liveStores(p.stores); n != 0 {
			t.Fatalf("after run %d: %d stores held, want 0 (the finished runs')", i+1, n)
		}
	}
	if _, err := Run(context.Background(), ps, Downstream{}, Gates{}, Options{Storms: []string{"errors-10"}, Trials: MinTrials}); err != nil {
		t.Fatal(err)
	}
	if n := liveStores(p.stores); n != 0 {
		t.Fatalf("after Run: %d stores held, want 0", n)
	}
}
