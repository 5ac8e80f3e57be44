package redisstore

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
)

// Regression tests of the issue 32 sweep of redisstore (callback panics,
// arithmetic extremes, cleanup on every path).

// panicky is a rand.Source that panics while armed.
type panicky struct{ armed atomic.Bool }

func (p *panicky) Uint64() uint64 {
	if p.armed.Load() {
		panic("rand source panicked")
	}
	return 42
}

// mustPanicWith runs fn and fails the test unless it panics.
func mustPanicWith(t *testing.T, fn func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	fn()
}

// TestRandPanicDoesNotWedgeBreaker: the user's Rand panics while an
// exchange draws the open period's jitter. The panic goes on, and the next
// exchange neither waits for a lock nor for the right to call Redis that
// the panicking one held.
func TestRandPanicDoesNotWedgeBreaker(t *testing.T) {
	src := &panicky{}
	f := newFleet(t, 1, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: 0.5, Rand: src})
	b := f.bs[0]
	src.armed.Store(true)
	mustPanicWith(t, func() { _ = b.Sync(syncCtx(t)) })
	src.armed.Store(false)
	var err error
	if within(10*time.Second, func() { err = b.Sync(syncCtx(t)) }) != nil {
		t.Fatal("Sync after a panicking Rand did not return within 10s: wedged")
	}
	if err != nil {
		t.Fatalf("Sync after a panicking Rand: %v", err)
	}
}

// panickingScripter panics in its script calls while armed.
type panickingScripter struct {
	redis.Scripter
	armed atomic.Bool
}

func (p *panickingScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if p.armed.Load() {
		panic("scripter panicked")
	}
	return p.Scripter.EvalSha(ctx, sha, keys, args...)
}

// TestScripterPanicReleasesRedis: a redis.Scripter of the user's that
// panics during an exchange or a probe claim does not keep the right to
// call Redis: later calls still reach Redis, and the outcomes of the batch
// whose exchange panicked are sent with the next one.
func TestScripterPanicReleasesRedis(t *testing.T) {
	fc := clocktest.NewFake()
	ps := &panickingScripter{Scripter: newClient(t, sharedRedis(t).addr)}
	b, err := NewBreaker(BreakerConfig{
		Client: ps, Name: "scripter", Namespace: namespace(t), Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: testInterval, Timeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	fc.BlockUntil(1)
	for range 3 {
		_ = call(b, errDown)
	}
	ps.armed.Store(true)
	mustPanicWith(t, func() { _ = b.Sync(syncCtx(t)) })
	ps.armed.Store(false)
	if err := b.Sync(syncCtx(t)); err != nil {
		t.Fatalf("Sync after a panicking Scripter: %v", err)
	}
	wantState(t, b, breaker.Open) // the 3 failures were not lost with the panic
	fc.Advance(time.Minute)
	fc.BlockUntil(1)
	mustSync(t, b)
	ps.armed.Store(true)
	mustPanicWith(t, func() { _, _ = b.Allow() }) // the probe claim panics
	ps.armed.Store(false)
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("Allow after a panicking claim: %v", err)
	}
	done(nil)
	wantState(t, b, breaker.Closed)
}

// TestClassifierPanicCountsAsFailure: the user's IsFailure panics while a
// closed-state call's result is counted. As for a probe, the call counts
// as a failure and the panic goes on; and a call that panicked
// (retry.PanicError) is a failure whatever IsExcluded says, as in
// breaker.Breaker.
func TestClassifierPanicCountsAsFailure(t *testing.T) {
	for _, timed := range []bool{false, true} {
		bc := breaker.Config{
			ConsecutiveFailures: 1, OpenTimeout: time.Minute,
			IsFailure: func(err error) bool {
				if errors.Is(err, errPanicky) {
					panic("IsFailure panicked")
				}
				return err != nil
			},
		}
		if timed {
			bc = breaker.Config{
				Window:      breaker.Window{Duration: time.Minute, MinCalls: 1, FailureRatio: 0.5, SlowCallDuration: time.Second, SlowCallRatio: 1},
				OpenTimeout: time.Minute, IsFailure: bc.IsFailure,
			}
		}
		f := newFleet(t, 1, bc)
		b := f.bs[0]
		mustPanicWith(t, func() { _ = call(b, errPanicky) })
		mustSync(t, b)
		wantState(t, b, breaker.Open)
	}
	f := newFleet(t, 1, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, IsExcluded: func(error) bool { return true }})
	b := f.bs[0]
	_ = call(b, &retry.PanicError{Value: "op panicked"})
	mustSync(t, b)
	wantState(t, b, breaker.Open)
}

// TestHugeWindowBucketTTL: a window near the longest Duration with the
// longest KeyTTL gives its buckets a TTL that saturates instead of
// wrapping negative (which would make Redis delete them at once).
func TestHugeWindowBucketTTL(t *testing.T) {
	s, err := BreakerConfig{
		Client: offlineClient(t), Name: "n", KeyTTL: math.MaxInt64,
		Breaker: breaker.Config{Window: breaker.Window{Duration: math.MaxInt64 - 1, FailureRatio: 0.5}},
	}.resolve()
	if err != nil {
		t.Fatal(err)
	}
	b := &Breaker{s: s}
	if ttl := b.bucketTTL(); ttl <= 0 {
		t.Fatalf("bucket TTL = %dms, want a positive (saturated) TTL", ttl)
	}
}

// TestBudgetScripterPanicKeepsDeposits: a Scripter that panics during a
// Budget's exchange loses none of the deposits that exchange carried:
// they reach the bucket with the next one.
func TestBudgetScripterPanicKeepsDeposits(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	fc := clocktest.NewFake()
	ps := &panickingScripter{Scripter: newClient(t, srv.addr)}
	bu, err := NewBudget(BudgetConfig{
		Client: ps, Name: "deposits", Namespace: ns, Clock: fc,
		Ratio:           budget.RatioConfig{MaxTokens: 10, Refill: 1, RetryCost: 1, StartEmpty: true},
		LeaseTokens:     1,
		RefreshInterval: testInterval, Timeout: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bu.Close)
	waitFor(t, "the first exchange", func() bool { return bu.Stats().Link.Syncs >= 1 })
	fc.BlockUntil(1)
	for range 5 {
		bu.Record(false, nil)
	}
	ps.armed.Store(true)
	mustPanicWith(t, func() { _ = bu.Sync(syncCtx(t)) })
	ps.armed.Store(false)
	if err := bu.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := bucketTokens(t, srv.addr, ns, "deposits") + bu.Lease(); got != 5 {
		t.Fatalf("bucket and lease hold %v tokens after 5 deposits, want 5", got)
	}
}
