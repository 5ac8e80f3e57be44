package promretry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/internal/labels"
	"github.com/stormguard/stormguard/keyed"
)

// DefaultKeyedTopN is how many keys of a breaker group (or of a group of
// hedge delays) get a series of their own when Config.KeyedTopN is 0.
const DefaultKeyedTopN = 10

// OtherKey is the key label of the series that sums the keys without a
// series of their own (and a group's default and overflow members); in
// stormguard_hedges_key_delay_seconds, their lower median delay.
const OtherKey = "other"

// KeyedGroup is what WatchKeyed reads from a group of parts, one per key
// (package keyed): *keyed.Breakers, *keyed.Budgets, *keyed.Limiters and
// *keyed.Group values implement it.
type KeyedGroup interface {
	// Stats returns the group's counts now: Live and Kept become gauges,
	// Evictions, Idle and Overflows counters, so those three must never
	// go down. It is called at every scrape, outside the Collector's
	// locks, possibly while other goroutines use the group: it must be
	// safe for concurrent use.
	Stats() keyed.Stats
}

// keyedWatches are the groups WatchKeyed exports.
type keyedWatches struct {
	members, kept, evictions, overflows, openKeys *prometheus.Desc
	groupDelay, groupDelayKeys, keyDelay          *prometheus.Desc

	mu sync.Mutex
	m  map[[2]string]*keyedWatch // (operation label, part) -> watch
}

type keyedWatch struct {
	op, part string
	g        KeyedGroup
	brk      *keyed.Breakers               // nil unless a breaker group
	hdg      *keyed.Group[*hedge.Adaptive] // nil unless a group of hedge delays
}

func newKeyedWatches(desc func(name, help string, labels ...string) *prometheus.Desc) keyedWatches {
	return keyedWatches{
		members: desc("keyed_members",
			"Live members (one per key) of a group of parts per key (package keyed), its default and overflow members aside; part is breaker, budget, limiter or hedge.",
			"operation", "part"),
		kept: desc("keyed_kept",
			"Members of a group per key kept for the state they hold (breakers that refuse calls), never evicted.",
			"operation", "part"),
		evictions: desc("keyed_evictions_total",
			"Members removed from a group per key: reason=\"full\" to make room for a new key, reason=\"idle\" after the group's idle time unused.",
			"operation", "part", "reason"),
		overflows: desc("keyed_overflows_total",
			"Calls of a new key given a group's shared overflow member because every member was kept (open breakers).",
			"operation", "part"),
		openKeys: desc("breaker_open_keys",
			"Open circuit breakers of a breaker group per key: for each of the top keys (open ones first, then the busiest; Config.KeyedTopN), 1 if its breaker is open, else 0; for key=\""+OtherKey+"\", how many of the other keys' breakers (the default and overflow members included) are open. sum by (operation) is the group's open breakers.",
			"operation", "key"),
		groupDelay: desc("hedges_group_delay_seconds",
			"The hedge delays of a group of Adaptive delays per key (hedge.NewAdaptives) now, over every member that gives one (the default and overflow members included): stat=\"min\", \"median\" (the lower median) or \"max\", in seconds; absent while no member has enough samples.",
			"operation", "stat"),
		groupDelayKeys: desc("hedges_group_delay_keys",
			"Members of a group of Adaptive delays per key that give a delay now (enough samples), the default and overflow members included.",
			"operation"),
		keyDelay: desc("hedges_key_delay_seconds",
			"The hedge delay, in seconds, of each of the top keys of a group of Adaptive delays per key (the busiest first (the most attempts in the window, hedge.Adaptive.Samples), then the longest delays, then by key; Config.KeyedTopN), and for key=\""+OtherKey+"\" the lower median delay of the other members that give one (the default and overflow members included).",
			"operation", "key"),
		m: make(map[[2]string]*keyedWatch),
	}
}

