package breaker

import "sync"

// listener is one state-change callback.
type listener struct {
	id uint64
	fn func(from, to State)
}

type transition struct{ from, to State }

// events queues state changes and hands them to the listeners one at a
// time, in the order they happened, never while the breaker's lock is held.
// The goroutine that finds no delivery running delivers everything queued,
// including changes queued meanwhile by other goroutines (or by a listener
// that called the breaker).
type events struct {
	mu         sync.Mutex
	queue      []transition
	head       int // queue[head:] is still to be delivered
	delivering bool
	listeners  []listener // copy on write
	nextID     uint64
}

func (ev *events) push(from, to State) {
	ev.mu.Lock()
	ev.queue = append(ev.queue, transition{from, to})
	ev.mu.Unlock()
}

func (ev *events) deliver() {
	ev.mu.Lock()
	if ev.delivering {
		ev.mu.Unlock()
		return
	}
	ev.delivering = true
	finished := false
	defer func() {
		if !finished { // a listener panicked: let the next change deliver the rest
			ev.mu.Lock()
			ev.delivering = false
			ev.mu.Unlock()
		}
	}()
	for ev.head < len(ev.queue) {
		t, ls := ev.queue[ev.head], ev.listeners
		ev.head++
		ev.mu.Unlock()
		for _, l := range ls {
			l.fn(t.from, t.to)
		}
		ev.mu.Lock()
	}
	ev.queue, ev.head = ev.queue[:0], 0
	ev.delivering = false
	finished = true
	ev.mu.Unlock()
}

// Subscribe adds fn to the functions called on every state change, and
// returns a function that removes it again. Listeners are called one at a
// time, in the order of the changes, after the breaker's lock has been
// released, so they may call the breaker (a change they cause is delivered
// after the current one). A listener added while a change is being
// delivered may or may not see that change.
func (b *Breaker) Subscribe(fn func(from, to State)) (unsubscribe func()) {
	if b == nil || fn == nil {
		return func() {}
	}
	ev := &b.ev
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
