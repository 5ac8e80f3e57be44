package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"time"
)

// HandlerID names an event handler registered with Sim.Register.
type HandlerID uint32

// Event is one scheduled happening: at virtual time At, the handler
// Handler is called with the two arguments the scheduler gave. Ref usually
// indexes the model object the event is about (a client, an attempt) and Arg
// carries a generation number or a small payload, so that an event never
// needs a closure or an allocation.
type Event struct {
	// At is the virtual time the event is due, from the Sim's start (the
	// time Schedule was given, raised to the then current time).
	At time.Duration
	// Handler is the handler called, as Register returned it.
	Handler HandlerID
	// Ref and Arg are the arguments given to Schedule, passed to the
	// handler unchanged.
	Ref int32
	Arg int64
}

// item is an Event in a lane, with its tie-breaking sequence number.
type item struct {
	at  time.Duration
	seq uint64
	h   HandlerID
	ref int32
	arg int64
}

// qitem is an event in the radix heap: its time and handler, and the
// index in Sim.payloads of the rest. At 16 bytes it halves the memory the
// heap moves between its slots (an item has 32).
type qitem struct {
	at   time.Duration
	slot uint32
	h    HandlerID
}

// payload is the part of a heap event that the heap does not look at.
type payload struct {
	seq uint64
	arg int64
	ref int32
}

// Sim is a discrete-event simulator in virtual time. Events run one at a
// time in order of their time; events due at the same instant run in the
// order they were scheduled. Time starts at 0 and moves only from event to
// event, so an hour of simulated load takes as long as its events take to
// process.
//
// A Sim is single-threaded: all handlers run in the goroutine that calls
// Step, Run or RunUntil, and a Sim must not be used from several goroutines.
// Run independent trials in independent Sims.
type Sim struct {
	now     time.Duration
	seq     uint64
	queue   radix // the scheduled events, by (at, seq)
	payload []payload
	freeP   []uint32 // free indices of payload
	lanes   []lane   // fixed-delay FIFOs (see Lane)
	rings   [][]item // rings of an earlier Sim for the next lanes (simBufs)
	// heads[i] is the time and sequence of lane i's head, or
	// emptyHead: findLaneMin scans this dense array, not the rings.
	heads   []laneHead
	inLanes int // events waiting in lanes
	// laneMin is the lane whose head is the earliest lane event, when
	// inLanes > 0 and laneDirty is false.
	laneMin   int
	laneDirty bool
	handlers  []func(Event)
	stopped   bool
	events    uint64

	timers    []*vtimer // AfterFunc / NewTimer timers by slot
	freeSlots []int32
	timerGen  int64
	timerH    HandlerID

	rng   *rand.Rand
	clock *Clock
}

