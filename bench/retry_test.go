package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	retrygo "github.com/avast/retry-go/v5"
	"github.com/cenkalti/backoff/v5"
	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	sethretry "github.com/sethvargo/go-retry"
	sgbackoff "github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

var errTransient = errors.New("transient")

// flaky returns an operation that fails the first `fail` times of every
// cycle of fail+1 calls, so one benchmark iteration sees exactly fail
// failures and then a success; with fail < 0 it always fails.
type flaky struct{ fail, n int }

func (f *flaky) call() (int, error) {
	if f.fail < 0 {
		return 0, errTransient
	}
	f.n++
	if f.n <= f.fail {
		return 0, errTransient
	}
	f.n = 0
	return 1, nil
}

// workload is one retry workload: attempts allowed, failures before success.
type workload struct {
	name     string
	attempts int
	fail     int // -1: every attempt fails
}

var workloads = []workload{
	{"FirstTrySuccess", 4, 0},
	{"OneFailureThenSuccess", 4, 1},
	{"ThreeFailuresGiveUp", 3, -1},
}

// BenchmarkRetry runs each workload through each library with zero delay
// between attempts and the same attempt limit, each used as its README
// shows and reusing prebuilt policies where the library allows.
func BenchmarkRetry(b *testing.B) {
	for _, w := range workloads {
		b.Run(w.name, func(b *testing.B) {
			ctx := context.Background()
			b.Run("lib=stormguard", func(b *testing.B) {
				p := &retry.Policy{MaxAttempts: w.attempts, Backoff: sgbackoff.Constant{}}
				f := &flaky{fail: w.fail}
				op := func(context.Context) (int, error) { return f.call() }
				b.ReportAllocs()
				for b.Loop() {
					retry.Do(ctx, p, op)
				}
			})
			b.Run("lib=retry-go", func(b *testing.B) {
				r := retrygo.NewWithData[int](retrygo.Attempts(uint(w.attempts)), retrygo.Delay(0),
					retrygo.DelayType(retrygo.FixedDelay), retrygo.Context(ctx), retrygo.LastErrorOnly(true))
				f := &flaky{fail: w.fail}
				b.ReportAllocs()
				for b.Loop() {
					r.Do(f.call)
				}
			})
			b.Run("lib=cenkalti", func(b *testing.B) {
				f := &flaky{fail: w.fail}
				b.ReportAllocs()
				for b.Loop() {
					backoff.Retry(ctx, f.call, backoff.WithBackOff(&backoff.ZeroBackOff{}), backoff.WithMaxTries(uint(w.attempts)))
				}
			})
			b.Run("lib=sethvargo", func(b *testing.B) {
				f := &flaky{fail: w.fail}
				op := func(context.Context) (int, error) {
					v, err := f.call()
					if err != nil {
						return v, sethretry.RetryableError(err)
					}
					return v, nil
				}
				zero := sethretry.BackoffFunc(func() (time.Duration, bool) { return 0, false })
				b.ReportAllocs()
				for b.Loop() {
					// The backoff counts retries, so it is built per call.
					sethretry.DoValue(ctx, sethretry.WithMaxRetries(uint64(w.attempts-1), zero), op)
				}
			})
			b.Run("lib=failsafe-go", func(b *testing.B) {
				rp := retrypolicy.NewBuilder[int]().WithMaxAttempts(w.attempts).WithDelay(0).Build()
				ex := failsafe.With[int](rp).WithContext(ctx)
				f := &flaky{fail: w.fail}
				b.ReportAllocs()
				for b.Loop() {
					ex.Get(f.call)
				}
			})
		})
	}
}

// BenchmarkBackoffDelay computes one full-jitter exponential delay (base
// 100ms, cap 10s) for a retry number cycling 1..16.
func BenchmarkBackoffDelay(b *testing.B) {
	b.Run("lib=stormguard", func(b *testing.B) {
		s := sgbackoff.Strategy(sgbackoff.Exponential{Base: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: sgbackoff.Full})
		var d time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d += s.Delay(i&15+1, 0)
		}
		sinkD = d
	})
	b.Run("lib=retry-go", func(b *testing.B) {
		r := retrygo.New(retrygo.Delay(100*time.Millisecond), retrygo.MaxDelay(10*time.Second), retrygo.DelayType(retrygo.FullJitterBackoffDelay))
		var d time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d += retrygo.FullJitterBackoffDelay(uint(i&15), nil, r)
		}
		sinkD = d
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		e := backoff.NewExponentialBackOff()
		e.InitialInterval, e.MaxInterval, e.RandomizationFactor = 100*time.Millisecond, 10*time.Second, 0.5
		var d time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i&15 == 0 {
				e.Reset() // stateful: one per call sequence
			}
			d += e.NextBackOff()
		}
		sinkD = d
	})
	b.Run("lib=sethvargo", func(b *testing.B) {
		var next sethretry.Backoff
		var d time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i&15 == 0 { // stateful: one per call sequence
				next = sethretry.WithFullJitter(sethretry.WithCappedDuration(10*time.Second, sethretry.NewExponential(100*time.Millisecond)))
			}
			v, _ := next.Next()
			d += v
		}
		sinkD = d
	})
}

// BenchmarkBackoffDelayDynamic is BenchmarkBackoffDelay with each
// strategy called through the interface its library's retry loop calls
// (stormguard's retry.Policy.Backoff, cenkalti's BackOff), held where the
// compiler cannot see its type, so that neither call is devirtualized.
func BenchmarkBackoffDelayDynamic(b *testing.B) {
	b.Run("lib=stormguard", func(b *testing.B) {
		s := dynStrategy
		var d time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			d += s.Delay(i&15+1, 0)
		}
		sinkD = d
	})
	b.Run("lib=cenkalti", func(b *testing.B) {
		e := backoff.NewExponentialBackOff()
		e.InitialInterval, e.MaxInterval, e.RandomizationFactor = 100*time.Millisecond, 10*time.Second, 0.5
		dynBackOff = e
		bo := dynBackOff
		var d time.Duration
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i&15 == 0 {
				bo.Reset() // stateful: one per call sequence
			}
			d += bo.NextBackOff()
		}
		sinkD = d
	})
}

var (
	dynStrategy sgbackoff.Strategy = sgbackoff.Exponential{Base: 100 * time.Millisecond, Max: 10 * time.Second, Jitter: sgbackoff.Full}
	dynBackOff  backoff.BackOff
)

var sinkD time.Duration
