package simtest

import (
	"context"
	"testing"
)

// Check runs p through the storm suite against d and reports every gate
// of g it fails as a test error (t.Errorf), naming the storm and the
// margin, so that a team can assert in go test, next to its client code,
// what stormsim check asserts in CI. It returns the report (nil when the
// check could not run: that is a t.Fatalf).
//
// Without o the run is stormsim check's default: every storm, DefaultTrials
// trials, seed 1. An Options (at most one) chooses the storms, the trials
// and the seed (a zero Seed is seed 1, a zero Trials DefaultTrials, nil
// Storms every storm) and how many runs go at once. The run is
// deterministic: the same options give the same report.
//
// A zero Downstream is the default model; a zero Gates still requires
// recovery within DefaultMaxRecovery after every storm, and peak
// amplification within DefaultMaxAmplification.
func Check(t testing.TB, p Policy, d Downstream, g Gates, o ...Options) *Report {
	t.Helper()
	if p.Name == "" {
		p.Name = "policy"
	}
	if len(o) > 1 {
		t.Fatalf("simtest.Check: %d Options, want at most one", len(o))
		return nil
	}
	opt := Options{Seed: 1}
	if len(o) == 1 {
		opt = o[0]
		if opt.Seed == 0 {
			opt.Seed = 1
		}
	}
	rep, err := Run(context.Background(), []Policy{p}, d, g, opt)
	if err != nil {
		t.Fatalf("simtest.Check: %v", err)
		return nil
	}
	for _, f := range rep.Failures {
		t.Errorf("simtest.Check: %s", f.Message)
	}
	return rep
}
