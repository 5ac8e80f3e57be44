package redisstore

import (
	"sync"

	"github.com/stormguard/stormguard/breaker"
)

type listener struct {
	id uint64
	fn func(from, to breaker.State)
}

type transition struct{ from, to breaker.State }

// events turns observations of the effective state into transitions and
// hands them to the listeners one at a time, in order, outside any lock of
// the Breaker. The goroutine that finds no delivery running delivers
// everything queued, including what other goroutines queue meanwhile.
type events struct {
	mu         sync.Mutex
	last       breaker.State // the state the listeners were last told of
	queue      []transition
	delivering bool
	listeners  []listener // copy on write
	nextID     uint64
}

// observe queues a transition if st differs from the last state observed,
// and delivers the queue unless another goroutine is delivering it.
func (ev *events) observe(st breaker.State) {
	ev.mu.Lock()
	if st != ev.last {
		ev.queue = append(ev.queue, transition{ev.last, st})
		ev.last = st
	}
	if ev.delivering || len(ev.queue) == 0 {
		ev.mu.Unlock()
		return
	}
	ev.delivering = true
	finished := false
	defer func() {
		if !finished { // a listener panicked: let the next observation deliver the rest
			ev.mu.Lock()
			ev.delivering = false
			ev.mu.Unlock()
		}
	}()
	for len(ev.queue) > 0 {
		t, ls := ev.queue[0], ev.listeners
		ev.queue = ev.queue[1:]
		ev.mu.Unlock()
		for _, l := range ls {
			l.fn(t.from, t.to)
		}
		ev.mu.Lock()
	}
	ev.delivering = false
	finished = true
	ev.mu.Unlock()
}

func (ev *events) subscribe(fn func(from, to breaker.State)) func() {
	ev.mu.Lock()
	ev.nextID++
	id := ev.nextID
	ls := make([]listener, len(ev.listeners), len(ev.listeners)+1)
	copy(ls, ev.listeners)
	ev.listeners = append(ls, listener{id: id, fn: fn})
	ev.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			ev.mu.Lock()
			defer ev.mu.Unlock()
			ls := make([]listener, 0, len(ev.listeners))
			for _, l := range ev.listeners {
				if l.id != id {
					ls = append(ls, l)
				}
			}
			ev.listeners = ls
		})
	}
}
