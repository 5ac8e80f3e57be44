package redisstore

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/listeners"
)

// LinkStats describe how a Breaker or a Budget has been reaching Redis.
// The counters are cumulative since it was made.
type LinkStats struct {
	// Syncs counts successful exchanges with Redis (flush and refresh).
	Syncs uint64
	// RedisErrors counts Redis calls that failed or timed out.
	RedisErrors uint64
	// Fallbacks counts the times the process fell back to local state.
	Fallbacks uint64
	// Degraded reports whether the process is using local state now
	// because its last Redis call failed.
	Degraded bool
	// Panics counts the panics recovered on the background goroutine (a
	// listener's, OnDegraded's, the Clock's). Each is logged at Error
	// level with its stack unless it repeats the last one logged (the
	// same value, as fmt.Sprint prints it): a Clock that panics at every
	// exchange is logged once and counted here.
	Panics uint64
}

// link follows the health of the connection to Redis and runs the
// background exchange loop of one Breaker or Budget.
type link struct {
	cfg  linkConfig
	what string // "breaker" or "budget", for log messages

	syncs, redisErrors, fallbacks atomic.Uint64
	panics                        atomic.Uint64 // recovered on the loop's goroutine
	lastPanic                     string        // the last panic logged, as fmt.Sprint prints it; the loop's goroutine only
	degraded                      atomic.Bool

	notes listeners.Queue[note] // degraded/rejoined transitions, delivered in order

	kick      chan struct{}
	pokeTo    *link // non-nil: a keyed group's loop makes the exchanges (see BreakerConfig.BatchRefresh)
	stop      chan struct{}
	stopped   chan struct{}
	closeOnce sync.Once
	closed    atomic.Bool // Close was called; set under mu

	mu          sync.Mutex
	busy        bool // the loop is running an exchange; guarded by mu
	inCallbacks bool // the loop is running the callbacks of its exchange; guarded by mu
}

type note struct {
	degraded bool
	err      error
}

func newLink(cfg linkConfig, what string) *link {
	l := &link{
		cfg:     cfg,
		what:    what,
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	l.notes.Subscribe(l.deliver)
	if f := cfg.onMember; f != nil {
		l.notes.Subscribe(func(n note) {
			if !l.closed.Load() {
				f(cfg.member, n.degraded, n.err) // never once Close has begun
			}
		})
	}
	return l
}

func (l *link) stats() LinkStats {
	return LinkStats{
		Syncs:       l.syncs.Load(),
		RedisErrors: l.redisErrors.Load(),
		Fallbacks:   l.fallbacks.Load(),
		Degraded:    l.degraded.Load(),
		Panics:      l.panics.Load(),
	}
}

// context bounds one Redis call by the configured timeout.
func (l *link) context(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, l.cfg.timeout)
}

// failed records a failed Redis call. It reports whether the process has
// just fallen back to local state.
func (l *link) failed(err error) bool {
	l.redisErrors.Add(1)
	if !l.degraded.CompareAndSwap(false, true) {
		return false
	}
	l.fallbacks.Add(1)
	l.announce(note{degraded: true, err: err})
	return true
}

// succeeded records a successful exchange. It reports whether the process
// has just re-joined the shared state.
func (l *link) succeeded() bool {
	l.syncs.Add(1)
	return l.reached()
}

// reached records a Redis call that succeeded (an exchange, or a probe's
// claim or report). It reports whether the process has just re-joined
// the shared state.
func (l *link) reached() bool {
	if !l.degraded.CompareAndSwap(true, false) {
		return false
	}
	l.announce(note{degraded: false})
	return true
}

// announce logs and delivers a degraded/rejoined transition: one at a
// time, in order, outside any lock.
func (l *link) announce(n note) {
	l.notes.Push(n)
	l.notes.Deliver()
}

func (l *link) deliver(n note) {
	if lg := l.cfg.logger; lg != nil {
		if n.degraded {
			lg.Warn("redisstore: Redis unavailable, using local state until it answers again",
				"kind", l.what, "name", l.cfg.name, "err", n.err)
		} else {
			lg.Info("redisstore: Redis answers again, using shared state", "kind", l.what, "name", l.cfg.name)
		}
	}
	if f := l.cfg.onDegraded; f != nil && !l.closed.Load() {
		f(n.degraded, n.err) // never once Close has begun
	}
}

