package otelretry

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/internal/labels"
)

// admissionReasons are the shed reasons, in admission.Stats.Shed order.
var admissionReasons = [...]admission.Reason{admission.ReasonLimit, admission.ReasonQueueFull,
	admission.ReasonQueueTimeout, admission.ReasonCallerGone}

// admissionWatches are the server-side admission Limiters WatchAdmission
// reports, and their instruments.
type admissionWatches struct {
	limit, inFlight, queued, waits, shed metric.Int64Observable
	delay                                metric.Float64Observable

	mu sync.Mutex
	m  map[string]*admissionWatch // by limiter name
}

type admissionWatch struct {
	l       *admission.Limiter
	opts    []metric.ObserveOption   // limiter=name
	reasons [][]metric.ObserveOption // limiter=name, reason=r, per reason
}

// newAdmissionInstruments makes the admission instruments (New calls it).
func (o *Observer) newAdmissionInstruments(m metric.Meter, name func(string) string, add func(error)) {
	aw := &o.admissionWatch
	aw.m = make(map[string]*admissionWatch)
	var err error
	aw.limit, err = m.Int64ObservableGauge(name("admission.limit"), metric.WithUnit("{request}"),
		metric.WithDescription("The concurrency limit an admission limiter enforces now (the algorithm's, or the probe's while it measures the no-load latency)."))
	add(err)
	aw.inFlight, err = m.Int64ObservableGauge(name("admission.in_flight"), metric.WithUnit("{request}"),
		metric.WithDescription("Requests an admission limiter has admitted and not yet released."))
	add(err)
	aw.queued, err = m.Int64ObservableGauge(name("admission.queue.length"), metric.WithUnit("{request}"),
		metric.WithDescription("Requests waiting in an admission limiter's queue."))
	add(err)
	aw.delay, err = m.Float64ObservableCounter(name("admission.queue.delay"), metric.WithUnit("s"),
		metric.WithDescription("Total time requests waited in an admission limiter's queue before they were given a slot or shed from it (divide by stormguard.admission.queue.waits for the mean)."))
	add(err)
	aw.waits, err = m.Int64ObservableCounter(name("admission.queue.waits"), metric.WithUnit("{request}"),
		metric.WithDescription("Requests that left an admission limiter's queue, given a slot or shed from it (requests admitted at once are not counted)."))
	add(err)
	aw.shed, err = m.Int64ObservableCounter(name("admission.shed"), metric.WithUnit("{request}"),
		metric.WithDescription("Requests an admission limiter shed, by reason: limit (no queue), queue_full, queue_timeout (waited longer than CoDel allows), caller_gone (the caller gave up while it waited)."))
	add(err)
	if aw.limit != nil && aw.inFlight != nil && aw.queued != nil && aw.delay != nil && aw.waits != nil && aw.shed != nil {
		_, err = m.RegisterCallback(o.observeAdmission, aw.limit, aw.inFlight, aw.queued, aw.delay, aw.waits, aw.shed)
		add(err)
	}
}

// WatchAdmission reports the server-side admission.Limiter l under the
// attribute limiter=name (invalid UTF-8 replaced, "" as "unnamed"), read
// from l.Stats at every collection:
//
//   - stormguard.admission.limit: the limit in force;
//   - stormguard.admission.in_flight: requests admitted, not released;
//   - stormguard.admission.queue.length: requests waiting in its queue;
//   - stormguard.admission.queue.delay (seconds) and
//     stormguard.admission.queue.waits: the total time requests waited in
//     the queue before they were given a slot or shed from it, and how
//     many did (the promretry module exports the pair as the summary
//     stormguard_admission_queue_delay_seconds);
//   - stormguard.admission.shed{reason}: requests shed, by reason (limit,
//     queue_full, queue_timeout, caller_gone), every reason reported, at
//     0 too.
//
// Through OpenTelemetry's Prometheus exporter the limit, in-flight, queue
// length and shed series carry promretry's names
// (stormguard_admission_limit, …, stormguard_admission_shed_total).
// Watching another Limiter under the same name replaces the first (as a
// hot reload that builds a new Limiter does). The returned function stops
// watching, unless another Limiter has replaced l under name since; it is
// safe to call more than once. A nil Observer or Limiter does nothing.
func (o *Observer) WatchAdmission(name string, l *admission.Limiter) (unwatch func()) {
	if o == nil || l == nil {
		return func() {}
	}
	name = labels.Value(name) // as promretry exports it
	w := &admissionWatch{l: l, opts: []metric.ObserveOption{
		metric.WithAttributeSet(attribute.NewSet(attribute.String("limiter", name)))}}
	for _, r := range admissionReasons {
		w.reasons = append(w.reasons, []metric.ObserveOption{metric.WithAttributeSet(attribute.NewSet(
			attribute.String("limiter", name), attribute.String("reason", r.String())))})
	}
	aw := &o.admissionWatch
	aw.mu.Lock()
	aw.m[name] = w
	aw.mu.Unlock()
	return func() {
		aw.mu.Lock()
		if aw.m[name] == w {
			delete(aw.m, name)
		}
		aw.mu.Unlock()
	}
}

// observeAdmission is the admission instruments' callback.
func (o *Observer) observeAdmission(_ context.Context, obs metric.Observer) error {
	aw := &o.admissionWatch
	aw.mu.Lock()
	ws := make([]*admissionWatch, 0, len(aw.m))
	for _, w := range aw.m {
		ws = append(ws, w)
	}
	aw.mu.Unlock()
	for _, w := range ws {
		s := w.l.Stats()
		obs.ObserveInt64(aw.limit, int64(s.Limit), w.opts...)
		obs.ObserveInt64(aw.inFlight, int64(s.InFlight), w.opts...)
		obs.ObserveInt64(aw.queued, int64(s.Queued), w.opts...)
		obs.ObserveFloat64(aw.delay, s.QueueWaitTotal.Seconds(), w.opts...)
		obs.ObserveInt64(aw.waits, int64(min(s.QueueWaits, 1<<63-1)), w.opts...)
		for i := range admissionReasons {
			obs.ObserveInt64(aw.shed, int64(min(s.Shed[i], 1<<63-1)), w.reasons[i]...)
		}
	}
	return nil
}
