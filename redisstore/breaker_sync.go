package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/breaker"
)

// errReply reports a script reply of an unexpected shape.
var errReply = errors.New("redisstore: unexpected script reply")

// sharedState is the shared state as a script returns it.
type sharedState struct {
	st      breaker.State
	gen     uint64
	until   time.Time
	untilMs int64  // until on Redis's time line, as the script returned it: what tells two open periods apart
	inuse   int64  // probe permits held (half-open)
	prev    uint64 // sync only, non-zero: an earlier generation whose outcomes count toward this state (see syncScript)
}

// decodeState reads st, gen, until, probes-in-use from v, whose element
// at nowAt is the script's now.
func (b *Breaker) decodeState(v []int64, nowAt int) (sharedState, error) {
	if len(v) <= nowAt || len(v) < 4 || v[0] < 0 || v[0] > int64(breaker.Open) || v[1] < 0 || v[3] < 0 {
		return sharedState{}, fmt.Errorf("%w: %v", errReply, v)
	}
	return sharedState{
		st:      breaker.State(v[0]),
		gen:     uint64(v[1]),
		until:   b.tc.local(v[nowAt], v[2]),
		untilMs: v[2],
		inuse:   v[3],
	}, nil
}

func durMillis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Sync flushes the outcomes counted since the last exchange and refreshes
// the cached shared state now, within ctx and Timeout. The background
// loop does this every RefreshInterval; Sync is for a process that wants
// the shared state before it starts serving, and for tests. It returns
// ErrClosed after Close; an error wrapping ctx's (or Timeout's) end while
// it waits for another Redis call of this Breaker to finish, with nothing
// changed; and otherwise an error only when the Redis call failed, and the
// process has fallen back to local state (see Stats).
func (b *Breaker) Sync(ctx context.Context) error {
	if b == nil {
		return nil
	}
	if b.l.closed.Load() {
		return ErrClosed
	}
	return b.sync(ctx, false)
}

func (b *Breaker) loopSync() { _ = b.sync(context.Background(), true) }

// flushOnClose flushes what the process counted since the last exchange,
// if anything: a Breaker that has nothing to tell Redis (a keyed member
// removed while idle) closes without a round trip.
func (b *Breaker) flushOnClose() {
	ctx, cancel := b.l.context(context.Background())
	defer cancel()
	if b.acquire(ctx) != nil {
		return
	}
	idle := b.retained == nil && b.localTrip.Load() == 0 && b.acc.empty()
	b.release()
	if !idle {
		_ = b.sync(context.Background(), false)
	}
}

// flush is one batch of outcomes on its way to Redis. A flush whose
// exchange failed is kept and sent again, under the same number, before
// any newer outcome: Redis applies each number once, so a batch whose
// script ran but whose reply was lost is not counted twice.
type flush struct {
	seq    uint64
	gen    uint64 // the generation the outcomes and the trip were made against
	bt     batch
	trip   bool
	anygen bool // outcomes or a trip from before the first exchange: for any closed state
}

// sync makes one exchange; loop is true on the background loop's goroutine.
func (b *Breaker) sync(ctx context.Context, loop bool) error {
	ctx, cancel := b.l.context(ctx)
	defer cancel()
	if err := b.acquire(ctx); err != nil {
		return fmt.Errorf("redisstore: breaker %s: sync: %w", b.s.link.name, err)
	}
	held := true
	defer func() {
		if held { // the Clock, Rand or Scripter panicked
			b.unhold()
		}
	}()
	f, resend := b.nextFlush()
	st, err := b.exchange(ctx, f)
	st, err = b.drain(ctx, resend, st, err)
	held = false
	return b.finishSync(st, err, loop)
}

// unhold releases the right to call Redis after a panic of an exchange
// (the Clock, Rand or Scripter), and starts the timer of an open period a
// resent batch's reply cached.
func (b *Breaker) unhold() {
	b.release()
	b.armEnd()
}