// poke asks the loop for an early exchange. It never blocks.
func (l *link) poke() {
	if l.pokeTo != nil {
		l.pokeTo.poke()
		return
	}
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// run is the background loop: it calls sync at once, then every interval,
// and early when poked, though never sooner than interval/10 after the
// previous exchange began. It returns when shut is called. Between two
// exchanges exactly one timer of the clock is pending.
//
// A Clock that panics while the loop paces the exchanges (NewTimer,
// Reset, Now, Since) would end the process, with no caller to hand the
// panic to: it is counted in LinkStats.Panics and logged at Error level
// (Logger; nil: silent) unless it repeats the last panic logged, and the
// loop goes on paced by the real clock, exchanging at once.
func (l *link) run(sync func()) {
	defer close(l.stopped)
	clk := l.cfg.clk
	for !l.pace(clk, sync) {
		clk = clock.Real
	}
}

// pace is run's loop on the clock clk. It reports true when shut was
// called, false when clk panicked.
func (l *link) pace(clk clock.Clock, sync func()) (stopped bool) {
	defer func() {
		if v := recover(); v != nil {
			if lg := l.cfg.logger; l.newPanic(v) && lg != nil {
				lg.Error("redisstore: the Clock panicked on the background goroutine; recovered, the exchanges go on by the real clock (repeats are counted in Stats, not logged)",
					"kind", l.what, "name", l.cfg.name, "panic", v, "stack", string(debug.Stack()))
			}
			stopped = false
		}
	}()
	gap := max(l.cfg.interval/10, time.Millisecond)
	t := clk.NewTimer(0)
	defer stopTimer(t)
	var last time.Time
	synced := false
	for {
		select {
		case <-l.stop:
			return true
		case <-t.C():
		case <-l.kick:
			if synced {
				if wait := gap - clk.Since(last); wait > 0 {
					t.Reset(wait) // brings the next exchange forward
					continue
				}
			}
		}
		last, synced = clk.Now(), true
		if !l.begin() {
			return true
		}
		l.exchange(sync)
		l.end()
		t.Reset(l.cfg.interval)
	}
}

// stopTimer stops t; a panic of its Stop is dropped (the timer's clock
// already panicked, or the loop is ending).
func stopTimer(t clock.Timer) {
	defer func() { _ = recover() }()
	t.Stop()
}

// exchange runs one exchange of the loop. A panic on the loop's goroutine
// (a listener or OnDegraded that panicked: the Breaker and the Budget have
// settled their state before they call them) would end the process, with
// no caller to hand it to: it is counted in LinkStats.Panics and logged
// at Error level (Logger; nil: silent) unless it repeats the last panic
// logged, and the loop goes on. A Clock that panics at every exchange is
// thus logged once, not once per RefreshInterval.
func (l *link) exchange(sync func()) {
	defer func() {
		if v := recover(); v != nil {
			if lg := l.cfg.logger; l.newPanic(v) && lg != nil {
				lg.Error("redisstore: a callback panicked on the background goroutine; recovered, the exchanges go on (repeats are counted in Stats, not logged)",
					"kind", l.what, "name", l.cfg.name, "panic", v, "stack", string(debug.Stack()))
			}
		}
	}()
	sync()
}

// newPanic counts the panic v recovered on the loop's goroutine and
// reports whether to log it: it is not the last one logged. Only the
// loop's goroutine calls it.
func (l *link) newPanic(v any) bool {
	l.panics.Add(1)
	msg := fmt.Sprint(v)
	if l.panics.Load() > 1 && msg == l.lastPanic {
		return false
	}
	l.lastPanic = msg
	return true
}

// begin marks the start of an exchange of the loop; it reports false,
// starting nothing, once shut has been called.
func (l *link) begin() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return false
	}
	l.busy = true
	return true
}

func (l *link) end() {
	l.mu.Lock()
	l.busy = false
	l.mu.Unlock()
}

// enterCallbacks and leaveCallbacks bracket the part of the loop's
// exchange that runs user callbacks (listeners, OnDegraded), on the loop's
// goroutine. Only the loop calls them.
func (l *link) enterCallbacks() {
	l.mu.Lock()
	l.inCallbacks = true
	l.mu.Unlock()
}

func (l *link) leaveCallbacks() {
	l.mu.Lock()
	l.inCallbacks = false
	l.mu.Unlock()
}

// shut stops the loop and waits until its goroutine has ended, a slow
// exchange in progress included; only the first call does anything and
// reports true. While the loop is running the callbacks of an exchange,
// shut does not wait: it may be called from one of them (OnDegraded, a
// listener) on the loop's goroutine, which would wait for itself; the loop
// then returns as soon as those callbacks do, and calls OnDegraded no
// more (see deliver).
func (l *link) shut() bool {
	first := false
	l.closeOnce.Do(func() {
		first = true
		l.mu.Lock()
		l.closed.Store(true)
		close(l.stop)
		fromCallback := l.busy && l.inCallbacks
		l.mu.Unlock()
		if !fromCallback {
			<-l.stopped
		}
	})
	return first
}
