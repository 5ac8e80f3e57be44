package retry_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
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

// BenchmarkDoSuccessBudgetBreaker is the first-try success path with a
// ratio budget and a closed breaker, which takes the panic guard.
func BenchmarkDoSuccessBudgetBreaker(b *testing.B) {
	ctx := context.Background()
	p := &retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Constant{},
		Budget:      budget.NewRatio(budget.TenPercent()),
		Breaker:     breaker.New(breaker.Config{ConsecutiveFailures: 1 << 20}),
	}
	op := func(context.Context) (int, error) { return 1, nil }
	b.ReportAllocs()
	for b.Loop() {
		retry.Do(ctx, p, op)
	}
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

// openBreakerPolicy returns a Policy whose breaker is open for an hour.
func openBreakerPolicy() *retry.Policy {
	br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour})
	done, _ := br.Allow()
	done(errBench)
	return &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}, Breaker: br}
}

// emptyBudgetPolicy returns a Policy whose ratio budget refuses retries.
func emptyBudgetPolicy() *retry.Policy {
	b := budget.NewRatio(budget.GRPC())
	for b.Withdraw(errBench) {
		b.Record(false, errBench)
	}
	return &retry.Policy{MaxAttempts: 4, Backoff: backoff.Constant{}, Budget: b}
}

var failOp = func(context.Context) (int, error) { return 0, errBench }

// BenchmarkDoBreakerOpen is Do refused by an open breaker before any
// attempt. Its one allocation is the returned *retry.Error.
func BenchmarkDoBreakerOpen(b *testing.B) {
	ctx := context.Background()
	p := openBreakerPolicy()
	b.ReportAllocs()
	for b.Loop() {
		retry.Do(ctx, p, failOp)
	}
}

func BenchmarkDoBreakerOpenParallel(b *testing.B) {
	p := openBreakerPolicy()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			retry.Do(ctx, p, failOp)
		}
	})
}

// BenchmarkDoBudgetEmpty is Do whose first attempt fails and whose retry
// an empty budget refuses. Its one allocation is the returned *retry.Error.
func BenchmarkDoBudgetEmpty(b *testing.B) {
	ctx := context.Background()
	p := emptyBudgetPolicy()
	b.ReportAllocs()
	for b.Loop() {
		retry.Do(ctx, p, failOp)
	}
}

func BenchmarkDoBudgetEmptyParallel(b *testing.B) {
	p := emptyBudgetPolicy()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			retry.Do(ctx, p, failOp)
		}
	})
}

var adviceErr = retry.After(errBench, time.Second)

// instantClock's timers have fired already, at no allocation, so that
// TestAllocs measures Do rather than time.NewTimer.
type instantClock struct{}

func (instantClock) Now() time.Time                              { return time.Time{} }
func (instantClock) Since(time.Time) time.Duration               { return 0 }
func (instantClock) NewTimer(time.Duration) clock.Timer          { return firedTimer{} }
func (instantClock) AfterFunc(time.Duration, func()) clock.Timer { panic("unused") }

type firedTimer struct{}

var firedC = func() chan time.Time { c := make(chan time.Time); close(c); return c }()

func (firedTimer) C() <-chan time.Time      { return firedC }
func (firedTimer) Stop() bool               { return false }
func (firedTimer) Reset(time.Duration) bool { return false }

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
	open := openBreakerPolicy()
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, open, fail) }); a != 0 {
		t.Errorf("Do refused by an open breaker: %v allocs, want 0 (its prebuilt *Error)", a)
	}
	plain := *open
	plain.Breaker = struct{ retry.Breaker }{open.Breaker} // no RefusalError
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, &plain, fail) }); a != 1 {
		t.Errorf("Do refused by an open breaker that prebuilds no *Error: %v allocs, want 1 (the *Error)", a)
	}
	empty := emptyBudgetPolicy()
	if _, err := retry.Do(ctx, empty, fail); !errors.Is(err, retry.ErrBudgetExhausted) {
		t.Fatalf("empty budget: %v", err)
	}
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, empty, fail) }); a != 1 {
		t.Errorf("Do refused by an empty budget: %v allocs, want 1 (the *Error)", a)
	}
	// Jitter from a shared source of any kind stays allocation-free.
	jp := &retry.Policy{MaxAttempts: 2, Clock: instantClock{}, Backoff: backoff.Exponential{Base: time.Second, Jitter: backoff.Full, Rand: rand.NewPCG(1, 2)}, Rand: rand.NewPCG(3, 4)}
	advised := func(context.Context) (int, error) {
		n++
		if n%2 == 1 {
			return 0, adviceErr // Retry-After 1s: jittered from Policy.Rand
		}
		return n, nil
	}
	if a := testing.AllocsPerRun(200, func() { retry.Do(ctx, jp, advised) }); a != 0 {
		t.Errorf("Do with PCG sources: %v allocs, want 0", a)
	}
}
