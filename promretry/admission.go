package promretry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/internal/labels"
)

// admissionReasons are the shed reasons, in admission.Stats.Shed order.
var admissionReasons = [...]admission.Reason{admission.ReasonLimit, admission.ReasonQueueFull,
	admission.ReasonQueueTimeout, admission.ReasonCallerGone}

// admissionWatches are the server-side admission Limiters WatchAdmission
// exports.
type admissionWatches struct {
	limit, inFlight, queued, delay, shed *prometheus.Desc

	mu sync.Mutex
	m  map[string]*admissionWatch // by limiter label
}

type admissionWatch struct {
	name string
	l    *admission.Limiter
}

// newAdmissionWatches makes the admission metrics' descriptors with New's
// desc.
func newAdmissionWatches(desc func(name, help string, labels ...string) *prometheus.Desc) admissionWatches {
	return admissionWatches{
		limit: desc("admission_limit",
			"The concurrency limit an admission limiter enforces now (the algorithm's, or the probe's while it measures the no-load latency), read at scrape time.",
			"limiter"),
		inFlight: desc("admission_in_flight",
			"Requests an admission limiter has admitted and not yet released, read at scrape time.",
			"limiter"),
		queued: desc("admission_queue_length",
			"Requests waiting in an admission limiter's queue, read at scrape time.",
			"limiter"),
		delay: desc("admission_queue_delay_seconds",
			"Time requests waited in an admission limiter's queue before they were given a slot or shed from it, in seconds (requests admitted at once are not counted).",
			"limiter"),
		shed: desc("admission_shed_total",
			"Requests an admission limiter shed, by reason: limit (no queue), queue_full, queue_timeout (waited longer than CoDel allows), caller_gone (the caller gave up while it waited).",
			"limiter", "reason"),
		m: make(map[string]*admissionWatch),
	}
}

func (aw *admissionWatches) describe(ch chan<- *prometheus.Desc) {
	ch <- aw.limit
	ch <- aw.inFlight
	ch <- aw.queued
	ch <- aw.delay
	ch <- aw.shed
}

// WatchAdmission exports the server-side admission.Limiter l under the
// label limiter=name (invalid UTF-8 replaced, "" as "unnamed"), read from
// l.Stats at every scrape:
//
//   - stormguard_admission_limit: the limit in force;
//   - stormguard_admission_in_flight: requests admitted, not released;
//   - stormguard_admission_queue_length: requests waiting in its queue;
//   - stormguard_admission_queue_delay_seconds: a summary (sum and count)
//     of the time requests waited in the queue before they were given a
//     slot or shed from it;
//   - stormguard_admission_shed_total{reason}: requests shed, by reason
//     (limit, queue_full, queue_timeout, caller_gone), every reason
//     exported, at 0 too.
//
// Watching another Limiter under the same name replaces the first (as a
// hot reload that builds a new Limiter does); the counters then restart
// from the new Limiter's, which Prometheus's rate() reads as a counter
// reset. The returned function stops watching, unless another Limiter
// has replaced l under name since (it is safe to call more than once). A
// nil Collector or Limiter does nothing.
func (c *Collector) WatchAdmission(name string, l *admission.Limiter) (unwatch func()) {
	if c == nil || l == nil {
		return func() {}
	}
	name = labels.Value(name) // valid UTF-8, as every label value must be
	w := &admissionWatch{name: name, l: l}
	aw := &c.admissionWatch
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

// collectAdmission sends the watched Limiters' series.
func (c *Collector) collectAdmission(ch chan<- prometheus.Metric) {
	aw := &c.admissionWatch
	aw.mu.Lock()
	ws := make([]*admissionWatch, 0, len(aw.m))
	for _, w := range aw.m {
		ws = append(ws, w)
	}
	aw.mu.Unlock()
	for _, w := range ws {
		s := w.l.Stats()
		ch <- prometheus.MustNewConstMetric(aw.limit, prometheus.GaugeValue, float64(s.Limit), w.name)
		ch <- prometheus.MustNewConstMetric(aw.inFlight, prometheus.GaugeValue, float64(s.InFlight), w.name)
		ch <- prometheus.MustNewConstMetric(aw.queued, prometheus.GaugeValue, float64(s.Queued), w.name)
		ch <- prometheus.MustNewConstSummary(aw.delay, s.QueueWaits, s.QueueWaitTotal.Seconds(), nil, w.name)
		for i, r := range admissionReasons {
			ch <- prometheus.MustNewConstMetric(aw.shed, prometheus.CounterValue, float64(s.Shed[i]), w.name, r.String())
		}
	}
}
