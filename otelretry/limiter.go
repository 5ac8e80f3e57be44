package otelretry

import (
	"context"
	"errors"

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
	Stats() throttle.Stats
}

// AdaptiveSource is what WatchLimiter reads from an AWS adaptive-mode rate
// limiter (*throttle.Adaptive): its fill and measured rates and its counts
// of attempts that waited or were refused.
type AdaptiveSource interface {
	Stats() throttle.AdaptiveStats
}

type limiterWatch struct {
	prob     RejectionSource // nil if the limiter has none
	sre      ThrottleSource  // nil if not an SRE-like throttler
	adaptive AdaptiveSource  // nil if not an adaptive limiter
}

// limiterTotals are an operation's counts from limiters no longer watched,
// so that its counters do not go back when a reload replaces its limiter.
type limiterTotals struct {
	opts                     []metric.ObserveOption // {operation}
	sre, adaptive            bool                   // the counters exist
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
	if err := errors.Join(errs...); err != nil {
		add(err)
		return
	}
	_, err := m.RegisterCallback(o.observeLimiters, li.probability, li.rejections, li.fillRate, li.measuredRate, li.waits, li.refused)
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
//
// OpenTelemetry's Prometheus exporter gives them the promretry module's
// names (stormguard_throttle_local_rejections_total, ...). It takes any
// retry.Limiter and degrades gracefully: one that is none of these
// interfaces reports nothing (the calls it ends are still counted, as
// stormguard.calls{outcome="throttled"}). The counters are the limiter's
// own counts, kept per operation: when another limiter is watched under
// the same operation (a reload changed its settings), they go on from the
// first one's counts, and they stay after the returned function stops the
// watch (it is safe to call more than once). A nil Observer or limiter
// does nothing.
//
// The Observer is a config.LimiterWatcher: given as config.Options.Observer
// (alone or in a retry.Multi), it is told each operation's limiter under
// the operation's name (see WatchBudget).
func (o *Observer) WatchLimiter(operation string, l retry.Limiter) (unwatch func()) {
	if o == nil || l == nil {
		return func() {}
	}
	w := &limiterWatch{}
	w.prob, _ = l.(RejectionSource)
	w.sre, _ = l.(ThrottleSource)
	w.adaptive, _ = l.(AdaptiveSource)
	if w.prob == nil && w.sre == nil && w.adaptive == nil {
		return func() {}
	}
	label := o.ops.Get(operation).label
	o.mu.Lock()
	t := o.limiterTotals[label]
	if t == nil {
		t = &limiterTotals{opts: []metric.ObserveOption{
			metric.WithAttributeSet(attribute.NewSet(keyOperation.String(label)))}}
		o.limiterTotals[label] = t
	}
	t.sre, t.adaptive = t.sre || w.sre != nil, t.adaptive || w.adaptive != nil
	if prev := o.limiters[label]; prev != nil {
		t.add(prev.counts())
	}
	o.limiters[label] = w
	o.mu.Unlock()
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		if o.limiters[label] == w {
			delete(o.limiters, label)
			o.limiterTotals[label].add(w.counts())
		}
	}
}

// observeLimiters is the limiter metrics' callback. The limiters are read
// under o.mu, like the retirement of a replaced one, so that a counter
// never goes back.
func (o *Observer) observeLimiters(_ context.Context, obs metric.Observer) error {
	li := &o.limiterInst
	o.mu.Lock()
	defer o.mu.Unlock()
	for label, t := range o.limiterTotals {
		rejected, waits, refused := t.rejected, t.waits, t.refused
		if w := o.limiters[label]; w != nil {
			switch {
			case w.sre != nil:
				st := w.sre.Stats()
				obs.ObserveFloat64(li.probability, st.Probability, t.opts...)
				rejected += st.Rejected
			case w.prob != nil:
				obs.ObserveFloat64(li.probability, w.prob.RejectionProbability(), t.opts...)
			}
			if w.adaptive != nil {
				st := w.adaptive.Stats()
				obs.ObserveFloat64(li.fillRate, st.FillRate, t.opts...)
				obs.ObserveFloat64(li.measuredRate, st.MeasuredRate, t.opts...)
				waits += st.Waits
				refused += st.Refused
			}
		}
		if t.sre {
			obs.ObserveInt64(li.rejections, int64(rejected), t.opts...)
		}
		if t.adaptive {
			obs.ObserveInt64(li.waits, int64(waits), t.opts...)
			obs.ObserveInt64(li.refused, int64(refused), t.opts...)
		}
	}
	return nil
}
