package redisstore

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// holdPipeline is a hook that, once armed, holds the next pipeline of
// script calls until released.
type holdPipeline struct {
	armed    atomic.Bool
	entered  chan struct{}
	released chan struct{}
}

func (*holdPipeline) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*holdPipeline) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *holdPipeline) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && isScript(cmds[0]) && h.armed.CompareAndSwap(true, false) {
			close(h.entered)
			<-h.released
		}
		return next(ctx, cmds)
	}
}

// TestGroupCloseWaitsForLoopPipeline: a Close of a BatchRefresh group
// made while the group's loop is in the Redis pipeline of a refresh (not
// in its listeners) waits for the loop to end before it closes the
// members, and the loop has ended when Close returns.
func TestGroupCloseWaitsForLoopPipeline(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	h := &holdPipeline{entered: make(chan struct{}), released: make(chan struct{})}
	c := newClient(t, srv.addr)
	c.AddHook(h)
	k := batchGroup(t, c, namespace(t), fc, nil, nil)
	m := k.Get(hostKey(0))
	fc.BlockUntil(1)
	fc.Advance(testInterval / 10)
	waitFor(t, "the member's first exchange", func() bool { return m.Stats().Syncs > 0 })
	fc.BlockUntil(1)
	h.armed.Store(true)
	fc.Advance(testInterval)
	<-h.entered // the loop is in its pipeline
	closed := make(chan struct{})
	go func() { k.Close(); close(closed) }()
	waitFor(t, "Close to begin", func() bool { return k.loop.closed.Load() })
	// Close must not close a member while the loop refreshes: give a
	// wrong Close ample time to begin closing the member.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m.l.closed.Load() {
			close(h.released)
			<-closed
			t.Fatal("Close closed a member while the group's loop was still in its refresh")
		}
		time.Sleep(time.Millisecond)
	}
	close(h.released)
	<-closed
	select {
	case <-k.loop.stopped:
	default:
		t.Fatal("Close returned while the group's loop was still running")
	}
}

// afterFuncCounter is the real clock, counting AfterFunc calls.
type afterFuncCounter struct {
	clock.Clock
	n atomic.Int64
}

func (c *afterFuncCounter) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.n.Add(1)
	return c.Clock.AfterFunc(d, f)
}

// TestRealClockOpenPeriodKeepsItsTimer: on the real clock, refreshes of
// an open member that Redis reports with the same open period keep the
// cached end and its timer: no new snapshot end, no new AfterFunc.
func TestRealClockOpenPeriodKeepsItsTimer(t *testing.T) {
	c := BreakerConfig{
		Client: newClient(t, sharedRedis(t).addr), Name: "real-open", Namespace: namespace(t),
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Hour, OpenJitter: -1},
		RefreshInterval: time.Hour, Timeout: 5 * time.Second, Clock: clock.Real,
	}
	b, err := NewBreaker(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	ac := &afterFuncCounter{Clock: clock.Real}
	b.clk = ac // the loop waits an hour: only this goroutine reads it from now on
	if err := call(b, errDown); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b)
	wantState(t, b, breaker.Open)
	end := b.snap.Load().end
	if n := ac.n.Load(); n != 1 {
		t.Fatalf("the open period started %d timers, want 1", n)
	}
	for range 3 {
		mustSync(t, b)
	}
	if n := ac.n.Load(); n != 1 || b.snap.Load().end != end {
		t.Fatalf("refreshes of the same open period started %d timers (want 1), same end %v", n, b.snap.Load().end == end)
	}
}

