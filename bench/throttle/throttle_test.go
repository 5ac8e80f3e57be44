package throttlebench

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go/adaptivethrottler"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

var errOverload = retry.Overloaded(errors.New("overloaded"))

func newSRE() *throttle.SRE {
	return throttle.NewSRE(throttle.SREConfig{K: 2, Window: 2 * time.Minute, MaxRejection: 0.9})
}

func newFailsafe() adaptivethrottler.AdaptiveThrottler[any] {
	return adaptivethrottler.NewBuilder[any]().
		WithFailureRateThreshold(0.5, throttle.DefaultMinRequests, 2*time.Minute).
		WithMaxRejectionRate(0.9).
		Build()
}

// admitAll is a rand.Source whose draws are all just below 1, so an SRE
// throttler capped at 0.9 admits every request: its counts then stay
// those of failsafe-go, which does not count rejections.
type admitAll struct{}

func (admitAll) Uint64() uint64 { return math.MaxUint64 }

// TestEquivalentRejection: fed the same counts, with every request
// admitted, the two compute the same rejection probability.
func TestEquivalentRejection(t *testing.T) {
	for _, tc := range []struct{ ok, failed int }{{10, 0}, {5, 5}, {10, 10}, {10, 30}, {5, 100}, {0, 50}} {
		sg := throttle.NewSRE(throttle.SREConfig{K: 2, Window: 2 * time.Minute, MaxRejection: 0.9, Rand: admitAll{}})
		fs := newFailsafe()
		for range tc.ok {
			done, _ := sg.Allow()
			done(nil)
			fs.RecordSuccess()
		}
		for range tc.failed {
			done, err := sg.Allow()
			if err != nil {
				t.Fatalf("%d ok, %d failed: rejected with a draw of 1", tc.ok, tc.failed)
			}
			done(errOverload)
			fs.RecordFailure()
		}
		// failsafe-go computes its rate when a permit is asked.
		fs.TryAcquirePermit()
		a, b := sg.RejectionProbability(), fs.RejectionRate()
		if math.Abs(a-b) > 1e-9 {
			t.Errorf("%d ok, %d failed: stormguard %v, failsafe-go %v", tc.ok, tc.failed, a, b)
		}
		if tc.failed >= 30 && a == 0 {
			t.Errorf("%d ok, %d failed: no throttling at all", tc.ok, tc.failed)
		}
	}
}

// BenchmarkThrottleHealthy measures one admitted request and its
// successful answer (stormguard: Allow + done(nil); failsafe-go:
// TryAcquirePermit + RecordSuccess), serially and from every core.
func BenchmarkThrottleHealthy(b *testing.B) {
	bench(b, func(b *testing.B) func() {
		sg := newSRE()
		return func() {
			if done, err := sg.Allow(); err == nil {
				done(nil)
			}
		}
	}, func(b *testing.B) func() {
		fs := newFailsafe()
		return func() {
			if fs.TryAcquirePermit() {
				fs.RecordSuccess()
			}
		}
	})
}

// BenchmarkThrottleOverloaded measures the same while every answer is an
// overload: both reject most requests, after a random draw.
func BenchmarkThrottleOverloaded(b *testing.B) {
	bench(b, func(b *testing.B) func() {
		sg := newSRE()
		return func() {
			if done, err := sg.Allow(); err == nil {
				done(errOverload)
			}
		}
	}, func(b *testing.B) func() {
		fs := newFailsafe()
		return func() {
			if fs.TryAcquirePermit() {
				fs.RecordFailure()
			}
		}
	})
}

func bench(b *testing.B, sg, fs func(*testing.B) func()) {
	for _, mode := range []string{"serial", "parallel"} {
		b.Run(mode, func(b *testing.B) {
			for _, lib := range []struct {
				name string
				mk   func(*testing.B) func()
			}{{"stormguard", sg}, {"failsafe-go", fs}} {
				b.Run("lib="+lib.name, func(b *testing.B) {
					call := lib.mk(b)
					b.ReportAllocs()
					if mode == "serial" {
						for b.Loop() {
							call()
						}
						return
					}
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							call()
						}
					})
				})
			}
		})
	}
}
