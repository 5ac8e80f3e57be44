package faultinject

import (
	"slices"
	"sync"
)

// limiter counts running requests and queues the ones beyond the limit in
// FIFO order. A freed slot is handed straight to the first waiter, so a
// newcomer never overtakes the queue. The limit is passed in on every call,
// since the rules may change at any time: a lowered limit lets the surplus
// finish, a raised one admits waiters at once (grant).
type limiter struct {
	mu           sync.Mutex
	inFlight     int
	peakInFlight int
	peakWaiting  int
	waiters      []*waiter
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

// enter takes a slot if one is free and nobody waits, queues the caller if
// the queue has room, and otherwise reports full.
func (l *limiter) enter(lim *Limit) (entry, *waiter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if lim.Concurrency <= 0 || (l.inFlight < lim.Concurrency && len(l.waiters) == 0) {
		l.take()
		return admitted, nil
	}
	if len(l.waiters) >= lim.Queue {
		return full, nil
	}
	w := &waiter{ready: make(chan struct{})}
	l.waiters = append(l.waiters, w)
	l.peakWaiting = max(l.peakWaiting, len(l.waiters))
	return queued, w
}

// take must be called with l.mu held.
func (l *limiter) take() {
	l.inFlight++
	l.peakInFlight = max(l.peakInFlight, l.inFlight)
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

// release frees a slot and hands free slots to waiters.
func (l *limiter) release(lim *Limit) {
	l.mu.Lock()
	l.inFlight--
	l.grant(lim)
	l.mu.Unlock()
}

// admit hands free slots to waiters after a limit change.
func (l *limiter) admit(lim *Limit) {
	l.mu.Lock()
	l.grant(lim)
	l.mu.Unlock()
}

// grant must be called with l.mu held.
func (l *limiter) grant(lim *Limit) {
	for len(l.waiters) > 0 && (lim.Concurrency <= 0 || l.inFlight < lim.Concurrency) {
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
