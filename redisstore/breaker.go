package redisstore

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// Breaker is a circuit breaker whose state is shared by every process that
// uses the same Redis, Namespace and Name. It implements retry.Breaker, like
// breaker.Breaker, so a retry.Policy takes either.
//
// Each process caches the shared state and counts the outcomes of its calls
// locally; a background goroutine flushes the counts to Redis and refreshes
// the cache every RefreshInterval, in one round trip. In the closed state
// Allow and its done function touch no network, take no lock and do not
// allocate. In the open state Allow, Ready and State refuse (or report
// Open) without a lock or an allocation and, on the real clock, without
// reading the clock: a timer marks the end of the cached open period,
// whether this process tripped the breaker or learnt of it from Redis,
// and a refresh that moves the end starts a new one (until the exchange
// that cached the period has set its timer, and once the Breaker is
// closed, each refusal reads the clock). On any other Clock
// each refusal reads it, so that a fake clock sees the same instants.
// The half-open state's probe permits are fleet-wide: Allow takes one
// from Redis (bounded by Timeout), and the probe's done reports its
// result there.
//
// When a Redis call fails or times out the process falls back to a local
// breaker.Breaker, and re-joins the shared state at the first successful
// refresh. From a shared open state it honours the open period until it
// ends; from then, as from a shared half-open state, it is half-open on
// the local breaker's rules (MaxProbes in flight, SuccessThreshold
// successes close it, a failure opens it again for OpenTimeout) before
// the local breaker decides.
//
// Make one with NewBreaker and Close it when done. A Breaker is safe for
// concurrent use. A nil *Breaker admits every call.
type Breaker struct {
	snap atomic.Pointer[snapshot] // read by every call
	_    [120]byte                // off the cache lines the counters write
	acc  accumulator

	s     breakerSettings
	clk   clock.Clock
	gate  bool        // open periods end by a timer (the real clock): a refusal reads no clock
	tc    *scriptTime // the time the scripts compare
	l     *link
	local atomic.Pointer[localBreaker] // replaced at every fallback

	localState atomic.Uint32 // the local breaker's state, as its listener last heard
	localTrip  atomic.Uint64 // the local breaker opened and Redis has not been told yet: tripSet | the generation it counts toward
	claiming   atomic.Bool   // a probe permit is being asked for

	refusedOpen, refusedProbes *retry.Error // RefusalError's, built once

	stateKey, probesKey, windowPrefix, seenKey string
	member                                     string // prefix of this process's probe permit names
	seq                                        atomic.Uint64

	batchSeq uint64 // number of the last batch made; guarded by sem
	epoch    int64  // epoch of the shared state at the last exchange (0: none yet); guarded by sem
	retained *flush // a batch whose exchange failed, to send again; guarded by sem

	randMu sync.Mutex
	rnd    rand.Source // nil: the global generator

	sem        chan struct{} // the right to call Redis (see acquire)
	stMu       sync.Mutex    // serialises snapshot replacements, and guards pendingEnd and openEnd.t
	pendingEnd *openEnd      // the end of a cached open period whose timer is to be started (gate)
	cntMu      sync.Mutex
	counts     breaker.Counts // fleet-wide counts from the last exchange

	ev events
}

// snapshot is the process's cached copy of the shared state. It is
// replaced, never changed.
type snapshot struct {
	shared  bool // false: the local breaker decides (not joined yet, or degraded)
	state   breaker.State
	gen     uint64
	until   time.Time   // Open: end of the open period
	untilMs int64       // until on Redis's time line (ms), as the script returned it
	end     *openEnd    // Open: marks the end of the open period (non-nil exactly when state is Open)
	full    bool        // HalfOpen: every fleet-wide probe permit is taken
	done    func(error) // shared Closed without slow-call timing: the done of every call
	prob    *probation  // local (degraded) Open or HalfOpen: the local probes, once any open period ends
}

