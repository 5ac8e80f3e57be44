package promretry_test

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/promretry"
	"github.com/stormguard/stormguard/retry"
)

// countSeries returns how many series family name has.
func countSeries(t *testing.T, c *promretry.Collector, name string) (n int, keys map[string]float64) {
	t.Helper()
	mfs, err := registry(t, c).Gather()
	if err != nil {
		t.Fatal(err)
	}
	keys = map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			n++
			keys[labelValue(m, "key")] += m.GetGauge().GetValue()
		}
	}
	return n, keys
}

// openKey trips key's breaker in g (ConsecutiveFailures 1).
func use(g *keyed.Breakers, key string, calls int, fail bool) {
	b := g.Get(key)
	for range calls {
		done, err := b.Allow()
		if err != nil {
			return
		}
		if fail {
			done(errors.New("down"))
		} else {
			done(nil)
		}
	}
}

// TestKeyedBreakersExportBoundedSeries (#37 item 5): a breaker group of
// 500 keys exports the aggregate (members, evictions, overflows) and
// stormguard_breaker_open_keys for at most the top N keys (open ones
// first, then by traffic) plus "other": the number of series does not
// grow with the keys, and the sum is the number of open breakers.
func TestKeyedBreakersExportBoundedSeries(t *testing.T) {
	g, err := keyed.NewBreakers(keyed.Config{MaxKeys: 2000}, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: 1 << 40})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		use(g, fmt.Sprintf("https://h%03d:443", i), 1+i%7, false)
	}
	use(g, "https://busy:443", 100, false)
	for i := range 12 { // twelve open breakers: two more than N
		use(g, fmt.Sprintf("https://bad%02d:443", i), 1, true)
	}
	c := promretry.New(promretry.Config{KeyedTopN: 10})
	unwatch := c.WatchKeyed("webhooks", g)
	reg := registry(t, c)
	if v := value(t, reg, "stormguard_keyed_members", "operation", "webhooks", "part", "breaker"); v != 513 {
		t.Fatalf("members %v, want 513", v)
	}
	value(t, reg, "stormguard_keyed_evictions_total", "operation", "webhooks", "part", "breaker", "reason", "full")
	value(t, reg, "stormguard_keyed_overflows_total", "operation", "webhooks", "part", "breaker")
	n, keys := countSeries(t, c, "stormguard_breaker_open_keys")
	if n != 11 {
		t.Fatalf("%d open_keys series, want top 10 + other", n)
	}
	total := 0.0
	for _, v := range keys {
		total += v
	}
	if total != 12 || keys["other"] != 2 {
		t.Fatalf("open keys sum %v (other %v), want 12 (2)", total, keys["other"])
	}
	if _, ok := keys["https://h001:443"]; ok {
		t.Fatal("a quiet closed key got a series of its own")
	}
	promtoolCheckMetrics(t, reg)
	unwatch()
	if n, _ := countSeries(t, c, "stormguard_breaker_open_keys"); n != 0 {
		t.Fatalf("%d series after unwatch", n)
	}
}

// TestKeyedTopNByTraffic: with no breaker open, the top N are the keys
// with the most calls; with KeyedAllKeys every key has its series.
func TestKeyedTopNByTraffic(t *testing.T) {
	g, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{})
	for i := range 30 {
		use(g, fmt.Sprintf("k%02d", i), 1+i, false)
	}
	c := promretry.New(promretry.Config{KeyedTopN: 3})
	c.WatchKeyed("op", g)
	_, keys := countSeries(t, c, "stormguard_breaker_open_keys")
	for _, k := range []string{"k29", "k28", "k27", "other"} {
		if _, ok := keys[k]; !ok {
			t.Fatalf("series %v, want the three busiest and other", keys)
		}
	}
	if len(keys) != 4 {
		t.Fatalf("series %v", keys)
	}
	all := promretry.New(promretry.Config{KeyedAllKeys: true})
	all.WatchKeyed("op", g)
	if n, _ := countSeries(t, all, "stormguard_breaker_open_keys"); n != 31 {
		t.Fatalf("KeyedAllKeys: %d series, want 30 keys + other", n)
	}
}

// TestKeyedGroupThroughWatchBreaker: a keyed group handed to
// WatchBreaker and WatchBudget (as a policy file's Registry does) is
// exported as WatchKeyed exports it.
func TestKeyedGroupThroughWatchBreaker(t *testing.T) {
	g, _ := keyed.NewBreakers(keyed.Config{}, breaker.Config{ConsecutiveFailures: 1, OpenTimeout: 1 << 40})
	use(g, "a", 1, true)
	bg, _ := keyed.NewBudgets(keyed.Config{}, func() retry.Budget { return nil })
	c := promretry.New(promretry.Config{})
	un1 := c.WatchBreaker("op", g)
	un2 := c.WatchBudget("op", bg)
	reg := registry(t, c)
	if v := value(t, reg, "stormguard_breaker_open_keys", "operation", "op", "key", "a"); v != 1 {
		t.Fatalf("open_keys{key=a} %v", v)
	}
	value(t, reg, "stormguard_keyed_members", "operation", "op", "part", "budget")
	un1()
	un2()
	if find(t, reg, "stormguard_keyed_members") != nil {
		t.Fatal("series left after unwatch")
	}
}

// TestKeyedScrapeRunsBreakerListenersOutsideTheGroupLock: a scrape that
// finds a breaker whose open period ended moves it to half-open and runs
// its OnStateChange; a listener that reads the group (its Stats) must not
// deadlock the scrape, so the members' states are read after the group's
// lock is released.
func TestKeyedScrapeRunsBreakerListenersOutsideTheGroupLock(t *testing.T) {
	clk := clocktest.NewFake()
	var g *keyed.Breakers
	var heard atomic.Int32
	g, err := keyed.NewBreakers(keyed.Config{Clock: clk}, breaker.Config{
		ConsecutiveFailures: 1, OpenTimeout: time.Second, Clock: clk,
		OnStateChange: func(from, to breaker.State) {
			if to == breaker.HalfOpen {
				_ = g.Stats() // takes the group's lock
				heard.Add(1)
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	use(g, "a", 1, true) // open
	clk.Advance(time.Hour)
	c := promretry.New(promretry.Config{})
	c.WatchKeyed("op", g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		countSeries(t, c, "stormguard_breaker_open_keys")
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("the scrape deadlocked on the group's lock")
	}
	if heard.Load() != 1 {
		t.Fatalf("listener ran %d times, want 1", heard.Load())
	}
}
