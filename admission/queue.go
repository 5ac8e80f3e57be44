package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// ErrShed is wrapped by every error of a request the Limiter did not
// admit; errors.Is(err, ErrShed) tells a shed from other errors, and the
// reasons below tell sheds apart.
var ErrShed = errors.New("admission: shed")

// The reasons a request is shed. Each wraps ErrShed.
var (
	// ErrLimit: the limit was reached and the Limiter has no queue.
	ErrLimit error = &shedError{"admission: concurrency limit reached", ReasonLimit}
	// ErrQueueFull: the limit was reached and the queue was full.
	ErrQueueFull error = &shedError{"admission: queue full", ReasonQueueFull}
	// ErrQueueTimeout: the request waited as long as the queue allows
	// (QueueTarget while a queue stands, QueueInterval otherwise).
	ErrQueueTimeout error = &shedError{"admission: waited longer than the queue allows", ReasonQueueTimeout}
	// ErrCallerGone: the caller's context ended, or its inbound deadline
	// (retry.Inbound.Deadline) passed, before the request was served; the
	// error Acquire returns also wraps the context's cause.
	ErrCallerGone error = &shedError{"admission: the caller gave up before the request was served", ReasonCallerGone}
)

// Reason is why a request was shed, for Stats.
type Reason int

// The reasons, in Stats.Shed order.
const (
	ReasonLimit Reason = iota
	ReasonQueueFull
	ReasonQueueTimeout
	ReasonCallerGone
	nReasons
)

// String returns the reason's metric label: "limit", "queue_full",
// "queue_timeout" or "caller_gone".
func (r Reason) String() string {
	switch r {
	case ReasonLimit:
		return "limit"
	case ReasonQueueFull:
		return "queue_full"
	case ReasonQueueTimeout:
		return "queue_timeout"
	case ReasonCallerGone:
		return "caller_gone"
	}
	return "unknown"
}

type shedError struct {
	msg    string
	reason Reason
}

func (e *shedError) Error() string        { return e.msg }
func (e *shedError) Is(target error) bool { return target == ErrShed }

// Stats is a snapshot of a Limiter, for metrics.
type Stats struct {
	// Limit, InFlight and Queued are what the Limiter's methods of those
	// names returned, read one after another (not as one atomic
	// snapshot): the limit in force (lowered to ProbeLimit during a
	// probe), the requests admitted and not yet released, and the
	// requests waiting in the queue.
	Limit, InFlight, Queued int
	// Shed counts the requests shed so far, by Reason.
	Shed [nReasons]uint64
	// QueueWaits counts the requests that have left the queue so far —
	// given a slot or shed from it — and QueueWaitTotal is the sum of
	// the time they waited there (saturating), so that
	// QueueWaitTotal / QueueWaits is their mean queue delay. Requests
	// admitted at once, or shed without queueing, are not counted.
	QueueWaits     uint64
	QueueWaitTotal time.Duration
}

// Stats returns a snapshot of l.
func (l *Limiter) Stats() Stats {
	s := Stats{Limit: l.Limit(), InFlight: l.InFlight(), Queued: l.Queued()}
	for i := range s.Shed {
		s.Shed[i] = l.shed[i].Load()
	}
	s.QueueWaits = l.queueWaits.Load()
	s.QueueWaitTotal = time.Duration(min(l.queueWaitNs.Load(), 1<<63-1))
	return s
}

func (l *Limiter) refuse(err error) error {
	l.shed[err.(*shedError).reason].Add(1)
	return err
}

// Acquire admits a request now, or queues it, or sheds it:
//
//   - a request whose ctx has already ended when Acquire is called
//     (ctx.Err() != nil: the caller cancelled, or a deadline such as the
//     one layer.Middleware sets from the caller's header passed) is shed
//     at once (ErrCallerGone), whether or not a slot is free;
//   - otherwise, while fewer than the limit are in flight and none is
//     queued, it is admitted at once;
//   - otherwise it waits in the queue, unless the queue is full or the
//     Limiter has none (ErrQueueFull, ErrLimit). A slot freed by a
//     release goes to a queued request: the oldest (FIFO) — unless a
//     queue stands, i.e. it has not been empty for QueueInterval: then
//     the newest (adaptive LIFO; Config.FIFO keeps the oldest first);
//   - a queued request waits at most QueueTarget if a queue stood when
//     it arrived, QueueInterval otherwise (CoDel), then is shed
//     (ErrQueueTimeout);
//   - a queued request whose ctx ends, or whose caller's deadline
//     (retry.Inbound.Deadline, as layer.Middleware reads it) passes, is
//     shed before it starts (ErrCallerGone), also when it had just been
//     given a slot.
//
// ctx's methods may panic, and the panic goes on: one in Acquire leaves
// the request neither queued nor holding a slot (Done is read before it
// is queued; a slot handed to it as Err panics goes back unused, without
// a sample). One as a release hands slots on — it asks whether queued
// callers are gone — goes on to that release, and the request stays
// queued until it is served, its wait is over or its ctx ends.
//
// On success the Permit must be ended (Release, Drop or Ignore). Every
// error wraps ErrShed. Admission at once costs no allocation; a queued
// request costs a few.
func (l *Limiter) Acquire(ctx context.Context) (Permit, error) {
	if ctx.Err() != nil {
		l.refuse(ErrCallerGone)
		return Permit{}, callerGone(ctx)
	}
	if l.waiting.Load() == 0 && l.inflight.Load() < l.limit.Load() {
		// The start is read before the slot is taken, so that a Clock
		// that panics takes none; and only when a slot looks free, so
		// that a request refused at the limit (the storm's path) reads
		// no clock for nothing.
		start := l.startTime()
		if n := l.tryInc(); n > 0 {
			return Permit{l: l, start: start, in: n}, nil
		}
	}
	return l.q.wait(ctx)
}

