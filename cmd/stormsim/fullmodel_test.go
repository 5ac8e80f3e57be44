package main

import "testing"

// fullModel marks a test that runs whole lab scenarios (or storms of
// stormsim check) at the sizes whose figures it checks, or drives
// Chromium over such a report. The race detector slows the simulator
// twenty to seventy times, and these tests took most of this package's
// time under it: built with -race, they skip; make test runs every one
// of them without it (its sim-full job). A simulated run is one
// goroutine in virtual time, so the race detector has nothing to find
// inside one; what runs concurrently (the trial workers, cancellation,
// the progress bar, every live run on loopback) is exercised under -race
// by the tests without the mark.
func fullModel(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("full model: runs without -race (make sim-full)")
	}
}
