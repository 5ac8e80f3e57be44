package otelretry

import (
	"context"
	"errors"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// RejectionSource is what WatchLimiter reads for
// stormguard.throttle.rejection_probability from a limiter that has it:
// *throttle.SRE implements it. The methods of these interfaces are called
// with the Observer's lock held: they must not call the Observer.
type RejectionSource interface {
	// RejectionProbability returns the probability with which the limiter
	// would reject an attempt now.
	RejectionProbability() float64
}

// ThrottleSource is what WatchLimiter reads from an adaptive throttler
// (*throttle.SRE): its rejection probability and its local rejections,
// counted in stormguard.throttle.local_rejections.
type ThrottleSource interface {
	// Stats returns the throttler's state now: WatchLimiter reads its
	// Probability (the rejection probability, in [0, 1]) and Rejected,
	// the local rejections since the throttler was made, which must
	// never go down. It is called at every collection and when a watch ends,
	// with the Observer's lock held, possibly while other goroutines use
	// the throttler: it must be safe for concurrent use and must not
	// call the Observer.
	Stats() throttle.Stats
}

// AdaptiveSource is what WatchLimiter reads from an AWS adaptive-mode rate
// limiter (*throttle.Adaptive): its fill and measured rates and its counts
// of attempts that waited or were refused.
type AdaptiveSource interface {
	// Stats returns the limiter's state now: WatchLimiter reads its
	// FillRate (tokens per second) and MeasuredRate (answers per
	// second), and Waits and Refused, counts since the limiter was made,
	// which must never go down. It is called at every collection and when a
	// watch ends, with the Observer's lock held, possibly while other
	// goroutines use the limiter: it must be safe for concurrent use and
	// must not call the Observer.
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
func (w *limiterWatch) counts() (rejected, waits, refused uint64) {
	if w.sre != nil {
		rejected = w.sre.Stats().Rejected
	}
	if w.adaptive != nil {
		st := w.adaptive.Stats()
		waits, refused = st.Waits, st.Refused
	}
	return rejected, waits, refused
}

func (t *limiterTotals) add(rejected, waits, refused uint64) {
	t.rejected += rejected
	t.waits += waits
	t.refused += refused
}

// limiterInstruments are the limiter metrics, observed by one callback.
type limiterInstruments struct {
	probability, fillRate, measuredRate metric.Float64ObservableGauge
	rejections, waits, refused          metric.Int64ObservableCounter
	info                                metric.Int64ObservableGauge
}

// newLimiterInstruments creates the limiter metrics and registers their
// callback; errors go to add.
func (o *Observer) newLimiterInstruments(m metric.Meter, name func(string) string, add func(error)) {
	li := &o.limiterInst
	var errs []error
	gauge := func(n, desc string) metric.Float64ObservableGauge {
		g, err := m.Float64ObservableGauge(name(n), metric.WithDescription(desc))
		errs = append(errs, err)
		return g
	}
	counter := func(n, desc string) metric.Int64ObservableCounter {
		c, err := m.Int64ObservableCounter(name(n), metric.WithUnit("{attempt}"), metric.WithDescription(desc))
		errs = append(errs, err)
		return c
	}
	li.probability = gauge("throttle.rejection_probability",
		"Probability with which the client-side throttler (SRE adaptive throttling) rejects an attempt now.")
	li.rejections = counter("throttle.local_rejections",
		"Attempts the client-side throttler rejected locally, without sending them.")
	li.fillRate = gauge("adaptive.fill_rate",
		"Send tokens per second of the AWS adaptive-mode rate limiter (CUBIC-driven).")
	li.measuredRate = gauge("adaptive.measured_rate",
		"Smoothed rate at which answers come back, per second, as the AWS adaptive-mode rate limiter measures it.")
	li.waits = counter("adaptive.waits",
		"Attempts that waited for a send token of the AWS adaptive-mode rate limiter.")
	li.refused = counter("adaptive.refused",
		"Attempts the AWS adaptive-mode rate limiter refused because the wait for a token would not end before their deadline.")
	info, err := m.Int64ObservableGauge(name("limiter.info"),
		metric.WithDescription("1 for each operation and the operation value its client-side limiter is reported under: the operation's own, or for a limiter several operations share "+SharedPrefix+" and their names; join on it."))
	li.info = info
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		add(err)
		return
	}
	_, err = m.RegisterCallback(o.observeLimiters, li.probability, li.rejections, li.fillRate, li.measuredRate, li.waits, li.refused, li.info)
	add(err)
}

// WatchLimiter reports what the client-side limiter l can tell, read at
// every collection, under the operation attribute:
//
//	stormguard.throttle.rejection_probability{operation}  observable gauge    (a RejectionSource or ThrottleSource: *throttle.SRE)
//	stormguard.throttle.local_rejections{operation}       observable counter  (a ThrottleSource)
//	stormguard.adaptive.fill_rate{operation}              observable gauge    (an AdaptiveSource: *throttle.Adaptive), tokens/s
//	stormguard.adaptive.measured_rate{operation}          observable gauge    (an AdaptiveSource), per second
//	stormguard.adaptive.waits{operation}                  observable counter  (an AdaptiveSource)
//	stormguard.adaptive.refused{operation}                observable counter  (an AdaptiveSource)
//	stormguard.limiter.info{operation,limiter}            observable gauge    1: the value the operation's limiter is reported under
//
// OpenTelemetry's Prometheus exporter gives them the promretry module's
// names (stormguard_throttle_local_rejections_total, ...). It takes any
// retry.Limiter and degrades gracefully: one that is none of these
// interfaces reports nothing (the calls it ends are still counted, as
// stormguard.calls{outcome="throttled"}).
//
// A limiter watched under several operations (one policy's, shared by the
// operations that use it) is reported once, under an operation value of
// its own, SharedPrefix and the operations' labels
// ("_shared:checkout,search"), not whole under each; limiter.info is 1
// for every watched operation and the value its limiter is reported under
// (the operation's own for a limiter of its own), to join on. Operations
// past MaxOperations share OverflowOperation: the counts of every limiter
// watched under it are summed there, and its gauges are those of the
// limiter watched last.
//
// The counters are the limiters' own counts, kept per label: when another
// limiter is watched under the same operation (a reload changed its
// settings), they go on from the first one's counts (a shared limiter's
// in the shared value it had), and they stay after the returned function
// stops the watch (it is safe to call more than once). A nil Observer or
// limiter does nothing.
//
// The Observer is a config.LimiterWatcher: given as config.Options.Observer
// (alone or in a retry.Multi), it is told each operation's limiter under
// the operation's name (see WatchBudget).
func (o *Observer) WatchLimiter(operation string, l retry.Limiter) (unwatch func()) {
	if un, ok := o.watchedKeyed(operation, l); ok {
		return un
	}
	if o == nil || l == nil {
		return func() {}
	}
	w := &limiterWatch{op: operation, key: partKey(l)}
	w.prob, _ = l.(RejectionSource)
	w.sre, _ = l.(ThrottleSource)
	w.adaptive, _ = l.(AdaptiveSource)
	if w.prob == nil && w.sre == nil && w.adaptive == nil {
		return func() {}
	}
	w.label = o.ops.Get(operation).label
	o.mu.Lock()
	o.seq++
	w.seq = o.seq
	prev := o.limiters[operation]
	o.limiters[operation] = w
	o.noteWidestLocked(w.id())
	if prev != nil {
		o.retireLimiterLocked(prev)
	}
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.limiters[operation] == w {
			delete(o.limiters, operation)
			o.retireLimiterLocked(w)
		}
	}
}

