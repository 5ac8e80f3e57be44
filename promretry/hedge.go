package promretry

import (
	"context"
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
	hedgeCancelled
	numHedgeResults
)

var hedgeResults = [numHedgeResults]string{"started", "won", "cancelled"}

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
// first (a hedge, or the attempt it hedged) in
// stormguard_hedges_total{result="cancelled"}.
func (c *Collector) HedgeCancelled(_ context.Context, e hedge.Event) {
	if c == nil {
		return
	}
	c.ops.Get(e.Operation).hedges.results[hedgeCancelled].Add(1)
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
