package faultinject

import (
	"slices"
	"sync"
)

// limiter counts running requests and queues the ones beyond the limit in
// FIFO order. A freed slot is handed straight to the first waiter, so a
// newcomer never overtakes the queue.
//
// The limiter holds the Limit in force, and every change of it (setLimit),
// every admission and every release happen under one mutex: each is one
// linearizable step, so no request is ever admitted beyond the limit in
// force at the moment it is admitted. A lowered limit lets the surplus
// finish, a raised one admits waiters at once.
type limiter struct {
	mu           sync.Mutex
	limit        *Limit // in force (immutable; nil: no limit)
	inFlight     int
	peakInFlight int
	peakWaiting  int
	waiters      []*waiter

	// onTake, when set (by tests only), is called with mu held at every
	// admission, with the in-flight count that includes it.
	onTake func(inFlight int)
}

type waiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // set under limiter.mu
}

// entry is the result of enter.
type entry uint8

const (
	admitted entry = iota // a slot is the caller's: release it when done
	full                  // rejected: every slot taken and the queue full
	queued                // wait on the returned waiter
)

// noLimit is the Limit of a limiter that was never given one.
var noLimit Limit

// enter takes a slot if one is free and nobody waits, queues the caller if
// the queue has room, and otherwise reports full. It returns the Limit in
// force at that moment, whose Status, RetryAfter and QueueTimeout apply
// to the caller; the caller must not modify it.
func (l *limiter) enter() (entry, *waiter, *Limit) {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim := l.limit
	if lim == nil {
		lim = &noLimit
	}
	if lim.Concurrency <= 0 || (l.inFlight < lim.Concurrency && len(l.waiters) == 0) {
		l.take()
		return admitted, nil, lim
	}
	if len(l.waiters) >= lim.Queue {
		return full, nil, lim
	}
	w := &waiter{ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.peakWaiting = max(l.peakWaiting, len(l.waiters))
	return queued, w, lim
}

// take must be called with l.mu held.
func (l *limiter) take() {
	l.inFlight++
	l.peakInFlight = max(l.peakInFlight, l.inFlight)
	if l.onTake != nil {
		l.onTake(l.inFlight)
	}
}

// leave gives up a wait that ended without a grant being noticed. It
// reports whether w had been granted a slot meanwhile; the caller then owns
// that slot and must release it.
func (l *limiter) leave(w *waiter) (granted bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w.granted {
		return true
	}
	if i := slices.Index(l.waiters, w); i >= 0 {
		l.waiters = slices.Delete(l.waiters, i, i+1)
	}
	return false
}

// release frees a slot and hands free slots to waiters, under the limit in
// force.
func (l *limiter) release() {
	l.mu.Lock()
	l.inFlight--
	l.grant()
	l.mu.Unlock()
}

// setLimit puts lim in force and hands the slots it frees to waiters. lim
// must not change afterwards. publish, when not nil, is called in the same
// step (with l.mu held), so that whatever it publishes changes together
// with the limit.
func (l *limiter) setLimit(lim *Limit, publish func()) {
	l.mu.Lock()
	l.limit = lim
	if publish != nil {
		publish()
	}
	l.grant()
	l.mu.Unlock()
}

// grant must be called with l.mu held.
func (l *limiter) grant() {
	for len(l.waiters) > 0 && (l.limit == nil || l.limit.Concurrency <= 0 || l.inFlight < l.limit.Concurrency) {
		w := l.waiters[0]
		l.waiters[0] = nil
		l.waiters = l.waiters[1:]
		w.granted = true
		l.take()
		close(w.ready)
	}
	if len(l.waiters) == 0 {
		l.waiters = nil // let the drained backing array go
	}
}

// gauges fills the limiter's gauges into c.
func (l *limiter) gauges(c *Counters) {
	l.mu.Lock()
	c.InFlight = l.inFlight
	c.Waiting = len(l.waiters)
	c.PeakInFlight = l.peakInFlight
	c.PeakWaiting = l.peakWaiting
	l.mu.Unlock()
}