// nextFlush returns the batch of the next exchange: the one kept from a
// failed exchange (resend true), or a new one of the outcomes counted
// since. The caller holds the right to call Redis.
func (b *Breaker) nextFlush() (f *flush, resend bool) {
	if b.retained != nil {
		return b.retained, true
	}
	s := b.snap.Load()
	b.batchSeq++
	trip := b.localTrip.Swap(0)
	f = &flush{seq: b.batchSeq, gen: s.gen, bt: b.acc.take()}
	// A trip counts toward the generation the process saw when its
	// local breaker opened; one made against an earlier state is void.
	f.trip = trip != 0 && (trip&^tripSet == s.gen || trip&^tripSet == 0)
	f.anygen = f.bt.local || s.gen == 0 || (f.trip && trip&^tripSet == 0)
	if !f.bt.empty() || f.trip {
		b.retained = f // kept until Redis has it, even if the exchange panics
	}
	return f, false
}

// drain completes an exchange that answered st, err: once Redis has the
// batch kept from a failed exchange (resend), the newer outcomes go in an
// exchange of their own. The caller holds the right to call Redis.
func (b *Breaker) drain(ctx context.Context, resend bool, st sharedState, err error) (sharedState, error) {
	for err == nil {
		b.retained = nil
		if !resend {
			break
		}
		b.apply(st)
		var f *flush
		f, resend = b.nextFlush()
		st, err = b.exchange(ctx, f)
	}
	return st, err
}

// finishSync ends an exchange with its answer st, err (see conclude).
func (b *Breaker) finishSync(st sharedState, err error, loop bool) error {
	b.settleState(st, err)
	return b.toldSync(err, loop)
}

// toldSync is the second half of finishSync (see tell).
func (b *Breaker) toldSync(err error, loop bool) error {
	if err == nil {
		defer b.l.syncs.Add(1) // once the state is cached and told, even if a listener panics
	}
	if err := b.tell(err, loop); err != nil {
		return fmt.Errorf("redisstore: breaker %s: sync: %w", b.s.link.name, err)
	}
	return nil
}

// exchange runs the sync script for f. The caller holds the right to call
// Redis.
func (b *Breaker) exchange(ctx context.Context, f *flush) (sharedState, error) {
	now, err := b.tc.now(ctx, b.s.link.client)
	if err != nil {
		return sharedState{}, err
	}
	keys, args := b.syncCall(f, now)
	v, err := syncScript.Run(ctx, b.s.link.client, keys, args...).Int64Slice()
	if err != nil {
		return sharedState{}, err
	}
	return b.syncReply(f, v)
}

// syncCall returns the keys and arguments of the sync script for f, whose
// now is now. The caller holds the right to call Redis.
func (b *Breaker) syncCall(f *flush, now int64) ([]string, []any) {
	bt := f.bt
	// What this process last saw, for Redis to restore if it lost the state.
	held, rem := 0, int64(0)
	if s := b.snap.Load(); b.epoch != 0 {
		switch d := s.until.Sub(b.clk.Now()); {
		case s.state == breaker.Open && d > 0:
			held, rem = int(breaker.Open), millisUp(d) // whole ms, rounded up as every duration Redis gets
		case s.state != breaker.Closed:
			held = int(breaker.HalfOpen)
		}
	}
	return []string{b.stateKey, b.probesKey, b.seenKey}, []any{
		now, f.gen, bt.requests, bt.successes, bt.failures, bt.slow,
		flag(bt.saw), bt.lead, bt.longest, bt.trail,
		flag(b.s.window), b.s.consecutive, b.s.minCalls, b.s.failPct, b.s.slowPct,
		durMillis(b.s.openTimeout), durMillis(b.s.maxOpen), b.s.multiplier, b.s.jitter, b.jitterDraw(),
		b.s.link.ttlMs, b.bucketTTL(), b.s.maxProbes,
		flag(f.anygen), flag(f.trip), b.windowPrefix, b.s.width.Milliseconds(), b.s.buckets, f.seq,
		b.epoch, held, rem,
	}
}

