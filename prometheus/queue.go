package prometheus

import (
	prom "github.com/prometheus/client_golang/prometheus"
	"github.com/stormguard/stormguard/queue"
)

// queueMetrics holds one queue's series, resolved once.
type queueMetrics struct {
	dropped prom.Counter
	refused prom.Counter
	depth   prom.Gauge
}

// QueueDropped adds n records dropped by the named queue to
// stormguard_queue_dropped_records_total{queue}. The reason is not a label
// (it would multiply the series); n <= 0 does nothing. With QueueDepth it
// implements queue.Observer: set the Collector as a queue's
// Config.Observer, and SchedulerObserver as a Scheduler's.
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

// SchedulerObserver returns the queue.Observer to set as a
// queue.SchedulerConfig's Observer. It is the Collector, except that a task
// the Scheduler refused counts in stormguard_queue_refused_total, not in
// stormguard_queue_dropped_records_total: a Scheduler reports a refusal as
// QueueDropped with queue.DropFull, its only use of that reason (it never
// drops a task it accepted), and the caller keeps a refused task. Use the
// Collector itself for a queue.Queue, whose DropFull records are dropped.
// A nil Collector gives an Observer that does nothing.
func (c *Collector) SchedulerObserver() queue.Observer { return schedulerObserver{c} }

// schedulerObserver is a Collector seen by a Scheduler.
type schedulerObserver struct{ c *Collector }

func (o schedulerObserver) QueueDropped(name, reason string, n int) {
	if reason == queue.DropFull {
		reason = ReasonRefused
	}
	o.c.QueueDropped(name, reason, n)
}

func (o schedulerObserver) QueueDepth(name string, depth int) { o.c.QueueDepth(name, depth) }

// QueueRefused forwards a refusal reported as such.
func (o schedulerObserver) QueueRefused(name string, n int) { o.c.QueueRefused(name, n) }
