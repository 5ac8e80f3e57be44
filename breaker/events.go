package breaker

// transition is one state change, queued for the listeners. Changes are
// pushed while the breaker's lock is held and delivered after it is
// released (see unlock), one at a time and in order.
type transition struct{ from, to State }

// listen adapts a Subscribe callback to the transition queue.
func listen(fn func(from, to State)) func(transition) {
	return func(t transition) { fn(t.from, t.to) }
}

// Subscribe adds fn to the functions called on every state change, and
// returns a function that removes it again. Listeners are called one at a
// time, in the order of the changes, after the breaker's lock has been
// released and after the breaker's own work for the change (such as
// starting the probe timer), so they may call the breaker, Close included
// (a change they cause is delivered after the current one). A listener
// that panics stops no other: every listener still hears that change and
// every later one, and the panic goes on once they have (in the goroutine
// that delivered). A listener added while a change is being delivered may
// or may not see that change.
func (b *Breaker) Subscribe(fn func(from, to State)) (unsubscribe func()) {
	if b == nil || fn == nil {
		return func() {}
	}
	return b.ev.Subscribe(listen(fn))
}
