package promretry

import (
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
	// Stats returns the throttler's state now: WatchLimiter reads its
	// Probability (the rejection probability, in [0, 1]) and Rejected,
	// the local rejections since the throttler was made, which must
	// never go down. It is called at every scrape and when a watch ends,
	// with the Collector's lock held, possibly while other goroutines use
	// the throttler: it must be safe for concurrent use and must not
	// call the Collector.
	Stats() throttle.Stats
}

// AdaptiveSource is what WatchLimiter reads from an AWS adaptive-mode rate
// limiter (*throttle.Adaptive): its fill and measured rates and its
// counts of attempts that waited or were refused.
type AdaptiveSource interface {
	// Stats returns the limiter's state now: WatchLimiter reads its
	// FillRate (tokens per second) and MeasuredRate (answers per
	// second), and Waits and Refused, counts since the limiter was made,
	// which must never go down. It is called at every scrape and when a
	// watch ends, with the Collector's lock held, possibly while other
	// goroutines use the limiter: it must be safe for concurrent use and
	// must not call the Collector.
	Stats() throttle.AdaptiveStats
}

type limiterWatch struct {
	op       string          // the operation it was watched under
	label    string          // op's label (OverflowOperation past MaxOperations)
	key      any             // the limiter, to find the operations sharing it (nil: not comparable)
	seq      uint64          // order of the watches, for the gauges of a label with several limiters
	prob     RejectionSource // nil if the limiter has none
	sre      ThrottleSource  // nil if not an SRE-like throttler
	adaptive AdaptiveSource  // nil if not an adaptive limiter
}

// id is the identity of the watched limiter: its key, or the watch itself.
func (w *limiterWatch) id() any {
	if w.key != nil {
		return w.key
	}
	return w
}

// limiterTotals are a label's counts from limiters no longer watched, so
// that its counters do not go back when a reload replaces its limiter.
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
//	stormguard_limiter_info{operation,limiter}            gauge    1: the label the operation's limiter is exported under
//
// It takes any retry.Limiter and degrades gracefully: a limiter that is
// none of these interfaces exports nothing (the calls it ends are still
// counted, as stormguard_calls_total{outcome="throttled"}).
//
// A limiter watched under several operations (one policy's, shared by the
// operations that use it) is exported once, under a label of its own,
// SharedPrefix and the operations' labels ("_shared:checkout,search"),
// not whole under each; stormguard_limiter_info{operation,limiter} is 1
// for every watched operation and the label its limiter is exported
// under (the operation's own for a limiter of its own), to join on.
// Operations past MaxOperations share OverflowOperation: the counts of
// every limiter watched under it are summed there, and its gauges are
// those of the limiter watched last.
//
// The counters are the limiters' own counts, kept per label: when another
// limiter is watched under the same operation (a reload changed its
// settings), the first one's counts stay in the counters, which go on from
// there (a shared limiter's in the shared label it had), and they stay
// after the returned function stops the watch (it is safe to call more
// than once). A nil Collector or limiter does nothing.
//
// The Collector is a config.LimiterWatcher: given as
// config.Options.Observer (alone or in a retry.Multi), it is told each
// operation's limiter under the operation's name, so the series join the
// call metrics on operation (through stormguard_limiter_info for a shared
// one).
func (c *Collector) WatchLimiter(operation string, l retry.Limiter) (unwatch func()) {
	if un, ok := c.watchedKeyed(operation, l); ok {
		return un
	}
	if c == nil || l == nil {
		return func() {}
	}
	w := &limiterWatch{op: operation, key: partKey(l)}
	w.prob, _ = l.(RejectionSource)
	w.sre, _ = l.(ThrottleSource)
	w.adaptive, _ = l.(AdaptiveSource)
	if w.prob == nil && w.sre == nil && w.adaptive == nil {
		return func() {}
	}
	w.label = c.ops.Get(operation).name
	c.mu.Lock()
	c.seq++
	w.seq = c.seq
	prev := c.limiters[operation]
	c.limiters[operation] = w
	c.noteWidestLocked(w.id())
	if prev != nil {
		c.retireLimiterLocked(prev)
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.limiters[operation] == w {
			delete(c.limiters, operation)
			c.retireLimiterLocked(w)
		}
	}
}

