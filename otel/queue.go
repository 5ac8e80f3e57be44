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

func newQueueState(label string) *queueState {
	set := metric.WithAttributeSet(attribute.NewSet(keyQueue.String(label)))
	return &queueState{add: []metric.AddOption{set}, record: []metric.RecordOption{set}}
}

// QueueDropped adds n records dropped by the named queue to
// stormguard.queue.dropped_records{queue}. The reason is not an attribute
// (it would multiply the series); n <= 0 does nothing. It implements
// queue.Observer.
func (o *Observer) QueueDropped(queue, reason string, n int) {
	if o == nil || n <= 0 {
		return
	}
	o.queueDropped.Add(context.Background(), int64(n), o.queues.Get(queue).add...)
}

// QueueDepth sets stormguard.queue.depth{queue} to the number of records
// waiting in the named queue. It implements queue.Observer.
func (o *Observer) QueueDepth(queue string, depth int) {
	if o == nil {
		return
	}
	o.queueDepth.Record(context.Background(), int64(depth), o.queues.Get(queue).record...)
}
