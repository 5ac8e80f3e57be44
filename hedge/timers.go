package hedge

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/internal/stripe"
)

// Hedge timers on the real clock.
//
// A call arms a timer for its hedge delay and, in the common case, stops it
// when its first attempt answers well before. A runtime timer's Reset and
// Stop cost about 100 ns together on a small VM (each takes the P's timer
// lock, edits its heap and may wake the netpoller), which is more than the
// rest of the call. So real-clock hedge timers are entries in a min-heap of
// one of stripe.N shards, each shard woken by one runtime timer set for its
// earliest entry. A delay of coarseMin or more is armed without even a
// clock read (sharedTimer says how). The shard's runtime timer is reset
// only when an entry is earlier than the time it is set for (with one
// delay per Hedger, new entries are nearly always later). Stopping an
// entry is one compare-and-swap: it stays where it is, no longer pending,
// until the shard meets it or its owner arms it again. The tick keeps a
// stopped entry in the list, parked, for parkTicks ticks: a pooled call
// that arms again with the same delay meanwhile (the steady state of a
// busy Hedger) does so with one compare-and-swap too, without the lock.
// The runtime timer is left set, and when it goes off with nothing due it
// sets itself for the new earliest entry (or not at all). So a shard's runtime timers go off
// about once per tickPeriod and once per hedge delay while calls come,
// not once per call, and only the calls still waiting at their deadline
// are called back.
//
// Fake clocks keep one clock.Timer per call (clock.Clock.AfterFunc), so
// tests on a clocktest.Fake see a hedge start exactly at the delay.

// tickPeriod is how often a shard resolves the deadlines of the entries
// armed without a clock read; coarseMin is the shortest delay armed that
// way (so the resolution adds at most 1/16 of the delay).
const (
	tickPeriod = time.Millisecond
	coarseMin  = 16 * tickPeriod
)

// sharedTimer is one entry of a shard: a clock.Timer whose callback f runs
// (in a goroutine of its own, as time.AfterFunc's does) at or after its
// deadline, never before.
//
// A delay of coarseMin or more is armed without reading the clock: the
// entry joins the shard's list of unresolved entries, and the shard's
// next tick (at most tickPeriod later, plus the runtime timer's own
// lateness) gives it the deadline tick time + delay, which is never
// earlier than arming time + delay, and later by at most the time to that
// tick. A call that answers first leaves the list with a lock and an
// unlink. A shorter delay reads the clock and goes to the heap directly.
//
// The zero sharedTimer is not usable: init it.
type sharedTimer struct {
	s          *timerShard
	f          func()
	state      atomic.Uint32 // tIdle, tListed, tHeaped or tParked
	when       int64         // monotonic ns since epoch, in the heap
	d          int64         // the delay, in the list; written under s.mu
	index      int           // in s.heap; -1: not in the heap
	listed     bool          // in s.list
	parked     uint8         // ticks spent parked
	prev, next *sharedTimer
}

type timerShard struct {
	mu        sync.Mutex
	heap      []*sharedTimer
	list      sharedTimer // sentinel of the unresolved entries
	t         *time.Timer // wakes the shard for heap[0]; nil until first needed
	at        int64       // when t is set for; 0: not set (or gone off)
	tick      *time.Timer // resolves the list
	tickArmed bool
	_         [64]byte // keep shards on separate cache lines
}

// The states of a sharedTimer. Only its owner arms it: under the shard's
// lock, or from tParked with a compare-and-swap. Every other change is a
// compare-and-swap too, so of two that race exactly one happens: the
// owner's Stop against the tick's move to the heap or the fire, the
// owner's arming against the tick's dropping of a parked entry.
const (
	tIdle   uint32 = iota // not armed (perhaps still in the heap, which pops it)
	tListed               // armed, in the list: the next tick resolves it
	tHeaped               // armed, in the heap: fire calls it back
	tParked               // not armed, kept in the list by the tick
)

// pending reports whether a state is armed.
func pending(st uint32) bool { return st == tListed || st == tHeaped }

// parkTicks is how many ticks a stopped entry stays parked in the list.
const parkTicks = 16

var (
	timerShards [stripe.N]timerShard
	epoch       = time.Now()
)

// monoNow is the monotonic time in ns since epoch: one runtime clock read.
func monoNow() int64 { return int64(time.Since(epoch)) }

func (t *sharedTimer) init(f func()) {
	t.s = &timerShards[stripe.Hint()]
	t.f = f
	t.index = -1
}

// C is not used: a sharedTimer only calls back.
func (t *sharedTimer) C() <-chan time.Time { return nil }

// Reset sets the timer to call back after d, and reports whether it was
// pending.
func (t *sharedTimer) Reset(d time.Duration) bool {
	s := t.s
	d = max(d, 0)
	if d >= coarseMin {
		// Parked with the same delay: the tick, which runs while the
		// list has entries, will resolve it.
		if t.d == int64(d) && t.state.CompareAndSwap(tParked, tListed) {
			return false
		}
		s.mu.Lock()
		was := pending(t.state.Load())
		if !t.listed {
			s.take(t)
			s.link(t)
		}
		t.d = int64(d)
		t.state.Store(tListed)
		if !s.tickArmed {
			s.tickArmed = true
			if s.tick == nil {
				s.tick = time.AfterFunc(tickPeriod, s.resolve)
			} else {
				s.tick.Reset(tickPeriod)
			}
		}
		s.mu.Unlock()
		return was
	}
	now := monoNow()
	s.mu.Lock()
	was := pending(t.state.Load())
	s.take(t)
	t.state.Store(tHeaped)
	s.pushAt(t, now, satAdd(now, int64(d)))
	s.mu.Unlock()
	return was
}

