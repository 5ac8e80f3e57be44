package redisstore

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// keyedFleet makes n KeyedBreakers ("processes", each with its own
// client) of one name on addr, on the fake clock fc.
func keyedFleet(t *testing.T, client func() redis.Scripter, n int, kc keyed.Config, fc *clocktest.Fake) []*KeyedBreakers {
	t.Helper()
	ns := namespace(t)
	var ks []*KeyedBreakers
	for range n {
		k, err := NewKeyedBreakers(kc, BreakerConfig{
			Client: client(), Name: "hosts", Namespace: ns, Clock: fc,
			Breaker:         breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute, OpenJitter: -1},
			RefreshInterval: testInterval, Timeout: 2 * time.Second,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		ks = append(ks, k)
	}
	return ks
}

// TestKeyedFleetBreakerPerKey (issue #37 item 4): two processes share a
// breaker per key through Redis: failures of key A in one process open
// A in both, while B stays closed in both; the keys are in the Redis keys.
func TestKeyedFleetBreakerPerKey(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	ks := keyedFleet(t, func() redis.Scripter { return newClient(t, srv.addr) }, 2, keyed.Config{}, fc)
	a1, b1 := ks[0].Get("https://a.example:443"), ks[0].Get("https://b.example:443")
	a2, b2 := ks[1].Get("https://a.example:443"), ks[1].Get("https://b.example:443")
	for _, b := range []*Breaker{a1, b1, a2, b2} {
		mustSync(t, b)
	}
	for range 3 {
		if err := call(a1, errDown); err != nil {
			t.Fatal(err)
		}
		if err := call(b1, nil); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, a1)
	mustSync(t, b1)
	mustSync(t, a2)
	mustSync(t, b2)
	wantState(t, a1, breaker.Open)
	wantState(t, a2, breaker.Open)
	wantState(t, b1, breaker.Closed)
	wantState(t, b2, breaker.Closed)
	if d := ks[1].Default(); d.State() != breaker.Closed {
		t.Fatalf("the default member is %v", d.State())
	}
	ctx := keyed.WithKey(context.Background(), "https://a.example:443")
	if _, err := ks[1].BreakerFor(ctx).Allow(); err != breaker.ErrOpen {
		t.Fatalf("a call keyed A through the group: %v, want ErrOpen", err)
	}
	rdb := newClient(t, srv.addr)
	ns := a1.s.link.ns
	for _, key := range []string{ns + ":{hosts:=https://a.example:443}:state", ns + ":{hosts:=https://b.example:443}:state"} {
		if n, err := rdb.Exists(context.Background(), key).Result(); err != nil || n != 1 {
			t.Fatalf("%s: exists %d, %v", key, n, err)
		}
	}
}

// TestKeyedFleetBudgetPerKey: each key draws on a bucket of its own, and
// a member removed is closed (its goroutine ends).
func TestKeyedFleetBudgetPerKey(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	ns := namespace(t)
	k, err := NewKeyedBudgets(keyed.Config{MaxKeys: 1}, BudgetConfig{
		Client: newClient(t, srv.addr), Name: "hosts", Namespace: ns, Clock: fc,
		Ratio: budget.RatioConfig{MaxTokens: 4}, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	a := k.Get("a")
	if err := a.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	for a.Withdraw(errDown) {
		if err := a.Sync(syncCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	b := k.Get("b") // evicts a, which gives back its lease
	if err := b.Sync(syncCtx(t)); err != nil {
		t.Fatal(err)
	}
	if !b.Withdraw(errDown) {
		t.Fatal("b's bucket is empty: a's retries spent it")
	}
	<-a.l.stopped // a's goroutine ended
}

// TestKeyedOpenSharedBreakerNeverEvicted: an open shared breaker is kept
// while it refuses; a new key then gets the overflow member, whose Redis
// keys are its own.
func TestKeyedOpenSharedBreakerNeverEvicted(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	ks := keyedFleet(t, func() redis.Scripter { return newClient(t, srv.addr) }, 1, keyed.Config{MaxKeys: 1, Idle: time.Second}, fc)
	k := ks[0]
	a := k.Get("a")
	mustSync(t, a)
	for range 3 {
		_ = call(a, errDown)
	}
	mustSync(t, a)
	wantState(t, a, breaker.Open)
	fc.Advance(10 * time.Second) // ten times Idle, inside the open period
	k.Sweep()
	if c := k.Get("c"); c != k.Overflow() {
		t.Fatal("a new key did not get the overflow member while the open breaker fills the group")
	}
	if k.Get("a") != a || a.State() != breaker.Open {
		t.Fatal("the open shared breaker was removed")
	}
	if s := k.Stats(); s.Overflows != 1 || s.Evictions != 0 || s.Kept != 1 {
		t.Fatalf("stats %+v", s)
	}
	if got, want := k.Overflow().stateKey, a.s.link.ns+":{hosts:#overflow}:state"; got != want {
		t.Fatalf("overflow state key %q, want %q", got, want)
	}
}

// TestKeyedChurnBoundedNoLeak: 100,000 distinct keys (20,000 under -race)
// through a group of 64 shared breakers: the live count stays at the
// bound, every removed member's goroutine ends, and after Close no
// goroutine is left (TestMain's goleak check covers the rest).
func TestKeyedChurnBoundedNoLeak(t *testing.T) {
	n := 100_000
	if raceEnabled || testing.Short() {
		n = 20_000
	}
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	before := runtime.NumGoroutine()
	ks := keyedFleet(t, func() redis.Scripter { return newClient(t, srv.addr) }, 1, keyed.Config{MaxKeys: 64}, fc)
	k := ks[0]
	first := k.Get("key-0")
	buf := make([]byte, 0, 16)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "key-"...), int64(i), 10)
		k.Get(string(buf))
		if l := k.Len(); l > 64 {
			t.Fatalf("after %d keys: %d live", i+1, l)
		}
	}
	if s := k.Stats(); s.Live != 64 || s.Evictions != uint64(n-64) {
		t.Fatalf("stats %+v", s)
	}
	<-first.l.stopped
	k.Close()
	if g := runtime.NumGoroutine(); g > before+8 { // the client's pool goroutines aside
		t.Fatalf("%d goroutines after Close, %d before", g, before)
	}
}

// TestKeyTagBounded: a key goes in the hash tag as it is when short and
// plain, else as a hash; braces never reach the tag and its length is
// bounded.
func TestKeyTagBounded(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	for _, c := range []struct{ key, want string }{
		{"", "n"},
		{"https://a.example:443", "n:=https://a.example:443"},
		{"GET https://a:443/v1", "n:=GET https://a:443/v1"},
		{"a{b}", ""},
		{long, ""},
		{"caf\xc3\xa9", ""},
		{"#overflow", "n:=#overflow"},
	} {
		got := keyTag("n", c.key, false)
		if c.want != "" && got != c.want {
			t.Fatalf("keyTag(%q) = %q, want %q", c.key, got, c.want)
		}
		if c.want == "" && (!strings.HasPrefix(got, "n:#") || len(got) != len("n:#")+32) {
			t.Fatalf("keyTag(%q) = %q, want n:# and 32 hex digits", c.key, got)
		}
		if strings.ContainsAny(got, "{}") || len(got) > 1+35 {
			t.Fatalf("keyTag(%q) = %q", c.key, got)
		}
	}
	if keyTag("n", "", true) != "n:#overflow" || keyTag("n", "a{b}", false) == keyTag("n", "a{c}", false) {
		t.Fatal("overflow tag, or two keys share a hash")
	}
}

// TestKeyedClusterOneSlotPerKey: on a three-node Redis Cluster each key's
// member works (its scripts address keys of one slot), different keys
// land on their own slots, and a key with braces is hashed.
func TestKeyedClusterOneSlotPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	rc := newRedisCluster(t)
	fc := clocktest.NewFake()
	ks := keyedFleet(t, func() redis.Scripter { return newClusterClient(t, rc.addrs) }, 2, keyed.Config{}, fc)
	cc := newClusterClient(t, rc.addrs)
	slots := map[int64]bool{}
	for i, key := range []string{"a", "b", "c", "d", "weird{key}", strings.Repeat("k", 500)} {
		m1, m2 := ks[0].Get(key), ks[1].Get(key)
		mustSync(t, m1)
		mustSync(t, m2)
		for range 3 {
			_ = call(m1, errDown)
		}
		mustSync(t, m1)
		mustSync(t, m2)
		wantState(t, m2, breaker.Open)
		s1, err := cc.ClusterKeySlot(context.Background(), m1.stateKey).Result()
		if err != nil {
			t.Fatal(err)
		}
		s2, _ := cc.ClusterKeySlot(context.Background(), m1.probesKey).Result()
		s3, _ := cc.ClusterKeySlot(context.Background(), m1.seenKey).Result()
		if s1 != s2 || s1 != s3 {
			t.Fatalf("key %d: slots %d %d %d of one member differ", i, s1, s2, s3)
		}
		slots[s1] = true
	}
	if len(slots) < 3 {
		t.Fatalf("six keys on %d slots: the key is not in the hash tag", len(slots))
	}
}

// lockedBuffer is a log destination safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestKeyedRemovedMemberListenerPanicLogged: a state listener that panics
// while a removed member closes (its last flush trips the breaker) on a
// goroutine of its own does not end the process: it is recovered and
// logged, and the group's Close still waits for every member.
func TestKeyedRemovedMemberListenerPanicLogged(t *testing.T) {
	srv := sharedRedis(t)
	fc := clocktest.NewFake()
	var log lockedBuffer
	k, err := NewKeyedBreakers(keyed.Config{MaxKeys: 1}, BreakerConfig{
		Client: newClient(t, srv.addr), Name: "hosts", Namespace: namespace(t), Clock: fc,
		Breaker: breaker.Config{ConsecutiveFailures: 3, OpenTimeout: time.Minute, OpenJitter: -1,
			OnStateChange: func(_, to breaker.State) {
				if to == breaker.Open {
					panic("listener")
				}
			}},
		RefreshInterval: time.Hour, Timeout: 2 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	a := k.Get("a")
	mustSync(t, a)
	// The loops of the default, overflow and a members have made their
	// first exchange and wait an hour: the failures' poke only re-arms a's.
	fc.BlockUntil(3)
	for range 3 {
		_ = call(a, errDown) // counted for the next exchange: the close's flush
	}
	k.Get("b") // removes a, which closes on its own goroutine
	<-a.l.stopped
	k.Close()
	if !strings.Contains(log.String(), "panicked while a removed member closed") {
		t.Fatalf("log %q, want the listener's panic recovered and logged", log.String())
	}
}
