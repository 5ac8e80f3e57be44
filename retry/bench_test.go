package retry_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
)

var errBench = errors.New("bench")

func BenchmarkDoSuccess(b *testing.B) {
	ctx := context.Background()
	p := &retry.Policy{MaxAttempts: 4}
	op := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		retry.Do(ctx, p, op)
	}
}

func BenchmarkDoSuccessParallel(b *testing.B) {
	p := &retry.Policy{MaxAttempts: 4}
	op := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			retry.Do(ctx, p, op)
		}
	})
}

func BenchmarkDoOneFailureThenSuccess(b *testing.B) {
	ctx := context.Background()
	p := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	n := 0
	op := func(context.Context) (int, error) { // fails every other call
		n++
		if n%2 == 1 {
			return 0, errBench
		}
		return n, nil
	}
	b.ReportAllocs()
	for b.Loop() {
		retry.Do(ctx, p, op)
	}
}

func BenchmarkDoThreeFailuresGiveUp(b *testing.B) {
	ctx := context.Background()
	p := &retry.Policy{MaxAttempts: 3, Backoff: backoff.Constant{}}
	op := func(context.Context) (int, error) { return 0, errBench }
	b.ReportAllocs()
	for b.Loop() {
		retry.Do(ctx, p, op)
	}
}

func BenchmarkRunSuccess(b *testing.B) {
	ctx := context.Background()
	p := &retry.Policy{}
	op := func(context.Context) error { return nil }
	b.ReportAllocs()
	for b.Loop() {
		retry.Run(ctx, p, op)
	}
}

func TestAllocs(t *testing.T) {
	ctx := context.Background()
	p := &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}}
	ok := func(context.Context) (int, error) { return 1, nil }
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, p, ok) }); a != 0 {
		t.Errorf("Do success: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(200, func() { retry.Run(ctx, p, func(context.Context) error { return nil }) }); a != 0 {
		t.Errorf("Run success: %v allocs, want 0", a)
	}
	n := 0
	flaky := func(context.Context) (int, error) {
		n++
		if n%2 == 1 {
			return 0, errBench
		}
		return n, nil
	}
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, p, flaky) }); a != 0 {
		t.Errorf("Do one failure then success: %v allocs, want 0", a)
	}
	fail := func(context.Context) (int, error) { return 0, errBench }
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, p, fail) }); a != 1 {
		t.Errorf("Do giving up: %v allocs, want 1 (the *Error)", a)
	}
}