// widest is the label a shared limiter had when the most operations
// watched it: its counts go there when it retires.
type widest struct {
	label string
	n     int
}

// limiterLabelsLocked returns the operation labels watching limiter id.
func (c *Collector) limiterLabelsLocked(id any) []string {
	var labels []string
	for _, w := range c.limiters {
		if w.id() == id {
			labels = append(labels, w.label)
		}
	}
	return labels
}

// noteWidestLocked records the label of limiter id if it is watched by as
// many operations as ever.
func (c *Collector) noteWidestLocked(id any) {
	labels := c.limiterLabelsLocked(id)
	slices.Sort(labels)
	n := len(slices.Compact(labels))
	if n >= c.limiterWidest[id].n {
		c.limiterWidest[id] = widest{partLabel(labels), n}
	}
}

// retireLimiterLocked folds the counts of w's limiter into the totals once
// no operation watches it any longer: under the label it had when the
// most operations shared it.
func (c *Collector) retireLimiterLocked(w *limiterWatch) {
	id := w.id()
	for _, o := range c.limiters {
		if o.id() == id {
			return // still watched
		}
	}
	label := w.label
	if wd, ok := c.limiterWidest[id]; ok {
		label = wd.label
		delete(c.limiterWidest, id)
	}
	t := c.limiterTotals[label]
	if t == nil {
		t = &limiterTotals{}
		c.limiterTotals[label] = t
	}
	t.add(w.counts())
}

// limiterMetrics returns the limiter series of a scrape. The limiters are
// read under c.mu, like the retirement of a replaced one, so that a
// counter never goes back: a scrape sees either the live limiter or its
// counts folded into the totals, not neither. Each limiter is read once,
// however many operations share it.
func (c *Collector) limiterMetrics() []prometheus.Metric {
	c.mu.Lock()
	defer c.mu.Unlock()
	groups := make(map[any][]*limiterWatch, len(c.limiters))
	for _, w := range c.limiters {
		groups[w.id()] = append(groups[w.id()], w)
	}
	totals := make(map[string]limiterTotals, len(c.limiterTotals))
	for label, t := range c.limiterTotals {
		totals[label] = *t
	}
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	type gauges struct {
		seq            uint64
		prob           float64
		hasProb        bool
		fill, measured float64
		hasAdaptive    bool
	}
	latest := make(map[string]gauges)
	info := make(map[[2]string]bool)
	for _, ws := range groups {
		labels := make([]string, len(ws))
		w := ws[0]
		for i, x := range ws {
			labels[i] = x.label
			if x.seq > w.seq {
				w = x
			}
		}
		label := partLabel(labels)
		for _, x := range ws {
			info[[2]string{x.label, label}] = true
		}
		t := totals[label]
		g := gauges{seq: w.seq}
		switch {
		case w.sre != nil:
			st := w.sre.Stats()
			g.prob, g.hasProb = st.Probability, true
			t.sre = true
			t.rejected += st.Rejected
		case w.prob != nil:
			g.prob, g.hasProb = w.prob.RejectionProbability(), true
		}
		if w.adaptive != nil {
			st := w.adaptive.Stats()
			g.fill, g.measured, g.hasAdaptive = st.FillRate, st.MeasuredRate, true
			t.adaptive = true
			t.waits += st.Waits
			t.refused += st.Refused
		}
		totals[label] = t
		if old, ok := latest[label]; !ok || g.seq > old.seq {
			latest[label] = g
		}
	}
	for label, g := range latest {
		if g.hasProb {
			gauge(c.throttleProbability, g.prob, label)
		}
		if g.hasAdaptive {
			gauge(c.adaptiveFillRate, g.fill, label)
			gauge(c.adaptiveMeasuredRate, g.measured, label)
		}
	}
	for pair := range info {
		gauge(c.limiterInfo, 1, pair[0], pair[1])
	}
	for label, t := range totals {
		counter := func(d *prometheus.Desc, v uint64) {
			out = append(out, prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), label))
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
