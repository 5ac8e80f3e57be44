package promretry

import (
	"github.com/prometheus/client_golang/prometheus"
)

// queueMetrics holds one queue's series, resolved once.
type queueMetrics struct {
	dropped prometheus.Counter
	refused prometheus.Counter
	depth   prometheus.Gauge
}

// QueueDropped adds n records dropped by the named queue to
// stormguard_queue_dropped_records_total{queue}. The reason is not a label
// (it would multiply the series); n <= 0 does nothing. With QueueDepth it
// implements queue.Observer: set the Collector as a queue's
// Config.Observer, and as a Scheduler's (it is a queue.RefusedObserver, so a Scheduler's
// refusals count apart from dropped records).
//
// The reason "refused" (a task a Scheduler refused, which the caller
// keeps) counts in stormguard_queue_refused_total instead, as
// QueueRefused does.
func (c *Collector) QueueDropped(queue, reason string, n int) {
	if c == nil || n <= 0 {
		return
	}
	if reason == ReasonRefused {
		c.queues.Get(queue).refused.Add(float64(n))
		return
	}
	c.queues.Get(queue).dropped.Add(float64(n))
}

// ReasonRefused is the drop reason under which QueueDropped counts a
// refusal rather than a drop: a task a Scheduler's Submit refused because
// MaxPending tasks were pending. The caller kept the task, so it is not a
// dropped record.
const ReasonRefused = "refused"

// QueueRefused adds n tasks the named Scheduler refused (Submit returned
// false: MaxPending tasks were pending, and the caller kept the task) to
// stormguard_queue_refused_total{queue}. n <= 0 does nothing.
func (c *Collector) QueueRefused(queue string, n int) {
	if c == nil || n <= 0 {
		return
	}
	c.queues.Get(queue).refused.Add(float64(n))
}

// QueueDepth sets stormguard_queue_depth{queue} to the number of records
// waiting in the named queue.
func (c *Collector) QueueDepth(queue string, depth int) {
	if c == nil {
		return
	}
	c.queues.Get(queue).depth.Set(float64(depth))
}
