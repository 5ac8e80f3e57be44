package keyed_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
)

// member remembers the key it was built for.
type member struct{ key string }

func newGroup(t testing.TB, cfg keyed.Config) (*keyed.Group[*member], *int) {
	t.Helper()
	builds := new(int)
	g, err := keyed.New(cfg, func(k string) *member { *builds++; return &member{key: k} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g, builds
}

func TestGroupOneMemberPerKey(t *testing.T) {
	g, _ := newGroup(t, keyed.Config{Clock: clocktest.NewFake()})
	a, b := g.Get("a"), g.Get("b")
	if a == b || a.key != "a" || b.key != "b" {
		t.Fatalf("a=%+v b=%+v", a, b)
	}
	if g.Get("a") != a {
		t.Fatal("a second Get of a built another member")
	}
	if g.Get("") != g.Default() || g.Default() == g.Overflow() {
		t.Fatal("the empty key is not the default member, or the default is the overflow member")
	}
	if n := g.Len(); n != 2 {
		t.Fatalf("Len %d, want 2", n)
	}
}

func TestConfigAbsurdSizesRefused(t *testing.T) {
	for _, c := range []keyed.Config{{MaxKeys: -1}, {MaxKeys: keyed.MaxMaxKeys + 1}, {Idle: -time.Second}} {
		_, err := keyed.New(c, func(string) int { return 0 }, nil)
		if !errors.Is(err, keyed.ErrConfig) {
			t.Fatalf("%+v: %v, want ErrConfig", c, err)
		}
		field := "MaxKeys"
		if c.Idle < 0 {
			field = "Idle"
		}
		if !strings.Contains(err.Error(), field) || c.MaxKeys != 0 && !strings.Contains(err.Error(), "10000000") {
			t.Fatalf("%q does not name the field and the limit", err)
		}
	}
	if _, err := keyed.New(keyed.Config{MaxKeys: keyed.MaxMaxKeys}, func(string) int { return 0 }, nil); err != nil {
		t.Fatalf("MaxMaxKeys refused: %v", err)
	}
}

func TestIdleKeysEvictedOnTheClock(t *testing.T) {
	clk := clocktest.NewFake()
	g, builds := newGroup(t, keyed.Config{Idle: time.Minute, Clock: clk})
	g.Get("a")
	g.Get("b")
	clk.Advance(59 * time.Second)
	g.Sweep()
	if n := g.Len(); n != 2 {
		t.Fatalf("after 59s: Len %d, want 2 (removed before Idle)", n)
	}
	g.Get("b") // b used at 59s
	clk.Advance(61 * time.Second)
	g.Sweep()
	if n, s := g.Len(), g.Stats(); n != 1 || s.Idle != 1 {
		t.Fatalf("after 120s: Len %d, stats %+v; want only b left, one idle removal", n, s)
	}
	before := *builds
	g.Get("b")
	if *builds != before {
		t.Fatal("b, used 61s ago, was removed")
	}
	g.Get("a")
	if *builds != before+1 {
		t.Fatal("a was not rebuilt after its removal")
	}
}

func TestFullGroupEvictsLeastRecentlyUsed(t *testing.T) {
	g, _ := newGroup(t, keyed.Config{MaxKeys: 3, Clock: clocktest.NewFake()})
	a, b, c := g.Get("a"), g.Get("b"), g.Get("c")
	g.Get("a")
	g.Get("b")
	g.Get("d")
	if n, s := g.Len(), g.Stats(); n != 3 || s.Evictions != 1 {
		t.Fatalf("Len %d, stats %+v; want 3 live, 1 eviction", n, s)
	}
	if g.Get("a") != a || g.Get("b") != b {
		t.Fatal("a recently used member was evicted")
	}
	if g.Get("c") == c {
		t.Fatal("c, the least recently used, was kept")
	}
}

func openBreakers(t *testing.T, max int) (*keyed.Breakers, *clocktest.Fake) {
	t.Helper()
	clk := clocktest.NewFake()
	bs, err := keyed.NewBreakers(keyed.Config{MaxKeys: max, Idle: time.Second},
		breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return bs, clk
}

func trip(t *testing.T, b *breaker.Breaker) {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errors.New("down"))
	if b.State() != breaker.Open {
		t.Fatalf("state %v, want open", b.State())
	}
}

func TestOpenBreakerNeverEvictedOverflowInstead(t *testing.T) {
	bs, clk := openBreakers(t, 2)
	a, b := bs.Get("a"), bs.Get("b")
	trip(t, a)
	trip(t, b)
	clk.Advance(10 * time.Second) // idle for ten times Idle, and still open
	bs.Sweep()
	if c := bs.Get("c"); c != bs.Overflow() {
		t.Fatal("a new key did not get the overflow member while every member is open")
	}
	if s := bs.Stats(); s.Overflows != 1 || s.Evictions != 0 || s.Idle != 0 || s.Live != 2 || s.Kept != 2 {
		t.Fatalf("stats %+v", s)
	}
	if bs.Get("a") != a || bs.Get("b") != b || a.Ready() == nil {
		t.Fatal("an open breaker was removed, or closed")
	}
	// Half-open after the open period, then closed by a probe: a can go.
	clk.Advance(time.Minute)
	done, err := a.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(nil)
	if a.State() != breaker.Closed {
		t.Fatalf("a: %v", a.State())
	}
	bs.Sweep()
	c := bs.Get("c")
	if c == bs.Overflow() {
		t.Fatal("c overflowed though a closed")
	}
	if s := bs.Stats(); s.Evictions != 1 || s.Live != 2 {
		t.Fatalf("stats %+v, want one eviction", s)
	}
}

// TestMillionKeysBoundedMemory sends 1,000,000 distinct keys (100,000
// under -race) through a group of 1,000 and a group of breakers: the live
// count stays at the bound and the heap the groups hold after GC does not
// grow with the keys.
func TestMillionKeysBoundedMemory(t *testing.T) {
	n := 1_000_000
	if raceEnabled || testing.Short() {
		n = 100_000
	}
	g, _ := newGroup(t, keyed.Config{MaxKeys: 1000, Clock: clocktest.NewFake()})
	grown, s := churn(n, g.Get, g.Stats)
	if s.Live != 1000 || s.Evictions != uint64(n-1000) {
		t.Fatalf("after %d keys: %+v", n, s)
	}
	if grown > 1<<20 { // 1,000 members, entries and a table of 4,096 slots: ~250 KiB
		t.Fatalf("after %d keys the group holds %d bytes more heap", n, grown)
	}
	t.Logf("%d keys: %+v, heap %+d B", n, s, grown)

	bs, err := keyed.NewBreakers(keyed.Config{MaxKeys: 1000, Clock: clocktest.NewFake()}, breaker.Config{})
	if err != nil {
		t.Fatal(err)
	}
	grown, s = churn(n/10, bs.Get, bs.Stats)
	if s.Live != 1000 || grown > 8<<20 { // a breaker is under 4 KiB
		t.Fatalf("breakers after %d keys: %+v, heap %+d B", n/10, s, grown)
	}
	t.Logf("breakers, %d keys: %+v, heap %+d B", n/10, s, grown)
}

func churn[T any](n int, get func(string) T, stats func() keyed.Stats) (int64, keyed.Stats) {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	buf := make([]byte, 0, 24)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "host-"...), int64(i), 10)
		get(string(buf))
	}
	runtime.GC()
	runtime.ReadMemStats(&m1)
	return int64(m1.HeapAlloc) - int64(m0.HeapAlloc), stats()
}