// syncReply decodes the sync script's reply v to the exchange of f, and
// caches the fleet-wide counts it carries. The caller holds the right to
// call Redis.
func (b *Breaker) syncReply(f *flush, v []int64) (sharedState, error) {
	if len(v) != 12 {
		return sharedState{}, fmt.Errorf("%w: %v", errReply, v)
	}
	st, err := b.decodeState(v, 9)
	if err != nil {
		return st, err
	}
	b.epoch = v[10]
	if v[11] == 1 && f.gen != st.gen {
		st.prev = f.gen
	}
	c := breaker.Counts{
		Requests:            uint64(max(v[4], 0)),
		Successes:           uint64(max(v[5], 0)),
		Failures:            uint64(max(v[6], 0)),
		SlowCalls:           uint64(max(v[7], 0)),
		ConsecutiveFailures: uint64(max(v[8], 0)),
	}
	b.cntMu.Lock()
	b.counts = c
	b.cntMu.Unlock()
	return st, nil
}

func flag(v bool) int {
	if v {
		return 1
	}
	return 0
}

// bucketTTL is how long a window bucket key lives: the window and one
// bucket, and a second of slack.
func (b *Breaker) bucketTTL() int64 {
	w := b.s.width.Milliseconds()
	if n := int64(b.s.buckets + 1); w > (math.MaxInt64-1000)/n {
		return math.MaxInt64 / int64(time.Millisecond) // saturated: the longest TTL a Duration holds
	}
	return int64(b.s.buckets+1)*w + 1000
}

