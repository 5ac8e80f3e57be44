package redisstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/retry"
)

// TestKeysNamespacedAndExpire: every key lives under
// "<namespace>:{<name>}:" and carries a TTL of at most KeyTTL.
func TestKeysNamespacedAndExpire(t *testing.T) {
	f := newFleet(t, 1, breaker.Config{
		Window:      breaker.Window{Duration: 10 * time.Second, MinCalls: 1, FailureRatio: 0.5},
		OpenTimeout: time.Minute,
	})
	b := f.bs[0]
	ns := f.cfg.Namespace
	_ = call(b, errDown) // trips: window bucket, state and (after the period) probes keys
	mustSync(t, b)
	f.fc.Advance(time.Minute)
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	rdb := newClient(t, sharedRedis(t).addr)
	bu, err := NewBudget(BudgetConfig{Client: rdb, Name: "payments", Namespace: ns, Clock: f.fc, KeyTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer bu.Close()
	if err := bu.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	keys, err := rdb.Keys(ctx, ns+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	prefix := ns + ":{payments}:"
	var kinds []string
	for _, k := range keys {
		if len(k) <= len(prefix) || k[:len(prefix)] != prefix {
			t.Fatalf("key %q outside %q", k, prefix)
		}
		ttl, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl <= 0 || ttl > DefaultKeyTTL {
			t.Fatalf("key %q has TTL %v, want (0, %v]", k, ttl, DefaultKeyTTL)
		}
		kind := k[len(prefix):]
		if len(kind) > 7 && kind[:7] == "window:" {
			kind = "window"
			if ttl > time.Minute {
				t.Fatalf("window bucket %q lives %v, want about the window", k, ttl)
			}
		}
		if strings.HasPrefix(kind, "seen:") {
			kind = "seen"
		}
		if kind == "budget" && ttl > time.Hour {
			t.Fatalf("budget key TTL %v above its KeyTTL", ttl)
		}
		kinds = append(kinds, kind)
	}
	slices.Sort(kinds)
	if want := []string{"budget", "probes", "seen", "seen", "state", "window"}; !slices.Equal(kinds, want) {
		t.Fatalf("keys %v, want one of each of %v", keys, want)
	}
	done(nil)
}

// TestAllowClosedAllocs: the cached closed path allocates nothing.
func TestAllowClosedAllocs(t *testing.T) {
	for _, bc := range []breaker.Config{
		{},
		{Window: breaker.Window{Duration: time.Minute}},
		{Window: breaker.Window{Duration: time.Minute, SlowCallDuration: time.Second, SlowCallRatio: 0.5}},
	} {
		timed := bc.Window.SlowCallDuration > 0
		f := newFleet(t, 1, bc)
		b := f.bs[0]
		allocs := testing.AllocsPerRun(1000, func() {
			done, err := b.Allow()
			if err != nil {
				t.Fatal(err)
			}
			done(nil)
			done, _ = b.Allow()
			done(errDown)
		})
		want := 0.0
		if timed {
			want = 4 // a record and its done per timed call, so a repeated done cannot end another call
		}
		if allocs != want {
			t.Fatalf("%+v: %v allocs per two Allow+done, want %v", bc.Window, allocs, want)
		}
	}
}

// TestPolicyWithSharedState: a retry.Policy takes the Redis-backed
// Breaker and Budget as it takes the local ones: one process's failing
// calls open the breaker, and after a refresh another process's calls
// fail fast with breaker.ErrOpen.
func TestPolicyWithSharedState(t *testing.T) {
	f := newFleet(t, 2, breaker.Config{ConsecutiveFailures: 6, OpenTimeout: time.Minute})
	bus := make([]*Budget, 2)
	for i := range bus {
		bu, err := NewBudget(BudgetConfig{
			Client: newClient(t, sharedRedis(t).addr), Name: "payments", Namespace: f.cfg.Namespace,
			Ratio: budget.RatioConfig{MaxTokens: 4}, LeaseTokens: 1, Clock: f.fc,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(bu.Close)
		if err := bu.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		bus[i] = bu
	}
	policy := func(i int) *retry.Policy {
		return &retry.Policy{
			MaxAttempts: 4, Backoff: backoff.Constant{}, Clock: f.fc,
			Breaker: f.bs[i], Budget: bus[i],
		}
	}
	attempts := 0
	fail := func(context.Context) error { attempts++; return errDown }
	for range 3 {
		err := retry.Run(context.Background(), policy(0), fail)
		if !errors.Is(err, errDown) {
			t.Fatalf("Run = %v", err)
		}
	}
	// 3 first attempts; the lease of 1 token paid one retry, the next
	// ones were refused until the lease is topped up.
	if attempts != 4 {
		t.Fatalf("%d attempts, want 3 calls + 1 retry from a lease of 1", attempts)
	}
	if err := bus[0].Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_ = retry.Run(context.Background(), policy(0), fail)
	}
	if st := bus[0].Stats(); st.Granted < 2 || st.Refused == 0 {
		t.Fatalf("budget stats %+v", st)
	}
	mustSync(t, f.bs[0])
	wantState(t, f.bs[0], breaker.Open)
	f.refresh()
	waitFor(t, "B to see the breaker open", func() bool { return f.bs[1].State() == breaker.Open })
	before := attempts
	err := retry.Run(context.Background(), policy(1), fail)
	if !errors.Is(err, breaker.ErrOpen) || attempts != before {
		t.Fatalf("B's call = %v after %d attempts, want breaker.ErrOpen without an attempt", err, attempts-before)
	}
}
