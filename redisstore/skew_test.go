package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
)

// TestClockSkewKeepsProbesExact (issue #26 item 4): a process whose clock
// runs 3s ahead of another's, with a probe lease of 2s, does not take the
// other's live probe permit: the scripts take time from Redis, so MaxProbes
// 1 still means one probe in the fleet.
func TestClockSkewKeepsProbesExact(t *testing.T) {
	srv := sharedRedis(t)
	ns := namespace(t)
	fb := clocktest.NewFake()
	fa := clocktest.NewFakeAt(clocktest.Epoch.Add(3 * time.Second)) // host A runs 3s ahead
	mk := func(fc *clocktest.Fake) *Breaker {
		b, err := NewBreaker(BreakerConfig{
			Client: newClient(t, srv.addr), Name: "skew", Namespace: ns, Clock: fc,
			Breaker:    breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1, MaxProbes: 1},
			ProbeLease: 2 * time.Second, RefreshInterval: testInterval,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		waitFor(t, "the first exchange", func() bool { return b.Stats().Syncs >= 1 })
		fc.BlockUntil(1)
		return b
	}
	a, b := mk(fa), mk(fb)
	_ = call(b, errDown)
	mustSync(t, b)
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	for _, fc := range []*clocktest.Fake{fa, fb} {
		fc.Advance(time.Minute)
		fc.BlockUntil(1)
	}
	mustSync(t, a)
	mustSync(t, b)
	wantState(t, a, breaker.HalfOpen)
	wantState(t, b, breaker.HalfOpen)
	done, err := b.Allow()
	if err != nil {
		t.Fatalf("B's probe: %v", err)
	}
	if _, err := a.Allow(); !errors.Is(err, breaker.ErrTooManyProbes) {
		t.Fatalf("A, 3s ahead, asked for a probe while B's is live: %v, want ErrTooManyProbes", err)
	}
	done(nil)
	wantState(t, b, breaker.Closed)
}
