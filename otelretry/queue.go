package otelretry

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
// queue.Observer: set the Observer as a queue's Config.Observer, and
// as a Scheduler's (it is a queue.RefusedObserver, so a Scheduler's
// refusals count apart from dropped records).
//
// The reason "refused" (ReasonRefused: a task a Scheduler refused, which
// the caller keeps) counts in stormguard.queue.refused instead, as
// QueueRefused does.
func (o *Observer) QueueDropped(queue, reason string, n int) {
	if o == nil || n <= 0 {
		return
	}
	if reason == ReasonRefused {
		o.queueRefused.Add(context.Background(), int64(n), o.queues.Get(queue).add...)
		return
	}
	o.queueDropped.Add(context.Background(), int64(n), o.queues.Get(queue).add...)
}

// ReasonRefused is the drop reason under which QueueDropped counts a
// refusal rather than a drop: a task a Scheduler's Submit refused because
// MaxPending tasks were pending. The caller kept the task, so it is not a
// dropped record.
const ReasonRefused = "refused"

// QueueRefused adds n tasks the named Scheduler refused (Submit returned
// false: MaxPending tasks were pending, and the caller kept the task) to
// stormguard.queue.refused{queue}. n <= 0 does nothing.
func (o *Observer) QueueRefused(queue string, n int) {
	if o == nil || n <= 0 {
		return
	}
	o.queueRefused.Add(context.Background(), int64(n), o.queues.Get(queue).add...)
}

// QueueDepth sets stormguard.queue.depth{queue} to the number of records
// waiting in the named queue. It implements queue.Observer.
func (o *Observer) QueueDepth(queue string, depth int) {
	if o == nil {
		return
	}
	o.queueDepth.Record(context.Background(), int64(depth), o.queues.Get(queue).record...)
}
