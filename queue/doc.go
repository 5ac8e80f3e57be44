// Package queue runs fire-and-forget work in the background without ever
// letting a slow or dead downstream grow memory without bound, block the
// application, or multiply its load.
//
// Two types cover the two shapes of such work:
//
//   - Queue[T] is for records — telemetry, audit events, analytics — that
//     are produced fast, are cheap to lose one by one and are sent in
//     batches. Offer never blocks and does not allocate; the buffer is a
//     fixed-capacity ring that drops the oldest (or the newest) record when
//     full and counts every drop; workers send batches bounded by count,
//     bytes and linger time through a user function under a retry.Policy,
//     so the Policy's jittered backoff, retry budget, circuit breaker and
//     Retry-After handling apply to every delivery. A batch the downstream
//     rejects permanently (HTTP 400) is dropped and counted, never retried;
//     one answered "overloaded, don't retry" goes back to the buffer, and
//     the queue pauses as after any delivery that gave up.
//
//   - Scheduler is for tasks — a webhook to deliver, a cache to warm, a
//     record to sync — that must each be retried until they succeed or a
//     stop condition of the Policy is met. Submit never blocks: it refuses
//     a task when too many are pending, so the caller keeps control of the
//     work. Each task is a retry.Call under the Policy, so it is retried
//     exactly as retry.Do would retry it, but however many tasks wait
//     between attempts, the Scheduler runs a fixed number of goroutines:
//     waiting tasks sit in a timer heap. SubmitKey gives a task its key's
//     members of the Policy's keyed groups (one breaker per host, say), so
//     one host's outage does not stop the tasks of the others.
//
// Both are stopped by Close(ctx), which stops intake, finishes what it can
// before ctx ends, cancels the rest, reports what was left and returns only
// after every goroutine it started has returned.
//
// Counting is exact and consistent: Stats and SchedulerStats are taken under
// one lock, so a reader always sees, for a Queue,
//
//	Offered == Delivered + DroppedFull + DroppedPermanent + Pending
//
// and, for a Scheduler, Submitted == Succeeded + Failed + Abandoned + Pending.
// An optional Observer (implemented by the promretry module) receives the
// drops and the depth for the stormguard_queue_dropped_records_total and
// stormguard_queue_depth metrics.
//
// A panic in a user callback on one of their goroutines — a Queue's
// deliver, a task, the Policy's callbacks, the Clock, the Observer, a
// done function — never ends the program, loses a record or leaves a
// lock held: it is recovered and counted (a task's own panic in
// SchedulerStats.Failed, the others in Stats.Panics and
// SchedulerStats.Panics), a Queue puts a batch whose delivery panicked
// back as after a delivery that gave up, a Scheduler fails a task whose
// step panicked with retry.ErrPanicked (a panicking done function or
// Observer call is skipped), and the goroutine goes on. A panic on the
// caller's goroutine (Config.Size, or the Clock or Observer in Offer,
// Submit or Close) goes on to the caller, with the counts consistent and
// no lock held.
//
// Time is read from Config.Clock (or the Policy's clock), so tests drive a
// Queue or a Scheduler with clocktest.Fake without sleeping.
package queue