// probation holds the half-open probes of a degraded snapshot: the process
// fell back from a shared open or half-open state (or a probe failed
// while it was degraded), and decides as breaker.Breaker does half-open,
// on the local breaker's rules: at most its MaxProbes calls in flight;
// SuccessThreshold successes close it (the fresh local breaker decides
// from then on), a failure opens it again for the local OpenTimeout.
type probation struct {
	inflight  atomic.Int64
	successes atomic.Int64
}

// openEnd marks the end of one cached open period, for the snapshots that
// hold it (a degraded copy of a shared snapshot shares its period). Its
// state is endArmed while a timer is set to mark the end: Allow, Ready,
// Peek and State then refuse without reading the clock. In any other state
// they read the clock to see whether the period has ended: endUnarmed
// before the timer is set (just after the exchange that cached the
// period; on the real clock), endDue once it fired at the period's end,
// or once a snapshot with another period replaced the one holding it, the
// Breaker was closed, or the Clock panicked; on any other clock endDue
// from the start, so that every refusal reads the clock and a fake clock
// sees the same instants.
type openEnd struct {
	state atomic.Uint32 // endUnarmed, endArmed or endDue
	until time.Time
	t     clock.Timer // the timer once started; guarded by Breaker.stMu
}

// The states of an openEnd.
const (
	endUnarmed uint32 = iota // no timer yet: refusals read the clock
	endArmed                 // the timer is set: refusals read no clock
	endDue                   // the timer fired, or none will: refusals read the clock
)

// openUntil reports whether the open period of the snapshot s (state
// Open) has not ended yet, reading the clock unless its timer is armed.
func (b *Breaker) openUntil(s *snapshot) bool {
	if s.end != nil && s.end.state.Load() == endArmed {
		return true
	}
	return b.clk.Now().Before(s.until)
}

var (
	_ retry.Breaker         = (*Breaker)(nil)
	_ retry.PrebuiltRefusal = (*Breaker)(nil)
)

// RefusalError returns the *retry.Error that retry.Do, Run and BeginInline
// give up with when b refuses a call's first attempt with refused
// (breaker.ErrOpen or breaker.ErrTooManyProbes, shared or local) and no
// Observer watches the call; nil for any other error. Each is built once
// per Breaker and shared by every call it refuses, so that a refusal
// allocates nothing, as with breaker.Breaker: do not modify it. See
// retry.PrebuiltRefusal.
func (b *Breaker) RefusalError(refused error) *retry.Error {
	if b == nil {
		return nil
	}
	// classifier tells the two refusals apart by a type assertion and a
	// pointer comparison, cheaper than comparing interface values.
	switch classifier.RefusalError(refused) {
	case classOpen:
		return b.refusedOpen
	case classProbes:
		return b.refusedProbes
	}
	return nil
}

// classifier is a breaker.Breaker used only for its RefusalError, whose
// answers for breaker.ErrOpen and breaker.ErrTooManyProbes are classOpen
// and classProbes. It is never asked to allow a call.
var (
	classifier  = breaker.New(breaker.Config{})
	classOpen   = classifier.RefusalError(breaker.ErrOpen)
	classProbes = classifier.RefusalError(breaker.ErrTooManyProbes)
)

// NewBreaker returns a Breaker configured by c and starts its background
// exchange with Redis. It makes no Redis call itself: until the first
// exchange has answered (at once, in the background) calls are decided by
// the local breaker. It returns an error wrapping ErrInvalidConfig if
// c.Validate does.
func NewBreaker(c BreakerConfig) (*Breaker, error) {
	s, err := c.resolve()
	if err != nil {
		return nil, err
	}
	return startBreaker(s, c.Breaker.Rand), nil
}

// startBreaker makes the Breaker of the settings s and starts its loop.
func startBreaker(s breakerSettings, rnd rand.Source) *Breaker { return startMember(s, rnd, nil) }