func (kw *keyedWatches) describe(ch chan<- *prometheus.Desc) {
	ch <- kw.members
	ch <- kw.kept
	ch <- kw.evictions
	ch <- kw.overflows
	ch <- kw.openKeys
	ch <- kw.groupDelay
	ch <- kw.groupDelayKeys
	ch <- kw.keyDelay
}

// partOf names the part a group is.
func partOf(g KeyedGroup) string {
	switch g.(type) {
	case *keyed.Breakers:
		return "breaker"
	case *keyed.Budgets:
		return "budget"
	case *keyed.Limiters:
		return "limiter"
	case *keyed.Group[*hedge.Adaptive]:
		return "hedge"
	}
	return "group"
}

// WatchKeyed exports a group of parts per key (package keyed) under the
// operation, read at every scrape, without a series per key by default:
//
//   - stormguard_keyed_members{operation,part} and
//     stormguard_keyed_kept{operation,part}: the live and kept members;
//   - stormguard_keyed_evictions_total{operation,part,reason} (full,
//     idle) and stormguard_keyed_overflows_total{operation,part};
//   - for a breaker group (*keyed.Breakers),
//     stormguard_breaker_open_keys{operation,key}: a series for each of
//     the top Config.KeyedTopN keys (default 10; breakers that are open
//     first, then the keys with the most calls in their breaker's current
//     state), 1 when its breaker is open, and key="other", the number of
//     open breakers among the rest. At most KeyedTopN+1 series, whatever
//     the keys; Config.KeyedAllKeys gives every live key its series;
//   - for a group of hedge delays (*keyed.Group[*hedge.Adaptive], as
//     hedge.NewAdaptives makes for Hedger.Adaptives), over the members
//     whose Adaptive gives a delay now (enough samples; the default and
//     overflow members included):
//     stormguard_hedges_group_delay_keys{operation}, their count, and
//     stormguard_hedges_group_delay_seconds{operation,stat} with stat
//     min, median (the lower median) and max (absent while the count is
//     0); and stormguard_hedges_key_delay_seconds{operation,key}: the
//     delay of each of the top Config.KeyedTopN keys (the busiest first:
//     the most attempts in the window, hedge.Adaptive.Samples; then the
//     longest delays, then by key) and key="other", the lower median delay of the
//     rest (absent when none of the rest gives one). At most KeyedTopN+1
//     series, whatever the keys; Config.KeyedAllKeys gives every live key
//     with a delay its series.
//
// part is breaker, budget, limiter or hedge (a *keyed.Group of
// *hedge.Adaptive). A scrape reads every member of a breaker group or of
// a group of hedge delays (listed under the group's lock, read after it,
// so that a breaker's listeners may use the group), so its cost grows
// with the live keys (bounded by the group's MaxKeys). Watching another
// group under the same operation and part replaces the first. The
// returned function stops exporting it; it is safe to call more than
// once. A nil Collector or group does nothing.
//
// WatchBreaker, WatchBudget and WatchLimiter hand a group to WatchKeyed,
// so a policy file's keyed parts are exported with Observer: collector.
func (c *Collector) WatchKeyed(operation string, g KeyedGroup) (unwatch func()) {
	if c == nil || g == nil {
		return func() {}
	}
	w := &keyedWatch{op: c.ops.Get(operation).name, part: partOf(g), g: g}
	w.brk, _ = g.(*keyed.Breakers)
	w.hdg, _ = g.(*keyed.Group[*hedge.Adaptive])
	id := [2]string{w.op, w.part}
	kw := &c.keyedW
	kw.mu.Lock()
	kw.m[id] = w
	kw.mu.Unlock()
	return func() {
		kw.mu.Lock()
		if kw.m[id] == w {
			delete(kw.m, id)
		}
		kw.mu.Unlock()
	}
}

// watchedKeyed hands b to WatchKeyed when it is a group; ok is false when
// it is not.
func (c *Collector) watchedKeyed(operation string, b any) (unwatch func(), ok bool) {
	g, ok := b.(KeyedGroup)
	if !ok || c == nil {
		return nil, false
	}
	return c.WatchKeyed(operation, g), true
}

