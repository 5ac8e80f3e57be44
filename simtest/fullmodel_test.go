package simtest_test

import "testing"

// fullModel marks a test that runs whole storms of the suite on the
// default downstream (24,000 calls a run), or builds and runs the
// command, to check figures and verdicts that depend on that scale. The
// race detector slows the simulator twenty to seventy times, and these
// tests took most of simtest's time under it: built with -race, they
// skip; make test runs every one of them without it (its sim-full job).
// A run is one goroutine in virtual time, so the race detector has
// nothing to find inside one; what runs concurrently (Run's trial
// workers, the fleet's shared stores, a panicking constructor) is
// exercised under -race by the tests without the mark, on small
// downstreams (TestEveryFileRunsConcurrentlyOnASmallDownstream).
func fullModel(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("full model: runs without -race (make sim-full)")
	}
}