// startMember makes the Breaker of the settings s. With group nil it
// starts its own loop; otherwise the loop of group, a keyed group's,
// makes its exchanges, and is asked for one at once.
func startMember(s breakerSettings, rnd rand.Source, group *link) *Breaker {
	b := &Breaker{
		s:            s,
		clk:          s.link.clk,
		tc:           newScriptTime(s.link.clk),
		l:            newLink(s.link, "breaker"),
		gate:         s.gate,
		rnd:          backoff.Shared(rnd), // drawn under the lock the local breaker uses for the same source
		stateKey:     s.link.prefix + "state",
		probesKey:    s.link.prefix + "probes",
		windowPrefix: s.link.prefix + "window:",
		member:       fmt.Sprintf("%016x:", rand.Uint64()),
		sem:          make(chan struct{}, 1),

		refusedOpen:   &retry.Error{Reason: breaker.ErrOpen},
		refusedProbes: &retry.Error{Reason: breaker.ErrTooManyProbes},
	}
	b.seenKey = s.link.prefix + "seen:" + b.member[:16]
	if s.onTransition != nil {
		b.ev.subscribe(s.onTransition)
	}
	if f, m := s.onMember, s.link.member; f != nil {
		b.ev.subscribe(func(from, to breaker.State) { f(m, from, to) })
	}
	b.resetLocal()
	b.snap.Store(&snapshot{state: breaker.Closed})
	if group != nil {
		b.l.pokeTo = group
		close(b.l.stopped) // no loop of its own to wait for
		group.poke()
		return b
	}
	go b.l.run(b.loopSync)
	return b
}

// Allow asks to make one call, as breaker.Breaker.Allow does: it returns
// breaker.ErrOpen or breaker.ErrTooManyProbes and a nil done if the call is
// refused; otherwise done must be called once with the call's result.
//
// In the shared closed state every call of one generation gets the same
// done function, so calling it twice counts twice; when slow calls are
// timed each call gets its own, and a second call does nothing. In the half-open state
// Allow asks Redis for a probe permit (at most Timeout); one process in the
// fleet gets each permit, and the others get ErrTooManyProbes without
// asking again until the next refresh.
func (b *Breaker) Allow() (done func(err error), err error) {
	if b == nil {
		return nopDone, nil
	}
	s := b.snap.Load()
	if s.done != nil { // shared, closed, untimed
		return s.done, nil
	}
	if e := s.end; e != nil && e.state.Load() == endArmed { // open, on the real clock: no clock read
		return nil, breaker.ErrOpen
	}
	return b.allowSlow(s)
}

func nopDone(error) {}

// tripSet marks Breaker.localTrip as set; the low bits hold the shared
// generation the trip counts toward: the one the process last saw when its
// local breaker opened (0: before the first exchange). Generations are times in ms since 1970 plus the
// number of transitions: far below 2^63.
const tripSet = 1 << 63

func (b *Breaker) allowSlow(s *snapshot) (func(error), error) {
	if !s.shared {
		return b.allowLocal(s)
	}
	switch s.state {
	case breaker.Closed:
		return b.admitTimed(s), nil
	case breaker.Open:
		if b.openUntil(s) {
			return nil, breaker.ErrOpen
		}
	default:
		if s.full {
			return nil, breaker.ErrTooManyProbes
		}
	}
	return b.claim()
}

// allowLocal decides a call while the process is not using the shared
// state: an open period last seen in Redis is honoured until it ends, then
// the local breaker decides. The outcome is also counted for Redis, so
// that the next exchange carries it.
func (b *Breaker) allowLocal(s *snapshot) (func(error), error) {
	if s.state == breaker.Open && b.openUntil(s) {
		return nil, breaker.ErrOpen
	}
	var start time.Time
	if b.s.slowDur > 0 {
		start = b.clk.Now() // before the local breaker admits: a panic here holds no probe
	}
	if p := s.prob; p != nil {
		return b.allowProbe(s, p, start)
	}
	done, err := b.local.Load().b.Allow()
	if err != nil {
		return nil, err
	}
	var once atomic.Bool
	return func(err error) {
		if once.Swap(true) {
			return
		}
		defer b.countLocal(s, start, err) // even if the local breaker's listeners panic
		done(err)
	}, nil
}

