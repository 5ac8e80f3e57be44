package otelretry

import (
	"context"
	"errors"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

var _ hedge.Observer = (*Observer)(nil)

// Hedge marks on attempt spans.
const (
	// AttrHedge is true on the span of an attempt hedge.Do started as a
	// hedge (no attempt had answered within the hedge delay).
	AttrHedge = attribute.Key("stormguard.hedge")

	// EventHedgeStarted is added to a hedge's span when it starts, with
	// the hedge delay in effect as stormguard.delay_ms.
	EventHedgeStarted = "stormguard.hedge.started"
	// EventHedgeWon is added to the span of a hedge that gave the call's
	// result, before the span ends.
	EventHedgeWon = "stormguard.hedge.won"
	// EventHedgeCancelled is added to the span of an attempt (a hedge, or
	// the attempt it hedged) cancelled because another answered first or
	// a fatal result stopped the call, before the span ends. Such a span
	// has stormguard.outcome "canceled" and no Error status: losing a race
	// is not a failure.
	EventHedgeCancelled = "stormguard.hedge.cancelled"
)

// Values of the result attribute of stormguard.hedges.
const (
	hedgeStarted = iota
	hedgeWon
	hedgeCancelled // a hedge
	firstCancelled // the attempt a hedge hedged (Event.Hedge false)
	numHedgeResults
)

var hedgeResultNames = [numHedgeResults]string{"started", "won", "hedge_cancelled", "first_cancelled"}

// keyReason is the reason attribute of stormguard.hedges.refused (the
// result attribute of stormguard.hedges is config.go's keyResult).
const keyReason = attribute.Key("reason")

// hedgeOptions are an operation's pre-built attribute sets of the hedge
// metrics.
type hedgeOptions struct {
	results [numHedgeResults][]metric.AddOption
	refused [numReasons + 1][]metric.AddOption // the last reason is unknown
}

func newHedgeOptions(op attribute.KeyValue) hedgeOptions {
	var h hedgeOptions
	for r, name := range hedgeResultNames {
		h.results[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, keyResult.String(name)))}
	}
	for r := range numReasons + 1 {
		reason := unknown
		if r < numReasons {
			reason = retry.Reason(r).String()
		}
		h.refused[r] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(op, keyReason.String(reason)))}
	}
	return h
}

var hedgeTrue = AttrHedge.Bool(true)

// HedgeStarted counts the hedge in stormguard.hedges{result="started"},
// marks its attempt span (the one AttemptStart started, which ctx
// carries) stormguard.hedge=true and adds a hedge.started event with the
// delay. With HedgeWon, HedgeCancelled and HedgeRefused it implements
// hedge.Observer: an Observer set as the Policy's Observer (alone or in a
// retry.Multi) hears the hedges of hedge.Do and hedge.Transport.
func (o *Observer) HedgeStarted(ctx context.Context, e hedge.Event) {
	if o == nil {
		return
	}
	s := o.ops.Get(e.Operation)
	o.hedges.Add(ctx, 1, s.hedge.results[hedgeStarted]...)
	span, _ := ctx.Value(spanKey{o}).(trace.Span)
	if span == nil {
		return
	}
	span.SetAttributes(hedgeTrue)
	span.AddEvent(EventHedgeStarted, trace.WithAttributes(AttrDelayMS.Float64(ms(e.Delay))))
	o.hedgeSpans.Store(span, struct{}{})
}

// HedgeWon counts the hedge in stormguard.hedges{result="won"}. (Its
// span, ended by AttemptEnd just before, has the hedge.won event.)
func (o *Observer) HedgeWon(ctx context.Context, e hedge.Event) {
	if o == nil {
		return
	}
	o.hedges.Add(ctx, 1, o.ops.Get(e.Operation).hedge.results[hedgeWon]...)
}

// HedgeCancelled counts the attempt cancelled because another answered
// first or a fatal result stopped the call: a hedge in
// stormguard.hedges{result="hedge_cancelled"}, the attempt it hedged (the
// call's first attempt or a retry; Event.Hedge false) in
// stormguard.hedges{result="first_cancelled"}. (Its span, ended by
// AttemptEnd just before, has the hedge.cancelled event.)
func (o *Observer) HedgeCancelled(ctx context.Context, e hedge.Event) {
	if o == nil {
		return
	}
	r := firstCancelled
	if e.Hedge {
		r = hedgeCancelled
	}
	o.hedges.Add(ctx, 1, o.ops.Get(e.Operation).hedge.results[r]...)
}

