package sim

import "testing"

// fullModel marks a test that runs whole scenarios, or models as large, to
// check the figures they must reproduce. The race detector slows the
// simulator twenty to seventy times, and these tests would take most of
// make test's time under it: built with -race, they skip; make test runs
// every one of them without it (its sim-full job, go test ./sim). The
// tests that exercise the concurrent parts (the trial workers,
// cancellation, progress) run cheaper models under -race too.
func fullModel(t *testing.T) {
	t.Helper()
	if raceEnabled {
		t.Skip("full model: runs without -race (make sim-full)")
	}
}
