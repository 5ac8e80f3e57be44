package otelretry

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/internal/labels"
	"github.com/stormguard/stormguard/keyed"
)

// AttrKey is, on an attempt span, the key of the call (keyed.KeyFrom of
// its context: the host, method or other key the adapter gave it, for
// parts split per key). Absent when the call's context carries no key.
const AttrKey = attribute.Key("stormguard.key")

// DefaultKeyedTopN is how many keys of a breaker group (or of a group of
// hedge delays) get a data point of their own when Config.KeyedTopN is 0.
const DefaultKeyedTopN = 10

// OtherKey is the key attribute of the data point that sums the keys
// without one of their own (and a group's default and overflow members);
// in stormguard.hedges.key_delay, their lower median delay.
const OtherKey = "other"

// KeyedGroup is what WatchKeyed reads from a group of parts, one per key
// (package keyed): *keyed.Breakers, *keyed.Budgets, *keyed.Limiters and
// *keyed.Group values implement it.
type KeyedGroup interface {
	// Stats returns the group's counts now: Live and Kept become gauges,
	// Evictions, Idle and Overflows counters, so those three must never
	// go down. It is called at every collection, outside the Observer's
	// locks, possibly while other goroutines use the group: it must be
	// safe for concurrent use.
	Stats() keyed.Stats
}

// keyedInstruments are the keyed-group metrics, observed by one callback.
type keyedInstruments struct {
	members, kept, openKeys metric.Int64ObservableGauge
	evictions, overflows    metric.Int64ObservableCounter
	groupDelayKeys          metric.Int64ObservableGauge
	groupDelay, keyDelay    metric.Float64ObservableGauge

	mu sync.Mutex
	m  map[[2]string]*keyedWatch // (operation label, part) -> watch
}

type keyedWatch struct {
	op, part string
	g        KeyedGroup
	brk      *keyed.Breakers
	hdg      *keyed.Group[*hedge.Adaptive]
}

var keyPart = attribute.Key("part")