// collectKeyed sends the watched groups' series.
func (c *Collector) collectKeyed(ch chan<- prometheus.Metric) {
	kw := &c.keyedW
	kw.mu.Lock()
	ws := make([]*keyedWatch, 0, len(kw.m))
	for _, w := range kw.m {
		ws = append(ws, w)
	}
	kw.mu.Unlock()
	for _, w := range ws {
		s := w.g.Stats()
		ch <- prometheus.MustNewConstMetric(kw.members, prometheus.GaugeValue, float64(s.Live), w.op, w.part)
		ch <- prometheus.MustNewConstMetric(kw.kept, prometheus.GaugeValue, float64(s.Kept), w.op, w.part)
		ch <- prometheus.MustNewConstMetric(kw.evictions, prometheus.CounterValue, float64(s.Evictions), w.op, w.part, "full")
		ch <- prometheus.MustNewConstMetric(kw.evictions, prometheus.CounterValue, float64(s.Idle), w.op, w.part, "idle")
		ch <- prometheus.MustNewConstMetric(kw.overflows, prometheus.CounterValue, float64(s.Overflows), w.op, w.part)
		if w.brk != nil {
			c.collectOpenKeys(ch, w)
		}
		if w.hdg != nil {
			c.collectKeyDelays(ch, w)
		}
	}
}

// collectKeyDelays sends the delays of w's group of hedge delays: the
// summary over every member, the top keys and other.
func (c *Collector) collectKeyDelays(ch chan<- prometheus.Metric, w *keyedWatch) {
	kw := &c.keyedW
	s := labels.HedgeDelays(w.hdg, c.keyedTopN, c.keyedAll, OtherKey)
	ch <- prometheus.MustNewConstMetric(kw.groupDelayKeys, prometheus.GaugeValue, float64(s.Keys), w.op)
	if s.Keys > 0 {
		ch <- prometheus.MustNewConstMetric(kw.groupDelay, prometheus.GaugeValue, s.Min.Seconds(), w.op, "min")
		ch <- prometheus.MustNewConstMetric(kw.groupDelay, prometheus.GaugeValue, s.Median.Seconds(), w.op, "median")
		ch <- prometheus.MustNewConstMetric(kw.groupDelay, prometheus.GaugeValue, s.Max.Seconds(), w.op, "max")
	}
	for _, k := range s.Top {
		ch <- prometheus.MustNewConstMetric(kw.keyDelay, prometheus.GaugeValue, k.Delay.Seconds(), w.op, k.Key)
	}
	if s.OtherOK {
		ch <- prometheus.MustNewConstMetric(kw.keyDelay, prometheus.GaugeValue, s.Other.Seconds(), w.op, OtherKey)
	}
}

// collectOpenKeys sends w's breaker_open_keys: the top keys and other.
func (c *Collector) collectOpenKeys(ch chan<- prometheus.Metric, w *keyedWatch) {
	top, other := labels.OpenKeys(w.brk, c.keyedTopN, c.keyedAll, OtherKey)
	for _, k := range top {
		v := 0.0
		if k.Open {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.keyedW.openKeys, prometheus.GaugeValue, v, w.op, k.Key)
	}
	ch <- prometheus.MustNewConstMetric(c.keyedW.openKeys, prometheus.GaugeValue, float64(other), w.op, OtherKey)
}

// WatchAdaptives is WatchKeyed for a keyed group of hedge delays
// (hedge.Hedger.Adaptives): the per-key hedge delay metrics. A policy
// file's hedge block with adaptive and per reaches it through
// config.AdaptivesWatcher when Observer is the collector.
func (c *Collector) WatchAdaptives(operation string, g *keyed.Group[*hedge.Adaptive]) (unwatch func()) {
	if g == nil {
		return func() {}
	}
	return c.WatchKeyed(operation, g)
}
