package redisstore

import (
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestClusterWindowAndBudget: on a three-node Redis Cluster the
// time-window breaker (whose scripts address bucket keys of the same hash
// slot) and the budget work as on one server.
func TestClusterWindowAndBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := newRedisCluster(t)
	fc := clocktest.NewFake()
	ns := namespace(t)
	var bs []*Breaker
	for range 2 {
		b, err := NewBreaker(BreakerConfig{
			Client: newClusterClient(t, rc.addrs), Name: "catalog", Namespace: ns, Clock: fc,
			Breaker: breaker.Config{
				Window:      breaker.Window{Duration: 10 * time.Second, MinCalls: 10, FailureRatio: 0.5},
				OpenTimeout: time.Minute, OpenJitter: -1,
			},
			RefreshInterval: testInterval, Timeout: time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		mustSync(t, b)
		bs = append(bs, b)
	}
	fc.BlockUntil(2) // both loops have made their first exchange and wait for the clock
	for i := range 10 {
		_ = call(bs[i%2], errDown)
	}
	mustSync(t, bs[0])
	wantState(t, bs[0], breaker.Closed) // 5 of the 10 failures
	mustSync(t, bs[1])
	wantState(t, bs[1], breaker.Open)
	mustSync(t, bs[0])
	wantState(t, bs[0], breaker.Open)

	bu, err := NewBudget(BudgetConfig{Client: newClusterClient(t, rc.addrs), Name: "catalog", Namespace: ns, Clock: fc, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bu.Close)
	if err := bu.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if got := bu.Lease(); got != 2 {
		t.Fatalf("lease on the cluster = %v, want 2", got)
	}
}