// allowProbe admits a local half-open probe under the degraded snapshot s,
// if fewer than the local MaxProbes are in flight.
func (b *Breaker) allowProbe(s *snapshot, p *probation, start time.Time) (func(error), error) {
	if p.inflight.Add(1) > b.s.localProbes {
		p.inflight.Add(-1)
		return nil, breaker.ErrTooManyProbes
	}
	var once atomic.Bool
	return func(err error) {
		if once.Swap(true) {
			return
		}
		defer b.countLocal(s, start, err) // counted for Redis too, as every local outcome
		b.endProbe(s, p, start, err)
	}, nil
}

// endProbe ends a local probe admitted under s with the call's error err:
// its slot is given back, a success counts toward closing, a failure opens
// the local state again. A panic of IsExcluded, IsFailure or the Clock
// makes it a failure, and goes on once the slot is given back.
func (b *Breaker) endProbe(s *snapshot, p *probation, start time.Time, err error) {
	defer p.inflight.Add(-1)
	outcome, panicked := b.probeOutcome(start, err)
	if panicked != nil {
		defer panic(panicked)
	}
	switch {
	case outcome == 1:
		b.endProbation(s, true)
	case outcome == 0 && p.successes.Add(1) >= b.s.localSuccesses:
		b.endProbation(s, false)
	}
}

// probeOutcome returns the outcome of a probe that began at start (0
// success, 1 failure, 2 excluded), as probe.classify does: a panic of
// IsExcluded, IsFailure or the Clock makes it a failure, and is handed
// back to re-raise.
func (b *Breaker) probeOutcome(start time.Time, err error) (outcome int, panicked any) {
	if err != nil {
		failed, excluded, v := b.judge(err)
		switch {
		case v != nil:
			return 1, v
		case excluded:
			return 2, nil
		case failed:
			return 1, nil
		}
	}
	if b.s.slowDur > 0 && b.s.slowPct > 0 {
		slow, v := b.slow(start)
		if v != nil || slow {
			return 1, v // a slow probe fails when the slow-call rate can trip
		}
	}
	return 0, nil
}

// endProbation ends the local half-open state of the degraded snapshot s,
// unless another snapshot has replaced it: closed (the fresh local
// breaker decides from then on), or, after a failed probe, open again for
// the local OpenTimeout, jittered by its OpenJitter, and half-open after
// that. A Clock that panics leaves s in place; a Rand that panics draws
// 0.5; either panic goes on.
func (b *Breaker) endProbation(s *snapshot, failed bool) {
	var until time.Time
	if failed {
		d := b.s.localOpen
		if j := b.s.localJitter; j > 0 {
			u, v := b.drawOrHalf()
			if v != nil {
				defer panic(v) // once the state is open again
			}
			d -= time.Duration(j * u * float64(d))
		}
		until = b.clk.Now().Add(max(d, 1))
	}
	b.stMu.Lock()
	if b.snap.Load() != s {
		b.stMu.Unlock()
		return // re-joined the shared state, or another probe ended it
	}
	n := *s
	n.until, n.untilMs, n.end, n.prob = time.Time{}, 0, nil, nil
	n.state = breaker.Closed
	if failed {
		// untilMs -1 matches no period of Redis's: one cached at the next
		// exchange gets its own mark.
		n.state, n.until, n.untilMs, n.prob = breaker.Open, until, -1, &probation{}
		n.end = b.newEnd(until)
	}
	b.snap.Store(&n)
	if s.end != nil {
		b.retireEnd(s.end)
	}
	b.stMu.Unlock()
	defer b.settle() // also when the Clock panics
	b.armEnd()
}

// drawOrHalf returns a jitter draw, or 0.5 and the panic of a Rand that
// panicked, to re-raise.
func (b *Breaker) drawOrHalf() (u float64, panicked any) {
	defer func() {
		if v := recover(); v != nil {
			u, panicked = 0.5, v
		}
	}()
	return b.jitterDraw(), nil
}

// countLocal counts the outcome of a call admitted on local state under
// snapshot s.
func (b *Breaker) countLocal(s *snapshot, start time.Time, err error) {
	if s.gen == 0 {
		b.count(start, err, true) // before the first exchange: for any generation
		return
	}
	if b.snap.Load().gen != s.gen {
		return // the process re-joined a later state: made against an earlier one
	}
	b.count(start, err, false)
}

