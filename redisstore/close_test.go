package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// gatedScripter runs scripts on a real Redis client, but can make them
// fail at once or wait at a gate (until released, or until their context
// ends): a Redis call that is slow for exactly as long as a test wants.
type gatedScripter struct {
	redis.Scripter
	fail atomic.Bool

	mu      sync.Mutex
	gate    chan struct{} // non-nil: calls wait until it is closed
	entered chan struct{} // receives once per call that waits at the gate
}

var errGated = errors.New("gatedScripter: failing")

func newGatedScripter(tb testing.TB, addr string) *gatedScripter {
	return &gatedScripter{Scripter: newClient(tb, addr), entered: make(chan struct{}, 16)}
}

func (g *gatedScripter) hold() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gatedScripter) release() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gatedScripter) wait(ctx context.Context) error {
	if g.fail.Load() {
		return errGated
	}
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate == nil {
		return nil
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func failedCmd(ctx context.Context, err error) *redis.Cmd {
	c := redis.NewCmd(ctx)
	c.SetErr(err)
	return c
}

func (g *gatedScripter) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := g.wait(ctx); err != nil {
		return failedCmd(ctx, err)
	}
	return g.Scripter.EvalSha(ctx, sha, keys, args...)
}

func (g *gatedScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if err := g.wait(ctx); err != nil {
		return failedCmd(ctx, err)
	}
	return g.Scripter.Eval(ctx, script, keys, args...)
}

// closeBlocked reports whether some goroutine is blocked inside a
// Breaker's or a Budget's Close (waiting for the background goroutine).
func closeBlocked() bool {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	for g := range strings.SplitSeq(string(buf), "\n\n") {
		if !strings.Contains(g, "redisstore.(*Breaker).Close") && !strings.Contains(g, "redisstore.(*Budget).Close") {
			continue
		}
		header, _, _ := strings.Cut(g, "\n")
		for _, state := range []string{"[chan receive", "[sync.Cond.Wait", "[select", "[sync.Mutex.Lock", "[semacquire"} {
			if strings.Contains(header, state) {
				return true
			}
		}
	}
	return false
}

// TestCloseWaitsForSlowExchange (issue 32 item 11): Close called (not from
// a callback) while the background exchange waits on a slow Redis waits
// for it: when Close returns the background goroutine has ended, and
// OnDegraded is not called after Close returned.
func TestCloseWaitsForSlowExchange(t *testing.T) {
	for _, kind := range []string{"breaker", "budget"} {
		t.Run(kind, func(t *testing.T) {
			g := newGatedScripter(t, sharedRedis(t).addr)
			fc := clocktest.NewFake()
			var mu sync.Mutex
			returned := false
			var late []bool
			onDeg := func(degraded bool, _ error) {
				mu.Lock()
				if returned {
					late = append(late, degraded)
				}
				mu.Unlock()
			}
			var l *link
			var closeFn func()
			var degraded func() bool
			switch kind {
			case "breaker":
				b, err := NewBreaker(BreakerConfig{
					Client: g, Name: "slow", Namespace: namespace(t), Clock: fc,
					RefreshInterval: testInterval, Timeout: 10 * time.Second, OnDegraded: onDeg,
				})
				if err != nil {
					t.Fatal(err)
				}
				l, closeFn, degraded = b.l, b.Close, func() bool { return b.Stats().Degraded }
			case "budget":
				b, err := NewBudget(BudgetConfig{
					Client: g, Name: "slow", Namespace: namespace(t), Clock: fc,
					RefreshInterval: testInterval, Timeout: 10 * time.Second, OnDegraded: onDeg,
				})
				if err != nil {
					t.Fatal(err)
				}
				l, closeFn, degraded = b.l, b.Close, func() bool { return b.Stats().Link.Degraded }
			}
			t.Cleanup(closeFn)
			waitFor(t, "the first exchange", func() bool { return l.stats().Syncs >= 1 })
			fc.BlockUntil(1)
			g.fail.Store(true)
			fc.Advance(testInterval)
			waitFor(t, "the fallback", degraded)
			fc.BlockUntil(1)
			g.fail.Store(false)

			g.hold()
			fc.Advance(testInterval) // the next exchange (it would re-join) waits at the gate
			select {
			case <-g.entered:
			case <-time.After(10 * time.Second):
				t.Fatal("the background exchange did not start within 10s")
			}
			result := make(chan bool, 1)
			go func() {
				closeFn()
				mu.Lock()
				returned = true
				mu.Unlock()
				select {
				case <-l.stopped:
					result <- true
				default:
					result <- false
				}
			}()
			waitFor(t, "Close to return or to wait", func() bool { return len(result) > 0 || closeBlocked() })
			if len(result) > 0 {
				g.release()
				t.Fatal("Close returned while the background exchange was still running")
			}
			g.release()
			select {
			case stopped := <-result:
				if !stopped {
					t.Fatal("Close returned before the background goroutine ended")
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Close did not return within 10s of the exchange ending")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(late) > 0 {
				t.Fatalf("OnDegraded called after Close returned: %v", late)
			}
		})
	}
}

// TestBackgroundCallbackPanicIsRecovered (issue 32 item 12): a listener or
// OnDegraded that panics on the background goroutine does not crash the
// process: the panic is logged (Logger, at Error) and the exchanges go on.
func TestBackgroundCallbackPanicIsRecovered(t *testing.T) {
	t.Run("breaker listener", func(t *testing.T) {
		logs := &logCapture{}
		f := newFleet(t, 1, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute})
		a := f.bs[0]
		c := f.cfg
		c.Client = newClient(t, sharedRedis(t).addr)
		c.Logger = slog.New(logs)
		b, err := NewBreaker(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		waitFor(t, "B's first exchange", func() bool { return b.Stats().Syncs >= 1 })
		b.Subscribe(func(_, to breaker.State) { panic("listener panicked on " + to.String()) })
		_ = call(a, errDown)
		mustSync(t, a)
		f.fc.BlockUntil(2)
		f.fc.Advance(testInterval) // B's loop sees the breaker open; its listener panics
		waitFor(t, "the panic to be logged", func() bool { return logs.count(slog.LevelError) == 1 })
		wantState(t, b, breaker.Open)
		syncs := b.Stats().Syncs
		f.fc.BlockUntil(2)
		f.fc.Advance(testInterval)
		waitFor(t, "B's loop to exchange again", func() bool { return b.Stats().Syncs > syncs })
	})
	for _, kind := range []string{"breaker", "budget"} {
		t.Run(kind+" OnDegraded", func(t *testing.T) {
			logs := &logCapture{}
			g := newGatedScripter(t, sharedRedis(t).addr)
			fc := clocktest.NewFake()
			onDeg := func(degraded bool, _ error) { panic(fmt.Sprintf("OnDegraded(%v) panicked", degraded)) }
			var stats func() LinkStats
			switch kind {
			case "breaker":
				b, err := NewBreaker(BreakerConfig{
					Client: g, Name: "panicky", Namespace: namespace(t), Clock: fc,
					RefreshInterval: testInterval, Logger: slog.New(logs), OnDegraded: onDeg,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				stats = b.Stats
			case "budget":
				b, err := NewBudget(BudgetConfig{
					Client: g, Name: "panicky", Namespace: namespace(t), Clock: fc,
					RefreshInterval: testInterval, Logger: slog.New(logs), OnDegraded: onDeg,
				})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(b.Close)
				stats = func() LinkStats { return b.Stats().Link }
			}
			waitFor(t, "the first exchange", func() bool { return stats().Syncs >= 1 })
			fc.BlockUntil(1)
			g.fail.Store(true)
			fc.Advance(testInterval) // falls back: OnDegraded(true) panics
			waitFor(t, "the fallback's panic to be logged", func() bool { return logs.count(slog.LevelError) == 1 })
			if !stats().Degraded {
				t.Fatalf("stats %+v, want degraded", stats())
			}
			fc.BlockUntil(1)
			g.fail.Store(false)
			fc.Advance(testInterval) // re-joins: OnDegraded(false) panics
			waitFor(t, "the re-join's panic to be logged", func() bool { return logs.count(slog.LevelError) == 2 })
			waitFor(t, "the re-join", func() bool { return !stats().Degraded })
		})
	}
}
