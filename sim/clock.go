package sim

import (
	"time"

	"github.com/stormguard/stormguard/clock"
)

// Epoch is the wall time that virtual time 0 corresponds to on a Sim's
// Clock. Like clocktest.Epoch it lies in the real future.
var Epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// Clock is a Sim's virtual time seen as a clock.Clock, to hand to the real
// budget and breaker code (their Config.Clock) so that they measure windows,
// cool-downs and refills in simulated time.
//
// AfterFunc schedules the callback as an event: it runs inside the Sim's
// event loop at the due virtual time. NewTimer's channel receives the time
// when its event is processed (the channel has room for one value); nothing
// in a single-threaded simulation can block on it, so models use AfterFunc
// or Sim.Schedule instead.
type Clock struct {
	s     *Sim
	epoch time.Time
}

var _ clock.Clock = (*Clock)(nil)

// Clock returns the Sim's virtual clock.
func (s *Sim) Clock() *Clock { return s.clock }

// Now returns Epoch plus the virtual time.
func (c *Clock) Now() time.Time { return c.epoch.Add(c.s.now) }

// Since returns Now().Sub(t).
func (c *Clock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// NewTimer returns a timer whose channel receives the virtual time once d
// has passed in the simulation.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := &vtimer{s: c.s, ch: make(chan time.Time, 1), slot: -1}
	t.start(d)
	return t
}

// AfterFunc calls f from the event loop once d has passed in the
// simulation.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &vtimer{s: c.s, fn: f, slot: -1}
	t.start(d)
	return t
}

// vtimer is a timer in virtual time. It owns a slot in Sim.timers while it
// is armed; the event carries the slot and a generation so that a stopped or
// reset timer's old event is ignored.
type vtimer struct {
	s    *Sim
	fn   func()
	ch   chan time.Time
	slot int32
	gen  int64
}

func (t *vtimer) start(d time.Duration) {
	s := t.s
	if t.slot < 0 {
		if n := len(s.freeSlots); n > 0 {
			t.slot = s.freeSlots[n-1]
			s.freeSlots = s.freeSlots[:n-1]
			s.timers[t.slot] = t
		} else {
			t.slot = int32(len(s.timers))
			s.timers = append(s.timers, t)
		}
	}
	s.timerGen++
	t.gen = s.timerGen
	s.After(max(d, 0), s.timerH, t.slot, t.gen)
}

func (t *vtimer) release() {
	if t.slot >= 0 {
		t.s.timers[t.slot] = nil
		t.s.freeSlots = append(t.s.freeSlots, t.slot)
		t.slot = -1
	}
}

// C returns the channel of a NewTimer timer (nil for AfterFunc).
func (t *vtimer) C() <-chan time.Time { return t.ch }

// Stop disarms the timer; it reports whether it was armed.
func (t *vtimer) Stop() bool {
	active := t.slot >= 0
	t.release()
	return active
}

// Reset arms the timer d from now; it reports whether it was armed.
func (t *vtimer) Reset(d time.Duration) bool {
	active := t.slot >= 0
	t.start(d)
	return active
}

func (s *Sim) fireTimer(e Event) {
	if int(e.Ref) >= len(s.timers) {
		return
	}
	t := s.timers[e.Ref]
	if t == nil || t.gen != e.Arg {
		return // stopped or reset since this event was scheduled
	}
	t.release()
	if t.fn != nil {
		t.fn()
		return
	}
	select {
	case t.ch <- s.clock.Now():
	default:
	}
}
