package admission_test

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/admission"
)

func TestAcquireReleaseAllocatesNothing(t *testing.T) {
	l := newLimiter(t, admission.Config{})
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, err := l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	}); n != 0 {
		t.Fatalf("Acquire+Release allocates %v times, want 0", n)
	}
}

// BenchmarkAcquireRelease is admission and release without contention,
// on the real clock: the bound is 50 ns and 0 allocations.
func BenchmarkAcquireRelease(b *testing.B) {
	l := newLimiter(b, admission.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := l.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Release()
	}
}

// BenchmarkAcquireReleaseParallel is the same from every core at once,
// under a limit that is never reached.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	l := newLimiter(b, admission.Config{Limit: admission.Fixed{N: 1 << 20}})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, err := l.Acquire(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			p.Release()
		}
	})
}