// TestSyncAllNoScriptReloadsOnce: after SCRIPT FLUSH, SyncAll of many
// members loads the script once and resends the members that met
// NOSCRIPT in one second pipeline: no script call alone, two pipelines,
// and no member falls back.
func TestSyncAllNoScriptReloadsOnce(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	var tr trips
	c := newClient(t, srv.addr)
	c.AddHook(&tr)
	k, err := NewKeyedBreakers(keyed.Config{MaxKeys: 300}, BreakerConfig{
		Client: c, Name: "hosts", Namespace: namespace(t), Clock: fc,
		Breaker:         breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1},
		RefreshInterval: time.Hour, Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	const n = 200
	for i := range n {
		k.Get(hostKey(i))
	}
	fc.BlockUntil(n + 2)
	if err := k.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := newClient(t, srv.addr).ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	tr.reset()
	if err := k.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s, p, m := tr.single.Load(), tr.pipelines.Load(), tr.piped.Load(); s != 0 || p != 2 || m != 2*(n+2) {
		t.Fatalf("SyncAll after SCRIPT FLUSH sent %d script calls alone and %d pipelines of %d calls, want 0 and 2 of %d", s, p, m, 2*(n+2))
	}
	for i := range n {
		if k.Get(hostKey(i)).Stats().Degraded {
			t.Fatalf("%s fell back", hostKey(i))
		}
	}
}

// countingFake is a readCounter that counts AfterFunc calls.
type countingFake struct {
	*readCounter
	afterFuncs atomic.Int64
}

func (c *countingFake) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.afterFuncs.Add(1)
	return c.readCounter.AfterFunc(d, f)
}

// cacheOpenPeriod caches on the gated Breaker b a shared open period that
// ends after d, as apply does, its timer not started yet (armEnd comes
// after the exchange, or after other members' listeners).
func cacheOpenPeriod(b *Breaker, d time.Duration) *openEnd {
	b.stMu.Lock()
	defer b.stMu.Unlock()
	until := b.clk.Now().Add(d)
	e := b.newEnd(until)
	b.snap.Store(&snapshot{shared: true, state: breaker.Open, gen: b.snap.Load().gen, until: until, end: e})
	return e
}

// TestUnarmedOpenPeriodEndsOnTime: an open period cached but whose timer
// is not started yet is judged by reading the clock: it does not go on
// refusing past its end.
func TestUnarmedOpenPeriodEndsOnTime(t *testing.T) {
	rc := newReadCounter()
	b := newGatedBreaker(t, gatedConfig(t, "unarmed", rc, breaker.Config{ConsecutiveFailures: 1, OpenJitter: -1}), true)
	cacheOpenPeriod(b, time.Second)
	if st := b.State(); st != breaker.Open {
		t.Fatalf("State = %v in the open period, want open", st)
	}
	rc.Advance(time.Second)
	if st := b.State(); st != breaker.HalfOpen {
		t.Fatalf("State = %v once the unarmed open period ended, want half-open", st)
	}
	if err := b.Ready(); err == breaker.ErrOpen {
		t.Fatal("Ready refuses as open once the unarmed open period ended")
	}
}

// TestNoOpenPeriodTimerAfterClose: a Breaker closed while an open period
// waits for its timer starts no timer afterwards, whether the pending
// period is armed late (an exchange's tell) or a new one is cached (a
// claim's reply), and holds none.
func TestNoOpenPeriodTimerAfterClose(t *testing.T) {
	rc := newReadCounter()
	cf := &countingFake{readCounter: rc}
	c := gatedConfig(t, "closed-timer", rc, breaker.Config{ConsecutiveFailures: 1, OpenJitter: -1})
	c.Clock = cf
	b := newGatedBreaker(t, c, true)
	e := cacheOpenPeriod(b, time.Minute)
	b.Close()
	b.armEnd()
	e2 := cacheOpenPeriod(b, time.Minute)
	b.armEnd()
	if n := cf.afterFuncs.Load(); n != 0 || e.t != nil || e2.t != nil {
		t.Fatalf("%d timers started after Close, want 0", n)
	}
	if b.pendingEnd != nil {
		t.Fatal("a closed Breaker holds a pending open period")
	}
	if st := b.State(); st != breaker.Open {
		t.Fatalf("State = %v, want open (judged by the clock)", st)
	}
	rc.Advance(time.Minute)
	if st := b.State(); st != breaker.HalfOpen {
		t.Fatalf("State = %v after the period, want half-open", st)
	}
}