// timedCall is the done of one closed-state call when slow calls are timed.
// Each call gets its own (two small allocations), so that calling a done
// twice can never end another call: a pooled record could be handed out
// again between the two calls.
type timedCall struct {
	b     *Breaker
	s     *snapshot
	start time.Time
	armed atomic.Bool
}

func (b *Breaker) admitTimed(s *snapshot) func(error) {
	c := &timedCall{b: b, s: s, start: b.clk.Now()}
	c.armed.Store(true)
	return c.finish
}

func (c *timedCall) finish(err error) {
	if !c.armed.CompareAndSwap(true, false) {
		return // done called again
	}
	c.b.record(c.s, c.start, err)
}

// record counts the result of a closed-state call admitted under snapshot
// s, unless the shared state has moved on since. A result that comes back
// after the process fell back to local state counts toward the same
// generation (a degraded snapshot keeps the generation last seen).
func (b *Breaker) record(s *snapshot, start time.Time, err error) {
	if b.snap.Load().gen != s.gen {
		return // a result from an earlier generation
	}
	b.count(start, err, false)
}

// count adds one outcome to the batch of the next exchange; anygen marks
// an outcome seen before the process first joined the shared state, which
// counts toward whatever closed state Redis holds.
func (b *Breaker) count(start time.Time, err error, anygen bool) {
	if anygen {
		b.acc.local.Store(true)
	}
	c := b.acc.cell()
	failed := false
	var panicked any // re-raised once the outcome is counted
	if err != nil {
		var excluded bool
		failed, excluded, panicked = b.judge(err)
		if panicked != nil {
			defer panic(panicked) // once the failure is counted
		}
		if excluded {
			c.excluded.Add(1)
			return
		}
	}
	if b.s.slowDur > 0 && panicked == nil {
		// A Clock that panics while it times the call makes the call a
		// failure, as breaker.Breaker counts it, and the panic goes on. A
		// call whose judging panicked is a failure counted without reading
		// the clock, as there.
		timing := true
		defer func() {
			if timing { // the Clock panicked
				b.countFailure(c)
			}
		}()
		slow := b.clk.Since(start) >= b.s.slowDur
		timing = false
		if slow {
			c.slow.Add(1)
		}
	}
	if failed {
		b.countFailure(c)
		return
	}
	c.successes.Add(1)
	if !b.s.window {
		b.acc.success()
	}
}

// countFailure counts one failure in the cell c.
func (b *Breaker) countFailure(c *cell) {
	c.failures.Add(1)
	if !b.s.window {
		b.acc.failure()
	}
	b.l.poke()
}

// slow reports whether a call that began at start was slow. A panic of
// the Clock is handed back, to re-raise once the outcome is counted.
func (b *Breaker) slow(start time.Time) (slow bool, panicked any) {
	defer func() {
		if v := recover(); v != nil {
			slow, panicked = false, v
		}
	}()
	return b.clk.Since(start) >= b.s.slowDur, nil
}

// judge classifies the error err of a call, as breaker.Breaker does: a
// call that panicked (retry.PanicError) is a failure whatever IsExcluded
// and IsFailure say. A panic in the user's IsExcluded or IsFailure makes
// the call a failure too, and is handed back to re-raise once the outcome
// is counted.
func (b *Breaker) judge(err error) (failed, excluded bool, panicked any) {
	if _, ok := err.(*retry.PanicError); ok {
		return true, false, nil
	}
	defer func() {
		if v := recover(); v != nil {
			failed, excluded, panicked = true, false, v
		}
	}()
	if b.s.isExcluded(err) {
		return false, true, nil
	}
	return b.s.isFailure(err), false, nil
}

