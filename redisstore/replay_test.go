package redisstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// replayBreaker makes a Breaker whose Redis calls go through a proxy that
// can drop a reply, with the scripts already loaded, and waits until its
// loop is idle on the fake clock. go-redis retries a command whose reply
// was lost with the connection (MaxRetries 3 by default).
func replayBreaker(t *testing.T, bc breaker.Config) (*Breaker, *proxy, *clocktest.Fake) {
	t.Helper()
	px := newProxy(t, sharedRedis(t).addr)
	fc := clocktest.NewFake()
	rdb := newClient(t, px.addr)
	loadScripts(t, rdb)
	bc.OpenJitter = -1
	b, err := NewBreaker(BreakerConfig{
		Client: rdb, Name: "replay", Namespace: namespace(t), Clock: fc, Breaker: bc,
		RefreshInterval: testInterval, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
	fc.BlockUntil(1)
	return b, px, fc
}

// TestReplayedSyncCountsOnce (issue #26 item 2): the reply to a flush is
// lost after Redis ran the script, and go-redis runs it again: the batch
// counts once. Two failures must not open a breaker set to trip at 4.
func TestReplayedSyncCountsOnce(t *testing.T) {
	b, px, _ := replayBreaker(t, breaker.Config{ConsecutiveFailures: 4, OpenTimeout: time.Minute})
	_ = call(b, errDown)
	_ = call(b, errDown)
	px.dropNext(1)
	mustSync(t, b)
	if px.dropped.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", px.dropped.Load())
	}
	wantState(t, b, breaker.Closed)
	if got := b.Counts().ConsecutiveFailures; got != 2 {
		t.Fatalf("fleet ConsecutiveFailures = %d after 2 failures, want 2", got)
	}
	_ = call(b, errDown)
	_ = call(b, errDown)
	mustSync(t, b)
	wantState(t, b, breaker.Open)
}

// TestReplayedClaimKeepsPermit (issue #26 item 2): the reply granting a
// probe permit is lost and the claim runs again: the process gets the
// permit it holds, instead of ErrTooManyProbes.
func TestReplayedClaimKeepsPermit(t *testing.T) {
	b, px, fc := replayBreaker(t, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute})
	_ = call(b, errDown)
	mustSync(t, b)
	wantState(t, b, breaker.Open)
	fc.Advance(time.Minute)
	fc.BlockUntil(1) // the refresh the advance fired has finished
	mustSync(t, b)
	px.dropNext(1)
	done, err := b.Allow()
	if px.dropped.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", px.dropped.Load())
	}
	if err != nil {
		t.Fatalf("probe whose grant was replayed: %v, want admitted", err)
	}
	if st := b.Stats(); st.RedisErrors != 0 || st.Degraded {
		t.Fatalf("stats %+v: the replayed claim failed, and the local breaker admitted the call", st)
	}
	done(nil)
	wantState(t, b, breaker.Closed)
	if got := b.Stats(); got.Degraded {
		t.Fatalf("stats %+v after the probe's report", got)
	}
}

// TestReplayedBudgetSyncOnce (issue #26 item 2): a budget exchange whose
// reply was lost runs again: its deposits count once and the lease it
// granted is the one the process gets, so no token is created or lost.
func TestReplayedBudgetSyncOnce(t *testing.T) {
	srv := sharedRedis(t)
	px := newProxy(t, srv.addr)
	fc := clocktest.NewFake()
	rdb := newClient(t, px.addr)
	loadScripts(t, rdb)
	ns := namespace(t)
	bu, err := NewBudget(BudgetConfig{
		Client: rdb, Name: "replay", Namespace: ns, Clock: fc,
		Ratio:       budget.RatioConfig{MaxTokens: 10, Refill: 0.1, RetryCost: 1, StartEmpty: true},
		LeaseTokens: 1, RefreshInterval: testInterval, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bu.Close)
	waitFor(t, "the first exchange", func() bool { return bu.Stats().Link.Syncs >= 1 })
	fc.BlockUntil(1)
	for range 30 { // 3 tokens
		bu.Record(false, nil)
	}
	px.dropNext(1)
	if err := bu.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if px.dropped.Load() != 1 {
		t.Fatalf("%d replies dropped, want 1", px.dropped.Load())
	}
	v, err := newClient(t, srv.addr).HGet(context.Background(), ns+":{replay}:budget", "tokens").Result()
	if err != nil {
		t.Fatal(err)
	}
	units, _ := strconv.ParseInt(v, 10, 64)
	if total := bu.Lease() + fromUnits(units); total != 3 {
		t.Fatalf("lease %v + bucket %v = %v tokens after depositing 3", bu.Lease(), fromUnits(units), total)
	}
}
