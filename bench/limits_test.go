package bench

import (
	"context"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	fsbudget "github.com/failsafe-go/failsafe-go/budget"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/sony/gobreaker/v2"
	sgbackoff "github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

func ok() (int, error) { return 1, nil }

// BenchmarkBreakerClosed measures one successful call through a closed
// breaker, serially and with b.RunParallel on every core.
func BenchmarkBreakerClosed(b *testing.B) {
	for _, mode := range []string{"serial", "parallel"} {
		run := func(b *testing.B, call func()) {
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
		}
		b.Run(mode, func(b *testing.B) {
			b.Run("lib=stormguard", func(b *testing.B) {
				br := breaker.New(breaker.Config{})
				run(b, func() {
					done, err := br.Allow()
					if err == nil {
						done(nil)
					}
				})
			})
			b.Run("lib=gobreaker", func(b *testing.B) {
				cb := gobreaker.NewCircuitBreaker[int](gobreaker.Settings{Name: "bench"})
				run(b, func() { cb.Execute(ok) })
			})
			b.Run("lib=failsafe-go", func(b *testing.B) {
				ex := failsafe.With[int](circuitbreaker.NewWithDefaults[int]())
				run(b, func() { ex.Get(ok) })
			})
		})
	}
}

// BenchmarkBudgetParallel records a first attempt and asks for a retry on
// one shared budget from every core.
func BenchmarkBudgetParallel(b *testing.B) {
	b.Run("lib=stormguard", func(b *testing.B) {
		bu := budget.NewRatio(budget.TenPercent())
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Record(false, nil)
				bu.Withdraw(errTransient)
			}
		})
	})
	b.Run("lib=stormguard-concurrency", func(b *testing.B) {
		bu := budget.NewConcurrency(budget.ConcurrencyConfig{Ratio: 0.1})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.Start(false)
				if bu.Withdraw(errTransient) {
					bu.Start(true)
					bu.Record(true, nil)
				}
				bu.Record(false, nil)
			}
		})
	})
	b.Run("lib=failsafe-go", func(b *testing.B) {
		// failsafe-go's Budget interface exposes only Rate; its retry
		// policy drives these exported methods of the concrete type.
		bu := fsbudget.NewBuilder().WithMaxRate(0.1).Build().(interface {
			RecordExecution()
			ReleaseExecution()
			TryAcquirePermit() bool
			ReleasePermit()
		})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				bu.RecordExecution()
				if bu.TryAcquirePermit() {
					bu.ReleasePermit()
				}
				bu.ReleaseExecution()
			}
		})
	})
}

// BenchmarkComposed runs retry + budget + breaker together: a call that
// succeeds first time, and one that fails once then succeeds (zero delay).
func BenchmarkComposed(b *testing.B) {
	ctx := context.Background()
	for _, w := range []workload{{"FirstTrySuccess", 4, 0}, {"OneFailureThenSuccess", 4, 1}} {
		b.Run(w.name, func(b *testing.B) {
			b.Run("lib=stormguard", func(b *testing.B) {
				p := &retry.Policy{
					MaxAttempts: w.attempts,
					Backoff:     sgbackoff.Constant{},
					Budget:      budget.NewRatio(budget.TenPercent()),
					Breaker:     breaker.New(breaker.Config{ConsecutiveFailures: 1 << 20}),
				}
				f := &flaky{fail: w.fail}
				op := func(context.Context) (int, error) { return f.call() }
				b.ReportAllocs()
				for b.Loop() {
					retry.Do(ctx, p, op)
				}
			})
			b.Run("lib=failsafe-go", func(b *testing.B) {
				rp := retrypolicy.NewBuilder[int]().WithMaxAttempts(w.attempts).WithDelay(0).
					WithBudget(fsbudget.NewBuilder().WithMaxRate(0.1).Build()).Build()
				cb := circuitbreaker.NewBuilder[int]().WithFailureThreshold(1 << 20).WithDelay(time.Minute).Build()
				ex := failsafe.With[int](rp, cb).WithContext(ctx)
				f := &flaky{fail: w.fail}
				b.ReportAllocs()
				for b.Loop() {
					ex.Get(f.call)
				}
			})
		})
	}
}
