package budget

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

var errBench = errors.New("bench: unavailable")

// The benchmarks measure the two hot operations of every budget, serially
// and from all Ps at once (RunParallel): a deposit (Record of a first
// attempt; Start+Record for Concurrency) and a granted withdrawal (Withdraw;
// Withdraw+Refund for Concurrency), plus a refusal. On 2 cores the parallel
// cost per operation should stay within 2× of the serial one.
//
// Every call counts itself in Stats, on counters striped per P
// (internal/stripe), so counting writes no cache line another core writes.
// A call that leaves Ratio's balance alone (DepositFull, Refused,
// WithdrawFree, Retry) only reads the balance's word. A call that changes
// it (Deposit, Withdraw, WithdrawAWS) would compare-and-swap one shared
// word, whose cache line the two cores would pass back and forth on every
// call (~60 ns instead of ~12): instead, once a cell has lost a few
// compare-and-swaps, the Ratio lends its balance out in leases
// (ratio_lease.go) and these calls change only their P's lease.
// BenchmarkSharedBalance shows the two ways of sharing one word: a mutex
// meets the 2× bound with one goroutine per P only because the waiting
// core backs off while the other runs a batch, and falls to ~150ns when
// many goroutines share the Ps, where compare-and-swap stays at ~50ns.
// Window and Concurrency keep their mutex (their callers would need the
// lock anyway); Window counts retries outside it (Window/Retry).

func benchBoth(b *testing.B, op func()) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			op()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				op()
			}
		})
	})
}

func BenchmarkRatio(b *testing.B) {
	b.Run("Deposit", func(b *testing.B) {
		// A bucket far from full, so every deposit changes the balance
		// (in parallel, the balance is lent out and each P fills its
		// lease).
		r := NewRatio(RatioConfig{MaxTokens: MaxRatioTokens, StartEmpty: true, Refill: 1e-6})
		benchBoth(b, func() { r.Record(false, nil) })
	})
	b.Run("DepositFull", func(b *testing.B) {
		r := NewRatio(TenPercent())
		benchBoth(b, func() { r.Record(false, nil) })
	})
	b.Run("Withdraw", func(b *testing.B) {
		r := NewRatio(RatioConfig{MaxTokens: MaxRatioTokens, RetryCost: 1e-6})
		benchBoth(b, func() { r.Withdraw(errBench) })
		if s := r.Stats(); s.Refused != 0 {
			b.Fatalf("%d refused: the benchmark measured refusals", s.Refused)
		}
	})
	b.Run("Refused", func(b *testing.B) {
		r := NewRatio(RatioConfig{StartEmpty: true})
		benchBoth(b, func() { r.Withdraw(errBench) })
		if s := r.Stats(); s.Granted != 0 {
			b.Fatalf("%d granted: the benchmark measured grants", s.Granted)
		}
	})
	b.Run("WithdrawFree", func(b *testing.B) {
		// gRPC A6: failures pay, a retry costs nothing and is granted
		// while the bucket holds more than Threshold.
		r := NewRatio(GRPC())
		benchBoth(b, func() { r.Withdraw(errBench) })
		if s := r.Stats(); s.Refused != 0 {
			b.Fatalf("%d refused: the benchmark measured refusals", s.Refused)
		}
	})
	b.Run("Retry", func(b *testing.B) {
		// A retry attempt that failed: counted, the balance untouched.
		r := NewRatio(TenPercent())
		benchBoth(b, func() { r.Record(true, errBench) })
	})
	b.Run("WithdrawAWS", func(b *testing.B) {
		// A retry that succeeds refunds its cost: the balance moves by 5
		// and back. In parallel each P's lease serves both.
		r := NewRatio(RatioConfig{MaxTokens: 500, Refill: 1, RetryCost: 5, TimeoutCost: 10, RefundRetrySuccess: true}) // the AWS legacy quota
		benchBoth(b, func() {
			r.Withdraw(errBench)
			r.Record(true, nil)
		})
	})
}

func BenchmarkWindow(b *testing.B) {
	b.Run("Deposit", func(b *testing.B) {
		w := NewWindow(WindowConfig{})
		benchBoth(b, func() { w.Record(false, nil) })
	})
	b.Run("Withdraw", func(b *testing.B) {
		w := NewWindow(WindowConfig{MinRetriesPerSecond: 1e11})
		benchBoth(b, func() { w.Withdraw(errBench) })
		if s := w.Stats(); s.Refused != 0 {
			b.Fatalf("%d refused: the benchmark measured refusals", s.Refused)
		}
	})
	b.Run("Refused", func(b *testing.B) {
		w := NewWindow(WindowConfig{Ratio: -1, MinRetriesPerSecond: -1})
		benchBoth(b, func() { w.Withdraw(errBench) })
		if s := w.Stats(); s.Granted != 0 {
			b.Fatalf("%d granted: the benchmark measured grants", s.Granted)
		}
	})
	b.Run("Retry", func(b *testing.B) {
		w := NewWindow(WindowConfig{})
		benchBoth(b, func() { w.Record(true, errBench) })
	})
}

func BenchmarkConcurrency(b *testing.B) {
	b.Run("Deposit", func(b *testing.B) {
		c := NewConcurrency(ConcurrencyConfig{})
		benchBoth(b, func() {
			c.Start(false)
			c.Record(false, nil)
		})
	})
	b.Run("Withdraw", func(b *testing.B) {
		c := NewConcurrency(ConcurrencyConfig{MinConcurrency: 1 << 30})
		benchBoth(b, func() {
			c.Withdraw(errBench)
			c.Refund()
		})
		if s := c.Stats(); s.Refused != 0 {
			b.Fatalf("%d refused: the benchmark measured refusals", s.Refused)
		}
	})
	b.Run("Refused", func(b *testing.B) {
		c := NewConcurrency(ConcurrencyConfig{Ratio: -1, MinConcurrency: -1})
		benchBoth(b, func() { c.Withdraw(errBench) })
		if s := c.Stats(); s.Granted != 0 {
			b.Fatalf("%d granted: the benchmark measured grants", s.Granted)
		}
	})
}

// BenchmarkSharedBalance compares two ways to keep one shared clamped
// balance (the heart of Ratio.Record's deposit): a compare-and-swap loop,
// as Ratio does, and a mutex, serially, from one goroutine per P, and from
// 32 goroutines per P.
func BenchmarkSharedBalance(b *testing.B) {
	const limit = 1 << 62
	type padded struct {
		_  [128]byte
		mu sync.Mutex
		n  atomic.Int64
		_  [128]byte
	}
	var cas, mu padded
	for _, x := range []struct {
		name string
		op   func()
	}{
		{"cas", func() {
			for {
				t := cas.n.Load()
				if n := min(t+1, limit); n == t || cas.n.CompareAndSwap(t, n) {
					return
				}
			}
		}},
		{"mutex", func() {
			mu.mu.Lock()
			mu.n.Store(min(mu.n.Load()+1, limit))
			mu.mu.Unlock()
		}},
	} {
		b.Run(x.name, func(b *testing.B) {
			benchBoth(b, x.op)
			b.Run("parallel-x32", func(b *testing.B) {
				b.ReportAllocs()
				b.SetParallelism(32)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						x.op()
					}
				})
			})
		})
	}
}
