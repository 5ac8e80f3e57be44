package simtest_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/sim"
	"github.com/stormguard/stormguard/simtest"
)

// A Policy.New that panicked inside a run crashed the process from a
// worker goroutine, where no caller could recover it. Run stops every
// run and raises the panic again on its caller's goroutine (goleak, in
// TestMain, checks that the workers ended).
func TestPolicyNewPanicIsRaisedOnRunsCaller(t *testing.T) {
	var calls atomic.Int64
	p := simtest.Policy{Name: "boom", New: func(env sim.Env) *retry.Policy {
		if calls.Add(1) > 1 { // the probe on the caller's goroutine passes; the runs' clients panic
			panic("policy constructor failed")
		}
		return &retry.Policy{MaxAttempts: 2, Clock: env.Clock}
	}}
	defer func() {
		if r := recover(); r != "policy constructor failed" {
			t.Fatalf("recovered %v, want the constructor's panic", r)
		}
	}()
	simtest.Run(context.Background(), []simtest.Policy{p}, simtest.Downstream{}, simtest.Gates{}, simtest.Options{Seed: 1, Workers: 2})
	t.Fatal("Run returned")
}