// TryAcquire admits a request at once or sheds it (ErrLimit), without
// the queue. It costs no allocation.
func (l *Limiter) TryAcquire() (Permit, error) {
	if l.waiting.Load() == 0 && l.inflight.Load() < l.limit.Load() {
		start := l.startTime()
		if n := l.tryInc(); n > 0 {
			return Permit{l: l, start: start, in: n}, nil
		}
	}
	return Permit{}, l.refuse(ErrLimit)
}

// queue is the Limiter's waiting room: a deque of waiters, pushed at the
// back, served from the front (FIFO) or, while a queue stands, the back
// (LIFO).
type queue struct {
	l          *Limiter
	mu         sync.Mutex
	head, tail *waiter
	n          int
	lastEmpty  int64 // when the queue was last empty, on the time line
}

type waiter struct {
	ctx        context.Context
	prev, next *waiter
	queued     bool
	err        error // the shed reason, once decided; nil: admitted
	p          Permit
	done       chan struct{}
	timer      clock.Timer
	since      int64 // when it was queued, on the time line
}

func (q *queue) init(l *Limiter) { q.l = l }

func (q *queue) push(w *waiter, now int64) {
	if q.n == 0 {
		q.lastEmpty = now
	}
	w.prev, w.next, w.queued = q.tail, nil, true
	if q.tail != nil {
		q.tail.next = w
	} else {
		q.head = w
	}
	q.tail = w
	q.n++
	q.l.waiting.Add(1)
}

// remove takes w out of the queue and decides it: err nil admits it with
// p. It must be called with mu held, for a queued w.
func (q *queue) remove(w *waiter, now int64, p Permit, err error) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		q.head = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		q.tail = w.prev
	}
	w.prev, w.next, w.queued = nil, nil, false
	q.n--
	q.l.waiting.Add(-1)
	if q.n == 0 {
		q.lastEmpty = now
	}
	q.l.queueWaits.Add(1)
	if d := now - w.since; d > 0 {
		q.l.queueWaitNs.Add(uint64(d))
	}
	w.p, w.err = p, err
	if err != nil {
		q.l.refuse(err)
	}
	close(w.done)
	if w.timer != nil {
		w.timer.Stop() // last: a Clock whose Stop panics leaves w decided and its caller woken
	}
}

// standing reports whether a queue stands at now: it has not been empty
// for QueueInterval. It must be called with mu held.
func (q *queue) standing(now int64) bool {
	return q.n > 0 && now-q.lastEmpty >= int64(q.l.c.QueueInterval)
}

// gone reports whether the caller of ctx has given up at now.
func (q *queue) gone(ctx context.Context, now int64) bool {
	if ctx.Err() != nil {
		return true
	}
	in, ok := retry.InboundOf(ctx)
	return ok && !in.Deadline.IsZero() && !q.l.at(now).Before(in.Deadline)
}

// dispatch gives free slots to queued requests. The lock is released by
// a defer (dispatch runs only while requests are queued, off the path of
// admission at once): a queued caller's context whose methods panic as
// dispatch asks whether it is gone leaves the lock free, its panic going
// on to the caller of dispatch and that request left queued until its
// timeout.
func (q *queue) dispatch(now int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.dispatchLocked(now)
}

// dispatchLate gives free slots to queued requests when the Clock could
// not be read: at known, or at the newest queued request's arrival if
// that is later (the latest time the Limiter has seen).
func (q *queue) dispatchLate(known int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := known
	if q.tail != nil {
		now = max(now, q.tail.since)
	}
	q.dispatchLocked(now)
}

