package promretry

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

var _ hedge.Observer = (*Collector)(nil)

// Values of stormguard_hedges_total{result}.
const (
	hedgeStarted = iota
	hedgeWon
	hedgeCancelled // a hedge
	firstCancelled // the attempt a hedge hedged (Event.Hedge false)
	numHedgeResults
)

var hedgeResults = [numHedgeResults]string{"started", "won", "hedge_cancelled", "first_cancelled"}

// hedgeRefusalReasons are the reasons hedge.Do gives a refused hedge
// (Event.Reason): their stormguard_hedges_refused_total series exist, at
// zero, from an operation's first sight. Any other reason is exported once
// it has counted something.
var hedgeRefusalReasons = [...]retry.Reason{
	retry.ReasonBudget, retry.ReasonBreaker, retry.ReasonAttempts,
	retry.ReasonDeadline, retry.ReasonNested, retry.ReasonThrottled,
}

// hedgeMetrics are an operation's hedge series.
type hedgeMetrics struct {
	results [numHedgeResults]atomic.Uint64
	refused [numReasons + 1]atomic.Uint64 // the last reason is unknown
}

// HedgeStarted counts a hedge in stormguard_hedges_total{result="started"}.
// With HedgeWon, HedgeCancelled and HedgeRefused it implements
// hedge.Observer: a Collector set as the Policy's Observer (alone or in a
// retry.Multi) hears the hedges of hedge.Do and hedge.Transport.
func (c *Collector) HedgeStarted(_ context.Context, e hedge.Event) {
	if c == nil {
		return
	}
	c.ops.Get(e.Operation).hedges.results[hedgeStarted].Add(1)
}

// HedgeWon counts a hedge that gave the call's result in
// stormguard_hedges_total{result="won"}.
func (c *Collector) HedgeWon(_ context.Context, e hedge.Event) {
	if c == nil {
		return
	}
	c.ops.Get(e.Operation).hedges.results[hedgeWon].Add(1)
}

// HedgeCancelled counts an attempt cancelled because another answered
// first or a fatal result stopped the call: a hedge in
// stormguard_hedges_total{result="hedge_cancelled"}, the attempt it
// hedged (the call's first attempt or a retry; Event.Hedge false) in
// stormguard_hedges_total{result="first_cancelled"}.
func (c *Collector) HedgeCancelled(_ context.Context, e hedge.Event) {
	if c == nil {
		return
	}
	r := firstCancelled
	if e.Hedge {
		r = hedgeCancelled
	}
	c.ops.Get(e.Operation).hedges.results[r].Add(1)
}

// HedgeRefused counts a hedge that was due but not started in
// stormguard_hedges_refused_total{reason}, the reason being the Event's
// (budget, breaker, attempts, deadline, nested, throttled).
func (c *Collector) HedgeRefused(_ context.Context, e hedge.Event) {
	if c == nil {
		return
	}
	r := int(e.Reason)
	if r >= numReasons {
		r = numReasons // unknown
	}
	c.ops.Get(e.Operation).hedges.refused[r].Add(1)
}

// collectHedges sends an operation's hedge series: every result and every
// reason hedge.Do gives, at zero too; other reasons once they counted.
func (c *Collector) collectHedges(ch chan<- prometheus.Metric, m *opMetrics) {
	for r, result := range hedgeResults {
		ch <- prometheus.MustNewConstMetric(c.hedgesDesc, prometheus.CounterValue, float64(m.hedges.results[r].Load()), m.name, result)
	}
	sent := [numReasons + 1]bool{}
	for _, r := range hedgeRefusalReasons {
		sent[r] = true
		ch <- prometheus.MustNewConstMetric(c.hedgesRefusedDesc, prometheus.CounterValue, float64(m.hedges.refused[r].Load()), m.name, r.String())
	}
	for r := range numReasons + 1 {
		v := m.hedges.refused[r].Load()
		if sent[r] || v == 0 {
			continue
		}
		reason := unknown
		if r < numReasons {
			reason = retry.Reason(r).String()
		}
		ch <- prometheus.MustNewConstMetric(c.hedgesRefusedDesc, prometheus.CounterValue, float64(v), m.name, reason)
	}
}

// hedgeWatches are the Adaptive delays WatchAdaptive exports.
type hedgeWatches struct {
	desc *prometheus.Desc // stormguard_hedges_delay_seconds
	mu   sync.Mutex
	m    map[string]*adaptiveWatch // by operation label
}

type adaptiveWatch struct {
	op string
	a  *hedge.Adaptive
}

// newHedgeWatches makes the hedge delay gauge's descriptor with New's desc.
func newHedgeWatches(desc func(name, help string, labels ...string) *prometheus.Desc) hedgeWatches {
	return hedgeWatches{
		desc: desc("hedges_delay_seconds",
			"The hedge delay an Adaptive gives now (a percentile of recent latencies, losers of hedge races counted as censored samples), in seconds, read at scrape time; absent until it has enough samples.",
			"operation"),
		m: make(map[string]*adaptiveWatch),
	}
}

// WatchAdaptive exports a's current delay (Adaptive.Delay: the hedge
// delay a call starting now waits before hedging) as the gauge
// stormguard_hedges_delay_seconds{operation}, read at every scrape. The
// series is absent while a has too few samples (the Hedger's fixed Delay
// then applies). Watching another Adaptive under the same operation
// replaces the first one. The returned function stops watching (it is
// safe to call more than once). A nil Collector or Adaptive does nothing.
func (c *Collector) WatchAdaptive(operation string, a *hedge.Adaptive) (unwatch func()) {
	if c == nil || a == nil {
		return func() {}
	}
	label := c.ops.Get(operation).name
	w := &adaptiveWatch{op: label, a: a}
	hw := &c.hedgeWatch
	hw.mu.Lock()
	hw.m[label] = w
	hw.mu.Unlock()
	return func() {
		hw.mu.Lock()
		if hw.m[label] == w {
			delete(hw.m, label)
		}
		hw.mu.Unlock()
	}
}

// collectHedgeDelays sends the watched Adaptives' delays.
func (c *Collector) collectHedgeDelays(ch chan<- prometheus.Metric) {
	hw := &c.hedgeWatch
	hw.mu.Lock()
	ws := make([]*adaptiveWatch, 0, len(hw.m))
	for _, w := range hw.m {
		ws = append(ws, w)
	}
	hw.mu.Unlock()
	for _, w := range ws {
		if d, ok := w.a.Delay(); ok {
			ch <- prometheus.MustNewConstMetric(hw.desc, prometheus.GaugeValue, d.Seconds(), w.op)
		}
	}
}
