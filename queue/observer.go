package queue

// Observer is told about a Queue's or Scheduler's drops and depth, for
// metrics. It is separate from retry.Observer, which already sees every
// delivery attempt made through the Policy. The promretry module
// implements it as stormguard_queue_dropped_records_total{queue} and
// stormguard_queue_depth{queue}.
//
// Methods are called synchronously, outside the queue's lock, from the
// goroutine that caused the event (Offer, Submit, a worker or Close); they
// must be safe for concurrent use, should be quick and must not block. A
// panic in a call from a worker is recovered and counted in Stats.Panics
// or SchedulerStats.Panics (see New and Scheduler); from Offer, Submit or
// Close it goes on to the caller, with the counts already consistent.
// Depth reports from different goroutines may arrive out of order, so a
// gauge fed by QueueDepth is a sample; Stats is always exact. A nil Observer
// costs nothing.
type Observer interface {
	// QueueDropped reports that n records (or tasks) were dropped for the
	// given reason: one of DropFull, DropPermanent, DropExhausted,
	// DropClosed or DropPanicked. queue is Config.Name or SchedulerConfig.Name.
	QueueDropped(queue string, reason string, n int)
	// QueueDepth reports the number of pending records (buffered plus in
	// flight; see Stats.Pending) or pending tasks. A Queue calls it when
	// its buffer starts filling, holds a full batch or becomes full, when a
	// batch is taken or its delivery ends, and at Close — not on every
	// Offer. A Scheduler calls it when Submit accepts a task, when a task
	// ends, and once when Close abandons tasks.
	QueueDepth(queue string, depth int)
}

// RefusedObserver is implemented by Observers that count a Scheduler's
// refusals apart from dropped records: a task Submit refused (MaxPending
// tasks were pending) was never taken, and its caller still holds it.
// A Scheduler whose Observer implements it calls QueueRefused instead of
// QueueDropped with DropFull.
type RefusedObserver interface {
	// QueueRefused reports that Submit refused n tasks of the Scheduler
	// named queue (SchedulerConfig.Name) because MaxPending tasks were
	// pending; a Scheduler passes n = 1, once per refused Submit. It is
	// called as Observer's methods are (synchronously, from the
	// goroutine that called Submit): it must be safe for concurrent use,
	// quick, and must not block.
	QueueRefused(queue string, n int)
}

// Drop reasons passed to Observer.QueueDropped, usable as metric label
// values.
const (
	// DropFull: the buffer was full and the record was evicted or refused
	// (Stats.DroppedFull); a Scheduler reports its refusals
	// (SchedulerStats.Refused) with it only to an Observer that is not a
	// RefusedObserver.
	DropFull = "full"
	// DropPermanent: delivery failed with an error the Policy does not
	// retry, such as HTTP 400 (Stats.DroppedPermanent, SchedulerStats.Failed);
	// for a scheduled task, also an answer carrying the overload marker
	// ("overloaded, don't retry", retry.ErrOverloaded), which no layer
	// retries. (A Queue keeps such a batch and pauses instead.)
	DropPermanent = "permanent"
	// DropExhausted: a scheduled task hit a stop condition of the Policy
	// (MaxAttempts, MaxElapsed, or a Budget or Breaker refusal) before
	// succeeding (SchedulerStats.Failed).
	DropExhausted = "exhausted"
	// DropClosed: Close's context ended before the record was delivered or
	// the task finished (Stats.Pending after Close, SchedulerStats.Abandoned).
	DropClosed = "closed"
	// DropPanicked: a scheduled task panicked; it is not retried
	// (SchedulerStats.Failed).
	DropPanicked = "panicked"
)
