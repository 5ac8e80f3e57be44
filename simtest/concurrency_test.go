package simtest_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	"github.com/stormguard/stormguard/simtest"
)

// The tests marked fullModel skip under -race; this one keeps what runs
// concurrently under the race detector: Run's trial workers over every
// policy file of testdata (each kind of budget, breaker and limiter,
// hedging, presets, keyed and nested operations) and a budget and a
// breaker shared by the fleet, each file in one storm of the suite (the
// next file the next storm), on a downstream small enough for the race
// detector (2 clients, 1 worker: 30 calls/s). A run must share no state with another: the report may not
// depend on how the runs were spread over the workers, so 4 workers give
// the bytes of 1.
func TestEveryFileRunsConcurrentlyOnASmallDownstream(t *testing.T) {
	files, _ := filepath.Glob("testdata/suite/*.yaml")
	files = append(files, "testdata/budgeted.yaml", "testdata/infile.yaml", "testdata/nobudget.yaml", "testdata/noretry.yaml", "testdata/policies.yaml",
		writeFile(t, "shared.yaml", "policies:\n  fleet:\n    max_attempts: 3\n    budget: {kind: ratio, preset: ten_percent, shared: redis}\n"+
			"    breaker: {kind: consecutive, failures: 5, open_timeout: 1s, shared: redis}\n"))
	if len(files) < 15 {
		t.Fatalf("%d files", len(files))
	}
	small := simtest.Downstream{Clients: 2, Workers: 1}
	suite := simtest.StormNames()
	for n, file := range files {
		storms := []string{suite[n%len(suite)]}
		ps := loadPolicies(t, file)
		var js [2]bytes.Buffer
		for i, workers := range []int{1, 4} {
			rep, err := simtest.Run(context.Background(), ps, small, simtest.Gates{}, simtest.Options{Seed: 3, Storms: storms, Workers: workers})
			if err != nil {
				t.Fatalf("%s, %d workers: %v", file, workers, err)
			}
			if len(rep.Policies) < len(ps) {
				t.Fatalf("%s: %d policies reported, want at least %d", file, len(rep.Policies), len(ps))
			}
			for _, p := range rep.Policies {
				if len(p.Storms) != len(storms) {
					t.Fatalf("%s %s: %d storms", file, p.Policy, len(p.Storms))
				}
				for _, s := range p.Storms {
					if len(s.Trials) != simtest.DefaultTrials || s.Metrics.Calls < 500 {
						t.Errorf("%s %s/%s: %d trials, %v calls", file, p.Policy, s.Storm, len(s.Trials), s.Metrics.Calls)
					}
				}
			}
			if err := rep.WriteJSON(&js[i]); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(js[0].Bytes(), js[1].Bytes()) {
			t.Errorf("%s: 4 workers give another report than 1", file)
		}
	}
}
