package hedge_test

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

func fast(context.Context) (int, error) { return 1, nil }

func benchPolicy() *retry.Policy {
	return &retry.Policy{
		Budget:  budget.NewRatio(budget.TenPercent()),
		Breaker: breaker.New(breaker.Config{}),
	}
}

// BenchmarkFast compares a call that answers before the hedge delay with
// the same call through retry.Do: the difference is hedging's cost.
func BenchmarkFast(b *testing.B) {
	ctx := context.Background()
	b.Run("retry.Do", func(b *testing.B) {
		p := benchPolicy()
		b.ReportAllocs()
		for b.Loop() {
			retry.Do(ctx, p, fast)
		}
	})
	b.Run("hedge.Do", func(b *testing.B) {
		h := &hedge.Hedger{Policy: benchPolicy(), Delay: time.Second}
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(ctx, h, fast, nil)
		}
	})
	b.Run("hedge.Do+adaptive", func(b *testing.B) {
		h := &hedge.Hedger{Policy: benchPolicy(), Delay: time.Second, Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{})}
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(ctx, h, fast, nil)
		}
	})
	b.Run("retry.Do+observer", func(b *testing.B) {
		p := benchPolicy()
		p.Observer = retry.NopObserver{}
		b.ReportAllocs()
		for b.Loop() {
			retry.Do(ctx, p, fast)
		}
	})
	b.Run("hedge.Do+observer", func(b *testing.B) {
		p := benchPolicy()
		p.Observer = retry.NopObserver{}
		h := &hedge.Hedger{Policy: p, Delay: time.Second}
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(ctx, h, fast, nil)
		}
	})
}

// BenchmarkFastParallel is BenchmarkFast from every P.
func BenchmarkFastParallel(b *testing.B) {
	ctx := context.Background()
	b.Run("retry.Do", func(b *testing.B) {
		p := benchPolicy()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				retry.Do(ctx, p, fast)
			}
		})
	})
	b.Run("hedge.Do", func(b *testing.B) {
		h := &hedge.Hedger{Policy: benchPolicy(), Delay: time.Second}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				hedge.Do(ctx, h, fast, nil)
			}
		})
	})
}

// BenchmarkAdaptive measures Observe and Delay on their own.
func BenchmarkAdaptive(b *testing.B) {
	a := hedge.NewAdaptive(hedge.AdaptiveConfig{})
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		a.ObserveAt(now, time.Duration(i%1000)*time.Microsecond)
		a.DelayAt(now)
	}
}

// BenchmarkFastClosure is BenchmarkFast with an operation that captures
// a variable: hedge.Do's op escapes (hedges run it in other goroutines),
// so the closure is allocated, where retry.Do keeps it on the stack.
func BenchmarkFastClosure(b *testing.B) {
	ctx := context.Background()
	n := 0
	b.Run("retry.Do", func(b *testing.B) {
		p := benchPolicy()
		b.ReportAllocs()
		for b.Loop() {
			retry.Do(ctx, p, func(context.Context) (int, error) { n++; return n, nil })
		}
	})
	b.Run("hedge.Do", func(b *testing.B) {
		h := &hedge.Hedger{Policy: benchPolicy(), Delay: time.Second}
		b.ReportAllocs()
		for b.Loop() {
			hedge.Do(ctx, h, func(context.Context) (int, error) { n++; return n, nil }, nil)
		}
	})
}

// TestFastPathAllocs holds a call answered before the delay to at most
// one allocation more than retry.Do (which makes none): none with an
// operation that captures nothing, one (the closure, which escapes because
// hedges run it in other goroutines) with one that does. First-attempt
// contexts come in slabs, an allocation per ctxSlab calls.
func TestFastPathAllocs(t *testing.T) {
	if raceEnabled || testing.CoverMode() != "" {
		t.Skip("the race detector and coverage change allocation counts")
	}
	ctx := context.Background()
	for _, p := range []*retry.Policy{benchPolicy(), {Observer: retry.NopObserver{}}} {
		h := &hedge.Hedger{Policy: p, Delay: time.Hour}
		hedge.Do(ctx, h, fast, nil)
		if n := testing.AllocsPerRun(1000, func() { hedge.Do(ctx, h, fast, nil) }); n > 0 {
			t.Errorf("observer %v: %v allocs per call answered before the delay, want 0", p.Observer != nil, n)
		}
		k := 0
		if n := testing.AllocsPerRun(1000, func() {
			hedge.Do(ctx, h, func(context.Context) (int, error) { k++; return k, nil }, nil)
		}); n > 1 {
			t.Errorf("observer %v, capturing closure: %v allocs per call answered before the delay, want at most 1", p.Observer != nil, n)
		}
	}
}

// BenchmarkTimerResetStop is what a runtime timer per call would cost the
// fast path (arm for the hedge, stop when the call answers first), which
// the shared hedge timers (timers.go) avoid.
func BenchmarkTimerResetStop(b *testing.B) {
	t := time.AfterFunc(time.Hour, func() {})
	defer t.Stop()
	for b.Loop() {
		t.Reset(time.Second)
		t.Stop()
	}
}