// limiterLabelsLocked returns the operation labels watching limiter id.
func (o *Observer) limiterLabelsLocked(id any) []string {
	var labels []string
	for _, w := range o.limiters {
		if w.id() == id {
			labels = append(labels, w.label)
		}
	}
	return labels
}

// noteWidestLocked records the label of limiter id if it is watched by as
// many operations as ever.
func (o *Observer) noteWidestLocked(id any) {
	labels := o.limiterLabelsLocked(id)
	slices.Sort(labels)
	n := len(slices.Compact(labels))
	if n >= o.limiterWidest[id].n {
		o.limiterWidest[id] = widest{partLabel(labels), n}
	}
}

// retireLimiterLocked folds the counts of w's limiter into the totals once
// no operation watches it any longer: under the label it had when the
// most operations shared it.
func (o *Observer) retireLimiterLocked(w *limiterWatch) {
	id := w.id()
	for _, x := range o.limiters {
		if x.id() == id {
			return // still watched
		}
	}
	label := w.label
	if wd, ok := o.limiterWidest[id]; ok {
		label = wd.label
		delete(o.limiterWidest, id)
	}
	t := o.limiterTotals[label]
	if t == nil {
		t = &limiterTotals{}
		o.limiterTotals[label] = t
	}
	t.sre, t.adaptive = t.sre || w.sre != nil, t.adaptive || w.adaptive != nil
	t.add(w.counts())
}

// opAttrs returns the observe options of operation value label, made once.
func (o *Observer) opAttrs(label string) []metric.ObserveOption {
	if opts, ok := o.labelOpts[label]; ok {
		return opts
	}
	opts := []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(keyOperation.String(label)))}
	o.labelOpts[label] = opts
	return opts
}

// observeLimiters is the limiter metrics' callback. The limiters are read
// under o.mu, like the retirement of a replaced one, so that a counter
// never goes back; each is read once, however many operations share it.
func (o *Observer) observeLimiters(_ context.Context, obs metric.Observer) error {
	li := &o.limiterInst
	o.mu.Lock()
	defer o.mu.Unlock()
	groups := make(map[any][]*limiterWatch, len(o.limiters))
	for _, w := range o.limiters {
		groups[w.id()] = append(groups[w.id()], w)
	}
	totals := make(map[string]limiterTotals, len(o.limiterTotals))
	for label, t := range o.limiterTotals {
		totals[label] = *t
	}
	type gauges struct {
		seq            uint64
		prob           float64
		hasProb        bool
		fill, measured float64
		hasAdaptive    bool
	}
	latest := make(map[string]gauges)
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
		seen := map[string]bool{}
		for _, x := range ws {
			if !seen[x.label] {
				seen[x.label] = true
				obs.ObserveInt64(li.info, 1, metric.WithAttributes(keyOperation.String(x.label), keyLimiter.String(label)))
			}
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
		opts := o.opAttrs(label)
		if g.hasProb {
			obs.ObserveFloat64(li.probability, g.prob, opts...)
		}
		if g.hasAdaptive {
			obs.ObserveFloat64(li.fillRate, g.fill, opts...)
			obs.ObserveFloat64(li.measuredRate, g.measured, opts...)
		}
	}
	for label, t := range totals {
		opts := o.opAttrs(label)
		if t.sre {
			obs.ObserveInt64(li.rejections, int64(t.rejected), opts...)
		}
		if t.adaptive {
			obs.ObserveInt64(li.waits, int64(t.waits), opts...)
			obs.ObserveInt64(li.refused, int64(t.refused), opts...)
		}
	}
	return nil
}
