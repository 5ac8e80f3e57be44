package prometheus

import prom "github.com/prometheus/client_golang/prometheus"

// queueMetrics holds one queue's series, resolved once.
type queueMetrics struct {
	dropped prom.Counter
	depth   prom.Gauge
}

// queue returns the series of the named queue, creating them on first
// sight. Queue names, like operation names, come from the program's
// configuration and are bounded by MaxOperations (past it they share
// OverflowOperation).
func (c *Collector) queue(name string) *queueMetrics {
	c.mu.Lock()
	defer c.mu.Unlock()
	if q, ok := c.queues[name]; ok {
		return q
	}
	label := operationLabel(name)
	q := c.queueLabels[label]
	if q == nil {
		if len(c.queueLabels) >= c.maxOps {
			label = OverflowOperation
			q = c.queueLabels[label]
		}
		if q == nil {
			q = &queueMetrics{
				dropped: c.queueDropped.WithLabelValues(label),
				depth:   c.queueDepth.WithLabelValues(label),
			}
			c.queueLabels[label] = q
		}
	}
	if len(c.queues) < 4*c.maxOps {
		c.queues[name] = q
	}
	return q
}

// QueueDropped and QueueDepth implement queue.Observer: set the Collector
// as a queue's Config.Observer.

// QueueDropped adds n records dropped by the named queue to
// stormguard_queue_dropped_records_total{queue}. The reason is not a label
// (it would multiply the series); n <= 0 does nothing.
func (c *Collector) QueueDropped(queue, reason string, n int) {
	if c == nil || n <= 0 {
		return
	}
	c.queue(queue).dropped.Add(float64(n))
}

// QueueDepth sets stormguard_queue_depth{queue} to the number of records
// waiting in the named queue.
func (c *Collector) QueueDepth(queue string, depth int) {
	if c == nil {
		return
	}
	c.queue(queue).depth.Set(float64(depth))
}
