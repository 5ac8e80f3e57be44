package simtest_test

import (
	"context"
	"math"
	"testing"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/simtest"
)

func runFile(t *testing.T, yaml string, storms ...string) *simtest.Report {
	t.Helper()
	f, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := simtest.FromFile(f)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := simtest.Run(context.Background(), ps, simtest.Downstream{}, simtest.Gates{}, simtest.Options{Seed: 1, Storms: storms})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

const plain = "policies:\n  p:\n    max_attempts: 2\n    attempt_timeout: 1s\n    backoff: {strategy: full_jitter, base: 50ms, max: 2s}\n"

// Issue 34 item 1: hedge: was ignored (byte-identical results with and
// without it). Hedges now add load, and the report says how much.
func TestHedgeIsSimulated(t *testing.T) {
	fullModel(t)
	without := runFile(t, plain, simtest.StormErrors10).Policies[0].Storms[0]
	with := runFile(t, plain+"    hedge: {delay: 1ms}\n", simtest.StormErrors10).Policies[0].Storms[0]
	if without.Hedges != 0 || with.Hedges < 0.5 || with.HedgeLoad < 0.3 {
		t.Fatalf("hedges per call: %.2f without, %.2f (%.0f%% of load) with hedge", without.Hedges, with.Hedges, 100*with.HedgeLoad)
	}
	if with.PeakAmplification.Mean < without.PeakAmplification.Mean+0.5 {
		t.Errorf("peak ×%.2f with hedges, ×%.2f without", with.PeakAmplification.Mean, without.PeakAmplification.Mean)
	}
}

// Issue 34 item 2: retry_on was not simulated: a policy retrying only
// 429 was charged for retrying 500s. Now the 500s of errors-50 are not
// retried (one attempt per call) and the 429s of the throttle storm are.
func TestRetryOnIsSimulated(t *testing.T) {
	fullModel(t)
	only429 := plain + "    retry_on: {http_status: [429]}\n"
	rep := runFile(t, only429, simtest.StormErrors50, simtest.StormThrottle)
	e50, thr := rep.Policies[0].Storms[0], rep.Policies[0].Storms[1]
	if e50.StormAttemptsPerCall > 1.02 || e50.NotRetried < 0.01 {
		t.Errorf("500s retried under retry_on [429]: %.2f attempts per call, %.3f not retried", e50.StormAttemptsPerCall, e50.NotRetried)
	}
	if thr.StormAttemptsPerCall < 1.3 {
		t.Errorf("429s not retried under retry_on [429]: %.2f attempts per call", thr.StormAttemptsPerCall)
	}
	all := runFile(t, plain, simtest.StormErrors50).Policies[0].Storms[0]
	if all.StormAttemptsPerCall < 1.3 {
		t.Errorf("no retry_on: 500s retried %.2f attempts per call", all.StormAttemptsPerCall)
	}
	// gRPC codes: a policy with both lists is checked once per protocol.
	both := runFile(t, plain+"    retry_on: {http_status: [500], grpc_codes: [UNAVAILABLE]}\n", simtest.StormErrors50)
	if len(both.Policies) != 2 || both.Policies[0].Policy != "p (http)" || both.Policies[1].Policy != "p (grpc)" {
		t.Fatalf("policies %+v", both.Policies)
	}
	if h, g := both.Policies[0].Storms[0].StormAttemptsPerCall, both.Policies[1].Storms[0].StormAttemptsPerCall; h < 1.3 || g > 1.02 {
		t.Errorf("500 (INTERNAL): http [500] %.2f attempts per call, grpc [UNAVAILABLE] %.2f", h, g)
	}
}

// Issue 34 item 2: limiter: was not simulated: an SRE limiter without a
// budget failed as if it had no protection. It now refuses attempts
// locally while the downstream sheds load.
func TestLimiterIsSimulated(t *testing.T) {
	fullModel(t)
	base := "policies:\n  p:\n    max_attempts: 5\n    attempt_timeout: 1s\n    backoff: {strategy: full_jitter, base: 50ms, max: 2s}\n"
	without := runFile(t, base, simtest.StormOutage).Policies[0].Storms[0]
	with := runFile(t, base+"    limiter: {kind: sre, k: 1.1}\n", simtest.StormOutage).Policies[0].Storms[0]
	if without.LocalRejected != 0 || with.LocalRejected < 0.05 {
		t.Fatalf("local rejections: %.3f without, %.3f with the limiter", without.LocalRejected, with.LocalRejected)
	}
	if with.PeakAmplification.Mean >= without.PeakAmplification.Mean {
		t.Errorf("peak ×%.2f with the limiter, ×%.2f without", with.PeakAmplification.Mean, without.PeakAmplification.Mean)
	}
	if math.IsNaN(with.PeakAmplification.High) {
		t.Error("NaN interval")
	}
}