// New returns a Sim at time 0 whose random generator is seeded with seed.
func New(seed uint64) *Sim {
	s := &Sim{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	if b, ok := simBufPool.Get().(*simBufs); ok {
		s.payload, s.freeP, s.rings = b.payload, b.freeP, b.rings
	}
	s.timerH = s.Register(s.fireTimer)
	s.clock = &Clock{s: s, epoch: Epoch}
	return s
}

// simBufs are the slices a Sim grows as its events come (the payload
// slab and its free list, the lanes' rings), kept by simBufPool for the
// next Sim once a run is done with them (Sim.release), as the queue's
// buckets are (radixStores). They change no event's order: the slab's
// indices are taken in the same order, and a ring holds its lane's
// events in order whatever its size.
type simBufs struct {
	payload []payload
	freeP   []uint32
	rings   [][]item
}

var simBufPool sync.Pool // of *simBufs, the slab and free list empty

// release gives the Sim's storage (its queue's buckets, payload slab and
// lanes' rings) to the next Sim, for a run that is done with s: s must
// not be used after.
func (s *Sim) release() {
	s.queue.release()
	b := &simBufs{payload: s.payload[:0], freeP: s.freeP[:0], rings: s.rings}
	for i := range s.lanes {
		if ln := &s.lanes[i]; ln.buf != nil {
			b.rings = append(b.rings, ln.buf)
			ln.buf, ln.n, ln.head = nil, 0, 0
		}
	}
	s.payload, s.freeP, s.rings = nil, nil, nil
	simBufPool.Put(b)
}

// Now returns the current virtual time, measured from the start.
func (s *Sim) Now() time.Duration { return s.now }

// Rand returns the Sim's seeded random generator. Models draw from it in
// event order, so a run is reproducible from its seed.
func (s *Sim) Rand() *rand.Rand { return s.rng }

// Events returns how many events have been processed, skipped lane
// events (Skip) included.
func (s *Sim) Events() uint64 { return s.events }

// Pending returns how many events are scheduled and not yet processed
// (including stale ones that a model will ignore).
func (s *Sim) Pending() int { return s.queue.len() + s.inLanes }

// Register adds an event handler and returns its id for Schedule.
// Handlers are registered while a model is built, before the run.
func (s *Sim) Register(h func(Event)) HandlerID {
	s.handlers = append(s.handlers, h)
	return HandlerID(len(s.handlers) - 1)
}

// Schedule arranges for handler h to be called at virtual time at with ref
// and arg. A time in the past is taken as now. Schedule does not allocate
// once the heap has grown to the model's working size.
func (s *Sim) Schedule(at time.Duration, h HandlerID, ref int32, arg int64) {
	if at < s.now {
		at = s.now
	}
	s.seq++
	var p uint32
	if n := len(s.freeP); n > 0 {
		p = s.freeP[n-1]
		s.freeP = s.freeP[:n-1]
		s.payload[p] = payload{seq: s.seq, arg: arg, ref: ref}
	} else {
		p = uint32(len(s.payload))
		s.payload = append(s.payload, payload{seq: s.seq, arg: arg, ref: ref})
	}
	s.queue.push(qitem{at: at, slot: p, h: h})
}

// After schedules handler h at Now()+d.
// A delay that would pass the end of time (math.MaxInt64) is due then.
func (s *Sim) After(d time.Duration, h HandlerID, ref int32, arg int64) {
	s.Schedule(s.due(d), h, ref, arg)
}

// due returns Now()+d, saturated at math.MaxInt64.
func (s *Sim) due(d time.Duration) time.Duration {
	at := s.now + d
	if d > 0 && at < s.now {
		return math.MaxInt64
	}
	return at
}

// LaneID names a fixed-delay lane made by Sim.Lane.
type LaneID int32

// lane is a FIFO of events that were all scheduled the same delay after
// the time they were scheduled: since time never goes back, they are due
// in the order they were scheduled, and (at, seq) order is FIFO order.
type lane struct {
	d     time.Duration
	buf   []item // ring
	head  int
	n     int
	taken uint64 // events taken from the lane so far
}

// laneHead is the time and sequence number of a lane's head event.
type laneHead struct {
	at  time.Duration
	seq uint64
}

// emptyHead is the laneHead of an empty lane: after every event (no
// event has the highest sequence number).
var emptyHead = laneHead{at: math.MaxInt64, seq: math.MaxUint64}

// skipH is the handler of a skipped lane event (see Sim.Skip).
const skipH = ^HandlerID(0)

// LaneEvent identifies an event scheduled with Sim.AfterLaneEvent, for
// Sim.Skip.
type LaneEvent uint64

// laneEventBits is how many low bits of a LaneEvent number the event
// within its lane; the lane is in the bits above.
const laneEventBits = 44

// Lane returns a lane for events scheduled a fixed delay d (at least 0)
// after the moment they are scheduled, such as a model's attempt
// timeouts. AfterLane(l, h, ref, arg) is exactly After(d, h, ref, arg):
// the event runs at the same time and in the same order among the
// others; it only costs less, since such events are due in the order they
// were scheduled and need no place in the heap. Lanes are made while a
// model is built, before the run.
func (s *Sim) Lane(d time.Duration) LaneID {
	ln := lane{d: max(d, 0)}
	if n := len(s.rings); n > 0 { // a ring of an earlier Sim's lane
		ln.buf, s.rings = s.rings[n-1], s.rings[:n-1]
	}
	s.lanes = append(s.lanes, ln)
	s.heads = append(s.heads, emptyHead)
	return LaneID(len(s.lanes) - 1)
}

// AfterLane schedules handler h at Now() plus lane l's delay: After with
// that delay, in constant time. It does not allocate once the lane has
// grown to the model's working size.
func (s *Sim) AfterLane(l LaneID, h HandlerID, ref int32, arg int64) {
	s.AfterLaneEvent(l, h, ref, arg)
}

// AfterLaneEvent is AfterLane, and returns the event's identity for Skip.
func (s *Sim) AfterLaneEvent(l LaneID, h HandlerID, ref int32, arg int64) LaneEvent {
	ln := &s.lanes[l]
	if ln.n == len(ln.buf) {
		nb := make([]item, max(64, 2*len(ln.buf)))
		k := copy(nb, ln.buf[ln.head:])
		copy(nb[k:], ln.buf[:ln.head])
		ln.buf, ln.head = nb, 0
	}
	s.seq++
	at := s.due(ln.d)
	if ln.n == 0 { // a new head
		s.heads[l] = laneHead{at: at, seq: s.seq}
		switch {
		case s.inLanes == 0:
			s.laneMin, s.laneDirty = int(l), false
		case !s.laneDirty:
			// Scheduled last, it comes first only if it is due sooner.
			if at < s.heads[s.laneMin].at {
				s.laneMin = int(l)
			}
		}
	}
	i := ln.head + ln.n
	if i >= len(ln.buf) {
		i -= len(ln.buf)
	}
	ln.buf[i] = item{at: at, seq: s.seq, h: h, ref: ref, arg: arg}
	e := LaneEvent(uint64(l)<<laneEventBits | (ln.taken+uint64(ln.n))&(1<<laneEventBits-1))
	ln.n++
	s.inLanes++
	return e
}

// Skip makes the lane event e a no-op, for a model that knows its
// handler would do nothing when it comes (the timeout of an attempt that
// has already ended): the event keeps its place, and when its time comes
// it is taken as any other, moving Now to its time and counting in Events
// and in RunUntilContext's guards, but its handler is not called. So the
// run is the same as without Skip, at less cost. Skip of an event already
// taken, or skipped, does nothing.
func (s *Sim) Skip(e LaneEvent) {
	l := int(uint64(e) >> laneEventBits)
	if l >= len(s.lanes) {
		return
	}
	ln := &s.lanes[l]
	off := (uint64(e) - ln.taken) & (1<<laneEventBits - 1)
	if off >= uint64(ln.n) {
		return // taken already
	}
	i := ln.head + int(off)
	if i >= len(ln.buf) {
		i -= len(ln.buf)
	}
	ln.buf[i].h = skipH
}

// next returns where the earliest pending event is (-1: the heap's root;
// i >= 0: the head of lane i) and its time; ok is false when none is
// pending.
func (s *Sim) next() (src int, at time.Duration, ok bool) {
	q := s.queue.min()
	if s.inLanes > 0 {
		if s.laneDirty {
			s.findLaneMin()
		}
		if s.laneFirst(q) {
			return s.laneMin, s.heads[s.laneMin].at, true
		}
	}
	if q == nil {
		return 0, 0, false
	}
	return -1, q.at, true
}

// take removes the earliest event, which next found at src, and runs it.
func (s *Sim) take(src int) {
	if src < 0 {
		s.takeHeap()
	} else {
		s.takeLane(src)
	}
}

// takeHeap removes the heap's earliest event and runs it.
func (s *Sim) takeHeap() {
	q := s.queue.pop()
	p := &s.payload[q.slot]
	ref, arg := p.ref, p.arg
	s.freeP = append(s.freeP, q.slot)
	s.now = q.at
	s.events++
	if q.h != skipH {
		s.handlers[q.h](Event{At: q.at, Handler: q.h, Ref: ref, Arg: arg})
	}
}

// takeLane removes the head of lane src and runs it (a skipped event
// only moves the time).
func (s *Sim) takeLane(src int) {
	ln := &s.lanes[src]
	it := ln.buf[ln.head]
	ln.head++
	if ln.head == len(ln.buf) {
		ln.head = 0
	}
	ln.n--
	ln.taken++
	s.inLanes--
	s.laneDirty = true // a new head, or none
	if ln.n == 0 {
		s.heads[src] = emptyHead
	} else {
		h := &ln.buf[ln.head]
		s.heads[src] = laneHead{at: h.at, seq: h.seq}
	}
	s.now = it.at
	s.events++
	if it.h != skipH {
		s.handlers[it.h](Event{At: it.at, Handler: it.h, Ref: it.ref, Arg: it.arg})
	}
}

// stepUntil takes and runs the earliest event, as next and take do, if it
// is due at or before t; it reports false when none is.
func (s *Sim) stepUntil(t time.Duration) bool {
	q := s.queue.min()
	if s.inLanes > 0 {
		if s.laneDirty {
			s.findLaneMin()
		}
		if src := s.laneMin; s.laneFirst(q) {
			if s.heads[src].at > t {
				return false
			}
			s.takeLane(src)
			return true
		}
	}
	if q == nil || q.at > t {
		return false
	}
	s.takeHeap()
	return true
}

// laneFirst reports whether the earliest lane event (laneMin's head, which
// findLaneMin has found) comes before q, the heap's earliest (nil: none):
// the (time, sequence) order next and stepUntil both take events in.
func (s *Sim) laneFirst(q *qitem) bool {
	h := &s.heads[s.laneMin]
	return q == nil || h.at < q.at || h.at == q.at && h.seq < s.payload[q.slot].seq
}

// findLaneMin sets laneMin to the lane whose head is the earliest lane
// event; some lane is not empty.
func (s *Sim) findLaneMin() {
	best := emptyHead
	for i, h := range s.heads {
		if h.at < best.at || h.at == best.at && h.seq < best.seq {
			best, s.laneMin = h, i
		}
	}
	s.laneDirty = false
}

// Step processes the earliest event. It reports false when there was none.
func (s *Sim) Step() bool {
	src, _, ok := s.next()
	if !ok {
		return false
	}
	s.take(src)
	return true
}

// Run processes events until none is left or Stop is called.
func (s *Sim) Run() {
	s.stopped = false
	for !s.stopped && s.Step() {
	}
}

// RunUntil processes every event due at or before t (or until Stop), then
// sets the time to t if it has not passed it.
func (s *Sim) RunUntil(t time.Duration) {
	s.stopped = false
	for !s.stopped && s.stepUntil(t) {
	}
	if !s.stopped && s.now < t {
		s.now = t
	}
}

// Guards of RunUntilContext.
const (
	// DefaultMaxEvents bounds the events of one trial when the model sets
	// no Model.MaxEvents. The default suite's largest trial takes about
	// 10 million.
	DefaultMaxEvents = 500_000_000
	// MaxSameInstant is how many events in a row may happen at one virtual
	// instant before a run is judged not to make progress: a model whose
	// retries take no time (no backoff, no latency) would otherwise spin
	// for ever without the clock moving.
	MaxSameInstant = 4 << 20
	// MinEventsPerCall is the fewest events a call that reaches its tier
	// takes (its arrival, the request's arrival at the tier, the end of
	// its service, the reply's arrival): Model.Validate refuses a
	// workload whose expected calls times this exceed the event cap.
	MinEventsPerCall = 4
	// checkEvery is how often, in events, RunUntilContext looks at its
	// context.
	checkEvery = 1 << 12
)

// ErrNoProgress is wrapped by the error of a run that stopped because its
// clock stopped moving. The error of a run that exceeded its event cap
// matches it too (it wraps ErrEventCap), for callers that check only it.
var ErrNoProgress = errors.New("sim: the run makes no progress")

// ErrEventCap is wrapped by the error of a run that exceeded its event
// cap (Model.MaxEvents, DefaultMaxEvents): a workload too large for a
// trial, not one that stopped moving. Model.Validate refuses a workload
// whose calls alone would need more events than the cap
// (MinEventsPerCall each), so this is met only by retries and hedges
// multiplying the work.
var ErrEventCap = errors.New("sim: the trial exceeded its event cap")

// capError is the event cap's error: it matches ErrEventCap and
// ErrNoProgress.
type capError struct{ msg string }

func (e *capError) Error() string { return e.msg }
func (e *capError) Is(target error) bool {
	return target == ErrEventCap || target == ErrNoProgress
}

// RunUntilContext is RunUntil with guards: it returns ctx's error when ctx
// ends (looked at every few thousand events, so a trial stops within
// microseconds of a Ctrl-C), and an error wrapping ErrNoProgress when more
// than maxEvents events have run (0: DefaultMaxEvents) or when
// MaxSameInstant events in a row happen at one virtual instant.
func (s *Sim) RunUntilContext(ctx context.Context, t time.Duration, maxEvents uint64) error {
	if maxEvents == 0 {
		maxEvents = DefaultMaxEvents
	}
	s.stopped = false
	start := s.events
	// check is the event count at which the loop next looks at ctx (every
	// checkEvery events) or reaches the cap.
	check := start + min(checkEvery, maxEvents)
	same, at := 0, s.now
	for !s.stopped && s.stepUntil(t) {
		if s.now != at {
			same, at = 0, s.now
		} else if same++; same >= MaxSameInstant {
			return fmt.Errorf("%w: %d events in a row at %v of virtual time without the clock moving "+
				"(retries that take no time: give the policy a backoff or an attempt limit, or the tier a latency)", ErrNoProgress, same, s.now)
		}
		if s.events < check {
			continue
		}
		n := s.events - start
		if n%checkEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if n >= maxEvents {
			return &capError{fmt.Sprintf("%v: %d events by %v of virtual time (Model.MaxEvents; DefaultMaxEvents is %d): "+
				"the retries or hedges multiply the work past what a trial may take: shorten the run or lower the load", ErrEventCap, maxEvents, s.now, uint64(DefaultMaxEvents))}
		}
		check = start + min((n/checkEvery+1)*checkEvery, maxEvents)
	}
	if !s.stopped && s.now < t {
		s.now = t
	}
	return nil
}

// Stop makes Run or RunUntil return after the current event.
func (s *Sim) Stop() { s.stopped = true }

// NextAt returns the time of the earliest pending event.
func (s *Sim) NextAt() (time.Duration, bool) {
	_, at, ok := s.next()
	return at, ok
}