// Stop disarms the timer, and reports whether it was pending (the callback
// will then not run for it). The entry stays where it is: in the list,
// parked; in the heap, idle until the heap pops it.
func (t *sharedTimer) Stop() bool {
	for {
		switch st := t.state.Load(); st {
		case tListed:
			if t.state.CompareAndSwap(tListed, tParked) {
				return true
			}
		case tHeaped:
			if t.state.CompareAndSwap(tHeaped, tIdle) {
				return true
			}
		default:
			return false
		}
	}
}

// take removes t from the list or the heap, pending or not, and reports
// whether it was in either; s.mu is held.
func (s *timerShard) take(t *sharedTimer) bool {
	switch {
	case t.listed:
		t.prev.next, t.next.prev = t.next, t.prev
		t.prev, t.next, t.listed = nil, nil, false
		return true
	case t.index >= 0:
		s.remove(t.index)
		return true
	}
	return false
}

func (s *timerShard) link(t *sharedTimer) {
	l := &s.list
	if l.next == nil {
		l.next, l.prev = l, l
	}
	t.prev, t.next = l.prev, l
	l.prev.next = t
	l.prev = t
	t.listed = true
}

// pushAt puts t in the heap for when, and sets the runtime timer if t is
// now the earliest; s.mu is held.
func (s *timerShard) pushAt(t *sharedTimer, now, when int64) {
	t.when = when
	s.push(t)
	if s.heap[0] == t && (s.at == 0 || when < s.at) {
		s.arm(now, when)
	}
}

// arm sets the shard's runtime timer for when; s.mu is held. A deadline
// already past (whatever its value) sets it to go off at once, so no
// entry can hold the shard's timer back from the entries after it.
func (s *timerShard) arm(now, when int64) {
	s.at = max(when, 1)
	d := time.Duration(0)
	if when > now {
		d = time.Duration(when - now)
	}
	if s.t == nil {
		s.t = time.AfterFunc(d, s.fire)
		return
	}
	s.t.Reset(d)
}

// resolve is the shard's tick: every unresolved entry gets its deadline,
// the tick's time plus its delay, and goes to the heap. A parked entry
// stays for parkTicks ticks, then leaves the list; the tick goes on while
// the list has entries.
func (s *timerShard) resolve() {
	s.mu.Lock()
	l := &s.list
	for t := l.next; t != nil && t != l; {
		next := t.next
		switch t.state.Load() {
		case tListed:
			// The clock is read after the arming was seen: the
			// deadline is never earlier than arming time + delay.
			if t.state.CompareAndSwap(tListed, tHeaped) {
				now := monoNow()
				s.take(t)
				s.pushAt(t, now, satAdd(now, t.d))
			}
		case tParked:
			if t.parked++; t.parked >= parkTicks && t.state.CompareAndSwap(tParked, tIdle) {
				t.parked = 0
				s.take(t)
			}
		default: // idle in the list: not a state the owner leaves behind
			s.take(t)
		}
		t = next
	}
	if l.next != nil && l.next != l {
		s.tick.Reset(tickPeriod)
	} else {
		s.tickArmed = false
	}
	s.mu.Unlock()
}

// fire runs when the shard's runtime timer goes off: it takes the entries
// that are due, sets the timer for the earliest one left, and calls the due
// ones back, each in a goroutine of its own.
func (s *timerShard) fire() {
	var buf [8]*sharedTimer
	due := buf[:0]
	s.mu.Lock()
	s.at = 0
	now := monoNow()
	for len(s.heap) > 0 && (s.heap[0].when <= now || s.heap[0].state.Load() != tHeaped) {
		t := s.heap[0]
		s.remove(0)
		if t.state.CompareAndSwap(tHeaped, tIdle) {
			due = append(due, t)
		}
	}
	if len(s.heap) > 0 {
		s.arm(now, s.heap[0].when)
	}
	s.mu.Unlock()
	for i, t := range due {
		if i == len(due)-1 {
			t.f() // this goroutine is the runtime timer's own
		} else {
			go t.f()
		}
	}
}

// The heap: a binary min-heap on when, each entry knowing its index.

func (s *timerShard) push(t *sharedTimer) {
	t.index = len(s.heap)
	s.heap = append(s.heap, t)
	s.up(t.index)
}

func (s *timerShard) remove(i int) {
	h := s.heap
	last := len(h) - 1
	h[i].index = -1
	if i != last {
		h[i] = h[last]
		h[i].index = i
	}
	h[last] = nil
	s.heap = h[:last]
	if i != last {
		s.fix(i)
	}
}

func (s *timerShard) fix(i int) {
	if !s.down(i) {
		s.up(i)
	}
}

func (s *timerShard) up(i int) {
	h := s.heap
	for i > 0 {
		p := (i - 1) / 2
		if h[p].when <= h[i].when {
			break
		}
		h[p], h[i] = h[i], h[p]
		h[p].index, h[i].index = p, i
		i = p
	}
}

// down sifts entry i down and reports whether it moved.
func (s *timerShard) down(i int) bool {
	h := s.heap
	i0 := i
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		m := l
		if r := l + 1; r < len(h) && h[r].when < h[l].when {
			m = r
		}
		if h[i].when <= h[m].when {
			break
		}
		h[i], h[m] = h[m], h[i]
		h[i].index, h[m].index = i, m
		i = m
	}
	return i > i0
}

// satAdd returns a+b, saturated at the ends of int64: a deadline for a
// delay near math.MaxInt64 is the far future, not the past.
func satAdd(a, b int64) int64 {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}