// Ready reports, without taking a probe permit, the error Allow would
// return now: nil, breaker.ErrOpen or breaker.ErrTooManyProbes.
func (b *Breaker) Ready() error {
	if b == nil {
		return nil
	}
	s := b.snap.Load()
	if !s.shared {
		if s.state == breaker.Open && b.openUntil(s) {
			return breaker.ErrOpen
		}
		if p := s.prob; p != nil {
			if p.inflight.Load() >= b.s.localProbes {
				return breaker.ErrTooManyProbes
			}
			return nil
		}
		return b.local.Load().b.Ready()
	}
	switch s.state {
	case breaker.Open:
		if b.openUntil(s) {
			return breaker.ErrOpen
		}
		if b.claiming.Load() {
			return breaker.ErrTooManyProbes
		}
	case breaker.HalfOpen:
		if s.full || b.claiming.Load() {
			return breaker.ErrTooManyProbes
		}
	}
	return nil
}

// Peek returns State and whether Ready would refuse a call now, without
// moving the local breaker's state or running a listener (see
// breaker.Breaker.Peek): a keyed group asks it under its lock.
func (b *Breaker) Peek() (st breaker.State, refusing bool) {
	if b == nil {
		return breaker.Closed, false
	}
	s := b.snap.Load()
	if !s.shared {
		if s.state == breaker.Open && b.openUntil(s) {
			return breaker.Open, true
		}
		if p := s.prob; p != nil {
			return breaker.HalfOpen, p.inflight.Load() >= b.s.localProbes
		}
		return b.local.Load().b.Peek()
	}
	switch s.state {
	case breaker.Open:
		if b.openUntil(s) {
			return breaker.Open, true
		}
		return breaker.HalfOpen, b.claiming.Load()
	case breaker.HalfOpen:
		return breaker.HalfOpen, s.full || b.claiming.Load()
	}
	return s.state, false
}

// State returns the state this process acts on: the cached shared state
// (an open state whose period has ended reads as half-open, as the next
// Allow would find it), or, while degraded, the local breaker's state (or
// Open until the end of an open period last seen in Redis, then HalfOpen
// while the local probes of a fallback from an open or half-open state
// decide).
func (b *Breaker) State() breaker.State {
	if b == nil {
		return breaker.Closed
	}
	s := b.snap.Load()
	switch {
	case s.shared && s.state == breaker.Open && !b.openUntil(s):
		return breaker.HalfOpen
	case s.shared:
		return s.state
	case s.state == breaker.Open && b.openUntil(s):
		return breaker.Open
	case s.prob != nil:
		return breaker.HalfOpen
	}
	return b.local.Load().b.State()
}

// Generation returns the generation of the cached shared state: a number
// that changes on every shared state change (it starts from the time the
// shared state was created in Redis).
func (b *Breaker) Generation() uint64 {
	if b == nil {
		return 0
	}
	return b.snap.Load().gen
}

// Counts returns the fleet-wide counts of the current shared state as of
// the last exchange with Redis (the window's counts for the time-window
// condition), or the local breaker's counts while degraded. Fleet-wide,
// Requests counts the calls whose result was reported (excluded results
// included), and ConsecutiveSuccesses is not tracked.
func (b *Breaker) Counts() breaker.Counts {
	if b == nil {
		return breaker.Counts{}
	}
	if !b.snap.Load().shared {
		return b.local.Load().b.Counts()
	}
	b.cntMu.Lock()
	defer b.cntMu.Unlock()
	return b.counts
}

// Stats returns how this process has been reaching Redis.
func (b *Breaker) Stats() LinkStats {
	if b == nil {
		return LinkStats{}
	}
	return b.l.stats()
}

// Subscribe adds fn to the functions called when the state this process
// acts on changes (see State), and returns a function that removes it.
// Listeners are called one at a time, in order, outside any lock, on the
// goroutine whose call saw the change: the background goroutine (after an
// exchange), or one calling Allow, a done function, Sync or Close. A panic
// in a listener does not stop the others from hearing the change; it then
// goes on to that caller, or, on the background goroutine, which has no
// caller, is recovered, counted in LinkStats.Panics, logged at Error
// level (BreakerConfig.Logger; nil: silent) unless it repeats the last
// panic logged there, and the exchanges go on.
func (b *Breaker) Subscribe(fn func(from, to breaker.State)) (unsubscribe func()) {
	if b == nil || fn == nil {
		return func() {}
	}
	return b.ev.subscribe(fn)
}

