package queue

import (
	"context"
	"errors"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// worker is one delivery goroutine of a Queue. Its batch slice and timer
// are reused, so a delivery that succeeds on its first attempt does not
// allocate.
type worker[T any] struct {
	q     *Queue[T]
	batch []T
	sizes []int                       // sizes of the batch's records, if tracked
	op    func(context.Context) error // w.send, bound once
	timer clock.Timer
	// holding: w.batch is taken (counted in flight) and not yet accounted
	// for by finish. Guarded by q.mu.
	holding bool
	// goexit: deliver saw runtime.Goexit, which goes on unwinding this
	// goroutine whatever round's recovery finds (a panic of the pause's
	// Backoff on the way), so recoverRound must start a worker in its place.
	goexit bool
	// panicked: the last round ended in a recovered panic. A round that
	// panics right after another waits panicPause first, so that a
	// callback that panics on every call (a broken Clock) cannot spin the
	// worker.
	panicked bool
}

// panicPause is how long, on the real clock, a worker waits before a round
// that follows two panicking rounds in a row.
const panicPause = 100 * time.Millisecond

func (w *worker[T]) send(ctx context.Context) error { return w.q.deliver(ctx, w.batch) }

func (w *worker[T]) run() {
	q := w.q
	defer func() {
		if w.timer != nil {
			w.timer.Stop()
		}
		q.mu.Lock()
		q.live--
		last := q.live == 0
		q.mu.Unlock()
		if last {
			close(q.exited)
		}
	}()
	for w.round() {
	}
}

// round takes a batch, delivers it and accounts for it; it reports false
// when the worker should return (see take). A panic of a Clock or of the
// Policy's Backoff or Rand source (which pace the pause after a delivery
// that gave up) is recovered here and counted in Stats.Panics, with the
// queue's lock released and no record lost: the worker goes on with the
// next round. (Panics in deliver and in the Observer are recovered where
// they happen, so that the round goes on.)
func (w *worker[T]) round() (more bool) {
	returned := false
	defer func() {
		if !returned {
			goexit := w.recoverRound(recover())
			if w.panicked && !goexit { // a Goexit's goroutine ends: no pause to keep Close waiting
				w.pauseAfterPanics()
			}
			w.panicked = true
			more = true
		}
	}()
	if !w.take() {
		returned = true
		return false
	}
	w.finish(w.deliver())
	returned = true
	w.panicked = false
	return true
}

// pauseAfterPanics waits panicPause on the real clock, or until Close
// gives up.
func (w *worker[T]) pauseAfterPanics() {
	t := time.NewTimer(panicPause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.q.ctx.Done():
	}
}

// recoverRound cleans up after a panic in a round, which every callback
// called with q.mu held releases before it goes on: a batch still taken
// goes back to the buffer. After runtime.Goexit (v is nil) a new worker
// takes this one's place, as in deliver.
func (w *worker[T]) recoverRound(v any) (goexit bool) {
	q := w.q
	goexit = v == nil || w.goexit
	q.mu.Lock()
	q.st.Panics++
	if w.holding {
		w.holding = false
		w.requeue()
	}
	if goexit {
		q.live++
	}
	q.mu.Unlock()
	clear(w.batch)
	q.signal() // records may be waiting: look at the buffer again
	if goexit {
		go newWorker(q).run()
	}
	return goexit
}

// newWorker returns a worker of q, ready to run.
func newWorker[T any](q *Queue[T]) *worker[T] {
	w := &worker[T]{q: q, batch: make([]T, 0, q.maxBatch)}
	if q.size != nil {
		w.sizes = make([]int, 0, q.maxBatch)
	}
	w.op = w.send
	return w
}

// deliver makes one delivery of w.batch through retry.Run. A panic that
// comes out of it — the user's deliver function, re-raised by retry.Run
// after it reported the attempt as failed, or a callback of the Policy —
// is recovered: the delivery fails with a *retry.PanicError, which finish
// treats as any delivery that gave up (the batch goes back to the buffer
// and the queue pauses), and Stats.Panics counts it. A runtime.Goexit
// cannot be stopped: finish accounts for the batch the same way here, and
// round, which Goexit unwinds next, counts it and starts a new worker in
// this one's place.
func (w *worker[T]) deliver() (err error) {
	q := w.q
	returned := false
	defer func() {
		if returned {
			return
		}
		v := recover()
		err = &retry.PanicError{Value: v}
		if v == nil { // runtime.Goexit: this goroutine ends after the defers
			w.goexit = true
			w.finish(err)
			return
		}
		q.mu.Lock()
		q.st.Panics++
		q.mu.Unlock()
	}()
	err = retry.Run(q.ctx, q.policy, w.op)
	returned = true
	return err
}

// take waits until a batch is due and moves it from the buffer into
// w.batch, or reports false when the worker should return: Close has
// emptied the buffer, or Close gave up.
func (w *worker[T]) take() bool {
	q := w.q
	q.mu.Lock()
	for {
		if q.ctx.Err() != nil {
			q.mu.Unlock()
			return false
		}
		// Whoever posted a wake wanted the buffer looked at, which this
		// worker does now: a wake left over would only end the wait below
		// at once, to look again at what it sees here.
		select {
		case <-q.wake:
		default:
		}
		if q.buf.n == 0 && q.closing {
			// Before the clock: nothing is left to deliver, and a Clock
			// that panics on every call must not keep Close waiting.
			q.mu.Unlock()
			return false
		}
		now := q.nowLocked()
		due, until := q.due(now)
		if due {
			break
		}
		closing := q.closing
		q.mu.Unlock()
		w.wait(now, until, closing)
		q.mu.Lock()
	}

	q.bytes -= w.fill()
	k := uint64(len(w.batch))
	q.st.Buffered -= k
	q.st.InFlight += k
	w.holding = true
	more := q.buf.n > 0
	depth := q.st.Buffered + q.st.InFlight
	q.mu.Unlock()
	if more {
		q.signal() // let another idle worker look at the rest
	}
	if q.obs != nil {
		q.observe(func(o Observer) { o.QueueDepth(q.name, int(depth)) })
	}
	return true
}

// due reports whether a batch should be taken now; if not, until is when
// to look again (zero: only when woken). q.mu must be held.
func (q *Queue[T]) due(now time.Time) (due bool, until time.Time) {
	switch {
	case q.buf.n == 0:
		return false, time.Time{}
	case now.Before(q.resumeAt):
		return false, q.resumeAt
	case q.closing, q.linger < 0, q.buf.n >= q.maxBatch, q.maxBytes > 0 && q.bytes >= q.maxBytes:
		return true, time.Time{}
	}
	deadline := q.since.Add(q.linger)
	if !now.Before(deadline) {
		return true, time.Time{}
	}
	return false, deadline
}

// fill moves the next batch from the buffer into w.batch and returns its
// size in bytes. q.mu must be held and the buffer not empty.
func (w *worker[T]) fill() int {
	q := w.q
	w.batch = w.batch[:0]
	w.sizes = w.sizes[:0]
	bytes := 0
	for q.buf.n > 0 && len(w.batch) < q.maxBatch {
		if q.maxBytes > 0 && len(w.batch) > 0 && bytes+q.buf.peekSize() > q.maxBytes {
			break
		}
		v, s := q.buf.popFront()
		w.batch = append(w.batch, v)
		if q.size != nil {
			w.sizes = append(w.sizes, s)
		}
		bytes += s
	}
	return bytes
}

// wait blocks until woken, until the clock reaches until (if not zero),
// until Close starts (unless it already has) or until Close gives up.
func (w *worker[T]) wait(now, until time.Time, closing bool) {
	q := w.q
	var tc <-chan time.Time
	if !until.IsZero() {
		d := until.Sub(now)
		if w.timer == nil {
			w.timer = q.clock.NewTimer(d)
		} else {
			w.timer.Reset(d)
		}
		tc = w.timer.C()
	}
	closingCh := q.closingCh
	if closing {
		closingCh = nil // closed: it would never block again
	}
	select {
	case <-tc:
		return // the timer has fired: nothing to stop
	case <-q.wake:
	case <-closingCh:
	case <-q.ctx.Done():
	}
	if tc != nil {
		w.timer.Stop()
	}
}

// finish accounts for a delivery that returned err.
func (w *worker[T]) finish(err error) {
	q := w.q
	k := len(w.batch)
	var overflow, permanent int
	q.mu.Lock()
	w.holding = false
	switch {
	case err == nil:
		q.st.InFlight -= uint64(k)
		q.st.Delivered += uint64(k)
		q.pacer, q.resumeAt = nil, time.Time{}
	case q.ctx.Err() != nil:
		// Close gave up: the batch stays counted in flight, as undelivered.
		q.mu.Unlock()
		clear(w.batch)
		return
	case isPermanent(err):
		q.st.InFlight -= uint64(k)
		q.st.DroppedPermanent += uint64(k)
		permanent = k
	default:
		overflow = w.requeue()
		q.pauseLocked(err)
	}
	depth := q.st.Buffered + q.st.InFlight
	q.mu.Unlock()
	clear(w.batch)
	if q.obs != nil {
		q.observe(func(o Observer) {
			if permanent > 0 {
				o.QueueDropped(q.name, DropPermanent, permanent)
			}
			if overflow > 0 {
				o.QueueDropped(q.name, DropFull, overflow)
			}
			o.QueueDepth(q.name, int(depth))
		})
	}
}

// observe makes a worker's calls f of the Observer. A panic in them is
// recovered and counted in Stats.Panics: it would otherwise end the
// program, and the worker goes on with what it was doing.
func (q *Queue[T]) observe(f func(Observer)) {
	defer func() {
		if v := recover(); v != nil {
			q.mu.Lock()
			q.st.Panics++
			q.mu.Unlock()
		}
	}()
	f(q.obs)
}

// pauseLocked is pause for finish, with q.mu held. If the Policy's Backoff
// or Rand source or the Clock panics, it unlocks q.mu before the panic goes
// on (to round): the batch has been put back already; the pause is lost.
func (q *Queue[T]) pauseLocked(err error) {
	ok := false
	defer func() {
		if !ok {
			q.mu.Unlock()
		}
	}()
	q.pause(err)
	ok = true
}

// isPermanent reports whether retry.Run gave up with err because the last
// error was not retryable (its *retry.Error has no stop reason), rather
// than because of a limit.
func isPermanent(err error) bool {
	re, ok := err.(*retry.Error) // retry.Run fails with an *Error
	return ok && re.Reason == nil
}

// requeue puts w.batch back at the oldest end of the buffer and returns
// how many of its records were dropped for lack of room: under DropOldest
// the batch's own oldest records (older than anything buffered), under
// DropNewest the newest buffered records. q.mu must be held.
func (w *worker[T]) requeue() (dropped int) {
	q := w.q
	k := len(w.batch)
	q.st.InFlight -= uint64(k)
	keep := min(k, len(q.buf.buf)-q.buf.n) // what fits in the free room
	if q.overflow == DropNewest {
		// k <= MaxBatch <= Capacity: room for the whole batch can be made.
		for ; keep < k; keep++ {
			q.bytes -= q.buf.popBack()
			q.st.Buffered--
			dropped++
		}
	}
	dropped += k - keep
	for i := k - 1; i >= k-keep; i-- {
		s := 0
		if q.size != nil {
			s = w.sizes[i]
		}
		q.buf.pushFront(w.batch[i], s)
		q.bytes += s
	}
	q.st.Buffered += uint64(keep)
	q.st.DroppedFull += uint64(dropped)
	if keep > 0 {
		q.since = time.Time{} // these records have lingered already
	}
	return dropped
}

// pause holds back further deliveries after one gave up with err. The
// deliveries that give up one after another, until one succeeds, are paced
// as the attempts of one retry.Call under q.pacing — the Policy's Backoff,
// MaxRetryAfter and Rand only, as each delivery's retry.Run has applied the
// rest — so the pause is that call's next wait: the backoff for the number
// of give-ups, raised to err's Retry-After advice, capped and jittered
// exactly as between retry.Do's attempts. q.mu must be held.
func (q *Queue[T]) pause(err error) {
	if q.pacer == nil {
		q.pacer = retry.NewCall(q.ctx, &q.pacing)
	}
	a, stop := q.pacer.Begin()
	var d time.Duration
	if stop == nil {
		d, stop = q.pacer.Next(q.pacer.End(&a, gaveUp(err)))
	}
	if stop != nil && errors.Is(stop, retry.ErrAdviceExceedsCap) {
		// The server asked for longer than MaxRetryAfter: pause for about
		// the cap, the longest the Policy allows, rather than not at all —
		// spread down by up to a tenth, so that queues told the same large
		// value do not all resume at once.
		q.pacer = nil
		d = q.pacing.MaxRetryAfter
		if d == 0 {
			d = retry.DefaultMaxRetryAfter
		}
		d -= time.Duration(backoff.Uniform(q.pacing.Rand, uint64(d/10)))
	} else if stop != nil { // only when Close gave up: nothing is delivered any more
		q.pacer = nil
		return
	}
	if until := q.clock.Now().Add(d); until.After(q.resumeAt) {
		q.resumeAt = until
	}
}

// errGaveUp is what the pacer hears of a delivery that gave up.
var errGaveUp = errors.New("queue: a delivery gave up")

// gaveUp is the error the pacer's attempt ends with for a delivery that
// gave up with err: errGaveUp, carrying err's Retry-After advice if any.
// Only the advice may reach the pacer: err's own marks would stop it the
// way they stopped the delivery (an "overloaded, don't retry" answer, a
// breaker's refusal), and the queue would then send the batch again at
// once instead of pausing.
func gaveUp(err error) error {
	if d, ok := retry.RetryAfter(err); ok {
		return retry.After(errGaveUp, d)
	}
	return errGaveUp
}

// retryAll is q.pacing's classifier: every delivery that gave up, other
// than permanently, is followed by a pause.
func retryAll(error) bool { return true }
