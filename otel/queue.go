package otel

import (
	"context"

	"github.com/stormguard/stormguard/queue"

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
// SchedulerObserver as a Scheduler's.
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

// SchedulerObserver returns the queue.Observer to set as a
// queue.SchedulerConfig's Observer. It is the Observer, except that a task
// the Scheduler refused counts in stormguard.queue.refused, not in
// stormguard.queue.dropped_records: a Scheduler reports a refusal as
// QueueDropped with queue.DropFull, its only use of that reason (it never
// drops a task it accepted), and the caller keeps a refused task. Use the
// Observer itself for a queue.Queue, whose DropFull records are dropped.
// A nil Observer gives one that does nothing.
func (o *Observer) SchedulerObserver() queue.Observer { return schedulerObserver{o} }

// schedulerObserver is an Observer seen by a Scheduler.
type schedulerObserver struct{ o *Observer }

func (s schedulerObserver) QueueDropped(name, reason string, n int) {
	if reason == queue.DropFull {
		reason = ReasonRefused
	}
	s.o.QueueDropped(name, reason, n)
}

func (s schedulerObserver) QueueDepth(name string, depth int) { s.o.QueueDepth(name, depth) }

// QueueRefused forwards a refusal reported as such.
func (s schedulerObserver) QueueRefused(name string, n int) { s.o.QueueRefused(name, n) }

// QueueDepth sets stormguard.queue.depth{queue} to the number of records
// waiting in the named queue. It implements queue.Observer.
func (o *Observer) QueueDepth(queue string, depth int) {
	if o == nil {
		return
	}
	o.queueDepth.Record(context.Background(), int64(depth), o.queues.Get(queue).record...)
}
