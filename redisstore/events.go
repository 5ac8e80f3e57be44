package redisstore

import (
	"sync"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/internal/listeners"
)

type transition struct{ from, to breaker.State }

// events turns observations of the effective state into transitions and
// hands them to the listeners one at a time, in order, outside any lock of
// the Breaker.
type events struct {
	mu   sync.Mutex
	last breaker.State // the state the listeners were last told of
	q    listeners.Queue[transition]
}

// observe queues a transition if st differs from the last state observed,
// and delivers the queue unless another goroutine is delivering it.
func (ev *events) observe(st breaker.State) {
	ev.mu.Lock()
	if st != ev.last {
		ev.q.Push(transition{ev.last, st})
		ev.last = st
	}
	ev.mu.Unlock()
	ev.q.Deliver()
}

func (ev *events) subscribe(fn func(from, to breaker.State)) func() {
	return ev.q.Subscribe(func(t transition) { fn(t.from, t.to) })
}
