// Package listeners delivers events to subscribed functions one at a time,
// in the order they happened, outside the locks of the code that produced
// them. The breaker and redisstore packages use it for state-change
// listeners.
package listeners

import "sync"

// Queue holds events not yet delivered and the subscribers. The zero value
// is ready to use. Push is cheap and may be called with the producer's lock
// held; Deliver must be called without it. The goroutine that finds no
// delivery running delivers everything queued, including events queued
// meanwhile by other goroutines or by a subscriber that caused one; a
// subscriber that panics stops no delivery (see Deliver).
type Queue[E any] struct {
	mu         sync.Mutex
	queue      []E
	head       int // queue[head:] is still to be delivered
	delivering bool
	subs       []sub[E] // copy on write
	nextID     uint64
}

type sub[E any] struct {
	id uint64
	fn func(E)
}

// Push queues e for delivery.
func (q *Queue[E]) Push(e E) {
	q.mu.Lock()
	q.queue = append(q.queue, e)
	q.mu.Unlock()
}

// Deliver hands every queued event to every subscriber, unless another
// goroutine is already doing so.
//
// A subscriber that panics stops nothing: the other subscribers still hear
// that event, and every subscriber hears every event queued after it, in
// this same Deliver. Once the queue is empty, Deliver panics with the
// value of the first panic it caught (the producer's state is settled by
// then: it calls Deliver after its own work).
func (q *Queue[E]) Deliver() {
	q.mu.Lock()
	if q.delivering {
		q.mu.Unlock()
		return
	}
	q.delivering = true
	finished := false
	defer func() {
		if !finished { // a subscriber called runtime.Goexit: the next Deliver goes on
			q.mu.Lock()
			q.delivering = false
			q.mu.Unlock()
		}
	}()
	var first *caught
	for q.head < len(q.queue) {
		e, subs := q.queue[q.head], q.subs
		q.head++
		q.mu.Unlock()
		for _, s := range subs {
			if p := call(s.fn, e); p != nil && first == nil {
				first = p
			}
		}
		q.mu.Lock()
	}
	q.queue, q.head = q.queue[:0], 0
	q.delivering = false
	finished = true
	q.mu.Unlock()
	if first != nil {
		panic(first.v)
	}
}

// caught is a panic recovered from a subscriber.
type caught struct{ v any }

// call runs fn(e) and returns the panic it recovered, or nil. A
// runtime.Goexit is not stopped.
func call[E any](fn func(E), e E) (p *caught) {
	ok := false
	defer func() {
		if !ok {
			if v := recover(); v != nil { // nil: Goexit (since Go 1.21 panic(nil) recovers a *runtime.PanicNilError)
				p = &caught{v}
			}
		}
	}()
	fn(e)
	ok = true
	return nil
}

// Subscribe adds fn and returns a function that removes it again (once;
// later calls do nothing). A subscriber added during a delivery may or may
// not see the event being delivered.
func (q *Queue[E]) Subscribe(fn func(E)) (unsubscribe func()) {
	q.mu.Lock()
	q.nextID++
	id := q.nextID
	subs := make([]sub[E], len(q.subs), len(q.subs)+1)
	copy(subs, q.subs)
	q.subs = append(subs, sub[E]{id: id, fn: fn})
	q.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			subs := make([]sub[E], 0, len(q.subs))
			for _, s := range q.subs {
				if s.id != id {
					subs = append(subs, s)
				}
			}
			q.subs = subs
		})
	}
}
