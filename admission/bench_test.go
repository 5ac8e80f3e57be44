package admission_test

import (
	"context"
	"testing"
	"time"

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
// on the real clock: the bound is 50 ns and 0 allocations. At
// this rate the Limiter times one request in 8 (two clock reads) and
// reads no clock for the others.
func BenchmarkAcquireRelease(b *testing.B) {
	benchAcquireRelease(b, newLimiter(b, admission.Config{}))
}

// BenchmarkAcquireReleaseTimed is the same with every request timed, as
// below the sampling rate: two reads of the monotonic clock a request,
// which cost most of it.
func BenchmarkAcquireReleaseTimed(b *testing.B) {
	l := newLimiter(b, admission.Config{})
	admission.TimeEveryForTest(l)
	benchAcquireRelease(b, l)
}

// BenchmarkAcquireReleaseCancelCtx is BenchmarkAcquireRelease with a
// context that can end, as a server request's is: Acquire asks its Err
// (one atomic load) before it admits.
func BenchmarkAcquireReleaseCancelCtx(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	benchAcquireReleaseCtx(b, newLimiter(b, admission.Config{}), ctx)
}

func benchAcquireRelease(b *testing.B, l *admission.Limiter) {
	benchAcquireReleaseCtx(b, l, context.Background())
}

func benchAcquireReleaseCtx(b *testing.B, l *admission.Limiter, ctx context.Context) {
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
// under a limit that is never reached. Run it with -cpu 1,2,… to see it
// scale: the in-flight count is the one word every core writes; the
// window's sums are per processor.
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

// TestAcquireReleaseUntimedAllocatesNothing: the path of a request the
// sampling Limiter does not time allocates nothing either.
func TestAcquireReleaseUntimedAllocatesNothing(t *testing.T) {
	h := &heard{limit: 5000}
	s := newSampler(t, admission.Config{Limit: h, Window: 10 * time.Millisecond, WindowSamples: 1, ProbeInterval: -1})
	s.round(2000, all, false, true) // a high rate: the Limiter samples from now on
	s.pick = false
	ctx := context.Background()
	if n := testing.AllocsPerRun(1000, func() {
		p, err := s.l.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.Release()
	}); n != 0 {
		t.Fatalf("Acquire+Release of an untimed request allocates %v times, want 0", n)
	}
	s.round(10, all, false, true)
	if got := h.last(t, 2); got.rtt != time.Millisecond {
		t.Fatalf("the window after: heard %+v, want only the 11 timed requests (1ms), none of the untimed", got)
	}
}
