package otel

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// queueState holds one queue's pre-built attribute options.
type queueState struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

// queue returns the state of the named queue, creating it on first sight.
// Queue names, like operation names, are bounded by MaxOperations (past it
// they share OverflowOperation).
func (o *Observer) queue(name string) *queueState {
	o.mu.Lock()
	defer o.mu.Unlock()
	if q, ok := o.queues[name]; ok {
		return q
	}
	label := operationLabel(name)
	q := o.qLabels[label]
	if q == nil && len(o.qLabels) >= o.maxOps {
		label = OverflowOperation
		q = o.qLabels[label]
	}
	if q == nil {
		set := metric.WithAttributeSet(attribute.NewSet(keyQueue.String(label)))
		q = &queueState{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
		o.qLabels[label] = q
	}
	if len(o.queues) < 4*o.maxOps {
		o.queues[name] = q
	}
	return q
}

// QueueDropped adds n records dropped by the named queue to
// stormguard.queue.dropped_records{queue}. The reason is not an attribute
// (it would multiply the series); n <= 0 does nothing. It implements
// queue.Observer.
func (o *Observer) QueueDropped(queue, reason string, n int) {
	if o == nil || n <= 0 {
		return
	}
	o.queueDropped.Add(context.Background(), int64(n), o.queue(queue).add...)
}

// QueueDepth sets stormguard.queue.depth{queue} to the number of records
// waiting in the named queue. It implements queue.Observer.
func (o *Observer) QueueDepth(queue string, depth int) {
	if o == nil {
		return
	}
	o.queueDepth.Record(context.Background(), int64(depth), o.queue(queue).record...)
}
