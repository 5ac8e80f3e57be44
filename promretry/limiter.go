package promretry

import (
	"maps"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// RejectionSource is what WatchLimiter reads for
// stormguard_throttle_rejection_probability from a limiter that has it:
// *throttle.SRE implements it. The methods of these interfaces are called
// with the Collector's lock held: they must not call the Collector.
type RejectionSource interface {
	// RejectionProbability returns the probability with which the limiter
	// would reject an attempt now.
	RejectionProbability() float64
}

// ThrottleSource is what WatchLimiter reads from an adaptive throttler
// (*throttle.SRE): its rejection probability and its local rejections,
// counted in stormguard_throttle_local_rejections_total.
type ThrottleSource interface {
	Stats() throttle.Stats
}

// AdaptiveSource is what WatchLimiter reads from an AWS adaptive-mode rate
// limiter (*throttle.Adaptive): its fill and measured rates and its
// counts of attempts that waited or were refused.
type AdaptiveSource interface {
	Stats() throttle.AdaptiveStats
}

type limiterWatch struct {
	op       string
	prob     RejectionSource // nil if the limiter has none
	sre      ThrottleSource  // nil if not an SRE-like throttler
	adaptive AdaptiveSource  // nil if not an adaptive limiter
}

// limiterTotals are an operation's counts from limiters no longer watched,
// so that its counters do not go back when a reload replaces its limiter.
type limiterTotals struct {
	sre, adaptive            bool // the counters exist
	rejected, waits, refused uint64
}

// counts reads the counts of a limiter that stops being watched.
func (w *limiterWatch) counts() (t limiterTotals) {
	if w.sre != nil {
		t.sre, t.rejected = true, w.sre.Stats().Rejected
	}
	if w.adaptive != nil {
		st := w.adaptive.Stats()
		t.adaptive, t.waits, t.refused = true, st.Waits, st.Refused
	}
	return t
}

func (t *limiterTotals) add(u limiterTotals) {
	t.sre, t.adaptive = t.sre || u.sre, t.adaptive || u.adaptive
	t.rejected += u.rejected
	t.waits += u.waits
	t.refused += u.refused
}

// WatchLimiter exports what the client-side limiter l can tell, read at
// every scrape, under the operation's label:
//
//	stormguard_throttle_rejection_probability{operation}  gauge    (a RejectionSource or ThrottleSource: *throttle.SRE)
//	stormguard_throttle_local_rejections_total{operation} counter  (a ThrottleSource)
//	stormguard_adaptive_fill_rate{operation}              gauge    (an AdaptiveSource: *throttle.Adaptive), tokens/s
//	stormguard_adaptive_measured_rate{operation}          gauge    (an AdaptiveSource), requests/s
//	stormguard_adaptive_waits_total{operation}            counter  (an AdaptiveSource)
//	stormguard_adaptive_refused_total{operation}          counter  (an AdaptiveSource)
//
// It takes any retry.Limiter and degrades gracefully: a limiter that is
// none of these interfaces exports nothing (the calls it ends are still
// counted, as stormguard_calls_total{outcome="throttled"}). The counters
// are the limiter's own counts, kept per operation: when another limiter
// is watched under the same operation (a reload changed its settings), the
// first one's counts stay in the counters, which go on from there, and
// they stay after the returned function stops the watch (it is safe to
// call more than once). A nil Collector or limiter does nothing.
//
// The Collector is a config.LimiterWatcher: given as
// config.Options.Observer (alone or in a retry.Multi), it is told each
// operation's limiter under the operation's name, so the series join the
// call metrics on operation.
func (c *Collector) WatchLimiter(operation string, l retry.Limiter) (unwatch func()) {
	if c == nil || l == nil {
		return func() {}
	}
	w := &limiterWatch{}
	w.prob, _ = l.(RejectionSource)
	w.sre, _ = l.(ThrottleSource)
	w.adaptive, _ = l.(AdaptiveSource)
	if w.prob == nil && w.sre == nil && w.adaptive == nil {
		return func() {}
	}
	w.op = c.ops.Get(operation).name
	label := w.op
	c.mu.Lock()
	prev := c.limiters[label]
	c.limiters[label] = w
	if c.limiterTotals[label] == nil {
		c.limiterTotals[label] = &limiterTotals{}
	}
	c.limiterTotals[label].add(limiterTotals{sre: w.sre != nil, adaptive: w.adaptive != nil})
	if prev != nil {
		c.limiterTotals[label].add(prev.counts())
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.limiters[label] == w {
			delete(c.limiters, label)
			c.limiterTotals[label].add(w.counts())
		}
	}
}

// limiterMetrics returns the limiter series of a scrape. The limiters are
// read under c.mu, like the retirement of a replaced one, so that a
// counter never goes back: a scrape sees either the live limiter or its
// counts folded into the totals, not neither.
func (c *Collector) limiterMetrics() []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	watches := slices.Collect(maps.Values(c.limiters))
	totals := make(map[string]limiterTotals, len(c.limiterTotals))
	for op, t := range c.limiterTotals {
		totals[op] = *t
	}
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, op string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, op))
	}
	for _, w := range watches {
		t := totals[w.op]
		switch {
		case w.sre != nil:
			st := w.sre.Stats()
			gauge(c.throttleProbability, st.Probability, w.op)
			t.rejected += st.Rejected
		case w.prob != nil:
			gauge(c.throttleProbability, w.prob.RejectionProbability(), w.op)
		}
		if w.adaptive != nil {
			st := w.adaptive.Stats()
			gauge(c.adaptiveFillRate, st.FillRate, w.op)
			gauge(c.adaptiveMeasuredRate, st.MeasuredRate, w.op)
			t.waits += st.Waits
			t.refused += st.Refused
		}
		totals[w.op] = t
	}
	for op, t := range totals {
		counter := func(d *prometheus.Desc, v uint64) {
			out = append(out, prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), op))
		}
		if t.sre {
			counter(c.throttleRejections, t.rejected)
		}
		if t.adaptive {
			counter(c.adaptiveWaits, t.waits)
			counter(c.adaptiveRefused, t.refused)
		}
	}
	return out
}
