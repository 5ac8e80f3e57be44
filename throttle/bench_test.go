package throttle_test

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/throttle"
)

// BenchmarkSREAllowDone measures Allow followed by done(nil) on the real
// clock: the healthy path, where the probability is 0 and nothing is drawn.
// Compare with breaker's BenchmarkAllowDone (its closed-state path).
func BenchmarkSREAllowDone(b *testing.B) {
	th := throttle.NewSRE(throttle.SREConfig{})
	b.ReportAllocs()
	for b.Loop() {
		done, err := th.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(nil)
	}
}

// BenchmarkSREAllowDoneParallel is BenchmarkSREAllowDone from GOMAXPROCS
// goroutines sharing one throttler.
func BenchmarkSREAllowDoneParallel(b *testing.B) {
	th := throttle.NewSRE(throttle.SREConfig{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := th.Allow()
			if err != nil {
				b.Error(err)
				return
			}
			done(nil)
		}
	})
}

// BenchmarkSREThrottledParallel measures the overloaded path: every answer
// is an overload, so the probability is near its maximum and most calls
// draw and are rejected.
func BenchmarkSREThrottledParallel(b *testing.B) {
	th := throttle.NewSRE(throttle.SREConfig{Rand: backoff.NewSource(1)})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if done, err := th.Allow(); err == nil {
				done(errOverload)
			}
		}
	})
}

// BenchmarkAdaptiveAcquireDone measures Adaptive's Acquire and done(nil)
// from GOMAXPROCS goroutines, before any throttle (the bucket unused: one
// lock for the answer) — the SDKs' common case.
func BenchmarkAdaptiveAcquireDoneParallel(b *testing.B) {
	a := throttle.NewAdaptive(throttle.AdaptiveConfig{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := a.Acquire(ctx, false)
			if err != nil {
				b.Error(err)
				return
			}
			done(nil)
		}
	})
}