// Close stops the background exchange and waits until its goroutine has
// ended, an exchange in progress included (bounded by Timeout), then,
// unless the process is degraded (its last Redis call failed), flushes
// the outcomes counted since the last exchange (within Timeout; with none
// to flush it makes no Redis call).
// Called from a listener or OnDegraded that the background goroutine is
// running, Close does not wait for that goroutine (it is the caller's); a
// callback the background goroutine is running when Close is called from
// elsewhere may still be running when Close returns. Once Close has begun,
// OnDegraded is not called again. The Breaker keeps deciding calls on its
// last cached state afterwards. Close is safe to call more than once, and
// on a nil Breaker.
func (b *Breaker) Close() {
	if b == nil || !b.l.shut() {
		return
	}
	defer func() { b.local.Load().close() }() // even if a listener panics
	defer b.stopEnd()
	if b.snap.Load().shared {
		b.flushOnClose()
	}
}

// stopEnd stops the timer of the cached open period, if one runs, and
// retires a period whose timer is still to be started: the period is
// then judged by reading the clock, and a closed Breaker holds no timer
// (newEnd and armEnd start none once Close has begun).
func (b *Breaker) stopEnd() {
	b.stMu.Lock()
	defer b.stMu.Unlock()
	if e := b.snap.Load().end; e != nil {
		b.retireEnd(e)
	}
	if e := b.pendingEnd; e != nil {
		b.retireEnd(e)
	}
}

// localBreaker is the local breaker.Breaker of one stretch of local state,
// with its listener.
type localBreaker struct {
	b     *breaker.Breaker
	unsub func()
}

func (lb *localBreaker) close() {
	lb.unsub()
	lb.b.Close()
}

// resetLocal starts a fresh local breaker, closed: the process's local
// state starts again from the shared state (an open period last seen in
// Redis is honoured by the snapshot until it ends, and the probation of a
// fallback from an open or half-open state decides before the local
// breaker does). The caller holds stMu, or is NewBreaker.
//
// A trip of the local breaker is noted with the generation of the cached
// (local) snapshot: the shared state the process last saw, which its
// local outcomes count toward.
func (b *Breaker) resetLocal() {
	lb := &localBreaker{b: breaker.New(b.s.local)}
	lb.unsub = lb.b.Subscribe(func(_, to breaker.State) {
		if b.local.Load() != lb {
			return // an earlier stretch's breaker, finishing its calls
		}
		b.localState.Store(uint32(to))
		switch s := b.snap.Load(); {
		case s.shared:
			// The stretch is over: a call admitted on local state ended
			// after the process re-joined. Its trip was made against the
			// state of the stretch, not the one the process follows now.
		case to == breaker.Open:
			b.localTrip.Store(tripSet | s.gen)
			b.l.poke()
		case to == breaker.Closed:
			b.localTrip.Store(0)
		}
		b.settle()
	})
	b.localState.Store(uint32(breaker.Closed))
	if old := b.local.Swap(lb); old != nil {
		old.close()
	}
}

// effective returns the state this process acts on, as listeners see it.
func (b *Breaker) effective() breaker.State {
	s := b.snap.Load()
	switch {
	case s.shared:
		return s.state
	case s.state == breaker.Open && b.openUntil(s):
		return breaker.Open
	case s.prob != nil:
		return breaker.HalfOpen
	}
	return breaker.State(b.localState.Load())
}

// settle tells the listeners if the effective state changed.
func (b *Breaker) settle() { b.ev.observe(b.effective()) }

// jitterDraw returns a uniform number in [0, 1) for the open period's jitter.
func (b *Breaker) jitterDraw() float64 {
	if b.rnd == nil {
		return rand.Float64()
	}
	b.randMu.Lock()
	defer b.randMu.Unlock() // a panicking source must not wedge every later draw
	return float64(b.rnd.Uint64()>>11) / (1 << 53)
}

func (b *Breaker) nextMember() string {
	return b.member + strconv.FormatUint(b.seq.Add(1), 10)
}