// HedgeRefused counts a hedge that was due but not started in
// stormguard.hedges.refused{reason}, the reason being the Event's
// (budget, breaker, attempts, deadline, nested, throttled).
func (o *Observer) HedgeRefused(ctx context.Context, e hedge.Event) {
	if o == nil {
		return
	}
	o.hedgesRefused.Add(ctx, 1, o.ops.Get(e.Operation).hedge.refused[min(int(e.Reason), numReasons)]...)
}

// hedgeEnd adds the hedge events to an attempt span about to end: hedge.won
// on a hedge that answered (a hedge's success always wins: an attempt
// that answers after the call was decided ends as a loser), and
// hedge.cancelled on a loser. It reports whether the attempt lost.
//
// The events go here rather than in HedgeWon and HedgeCancelled because
// hedge.Do reports those after the attempt's AttemptEnd, which ends the
// span.
func (o *Observer) hedgeEnd(span trace.Span, e retry.AttemptEnd) (lost bool) {
	hedged := false
	if e.Attempt > 1 { // a hedge is never the first attempt
		_, hedged = o.hedgeSpans.LoadAndDelete(span)
	}
	switch {
	case e.Outcome == retry.OutcomeSuccess && hedged:
		span.AddEvent(EventHedgeWon)
	case e.Outcome == retry.OutcomeCanceled && (e.Err == nil || errors.Is(e.Err, hedge.ErrLost)):
		// (A loser that answered after the call was decided ends
		// canceled with its nil error.)
		span.AddEvent(EventHedgeCancelled)
		return true
	}
	return false
}

// hedgeWatches are the Adaptive delays WatchAdaptive reports.
type hedgeWatches struct {
	mu sync.Mutex
	m  map[string]*adaptiveWatch // by operation label
}

type adaptiveWatch struct {
	a    *hedge.Adaptive
	opts []metric.ObserveOption
}

// newHedgeInstruments makes the hedge delay gauge (New calls it).
func (o *Observer) newHedgeInstruments(m metric.Meter, name func(string) string, add func(error)) {
	o.hedgeWatch.m = make(map[string]*adaptiveWatch)
	_, err := m.Float64ObservableGauge(name("hedges.delay"), metric.WithUnit("s"),
		metric.WithDescription("The hedge delay an Adaptive gives now (a percentile of recent latencies, losers of hedge races counted as censored samples); absent until it has enough samples."),
		metric.WithFloat64Callback(o.observeHedgeDelays))
	add(err)
}

// WatchAdaptive reports a's current delay (Adaptive.Delay: the hedge
// delay a call starting now waits before hedging) as the observable gauge
// stormguard.hedges.delay{operation}, in seconds, read at every
// collection (stormguard_hedges_delay_seconds through the Prometheus
// exporter, as the promretry module exports it). No point is reported
// while a has too few samples (the Hedger's fixed Delay then applies).
// Watching another Adaptive under the same operation replaces the first
// one. The returned function stops watching; it is safe to call more than
// once. A nil Observer or Adaptive does nothing.
func (o *Observer) WatchAdaptive(operation string, a *hedge.Adaptive) (unwatch func()) {
	if o == nil || a == nil {
		return func() {}
	}
	label := o.ops.Get(operation).label
	w := &adaptiveWatch{a: a, opts: []metric.ObserveOption{
		metric.WithAttributeSet(attribute.NewSet(keyOperation.String(label)))}}
	hw := &o.hedgeWatch
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

// observeHedgeDelays is the delay gauge's callback.
func (o *Observer) observeHedgeDelays(_ context.Context, obs metric.Float64Observer) error {
	hw := &o.hedgeWatch
	hw.mu.Lock()
	ws := make([]*adaptiveWatch, 0, len(hw.m))
	for _, w := range hw.m {
		ws = append(ws, w)
	}
	hw.mu.Unlock()
	for _, w := range ws {
		if d, ok := w.a.Delay(); ok {
			obs.Observe(d.Seconds(), w.opts...)
		}
	}
	return nil
}