// acquire takes the right to call Redis, within ctx. Each process makes
// one Redis call of a Breaker at a time, so that replies update the cache
// in the order Redis executed the calls.
func (b *Breaker) acquire(ctx context.Context) error {
	select {
	case b.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

func (b *Breaker) release() { <-b.sem }

// conclude ends a Redis call made with the right to call Redis: it caches
// the state st the call returned or, when the call failed with err, falls
// back to local state; then it releases the right and tells the listeners
// of any change, and the log and OnDegraded of a fallback or a re-join
// (even if a listener panics). loop is true on the background loop's
// goroutine. It returns err. A panic while it falls back (the local
// breaker's Clock) releases the right and goes on, telling no one.
func (b *Breaker) conclude(st sharedState, err error, loop bool) error {
	b.settleState(st, err)
	return b.tell(err, loop)
}

// settleState is the first half of conclude: it caches st, or falls back
// after err, and releases the right to call Redis.
func (b *Breaker) settleState(st sharedState, err error) {
	defer b.release() // even if the local breaker's Clock panics as fallBack makes it
	if err != nil {
		b.fallBack()
	} else {
		b.apply(st)
	}
}

// tell is the second half of conclude, once the right to call Redis is
// released: it starts the open period's timer and tells the listeners,
// the log and OnDegraded. It returns err.
func (b *Breaker) tell(err error, loop bool) error {
	if loop {
		b.l.enterCallbacks()
		defer b.l.leaveCallbacks()
	}
	defer func() {
		if err != nil {
			b.l.failed(err)
		} else {
			b.l.reached()
		}
	}()
	defer b.settle() // also when the Clock panics
	b.armEnd()
	return err
}

// apply makes st the cached shared state. The caller holds the right to
// call Redis (see acquire).
func (b *Breaker) apply(st sharedState) {
	full := st.st == breaker.HalfOpen && st.inuse >= b.s.maxProbes
	b.stMu.Lock()
	defer b.stMu.Unlock()
	cur := b.snap.Load()
	// Outcomes counted toward the cached generation count toward st too if
	// it is the same state, or a closed one standing in for a closed state
	// Redis lost.
	carry := cur.gen == st.gen || (st.prev != 0 && st.prev == cur.gen)
	if t := b.localTrip.Load(); carry && t != 0 && t&^tripSet == cur.gen && cur.gen != st.gen {
		b.localTrip.CompareAndSwap(t, tripSet|st.gen) // the trip counts toward the stand-in
	}
	if t := b.localTrip.Load(); t != 0 && !cur.shared && st.st == breaker.Closed {
		if g := t &^ tripSet; g == 0 || g == st.gen {
			// The local breaker opened while this call was in flight: keep
			// it until the next exchange tells Redis, rather than close it.
			if carry && cur.gen != st.gen {
				n := *cur
				n.gen = st.gen // the next batch counts toward the stand-in
				b.snap.Store(&n)
			}
			b.l.poke()
			return
		}
		// A trip made against a state the fleet has left: void, as the
		// failures of an earlier generation are.
		b.localTrip.CompareAndSwap(t, 0)
	}
	// The same open period is the same end on Redis's time line: on the
	// real clock until (now plus the time left) moves a little at every
	// exchange, and is kept as it was first cached.
	same := cur.end != nil && cur.untilMs == st.untilMs
	if same {
		st.until = cur.until
	}
	if cur.shared && cur.state == st.st && cur.gen == st.gen && cur.untilMs == st.untilMs && cur.full == full {
		return
	}
	n := &snapshot{shared: true, state: st.st, gen: st.gen, until: st.until, untilMs: st.untilMs, full: full}
	switch {
	case st.st == breaker.Open && same:
		n.end = cur.end // the same open period: its timer goes on
	case st.st == breaker.Open:
		n.end = b.newEnd(st.until)
	case st.st == breaker.Closed && b.s.slowDur == 0:
		n.done = func(err error) { b.record(n, time.Time{}, err) }
	}
	b.snap.Store(n)
	if cur.end != nil && cur.end != n.end {
		b.retireEnd(cur.end)
	}
	if cur.gen != 0 && !carry && !b.acc.local.Load() {
		// Counts of an earlier generation are void, whether counted in the
		// shared state or while degraded against it.
		b.acc.take()
	}
}

// newEnd returns the mark of an open period that ends at until: due at
// once on a Clock other than the real one, or once Close has begun, else
// unarmed until the next conclude starts its timer (armEnd). The caller
// holds stMu.
func (b *Breaker) newEnd(until time.Time) *openEnd {
	e := &openEnd{until: until}
	if !b.gate || b.l.closed.Load() {
		e.state.Store(endDue)
		return e
	}
	if b.pendingEnd != nil {
		b.pendingEnd.state.Store(endDue) // replaced before its timer started
	}
	b.pendingEnd = e
	return e
}

// retireEnd marks e, the open period of a snapshot just replaced (or of a
// Breaker being closed), as due (a call that loaded that snapshot reads
// the clock) and stops its timer. The caller holds stMu.
func (b *Breaker) retireEnd(e *openEnd) {
	e.state.Store(endDue)
	if b.pendingEnd == e {
		b.pendingEnd = nil
	}
	if e.t != nil {
		e.t.Stop()
		e.t = nil
	}
}

// armEnd starts the timer of the open period apply last cached, if it has
// not been started, and marks the period armed: the timer marks it due at
// its end. It runs outside every lock, after the right to call Redis is
// released, since the Clock may panic: the period is then judged by
// reading the clock, as on a fake clock, and the panic goes on. Once Close
// has begun it starts no timer.
func (b *Breaker) armEnd() {
	b.stMu.Lock()
	e := b.pendingEnd
	b.pendingEnd = nil
	b.stMu.Unlock()
	if e == nil {
		return
	}
	armed := false
	defer func() {
		if !armed {
			e.state.Store(endDue)
		}
	}()
	if b.l.closed.Load() {
		return
	}
	d := e.until.Sub(b.clk.Now())
	if d <= 0 { // over already (a refresh moved the end back)
		return
	}
	t := b.clk.AfterFunc(d, func() { e.state.Store(endDue) })
	armed = true
	b.stMu.Lock()
	defer b.stMu.Unlock()
	if e.state.Load() != endUnarmed || b.snap.Load().end != e || b.l.closed.Load() {
		t.Stop() // fired already, replaced meanwhile, or closed
		e.state.Store(endDue)
		return
	}
	e.t = t
	e.state.CompareAndSwap(endUnarmed, endArmed) // the timer may have fired meanwhile
}

// fallBack switches the cached state to local after a failed Redis call.
// The caller holds the right to call Redis.
func (b *Breaker) fallBack() {
	b.stMu.Lock()
	defer b.stMu.Unlock()
	if cur := b.snap.Load(); cur.shared {
		b.resetLocal() // from the shared state, not from an earlier outage's
		n := *cur
		n.shared, n.done, n.full = false, nil, false
		if cur.state != breaker.Closed {
			// Open or half-open: once any open period ends, local probes
			// decide (see probation), not the fresh local breaker, closed.
			n.prob = &probation{}
		}
		b.snap.Store(&n)
	}
}

// stateLost ends a claim or report that found Redis had lost the state
// this process saw: it changes nothing, and the next exchange (brought
// forward) restores the state. The caller holds the right to call Redis.
func (b *Breaker) stateLost() {
	b.release()
	b.l.reached()
	b.l.poke()
}

// claim asks Redis for a half-open probe permit. One goroutine of the
// process asks at a time; the others are refused meanwhile.
func (b *Breaker) claim() (func(error), error) {
	if !b.claiming.CompareAndSwap(false, true) {
		return nil, breaker.ErrTooManyProbes
	}
	defer b.claiming.Store(false)
	member := b.nextMember()
	ctx, cancel := b.l.context(context.Background())
	defer cancel()
	if b.acquire(ctx) != nil {
		return nil, breaker.ErrTooManyProbes // an exchange is stuck: it will fall back
	}
	held := true
	defer func() {
		if held { // the Clock or Scripter panicked
			b.release()
		}
	}()
	now, err := b.tc.now(ctx, b.s.link.client)
	var v []int64
	if err == nil {
		v, err = claimScript.Run(ctx, b.s.link.client, []string{b.stateKey, b.probesKey},
			now, member, b.s.probeLease.Milliseconds(), b.s.maxProbes, b.s.link.ttlMs, b.epoch,
		).Int64Slice()
	}
	var st sharedState
	var p *probe
	if err == nil {
		if len(v) != 7 || v[0] < 0 || v[0] > 1 {
			err = fmt.Errorf("%w: %v", errReply, v)
		} else if v[6] == 1 {
			held = false
			b.stateLost()
			return nil, breaker.ErrTooManyProbes
		} else {
			if v[0] == 1 {
				granted := &probe{b: b, member: member}
				granted.armed.Store(true)
				p = granted
				// Granted: from here on a panic (the Clock as the reply is
				// decoded or the probe's start is read, a listener,
				// OnDegraded) gives the permit back, as excluded, before it
				// goes on. Deferred after the release of the right to call
				// Redis, it runs first, so it releases that right itself if
				// still held: report takes it again.
				defer func() {
					if r := recover(); r != nil {
						if held {
							held = false
							b.release()
						}
						if granted.armed.CompareAndSwap(true, false) {
							granted.report(2)
						}
						panic(r)
					}
				}()
			}
			st, err = b.decodeState(v[1:], 4)
		}
	}
	if p != nil {
		if err != nil {
			// A reply that does not decode: the process falls back, and
			// the permit is freed by its lease running out.
			p.armed.Store(false)
			p = nil
		} else {
			p.gen, p.start = st.gen, b.clk.Now()
		}
	}
	held = false
	if b.conclude(st, err, false) != nil {
		return b.allowLocal(b.snap.Load())
	}
	if p != nil {
		return p.finish, nil
	}
	switch st.st {
	case breaker.Closed:
		if s := b.snap.Load(); s.shared && s.state == breaker.Closed {
			if s.done != nil {
				return s.done, nil
			}
			return b.admitTimed(s), nil
		}
	case breaker.Open:
		return nil, breaker.ErrOpen
	}
	return nil, breaker.ErrTooManyProbes
}

// probe is the done of a call admitted with a fleet-wide probe permit.
type probe struct {
	b      *Breaker
	gen    uint64
	member string
	start  time.Time
	armed  atomic.Bool
}

// finish reports the probe's result to Redis (within Timeout) and releases
// its permit. If Redis cannot be reached, the permit is released by its
// lease running out.
func (p *probe) finish(err error) {
	if !p.armed.CompareAndSwap(true, false) {
		return
	}
	outcome, panicked := p.classify(err)
	p.report(outcome)
	if panicked != nil {
		panic(panicked) // after the permit is released
	}
}

// classify returns the probe's outcome (0 success, 1 failure, 2 excluded).
// A panic in the user's IsExcluded, IsFailure or Clock makes it a failure,
// as a panicking call is (see judge), and is handed back to re-raise once
// the permit is released.
func (p *probe) classify(err error) (outcome int, panicked any) {
	return p.b.probeOutcome(p.start, err)
}

// report sends the probe's outcome to Redis and releases its permit.
func (p *probe) report(outcome int) {
	b := p.b
	ctx, cancel := b.l.context(context.Background())
	defer cancel()
	if b.acquire(ctx) != nil {
		return // an exchange is stuck: the permit's lease will run out
	}
	held := true
	defer func() {
		if held { // the Clock, Rand or Scripter panicked
			b.release()
		}
	}()
	// A Clock or Rand that panics must not keep the permit: the result is
	// reported with Redis's own time (-1: TIME) and a jitter draw of 0.5,
	// and the panic goes on once the script has run.
	now, panicked, rerr := p.reportTime(ctx)
	rnd, drawPanic := p.reportDraw()
	if panicked == nil {
		panicked = drawPanic
	}
	if panicked != nil {
		defer panic(panicked)
	}
	var v []int64
	if rerr == nil {
		v, rerr = reportScript.Run(ctx, b.s.link.client, []string{b.stateKey, b.probesKey},
			now, p.member, p.gen, outcome, b.s.successes,
			durMillis(b.s.openTimeout), durMillis(b.s.maxOpen), b.s.multiplier, b.s.jitter, rnd,
			b.s.link.ttlMs, b.epoch,
		).Int64Slice()
	}
	var st sharedState
	if rerr == nil {
		if len(v) != 6 {
			rerr = fmt.Errorf("%w: %v", errReply, v)
		} else if v[5] == 1 {
			held = false
			b.stateLost()
			return
		} else {
			st, rerr = b.decodeState(v, 4)
		}
	}
	held = false
	_ = b.conclude(st, rerr, false)
}

// reportTime returns the "now" of the report script. If the Clock panics
// it returns -1 (Redis's own TIME) and the panic, to re-raise once the
// result is reported.
func (p *probe) reportTime(ctx context.Context) (now int64, panicked any, err error) {
	defer func() {
		if v := recover(); v != nil {
			now, panicked, err = -1, v, nil
		}
	}()
	now, err = p.b.tc.now(ctx, p.b.s.link.client)
	return now, nil, err
}

// reportDraw returns the jitter draw of the report script. If the Rand
// panics it returns 0.5 and the panic, to re-raise once the result is
// reported.
func (p *probe) reportDraw() (rnd float64, panicked any) {
	defer func() {
		if v := recover(); v != nil {
			rnd, panicked = 0.5, v
		}
	}()
	return p.b.jitterDraw(), nil
}
