package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestFallbackStartsFromSharedState (issue #26 item 3): a process falls
// back to local state a second time, long after an earlier outage left its
// local breaker open and its private budget drained. The local state
// starts from the last shared state seen (closed, a bucket with tokens),
// not from where the earlier outage left it.
func TestFallbackStartsFromSharedState(t *testing.T) {
	srv := ownRedis(t)
	fc := clocktest.NewFake()
	ns := namespace(t)
	local := breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Hour, OpenJitter: -1}
	b, err := NewBreaker(BreakerConfig{
		Client: newClient(t, srv.addr), Name: "stock", Namespace: ns, Clock: fc,
		Breaker: breaker.Config{ConsecutiveFailures: 5, OpenTimeout: time.Minute, OpenJitter: -1},
		Local:   &local, RefreshInterval: testInterval, Timeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	bu, err := NewBudget(BudgetConfig{
		Client: newClient(t, srv.addr), Name: "stock", Namespace: ns, Clock: fc,
		RefreshInterval: testInterval, Timeout: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bu.Close)
	waitFor(t, "the first exchanges", func() bool { return b.Stats().Syncs >= 1 && bu.Stats().Link.Syncs >= 1 })
	fc.BlockUntil(2)

	// An earlier outage: the local breaker opens, the private budget drains.
	srv.kill()
	if b.Sync(syncCtx(t)) == nil || bu.Sync(syncCtx(t)) == nil {
		t.Fatal("Sync succeeded with Redis down")
	}
	for range 5 {
		_ = call(b, errDown)
	}
	wantState(t, b, breaker.Open)
	for bu.Withdraw(errDown) {
	}
	if err := srv.start(); err != nil {
		t.Fatal(err)
	}
	mustSync(t, b)
	if err := bu.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	fc.Advance(time.Minute) // the shared open period (if any) ends
	fc.BlockUntil(2)
	mustSync(t, b)
	if err := call(b, nil); err != nil { // a probe, if the breaker was open
		t.Fatal(err)
	}
	wantState(t, b, breaker.Closed)
	for range 100 {
		if err := call(b, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, b)
	if err := bu.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !bu.Withdraw(errDown) {
		t.Fatal("the shared budget refused a retry")
	}

	// A short blip: Redis stops answering for one exchange.
	srv.pause()
	errB, errBu := b.Sync(syncCtx(t)), bu.Sync(syncCtx(t))
	srv.resume()
	if errB == nil || errBu == nil || !b.Stats().Degraded || !bu.Stats().Link.Degraded {
		t.Fatalf("Sync during the blip: %v, %v; want both degraded", errB, errBu)
	}
	if err := call(b, nil); err != nil {
		t.Fatalf("first call on local state after the blip: %v, want admitted (the fleet is closed)", err)
	}
	if errors.Is(b.Ready(), breaker.ErrOpen) {
		t.Fatal("local breaker open after the blip")
	}
	if !bu.Withdraw(errDown) {
		t.Fatal("the private budget refused a retry after the blip: it resumed drained")
	}
}