// newKeyedInstruments creates the keyed-group metrics and registers their
// callback; errors go to add.
func (o *Observer) newKeyedInstruments(m metric.Meter, name func(string) string, add func(error)) {
	ki := &o.keyedInst
	ki.m = make(map[[2]string]*keyedWatch)
	var errs []error
	gauge := func(n, unit, desc string) metric.Int64ObservableGauge {
		g, err := m.Int64ObservableGauge(name(n), metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(n, unit, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name(n), metric.WithUnit(unit), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	ki.members = gauge("keyed.members", "{member}", "Live members (one per key) of a group of parts per key (package keyed), its default and overflow members aside; part is breaker, budget, limiter or hedge.")
	ki.kept = gauge("keyed.kept", "{member}", "Members of a group per key kept for the state they hold (breakers that refuse calls), never evicted.")
	ki.openKeys = gauge("breaker.open_keys", "{breaker}", "Open circuit breakers of a breaker group per key: for each of the top keys (open ones first, then the busiest; Config.KeyedTopN), 1 if its breaker is open, else 0; for key=\""+OtherKey+"\", how many of the other keys' breakers are open.")
	ki.evictions = counter("keyed.evictions", "{member}", "Members removed from a group per key: reason=full to make room for a new key, reason=idle after the group's idle time unused.")
	ki.overflows = counter("keyed.overflows", "{call}", "Calls of a new key given a group's shared overflow member because every member was kept (open breakers).")
	ki.groupDelayKeys = gauge("hedges.group_delay_keys", "{member}", "Members of a group of Adaptive delays per key that give a delay now (enough samples), the default and overflow members included.")
	fgauge := func(n, desc string) metric.Float64ObservableGauge {
		g, err := m.Float64ObservableGauge(name(n), metric.WithUnit("s"), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	ki.groupDelay = fgauge("hedges.group_delay", "The hedge delays of a group of Adaptive delays per key (hedge.NewAdaptives) now, over every member that gives one (the default and overflow members included): stat=min, median (the lower median) or max; absent while no member has enough samples.")
	ki.keyDelay = fgauge("hedges.key_delay", "The hedge delay of each of the top keys of a group of Adaptive delays per key (the busiest first (the most attempts in the window, hedge.Adaptive.Samples), then the longest delays, then by key; Config.KeyedTopN), and for key=\""+OtherKey+"\" the lower median delay of the other members that give one (the default and overflow members included).")
	if err := errors.Join(errs...); err != nil {
		add(err)
		return
	}
	_, err := m.RegisterCallback(o.observeKeyed, ki.members, ki.kept, ki.openKeys, ki.evictions, ki.overflows, ki.groupDelayKeys, ki.groupDelay, ki.keyDelay)
	add(err)
}

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

// WatchKeyed reports a group of parts per key under the operation, read
// at every collection, without a data point per key by default:
//
//	stormguard.keyed.members{operation,part}            observable gauge
//	stormguard.keyed.kept{operation,part}               observable gauge
//	stormguard.keyed.evictions{operation,part,reason}   observable counter (reason full, idle)
//	stormguard.keyed.overflows{operation,part}          observable counter
//	stormguard.breaker.open_keys{operation,key}         observable gauge (breaker groups)
//	stormguard.hedges.group_delay_keys{operation}       observable gauge (groups of hedge delays)
//	stormguard.hedges.group_delay{operation,stat}       observable gauge, s (stat min, median, max)
//	stormguard.hedges.key_delay{operation,key}          observable gauge, s
//
// open_keys has a data point for each of the top Config.KeyedTopN keys
// (default 10; open breakers first, then the keys with the most calls in
// their breaker's current state), 1 when its breaker is open, and one for
// key="other", the open breakers among the rest: at most KeyedTopN+1,
// whatever the keys (Config.KeyedAllKeys: every key).
//
// For a group of hedge delays (*keyed.Group[*hedge.Adaptive], as
// hedge.NewAdaptives makes for Hedger.Adaptives), group_delay_keys counts
// the members whose Adaptive gives a delay now (enough samples; the
// default and overflow members included) and group_delay reports the
// min, the lower median and the max of their delays (no point while the
// count is 0); key_delay has a point for each of the top KeyedTopN keys
// (the busiest first: the most attempts in the window,
// hedge.Adaptive.Samples; then the longest delays, then by key) and
// key="other", the lower
// median delay of the rest (no point when none of the rest gives one):
// at most KeyedTopN+1, whatever the keys (KeyedAllKeys: every key with a
// delay). A collection reads every member of a breaker group or of a
// group of hedge delays, so its cost grows with the live keys (bounded
// by the group's MaxKeys).
//
// These are the promretry module's metrics. Watching another group under the same
// operation and part replaces the first. The returned function stops
// watching; it is safe to call more than once. A nil Observer or group
// does nothing. WatchBreaker, WatchBudget and WatchLimiter hand a group
// to WatchKeyed.
func (o *Observer) WatchKeyed(operation string, g KeyedGroup) (unwatch func()) {
	if o == nil || g == nil {
		return func() {}
	}
	w := &keyedWatch{op: o.ops.Get(operation).label, part: partOf(g), g: g}
	w.brk, _ = g.(*keyed.Breakers)
	w.hdg, _ = g.(*keyed.Group[*hedge.Adaptive])
	id := [2]string{w.op, w.part}
	ki := &o.keyedInst
	ki.mu.Lock()
	ki.m[id] = w
	ki.mu.Unlock()
	return func() {
		ki.mu.Lock()
		if ki.m[id] == w {
			delete(ki.m, id)
		}
		ki.mu.Unlock()
	}
}

// watchedKeyed hands b to WatchKeyed when it is a group.
func (o *Observer) watchedKeyed(operation string, b any) (unwatch func(), ok bool) {
	g, ok := b.(KeyedGroup)
	if !ok || o == nil {
		return nil, false
	}
	return o.WatchKeyed(operation, g), true
}

func (o *Observer) observeKeyed(_ context.Context, obs metric.Observer) error {
	ki := &o.keyedInst
	ki.mu.Lock()
	ws := make([]*keyedWatch, 0, len(ki.m))
	for _, w := range ki.m {
		ws = append(ws, w)
	}
	ki.mu.Unlock()
	for _, w := range ws {
		s := w.g.Stats()
		at := metric.WithAttributes(attribute.String("operation", w.op), keyPart.String(w.part))
		obs.ObserveInt64(ki.members, int64(s.Live), at)
		obs.ObserveInt64(ki.kept, int64(s.Kept), at)
		obs.ObserveInt64(ki.evictions, int64(s.Evictions), metric.WithAttributes(attribute.String("operation", w.op), keyPart.String(w.part), attribute.String("reason", "full")))
		obs.ObserveInt64(ki.evictions, int64(s.Idle), metric.WithAttributes(attribute.String("operation", w.op), keyPart.String(w.part), attribute.String("reason", "idle")))
		obs.ObserveInt64(ki.overflows, int64(s.Overflows), at)
		if w.brk != nil {
			o.observeOpenKeys(obs, w)
		}
		if w.hdg != nil {
			o.observeKeyDelays(obs, w)
		}
	}
	return nil
}

// observeKeyDelays reports the delays of w's group of hedge delays: the
// summary over every member, the top keys and other.
func (o *Observer) observeKeyDelays(obs metric.Observer, w *keyedWatch) {
	ki := &o.keyedInst
	s := labels.HedgeDelays(w.hdg, o.keyedTopN, o.keyedAll, OtherKey)
	opAttr := attribute.String("operation", w.op)
	obs.ObserveInt64(ki.groupDelayKeys, int64(s.Keys), metric.WithAttributes(opAttr))
	if s.Keys > 0 {
		for _, st := range [...]struct {
			stat string
			d    time.Duration
		}{{"min", s.Min}, {"median", s.Median}, {"max", s.Max}} {
			obs.ObserveFloat64(ki.groupDelay, st.d.Seconds(), metric.WithAttributes(opAttr, attribute.String("stat", st.stat)))
		}
	}
	for _, k := range s.Top {
		obs.ObserveFloat64(ki.keyDelay, k.Delay.Seconds(), metric.WithAttributes(opAttr, attribute.String("key", k.Key)))
	}
	if s.OtherOK {
		obs.ObserveFloat64(ki.keyDelay, s.Other.Seconds(), metric.WithAttributes(opAttr, attribute.String("key", OtherKey)))
	}
}

func (o *Observer) observeOpenKeys(obs metric.Observer, w *keyedWatch) {
	top, other := labels.OpenKeys(w.brk, o.keyedTopN, o.keyedAll, OtherKey)
	opAttr := attribute.String("operation", w.op)
	for _, k := range top {
		v := int64(0)
		if k.Open {
			v = 1
		}
		obs.ObserveInt64(o.keyedInst.openKeys, v, metric.WithAttributes(opAttr, attribute.String("key", k.Key)))
	}
	obs.ObserveInt64(o.keyedInst.openKeys, int64(other), metric.WithAttributes(opAttr, attribute.String("key", OtherKey)))
}

// WatchAdaptives is WatchKeyed for a keyed group of hedge delays
// (hedge.Hedger.Adaptives): the per-key hedge delay metrics. A policy
// file's hedge block with adaptive and per reaches it through
// config.AdaptivesWatcher when Observer is this Observer.
func (o *Observer) WatchAdaptives(operation string, g *keyed.Group[*hedge.Adaptive]) (unwatch func()) {
	if g == nil {
		return func() {}
	}
	return o.WatchKeyed(operation, g)
}