// TestKeyedBudgetsSyncAllNoScriptReloadsOnce is
// TestSyncAllNoScriptReloadsOnce for KeyedBudgets.
func TestKeyedBudgetsSyncAllNoScriptReloadsOnce(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	var tr trips
	c := newClient(t, srv.addr)
	c.AddHook(&tr)
	k, err := NewKeyedBudgets(keyed.Config{MaxKeys: 300}, BudgetConfig{
		Client: c, Name: "hosts", Namespace: namespace(t), Clock: fc,
		Ratio:           budget.RatioConfig{MaxTokens: 10, Refill: 1, RetryCost: 1},
		RefreshInterval: time.Hour, Timeout: 5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	const n = 200
	for i := range n {
		k.Get(hostKey(i))
	}
	fc.BlockUntil(n + 2)
	if err := k.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if err := newClient(t, srv.addr).ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		k.Get(hostKey(i)).Record(false, nil) // something to flush
	}
	tr.reset()
	if err := k.SyncAll(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if s, p, m := tr.single.Load(), tr.pipelines.Load(), tr.piped.Load(); s != 0 || p != 2 || m != 2*(n+2) {
		t.Fatalf("SyncAll after SCRIPT FLUSH sent %d script calls alone and %d pipelines of %d calls, want 0 and 2 of %d", s, p, m, 2*(n+2))
	}
	for i := range n {
		if k.Get(hostKey(i)).Stats().Link.Degraded {
			t.Fatalf("%s fell back", hostKey(i))
		}
	}
}

// TestLoopPanicsLoggedOnceThenCounted: a panic recovered on a link's
// background goroutine again and again (a Clock that panics at every
// exchange) is logged with its stack once and counted in
// LinkStats.Panics, not logged once per exchange; another panic is
// logged.
func TestLoopPanicsLoggedOnceThenCounted(t *testing.T) {
	var logs lockedBuffer
	l := newLink(linkConfig{name: "p", logger: slog.New(slog.NewTextHandler(&logs, nil))}, "breaker")
	for range 3 {
		l.exchange(func() { panic("clock broke") })
	}
	if n := strings.Count(logs.String(), "clock broke"); n != 1 {
		t.Fatalf("3 panics logged %d times, want 1:\n%s", n, logs.String())
	}
	if got := l.stats().Panics; got != 3 {
		t.Fatalf("Stats.Panics = %d, want 3", got)
	}
	l.exchange(func() { panic("listener broke") })
	if n := strings.Count(logs.String(), "listener broke"); n != 1 {
		t.Fatalf("another panic logged %d times, want 1", n)
	}
}

// TestBudgetGroupCloseWaitsForLoopPipeline is
// TestGroupCloseWaitsForLoopPipeline for KeyedBudgets.
func TestBudgetGroupCloseWaitsForLoopPipeline(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	h := &holdPipeline{entered: make(chan struct{}), released: make(chan struct{})}
	c := newClient(t, srv.addr)
	c.AddHook(h)
	k, err := NewKeyedBudgets(keyed.Config{}, BudgetConfig{
		Client: c, Name: "hosts", Namespace: namespace(t), Clock: fc,
		Ratio:           budget.RatioConfig{MaxTokens: 10, Refill: 1, RetryCost: 1},
		RefreshInterval: testInterval, Timeout: 5 * time.Second, BatchRefresh: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	m := k.Get(hostKey(0))
	fc.BlockUntil(1)
	fc.Advance(testInterval / 10)
	waitFor(t, "the member's first exchange", func() bool { return m.Stats().Link.Syncs > 0 })
	fc.BlockUntil(1)
	h.armed.Store(true)
	fc.Advance(testInterval)
	<-h.entered
	closed := make(chan struct{})
	go func() { k.Close(); close(closed) }()
	waitFor(t, "Close to begin", func() bool { return k.loop.closed.Load() })
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if m.l.closed.Load() {
			close(h.released)
			<-closed
			t.Fatal("Close closed a member while the group's loop was still in its refresh")
		}
		time.Sleep(time.Millisecond)
	}
	close(h.released)
	<-closed
	select {
	case <-k.loop.stopped:
	default:
		t.Fatal("Close returned while the group's loop was still running")
	}
}
