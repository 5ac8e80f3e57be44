package breaker

import (
	"context"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
)

// benchConfigs are the trip conditions measured by the benchmarks, all on
// the real clock.
var benchConfigs = []struct {
	name string
	cfg  Config
}{
	{"consecutive", Config{}},
	{"count-window", Config{Window: Window{Calls: 100}}},
	{"time-window", Config{Window: Window{Duration: time.Minute, MinCalls: 20, FailureRatio: 0.3}}},
	{"slow-call", Config{Window: Window{Duration: time.Minute, SlowCallDuration: time.Second, SlowCallRatio: 0.5}}},
}

// BenchmarkAllowDone measures a closed-state Allow followed by done(nil).
func BenchmarkAllowDone(b *testing.B) {
	for _, bc := range benchConfigs {
		b.Run(bc.name, func(b *testing.B) {
			br := New(bc.cfg)
			b.ReportAllocs()
			for b.Loop() {
				done, err := br.Allow()
				if err != nil {
					b.Fatal(err)
				}
				done(nil)
			}
		})
	}
}

// BenchmarkAllowDoneParallel is BenchmarkAllowDone from GOMAXPROCS goroutines.
func BenchmarkAllowDoneParallel(b *testing.B) {
	for _, bc := range benchConfigs {
		b.Run(bc.name, func(b *testing.B) {
			br := New(bc.cfg)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					done, err := br.Allow()
					if err != nil {
						b.Error(err)
						return
					}
					done(nil)
				}
			})
		})
	}
}

func benchOp(context.Context) (int, error) { return 1, nil }

// BenchmarkDo measures Do with a closed breaker and a trivial function.
func BenchmarkDo(b *testing.B) {
	br := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Do(ctx, br, benchOp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDoParallel is BenchmarkDo from GOMAXPROCS goroutines.
func BenchmarkDoParallel(b *testing.B) {
	br := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := Do(ctx, br, benchOp); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// benchRefusal measures op, a refusal that must return want, serially and
// from GOMAXPROCS goroutines.
func benchRefusal(b *testing.B, want error, op func() error) {
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := op(); err != want {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := op(); err != want {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkAllowOpen measures the refusal of an open breaker.
func BenchmarkAllowOpen(b *testing.B) {
	br := New(Config{ConsecutiveFailures: 1})
	done, _ := br.Allow()
	done(errBench)
	if br.State() != Open {
		b.Fatal("breaker did not open")
	}
	benchRefusal(b, ErrOpen, func() error { _, err := br.Allow(); return err })
}

// BenchmarkAllowTooManyProbes measures the refusal of a half-open breaker
// whose probe slot is taken.
func BenchmarkAllowTooManyProbes(b *testing.B) {
	fc := clocktest.NewFake()
	br := New(Config{ConsecutiveFailures: 1, OpenTimeout: time.Second, OpenJitter: -1, Clock: fc})
	done, _ := br.Allow()
	done(errBench)
	fc.Advance(time.Second)
	probe, err := br.Allow()
	if err != nil {
		b.Fatal(err)
	}
	defer probe(nil)
	benchRefusal(b, ErrTooManyProbes, func() error { _, err := br.Allow(); return err })
}

type benchError struct{}

func (benchError) Error() string { return "bench failure" }

var errBench error = benchError{}
