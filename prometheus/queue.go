package prometheus

import prom "github.com/prometheus/client_golang/prometheus"

// queueMetrics holds one queue's series, resolved once.
type queueMetrics struct {
	dropped prom.Counter
	depth   prom.Gauge
}

// QueueDropped adds n records dropped by the named queue to
// stormguard_queue_dropped_records_total{queue}. The reason is not a label
// (it would multiply the series); n <= 0 does nothing. With QueueDepth it
// implements queue.Observer: set the Collector as a queue's
// Config.Observer.
func (c *Collector) QueueDropped(queue, reason string, n int) {
	if c == nil || n <= 0 {
		return
	}
	c.queues.Get(queue).dropped.Add(float64(n))
}

// QueueDepth sets stormguard_queue_depth{queue} to the number of records
// waiting in the named queue.
func (c *Collector) QueueDepth(queue string, depth int) {
	if c == nil {
		return
	}
	c.queues.Get(queue).depth.Set(float64(depth))
}
