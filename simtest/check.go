package simtest

import (
	"context"
	"testing"
)

// Check runs p through the storm suite against d and reports every gate
// of g it fails as a test error (t.Errorf), naming the storm and the
// margin, so that a team can assert in go test, next to its client code,
// what stormsim check asserts in CI. It returns the report (nil when the
// check could not run: that is a t.Fatalf). The run is deterministic:
// seed 1, as stormsim check's default.
//
// A zero Downstream is the default model; a zero Gates still requires
// recovery within DefaultMaxRecovery after every storm.
func Check(t testing.TB, p Policy, d Downstream, g Gates) *Report {
	t.Helper()
	if p.Name == "" {
		p.Name = "policy"
	}
	rep, err := Run(context.Background(), []Policy{p}, d, g, Options{Seed: 1})
	if err != nil {
		t.Fatalf("simtest.Check: %v", err)
		return nil
	}
	for _, f := range rep.Failures {
		t.Errorf("simtest.Check: %s", f.Message)
	}
	return rep
}
