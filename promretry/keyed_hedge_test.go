package promretry_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/promretry"
)

// keyedDelays returns a group of 10,000 hedge delays on a fake clock:
// key k%05d has 20 samples of (1+i%100) ms, key "slow" 20 of 5 s.
func keyedDelays(t *testing.T) (*keyed.Group[*hedge.Adaptive], hedge.AdaptiveConfig) {
	t.Helper()
	ac := hedge.AdaptiveConfig{Clock: clocktest.NewFake()}
	g, err := hedge.NewAdaptives(keyed.Config{MaxKeys: 20000}, ac)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10000 {
		a := g.Get(fmt.Sprintf("k%05d", i))
		for range hedge.DefaultMinSamples {
			a.Observe(time.Duration(1+i%100) * time.Millisecond)
		}
	}
	a := g.Get("slow")
	for range hedge.DefaultMinSamples {
		a.Observe(5 * time.Second)
	}
	g.Get("quiet") // too few samples: no delay
	return g, ac
}

// ref returns the delay an Adaptive of ac gives after samples of d.
func ref(ac hedge.AdaptiveConfig, d time.Duration) float64 {
	a := hedge.NewAdaptive(ac)
	for range hedge.DefaultMinSamples {
		a.Observe(d)
	}
	v, _ := a.Delay()
	return v.Seconds()
}

// TestKeyedHedgeDelaysBoundedSeries (#37 item 5): a group of hedge
// delays per key (hedge.NewAdaptives) watched with WatchKeyed exports the
// delay over all keys (min, median, max and the count of keys with a
// delay) and the delay of the top N keys (the longest) plus "other": the
// series count does not grow with 10,000 keys, and KeyedAllKeys gives a
// series per key only when asked for.
func TestKeyedHedgeDelaysBoundedSeries(t *testing.T) {
	g, ac := keyedDelays(t)
	c := promretry.New(promretry.Config{})
	unwatch := c.WatchKeyed("webhooks", g)
	reg := registry(t, c)
	if v := value(t, reg, "stormguard_keyed_members", "operation", "webhooks", "part", "hedge"); v != 10002 {
		t.Fatalf("members %v", v)
	}
	if v := value(t, reg, "stormguard_hedges_group_delay_keys", "operation", "webhooks"); v != 10001 {
		t.Fatalf("keys with a delay %v, want 10001 (quiet has too few samples)", v)
	}
	for stat, want := range map[string]float64{
		"min":    ref(ac, time.Millisecond),
		"median": ref(ac, 51*time.Millisecond), // the 5,001st of 10,001
		"max":    ref(ac, 5*time.Second),
	} {
		if v := value(t, reg, "stormguard_hedges_group_delay_seconds", "operation", "webhooks", "stat", stat); v != want {
			t.Errorf("%s %v, want %v", stat, v, want)
		}
	}
	n, keys := countSeries(t, c, "stormguard_hedges_key_delay_seconds")
	if n != promretry.DefaultKeyedTopN+1 {
		t.Fatalf("%d key delay series, want top %d + other", n, promretry.DefaultKeyedTopN)
	}
	if keys["slow"] != ref(ac, 5*time.Second) {
		t.Fatalf("slow %v", keys["slow"])
	}
	if _, ok := keys["k00099"]; !ok { // the longest of the k keys, then by key
		t.Fatalf("series %v", keys)
	}
	if keys["other"] != ref(ac, 50*time.Millisecond) {
		t.Fatalf("other %v", keys["other"])
	}
	promtoolCheckMetrics(t, reg)
	unwatch()
	if n, _ := countSeries(t, c, "stormguard_hedges_key_delay_seconds"); n != 0 {
		t.Fatalf("%d series after unwatch", n)
	}
	if find(t, reg, "stormguard_hedges_group_delay_seconds") != nil {
		t.Fatal("group delay left after unwatch")
	}

	all := promretry.New(promretry.Config{KeyedAllKeys: true})
	all.WatchKeyed("webhooks", g)
	if n, _ := countSeries(t, all, "stormguard_hedges_key_delay_seconds"); n != 10001 {
		t.Fatalf("KeyedAllKeys: %d series, want every key with a delay (10,001), other absent", n)
	}
}
