package labels

import (
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
)

// delayOf returns the delay an Adaptive of cfg gives after one sample d.
func delayOf(cfg hedge.AdaptiveConfig, d time.Duration) time.Duration {
	a := hedge.NewAdaptive(cfg)
	a.Observe(d)
	got, _ := a.Delay()
	return got
}

// TestHedgeDelaysSummary: the summary is over every member with a delay
// (the default member included), the top keys are (among keys of equal
// traffic) the longest delays,
// "other" is the lower median of the rest, and members without enough
// samples count nowhere.
func TestHedgeDelaysSummary(t *testing.T) {
	clk := clocktest.NewFake()
	ac := hedge.AdaptiveConfig{MinSamples: 1, Clock: clk}
	g, err := hedge.NewAdaptives(keyed.Config{}, ac)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ { // k1 (10ms) ... k5 (50ms)
		g.Get(fmt.Sprint("k", i)).Observe(time.Duration(i) * 10 * time.Millisecond)
	}
	g.Get("quiet")                        // no sample: no delay
	g.Default().Observe(time.Millisecond) // the default member counts in the summary and in other
	g.Get("other").Observe(time.Second)   // a key named like the sum of the rest
	g.Get("bad\xff").Observe(2 * time.Second)
	s := HedgeDelays(g, 2, false, "other")
	d := func(v time.Duration) time.Duration { return delayOf(ac, v) }
	if s.Keys != 8 || s.Min != d(time.Millisecond) || s.Max != d(2*time.Second) || s.Median != d(30*time.Millisecond) {
		t.Fatalf("summary %+v", s)
	}
	want := []KeyDelay{{"bad\uFFFD", d(2 * time.Second)}, {"other_", d(time.Second)}}
	if fmt.Sprint(s.Top) != fmt.Sprint(want) {
		t.Fatalf("top %v, want %v", s.Top, want)
	}
	// The rest: 1ms (default), 10..50ms: lower median of six is 20ms.
	if !s.OtherOK || s.Other != d(20*time.Millisecond) {
		t.Fatalf("other %v %v", s.Other, s.OtherOK)
	}
	all := HedgeDelays(g, 2, true, "other")
	if len(all.Top) != 7 || !all.OtherOK || all.Other != d(time.Millisecond) {
		t.Fatalf("all keys: top %v other %v %v", all.Top, all.Other, all.OtherOK)
	}
	if none := HedgeDelays(g, -1, false, "other"); len(none.Top) != 0 || none.Other != s.Median {
		t.Fatalf("topN < 0: top %v other %v, want none and the median of all", none.Top, none.Other)
	}
	empty, _ := hedge.NewAdaptives(keyed.Config{}, ac)
	if s := HedgeDelays(empty, 10, false, "other"); s.Keys != 0 || s.OtherOK || len(s.Top) != 0 {
		t.Fatalf("empty group %+v", s)
	}
}

// TestHedgeDelaysTopKeysAreTheBusiest (issue 37: the top N keys by
// traffic): a key with ten attempts in the window ranks above one with a
// single, far longer, delay.
func TestHedgeDelaysTopKeysAreTheBusiest(t *testing.T) {
	clk := clocktest.NewFake()
	ac := hedge.AdaptiveConfig{MinSamples: 1, Clock: clk}
	g, err := hedge.NewAdaptives(keyed.Config{}, ac)
	if err != nil {
		t.Fatal(err)
	}
	g.Get("slow").Observe(time.Second)
	for range 10 {
		g.Get("busy").Observe(5 * time.Millisecond)
	}
	if n := g.Get("busy").Samples(); n != 10 {
		t.Fatalf("busy: Samples %d, want 10", n)
	}
	s := HedgeDelays(g, 1, false, "other")
	if len(s.Top) != 1 || s.Top[0].Key != "busy" {
		t.Fatalf("top %v, want the busy key", s.Top)
	}
	if !s.OtherOK || s.Other != delayOf(ac, time.Second) {
		t.Fatalf("other %v %v, want the slow key's delay", s.Other, s.OtherOK)
	}
}

// TestTopKeysNeverRepeatALabelValue: keys that become the same label
// value ("a\xff" and "a\xfe" both "a\uFFFD"; a key "other_" and a key
// "other") gave two series with the same labels, which fails the whole
// scrape. The second counts with the rest.
func TestTopKeysNeverRepeatALabelValue(t *testing.T) {
	clk := clocktest.NewFake()
	ac := hedge.AdaptiveConfig{MinSamples: 1, Clock: clk}
	g, err := hedge.NewAdaptives(keyed.Config{}, ac)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a\xff", "a\xfe", "other", "other_"} {
		g.Get(k).Observe(10 * time.Millisecond)
	}
	s := HedgeDelays(g, 10, false, "other")
	seen := map[string]bool{}
	for _, k := range s.Top {
		if seen[k.Key] {
			t.Fatalf("label value %q twice in %v", k.Key, s.Top)
		}
		seen[k.Key] = true
	}
	if len(s.Top) != 2 || !s.OtherOK {
		t.Fatalf("top %v other %v: want 2 distinct values and the 2 others in other", s.Top, s.OtherOK)
	}
}
