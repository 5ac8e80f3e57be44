package redisstore

import (
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestLongestOpenPeriodDoesNotWrap: an open period near the longest
// Duration, on a clock that has moved since it was anchored to Redis's,
// ends at a saturated time far ahead rather than wrapping into the past
// (which would end it at once).
func TestLongestOpenPeriodDoesNotWrap(t *testing.T) {
	rc := newReadCounter()
	c := gatedConfig(t, "longest", rc, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: math.MaxInt64 - 1, OpenJitter: -1})
	c.KeyTTL = math.MaxInt64
	for _, gate := range []bool{false, true} {
		c.Name = "longest-" + map[bool]string{false: "plain", true: "gated"}[gate]
		b := newGatedBreaker(t, c, gate)
		rc.Advance(time.Second)
		mustSync(t, b)
		if err := call(b, errDown); err != nil {
			t.Fatal(err)
		}
		mustSync(t, b)
		wantState(t, b, breaker.Open)
		rc.Advance(24 * time.Hour)
		wantState(t, b, breaker.Open)
	}
	if got := scriptMillis(math.MaxInt64); got != math.MaxInt64 {
		t.Fatalf("scriptMillis(MaxInt64) = %v", got)
	}
	if got := scriptMillis(math.MinInt64); got != math.MinInt64 {
		t.Fatalf("scriptMillis(MinInt64) = %v", got)
	}
}

// resetPanics is a fake clock whose timers' Reset panics once armed.
type resetPanics struct {
	*clocktest.Fake
	armed atomic.Bool
}

func (c *resetPanics) NewTimer(d time.Duration) clock.Timer {
	return &panickyTimer{c.Fake.NewTimer(d), c}
}

type panickyTimer struct {
	clock.Timer
	c *resetPanics
}

func (t *panickyTimer) Reset(d time.Duration) bool {
	if t.c.armed.Load() {
		panic("Reset failed")
	}
	return t.Timer.Reset(d)
}

// TestLoopClockPanicKeepsExchanging: a Clock that panics while the
// background loop paces the exchanges does not end the process: the panic
// is logged, the exchanges go on by the real clock, and Close ends the
// goroutine (goleak, TestMain).
func TestLoopClockPanicKeepsExchanging(t *testing.T) {
	srv := sharedRedis(t)
	rc := &resetPanics{Fake: clocktest.NewFake()}
	var logs lockedBuffer
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, srv.addr), Name: "loop-clock", Namespace: namespace(t), Clock: rc,
		RefreshInterval: 20 * time.Millisecond, Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	rc.BlockUntil(1)
	rc.armed.Store(true)
	rc.Advance(20 * time.Millisecond) // the next exchange, then Reset panics
	waitFor(t, "exchanges paced by the real clock", func() bool { return b.Stats().Syncs >= 4 })
	if !strings.Contains(logs.String(), "Reset failed") {
		t.Fatalf("the panic was not logged: %q", logs.String())
	}
}

// nowPanics is a fake clock whose Now panics once armed.
type nowPanics struct {
	*clocktest.Fake
	armed atomic.Bool
}

func (c *nowPanics) Now() time.Time {
	if c.armed.Load() {
		panic("Now failed")
	}
	return c.Fake.Now()
}

// TestLocalClockPanicOnFallbackDoesNotWedge: the local breaker's Clock
// panics while the process falls back to local state (a fresh local
// breaker reads it): the panic goes on to the caller of Sync, and the
// right to call Redis is released, so that the next exchange is made.
func TestLocalClockPanicOnFallbackDoesNotWedge(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	lc := &nowPanics{Fake: clocktest.NewFake()}
	fc := clocktest.NewFake()
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, px.addr), Name: "local-clock", Namespace: namespace(t), Clock: fc,
		Local:           &breaker.Config{Clock: lc},
		RefreshInterval: time.Hour, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustSync(t, b)
	fc.BlockUntil(1) // the loop made its first exchange and waits
	lc.armed.Store(true)
	px.cut()
	mustPanicWith(t, func() { _ = b.Sync(syncCtx(t)) })
	lc.armed.Store(false)
	px.heal()
	mustSync(t, b)
}