func TestConcurrentGetAndSweep(t *testing.T) {
	clk := clocktest.NewFake()
	g, err := keyed.New(keyed.Config{MaxKeys: 64, Idle: time.Second, Clock: clk}, func(k string) *member { return &member{key: k} }, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				k := fmt.Sprint((i*7 + w) % 300)
				if m := g.Get(k); m != g.Overflow() && m.key != k {
					t.Errorf("Get(%q) gave %q's member", k, m.key)
					return
				}
				if i%500 == 0 {
					g.Sweep()
				}
			}
		})
	}
	wg.Go(func() {
		for range 100 {
			clk.Advance(100 * time.Millisecond)
			g.Sweep()
			if n := g.Len(); n > 64 {
				t.Errorf("Len %d over MaxKeys", n)
			}
		}
	})
	wg.Wait()
	if n := g.Len(); n > 64 {
		t.Fatalf("Len %d", n)
	}
}

func TestLookupAllocatesNothing(t *testing.T) {
	g, _ := newGroup(t, keyed.Config{Clock: clocktest.NewFake()})
	ctx := keyed.WithKey(context.WithValue(context.Background(), otherKey{}, 1), "https://a:443")
	g.Get("https://a:443")
	if n := testing.AllocsPerRun(100, func() { g.Get(keyed.KeyFrom(ctx)) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
	if keyed.KeyFrom(context.Background()) != "" || keyed.KeyFrom(context.WithValue(ctx, otherKey{}, 2)) != "https://a:443" {
		t.Fatal("KeyFrom")
	}
}

// otherKey is a context key of the tests, for a chain WithKey is inside.
type otherKey struct{}

// TestForMatchesGet: For of a context finds the member Get finds for its
// key, through a chain of contexts too, builds it the same way, gives the
// default member without a key, and allocates nothing for a live key.
func TestForMatchesGet(t *testing.T) {
	g, builds := newGroup(t, keyed.Config{Clock: clocktest.NewFake()})
	ctx := keyed.WithKey(context.Background(), "https://a:443")
	wrapped := context.WithValue(ctx, otherKey{}, 1)
	a := g.For(ctx)
	if a.key != "https://a:443" || g.Get("https://a:443") != a || g.For(wrapped) != a || *builds != 3 {
		t.Fatalf("For built %+v (%d builds); want one member shared with Get", a, *builds)
	}
	if g.For(context.Background()) != g.Default() || g.For(keyed.WithKey(ctx, "")) != g.Default() {
		t.Fatal("For without a key is not the default member")
	}
	if b := g.Get("b"); g.For(keyed.WithKey(context.Background(), "b")) != b {
		t.Fatal("For does not find a member Get built")
	}
	if n := testing.AllocsPerRun(100, func() { g.For(wrapped) }); n != 0 {
		t.Fatalf("%v allocations", n)
	}
}

// TestBreakerListenerUsingTheGroupDoesNotDeadlock: the group asks its keep
// rule under its lock. The rule read the breaker's State, which moves an
// open breaker whose period has ended to half-open and runs its
// OnStateChange there, so a listener that used the group (its Stats, as a
// metrics hook does) deadlocked the Get that evicts. The rule reads Peek,
// which moves nothing. And an idle breaker whose open period has ended
// (it admits a probe) is removed as idle: recheck used to mark it as just
// used, so the same sweep kept it again and a host no longer called held
// its slot for good.
func TestBreakerListenerUsingTheGroupDoesNotDeadlock(t *testing.T) {
	clk := clocktest.NewFake()
	var bs *keyed.Breakers
	var heard atomic.Int32
	bs, err := keyed.NewBreakers(keyed.Config{MaxKeys: 1, Idle: time.Second},
		breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1, Clock: clk,
			OnStateChange: func(from, to breaker.State) {
				heard.Add(1)
				_ = bs.Stats()
			}})
	if err != nil {
		t.Fatal(err)
	}
	trip(t, bs.Get("a"))
	clk.Advance(2 * time.Minute) // a's open period is over; it is still open until asked
	before := heard.Load()
	got := make(chan *breaker.Breaker, 1)
	go func() {
		bs.Sweep() // a is judged under the lock: kept, half-open and not yet idle
		clk.Advance(2 * time.Minute)
		bs.Sweep() // judged again, now idle
		if s := bs.Stats(); s.Live != 0 || s.Idle != 1 {
			t.Errorf("after the idle sweep: %+v, want a removed as idle", s)
		}
		got <- bs.Get("b")
	}()
	select {
	case b := <-got:
		if b == bs.Overflow() {
			t.Fatal("b overflowed: an idle breaker whose open period ended was kept")
		}
	case <-time.After(time.Minute): // a hang detector, not a timing check
		t.Fatal("Get deadlocked: the keep rule ran the breaker's listener under the group's lock")
	}
	if heard.Load() != before {
		t.Fatalf("the keep rule ran the listener %d times", heard.Load()-before)
	}
}
