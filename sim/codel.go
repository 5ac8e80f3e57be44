package sim

import "time"

// codelQueue is package admission's queue rule, for the simulator: a
// bounded deque served from the front (FIFO) or, while a queue stands,
// from the back (adaptive LIFO), in which a request may wait QueueTarget
// if a queue stood when it arrived and QueueInterval otherwise (CoDel). A
// queue stands when it has not been empty for the interval. A request
// whose caller has gone is dropped when it comes to the front of service
// (and refused on arrival). admission.Limiter runs the same rule on
// goroutines and timers; TestCoDelQueueModelMatchesAdmission checks the
// two on the same events. It is not safe for concurrent use.
type codelQueue[T any] struct {
	cap              int
	target, interval time.Duration
	items            []*qnode[T]
	lastEmpty        time.Duration
}

type qnode[T any] struct {
	v       T
	timeout time.Duration
}

type pushResult uint8

const (
	queueQueued pushResult = iota
	queueFull
	queueCallerGone
)

func newCoDelQueue[T any](capacity int, target, interval time.Duration) *codelQueue[T] {
	return &codelQueue[T]{cap: capacity, target: target, interval: interval}
}

// Len returns the requests waiting.
func (q *codelQueue[T]) Len() int { return len(q.items) }

// standing reports whether a queue stands at now.
func (q *codelQueue[T]) standing(now time.Duration) bool {
	return len(q.items) > 0 && now-q.lastEmpty >= q.interval
}

// Push queues v at now, or refuses it: the queue is full, or its caller
// has gone (gone). A queued v must be passed to Take or Expire once.
func (q *codelQueue[T]) Push(now time.Duration, v T, gone bool) (*qnode[T], pushResult) {
	if len(q.items) >= q.cap {
		return nil, queueFull
	}
	if gone {
		return nil, queueCallerGone
	}
	n := &qnode[T]{v: v, timeout: q.interval}
	if q.standing(now) {
		n.timeout = q.target
	}
	if len(q.items) == 0 {
		q.lastEmpty = now
	}
	q.items = append(q.items, n)
	return n, queueQueued
}

// Next returns the request a free slot goes to at now: the oldest, or
// the newest while a queue stands. A request whose caller has gone
// (gone) is taken out and returned with wasGone set; ok is false when
// the queue is empty.
func (q *codelQueue[T]) Next(now time.Duration, gone func(T) bool) (n *qnode[T], wasGone, ok bool) {
	if len(q.items) == 0 {
		return nil, false, false
	}
	n = q.items[0]
	if q.standing(now) {
		n = q.items[len(q.items)-1]
	}
	if gone(n.v) {
		q.remove(now, n)
		return n, true, true
	}
	return n, false, true
}

// Take removes n, admitted at now.
func (q *codelQueue[T]) Take(now time.Duration, n *qnode[T]) { q.remove(now, n) }

// Expire removes n at now, when its wait is over, and reports whether it
// was still queued (then it is shed).
func (q *codelQueue[T]) Expire(now time.Duration, n *qnode[T]) bool { return q.remove(now, n) }

func (q *codelQueue[T]) remove(now time.Duration, n *qnode[T]) bool {
	for i, x := range q.items {
		if x == n {
			copy(q.items[i:], q.items[i+1:])
			q.items[len(q.items)-1] = nil
			q.items = q.items[:len(q.items)-1]
			if len(q.items) == 0 {
				q.lastEmpty = now
			}
			return true
		}
	}
	return false
}