func (q *queue) dispatchLocked(now int64) {
	for q.n > 0 {
		w := q.head
		if !q.l.c.FIFO && q.standing(now) {
			w = q.tail
		}
		if q.gone(w.ctx, now) {
			q.remove(w, now, Permit{}, ErrCallerGone)
			continue
		}
		n := q.l.tryInc()
		if n == 0 {
			return
		}
		// Timed as one admitted at once would be: one in sampleEvery
		// while the Limiter samples, so the window's mean and its rate
		// estimate count the queued requests as they count the others.
		start := now
		if m := q.l.mask.Load(); m != 0 && q.l.coin()&m != 0 {
			start = untimed
		}
		q.remove(w, now, Permit{l: q.l, start: start, in: n}, nil)
	}
}

func (q *queue) wait(ctx context.Context) (Permit, error) {
	l := q.l
	if l.c.QueueLength < 0 {
		return Permit{}, l.refuse(ErrLimit)
	}
	// Done is read before the request is queued: if it panics, nothing
	// is queued yet.
	ctxDone := ctx.Done()
	w, err := q.enter(ctx, l.now())
	if err != nil {
		return Permit{}, err
	}
	select {
	case <-w.done:
	case <-ctxDone:
		q.leave(w)
	}
	if w.err == nil && q.callerWent(ctx, w) {
		// Given a slot as the caller went away: give it back unused.
		w.p.Ignore()
		l.refuse(ErrCallerGone)
		w.err = ErrCallerGone
	}
	if w.err != nil {
		if w.err == ErrCallerGone {
			return Permit{}, callerGone(ctx)
		}
		return Permit{}, w.err
	}
	return w.p, nil
}

// enter queues a request of ctx at now, or says why it is shed. If the
// Clock's AfterFunc panics, or the push's dispatch does (another queued
// caller's context), the request leaves the queue unserved
// (ErrQueueTimeout), a slot the dispatch gave it goes back, and the panic
// goes on, with the queue's lock free.
func (q *queue) enter(ctx context.Context, now int64) (w *waiter, err error) {
	l := q.l
	ok := false
	defer func() {
		// After the unlock below. The push's dispatch, or the Clock's
		// AfterFunc, panicked (another queued caller's context, say): w
		// leaves the queue, and a slot the dispatch gave it goes back, as
		// nobody will wait for either.
		if ok || w == nil {
			return
		}
		q.mu.Lock()
		if w.queued {
			q.remove(w, now, Permit{}, ErrQueueTimeout)
		}
		given := w.err == nil
		q.mu.Unlock()
		if given {
			w.p.Ignore()
		}
	}()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.n >= l.c.QueueLength {
		return nil, l.refuse(ErrQueueFull)
	}
	if q.gone(ctx, now) {
		l.refuse(ErrCallerGone)
		return nil, callerGone(ctx)
	}
	timeout := l.c.QueueInterval
	if q.standing(now) {
		timeout = l.c.QueueTarget
	}
	w = &waiter{ctx: ctx, done: make(chan struct{}), since: now}
	q.push(w, now)
	// A slot freed between the fast path and the push goes to the queue.
	q.dispatchLocked(now)
	if w.queued {
		// Timeouts are positive, so no clock fires this synchronously.
		w.timer = l.clk.AfterFunc(timeout, func() { q.expire(w) })
	}
	ok = true
	return w, nil
}

// leave takes w out of the queue as its caller goes, unless a slot or a
// shed reached it first; also when the Clock panics (w then leaves as of
// when it came, and the panic goes on).
//
// A slot may have reached w just as its caller went (wait's select
// picked ctx.Done); if the Clock panics then, wait never ignores it, so
// leave gives it back.
func (q *queue) leave(w *waiter) {
	now, read := w.since, false
	defer func() {
		q.mu.Lock()
		if w.queued {
			q.remove(w, now, Permit{}, ErrCallerGone)
		}
		given := !read && w.err == nil
		q.mu.Unlock()
		if given {
			w.p.Ignore()
		}
	}()
	now = q.l.now()
	read = true
}

// callerWent reports whether ctx has ended, for a w that has been given
// a slot. If ctx.Err panics, the slot goes back unused (no sample) before
// the panic goes on, as nobody will end the Permit.
func (q *queue) callerWent(ctx context.Context, w *waiter) bool {
	judged := false
	defer func() {
		if !judged {
			w.p.Ignore()
		}
	}()
	gone := ctx.Err() != nil
	judged = true
	return gone
}

// expire sheds w when its wait is over (ErrQueueTimeout), unless a slot
// or another shed reached it first. The time is read under the queue's
// lock; if the Clock panics, w is shed all the same, as of when it came
// (as leave does), and the panic goes on to the Clock's timer.
func (q *queue) expire(w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !w.queued {
		return
	}
	now := w.since
	defer func() {
		if w.queued {
			q.remove(w, now, Permit{}, ErrQueueTimeout)
		}
	}()
	now = q.l.now()
}

// callerGone returns ErrCallerGone wrapped with the reason ctx gives.
func callerGone(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil {
		return fmt.Errorf("%w: the caller's deadline passed", ErrCallerGone)
	}
	return fmt.Errorf("%w: %w", ErrCallerGone, cause)
}
