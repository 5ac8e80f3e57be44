package hedge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/fastpath"
	"github.com/stormguard/stormguard/internal/stripe"
	"github.com/stormguard/stormguard/retry"
)

// call is the state of one hedged call. It is pooled (a P's cell, then a
// sync.Pool: pool.go): a call whose first
// attempt answers before the delay allocates nothing but, once per ctxSlab
// calls, a slab of first-attempt contexts; its first attempt begins
// inline (retry.BeginInline) when the Policy allows, and rc adopts it only
// when needed (adoptLocked); on the real clock its hedge timer is an entry
// of a shared shard (sharedTimer), not a runtime timer. Fields are guarded
// by mu whenever a hedge or the timer may run; the retry.Call is used
// under mu only, one goroutine at a time.
type call struct {
	mu   sync.Mutex
	rc   retry.Call
	pol  retry.Policy // the Policy with its Observer wrapped, when it has one
	wrap wrapObserver
	brw  hedgeBreaker  // with an Observer, between rc and the Policy's Breaker
	p    *retry.Policy // what rc uses
	ctx  context.Context
	clk  clock.Clock
	ad   *Adaptive
	obs  observers

	realClk bool // clk is clock.Real
	rcLive  bool // rc is this call's (Reset or adoptLocked): a panic ends it through rc
	worn    bool // rc, pol or a Clock of the Policy's was set: put drops them

	op      launcher // the call's op, an opFunc[T]: it launches hedges too
	release any
	res     any // *results[T], made when the timer first fires

	delay       time.Duration
	max, limit  int
	hedges      int
	stopHedging bool

	arm   *arm
	armed bool
	seq   atomic.Uint64 // bumped before arming: the timer's callback syncs on it
	fired atomic.Bool   // the timer fired this round

	inline      slot
	lazy        bool         // inline's attempt began without rc (retry.BeginInline): adoptLocked hands it over
	first       retry.Inline // that attempt, until rc adopts it
	slots       []*slot      // this round's attempts
	running     int          // attempts not yet returned
	inflight    int          // hedge goroutines not yet gone, plus the inline attempt
	done        bool         // a winner or a fatal result: nothing new starts
	winner      *slot
	fatal       error
	last        error
	overloaded  error         // a copy's pushback of this round: no retry follows
	advice      time.Duration // the longest advice (retry.After) of this round's copies
	adviceUntil time.Time     // the next hedge waits for it, on the Policy's clock
	start       time.Time     // the call's start, with Policy.MaxElapsed

	endingLost bool  // wrapObserver: the attempt ending was cancelled
	fixLast    error // wrapObserver: the call's Last

	hasPanic bool
	panicked *slot // the attempt that panicked, nil for a release
	panicVal any
	relPanic panicBox // a release's panic in a hedged round

	wake  chan struct{}
	slab  []attemptCtx // first-attempt contexts (inlineCtx): slab[slabN:] unused
	slabN int
}

type slot struct {
	a       retry.Attempt
	ctx     *attemptCtx
	hedge   bool
	running bool
	lost    bool
	t0      time.Time
	lat     time.Duration // how long op took, read as it returned, with Adaptive
	censor  bool          // cancelled as a loser, its running time not yet given to Adaptive
}

// results holds the values of a round's attempts once hedges may run.
type results[T any] struct {
	win, last       T
	hasWin, hasLast bool
}

func resultsOf[T any](c *call) *results[T] {
	if c.res == nil {
		c.res = new(results[T])
	}
	return c.res.(*results[T])
}

type launcher interface{ launch(c *call, sl *slot) }

// opFunc is op, typed: as c.op (one pointer-shaped interface store, no
// allocation) it is both the operation and what starts its hedges.
type opFunc[T any] func(context.Context) (T, error)

func (opFunc[T]) launch(c *call, sl *slot) { go runHedge[T](c, sl) }

// arm is one timer of a call. An arm whose Stop failed is dropped, so a
// late callback finds c.arm changed and does nothing.
type arm struct {
	c    *call
	t    clock.Timer
	real bool
	st   sharedTimer // t, on the real clock
}

// stop is a.t.Stop(), without the interface call on the real clock.
func (a *arm) stop() bool {
	if a.real {
		return a.st.Stop()
	}
	return a.t.Stop()
}

func (a *arm) fire() {
	c := a.c
	c.mu.Lock()
	defer func() {
		// A callback hedgeLocked makes (Breaker.Ready, Budget.Withdraw,
		// the Observers) may panic: on this goroutine, the clock's, the
		// panic would crash the process. The call stops instead, and Do
		// re-raises it in the caller's goroutine.
		if r := recover(); r != nil {
			c.panicLocked(nil, r)
		}
		c.mu.Unlock()
	}()
	c.seq.Load()
	if c.arm != a {
		return
	}
	c.armed = false
	c.fired.Store(true)
	c.adoptLocked()
	c.hedgeLocked()
}

var (
	zeroPolicy retry.Policy
	errGoexit  = errors.New("hedge: a hedge attempt called runtime.Goexit")
)

type verdict uint8

const (
	vLost verdict = iota
	vWin
	vLast
)

func do[T any](ctx context.Context, h *Hedger, op func(context.Context) (T, error), release func(T), keep bool) (v T, kept *attemptCtx, err error) {
	if h == nil {
		h = &zeroHedger
	}
	maxHedges := h.MaxHedges
	if maxHedges == 0 {
		maxHedges = DefaultMaxHedges
	}
	var p *retry.Policy
	if pp, ok := h.Policy.(*retry.Policy); ok {
		p = pp // what its Policy method returns, without the interface call
	} else if h.Policy != nil {
		p = h.Policy.Policy()
	}
	if p == nil {
		p = &zeroPolicy
	}
	// A first attempt that needs nothing but the breaker and the budget
	// around it begins inline, as retry.Do's does: rc takes it over only
	// when a hedge or a retry needs the Call's steps (adoptLocked). The
	// other calls go to slow, by a jump: code that joins do's path from
	// elsewhere costs its common case the moves of every value it holds
	// (about 15 instructions, callgrind, BenchmarkFast).
	var in retry.Inline
	var fz fusedFirst // in's breaker and budget, when do began it as retry.Do's fused does
	var inline bool
	var gerr error
	var c *call
	var g doGuard[T]
	if h.Adaptives != nil || maxHedges <= 0 || p.AttemptLimit() == 1 {
		goto slow
	}
	// BeginInline takes no Policy with a group (it does nothing and says
	// so), so when it begins the attempt there is nothing to resolve, and
	// a breaker's refusal costs no pooled call. A Policy whose Breaker
	// is a *breaker.Breaker and whose Budget is a *budget.Ratio (either
	// may be nil) has its first attempt begun here as retry.Do's fused
	// begins it (fusedFirst): their types checked after the context's
	// Err, the last user code before the attempt, their data words read
	// once, the breaker asked with fastpath.Breaker.Admit (or Allow when
	// Admit says so: a half-open breaker, an open period that may have
	// ended), a refusal answered with the breaker's prebuilt error.
	// Anything else goes to BeginInline.
	if p.Breaker == nil && p.Budget == nil || !inlineFirst(p) {
		if in, inline, gerr = retry.BeginInline(ctx, p); gerr != nil {
			return v, nil, gerr
		}
	} else if ctx.Err() != nil {
		goto slow
	} else if bw, uw := fastpath.TypeWord(unsafe.Pointer(&p.Breaker)), fastpath.TypeWord(unsafe.Pointer(&p.Budget)); bw != 0 && bw != fastpath.Breaker.Tab.Load() || uw != 0 && uw != fastpath.Budget.Tab.Load() {
		if in, inline, gerr = retry.BeginInline(ctx, p); gerr != nil {
			return v, nil, gerr
		}
	} else {
		fz.bp, fz.rp = fastpath.DataWord(unsafe.Pointer(&p.Breaker)), fastpath.DataWord(unsafe.Pointer(&p.Budget))
		if bw != 0 {
			var done func(error)
			var refused error
			if fz.bp != nil {
				fz.e = fastpath.Current(fz.bp) // loaded once: the state the attempt is admitted in
			}
			if fz.e != nil && fastpath.Fast(fz.e) {
				// fastpath.Breaker.Admit, its closed state inlined as
				// retry's fused inlines it
				done = fastpath.DoneOf(fz.e)
			} else if fz.e, done, refused = fastpath.Breaker.Admit(fz.bp); done == nil && refused == nil {
				done, refused = p.Breaker.Allow() // the *breaker.Breaker checked: only Admit, a leaf, ran since
			}
			if refused != nil {
				return v, nil, refusal(fz.bp, refused)
			}
			in, fz.done = inlineOf(done), done != nil
		}
		fz.ok, inline = true, true
	}
	if !inline {
		goto slow
	}
	// getCall, inline: its P's cell, else the sync.Pool.
	if !raceBuild {
		id := procPin()
		if uint(id) < cacheCells {
			cl := &cells[id]
			if x := cl.c.Load(); x != nil && !cl.busy {
				cl.busy, c = true, x
			}
		}
		procUnpin()
	}
	if c == nil {
		c = pool.Get().(*call)
	}
	// setup, inline: a call of it (too big to inline) costs about 20
	// instructions more per call (callgrind, BenchmarkFast). BeginInline
	// took p: it has no Observer and no MaxElapsed, and the Hedger no
	// Adaptives.
	c.ctx, c.p, c.max, c.rcLive = ctx, p, maxHedges, false
	c.limit = p.AttemptLimit()
	if !c.realClk { // a call given back with realClk keeps clock.Real (put)
		c.clk, c.realClk = clock.Real, true
	}
	c.ad, c.delay = h.Adaptive, h.Delay
	if p.Clock != nil || c.delay <= 0 {
		c.setupRest(ctx, h, p)
	}
	goto round
slow:
	if h.Adaptives == nil && !retry.HasGroups(p) {
		return doCall(ctx, h, p, maxHedges, nil, op, release, keep)
	}
	if c, in, inline, gerr = setupGroups(ctx, h, p, maxHedges); gerr != nil {
		return v, nil, gerr
	}
	if !inline {
		return doCall(ctx, h, p, maxHedges, c, op, release, keep)
	}
round:
	c.op = opFunc[T](op)
	if release != nil {
		c.release = release
	}
	// A panic on this goroutine — op's (inOp), or a callback's in the
	// call's steps after op returned (End, Next, Succeed, Begin: the
	// Observer, Classify, the backoff, the breaker, the budget), which
	// retry.Call has already reported — releases every value Do holds
	// and goes on (doGuard.check).
	g = doGuard[T]{c: c, release: release}
	defer func() {
		if !g.settled {
			g.check(recover()) // recover must be called here, by the deferred function
		}
	}()
	// The first round, its attempt begun inline, as doRounds would run
	// it, in this small function: a first attempt that answers before
	// the delay (the common case) costs no more. Anything else goes on
	// in doRounds.
	sl := &c.inline
	sl.hedge, sl.lost, sl.running = false, false, true
	sl.ctx = c.inlineCtx(ctx, 1)
	c.lazy, c.first = true, in
	c.done = false // the rest of the round's state: adoptLocked
	c.running, c.inflight = 1, 1
	// From here the attempt has begun: a panic (op's, or the Clock's in
	// armRound) ends it as op's would.
	g.inOp = true
	var armed *arm
	if a := c.arm; a != nil && a.real && c.realClk && c.ad == nil && a.st.d == int64(c.delay) {
		// armRound's steady state, inline: the call's real-clock entry
		// is parked with this delay, and one compare-and-swap arms it
		// (sharedTimer.Reset), which publishes these writes to the
		// callback. mayHedge(1) holds: a first attempt begun inline
		// has a Policy without a Limiter and an attempt limit other
		// than 1, c.max is positive, and a call comes from the pool
		// with no hedges and stopHedging false (put clears them after
		// a hedged round; hedgeLocked checks them again all the same).
		// And st.d is 0 or a delay of coarseMin or more (Reset writes
		// it for those only), c.delay positive: a d equal to c.delay
		// is one that Reset re-arms with this compare-and-swap.
		c.armed = true
		if c.fired.Load() {
			c.fired.Store(false)
		}
		if a.st.state.CompareAndSwap(tParked, tListed) {
			armed = a
		}
	}
	if armed == nil {
		armed = c.armRound(sl, 1)
	}
	v, err = op(sl.ctx)
	g.cur, g.hasCur = v, true
	if c.ad != nil {
		// Read as op returns, while a panic of the Clock's is still
		// the attempt's: it ends failed, as op's would.
		sl.lat = c.clk.Since(sl.t0)
	}
	// Still the attempt's: a Clock's timer whose Stop panics ends the
	// attempt as op's panic would (inlinePanic), hedges or not. Parking
	// a listed entry does not show that no hedge ran: a hedge that
	// started re-arms the entry for the next one (MaxHedges >= 2), and a
	// coarse delay leaves it listed until the next tick, so fired is
	// read too (TestFirstAnswersWhileNextHedgeListed).
	quiet := armed == nil || armed.real && armed.st.state.CompareAndSwap(tListed, tParked) && !c.fired.Load() && c.disarmed() || c.disarmFast(armed)
	g.inOp = false
	if !quiet || err != nil {
		return doRounds(ctx, c, &g, op, release, keep, true, v, err, quiet)
	}
	// No hedge ran: nothing else touches the call. A fused attempt's
	// success is counted with the fastpath functions (below); any other
	// ends as Inline.Succeed(c.p) ends it, in two steps: Succeed with
	// no Policy tells the breaker alone, without Succeed's deferred
	// guard for the budget; the budget then hears what Succeed tells
	// it, and when the breaker's done panics, do's guard tells the
	// budget the attempt failed with a *retry.PanicError, as Succeed
	// would (g.succeeding).
	c.lazy, c.first = false, retry.Inline{}
	if fz.ok && (fz.e != nil || !fz.done) {
		// A fused attempt (fz) whose breaker is closed counting
		// consecutive failures, or absent: its success is counted
		// with the fastpath functions, as retry.Do's fused counts it,
		// on the words checked before op (op may have changed p).
		// Nothing here calls user code. stripe.Hint, after op (the
		// goroutine may have moved), written out.
		hint := stripe.Pin() & (stripe.N - 1)
		stripe.Unpin()
		// fastpath.Breaker.Succeed and fastpath.Budget.FirstOK, inlined
		// as retry's fused inlines them
		if fz.e != nil && fastpath.IsCurrent(fz.bp, fz.e) && fastpath.AddSuccess(fz.bp, hint) {
			fastpath.Breaker.EndStreak(fz.bp, fz.e)
		}
		if fz.rp != nil && fastpath.AddFirstOK(fz.rp, hint) {
			fastpath.Budget.Refill(fz.rp, hint)
		}
	} else {
		g.succeeding = true
		in.Succeed(nil)
		g.succeeding = false
		if b := c.p.Budget; b != nil {
			b.Record(false, nil)
		}
	}
	c.running, c.inflight, sl.running = 0, 0, false
	if c.ad != nil {
		c.observe(sl)
	}
	if x := sl.ctx; keep {
		kept = x
	} else if x.real.Load() == nil && ctx.Err() == nil && x.state.CompareAndSwap(live, ctxCancel) {
		// attemptCtx.cancel's common case, inline (ctx is x's
		// parent).
		if r := x.real.Load(); r != nil {
			r.cancel()
		}
	} else {
		x.cancel()
	}
	g.settled = true
	if c.worn {
		c.put()
	} else {
		// put's part for a call that used none of rc, pol or a Clock
		// of the Policy's (worn), nor, as no call here does, an
		// Observer or a hedged round's results.
		c.ctx, c.p, c.ad, c.op, c.release = nil, nil, nil, nil, nil
		// putCall, inline for a call that goes back to its P's cell.
		back := false
		if !raceBuild {
			id := procPin()
			if uint(id) < cacheCells {
				if cl := &cells[id]; cl.c.Load() == c {
					cl.busy, back = false, true
				}
			}
			procUnpin()
		}
		if !back {
			putCall(c)
		}
	}
	return v, kept, nil // round 1: no value held, no release ran
}

// doCall is do for a call whose rounds all begin with rc: c, set up by
// setupGroups, or, when c is nil, a call it sets up under p (which has no
// group, and h no Adaptives).
func doCall[T any](ctx context.Context, h *Hedger, p *retry.Policy, maxHedges int, c *call, op func(context.Context) (T, error), release func(T), keep bool) (v T, kept *attemptCtx, err error) {
	fresh := c == nil
	if fresh {
		c = getCall()
	}
	// As in do: a panic on this goroutine releases every value Do holds
	// and goes on (doGuard.check), from here: a panic in the setup (an
	// Observer's, a Clock's) leaves no cell taken. The inline slot's
	// context is still the last call's (a response of hedge.Transport's
	// may keep it live until its body is closed): not this call's to
	// cancel, as check's cancelAll would.
	c.inline.ctx = nil
	g := doGuard[T]{c: c, release: release}
	defer func() {
		if !g.settled {
			g.check(recover()) // recover must be called here, by the deferred function
		}
	}()
	if fresh {
		// setup, inline (a Policy with an Observer comes here).
		c.ctx, c.p, c.max, c.rcLive = ctx, p, max(maxHedges, 0), false
		c.limit = p.AttemptLimit()
		if !c.realClk {
			c.clk, c.realClk = clock.Real, true
		}
		c.ad, c.delay = h.Adaptive, h.Delay
		if p.Clock != nil || p.MaxElapsed > 0 || p.Observer != nil || c.delay <= 0 {
			c.setupRest(ctx, h, p)
		}
	}
	c.op = opFunc[T](op)
	if release != nil {
		c.release = release
	}
	c.rc.Reset(ctx, c.p)
	c.rcLive, c.worn = true, true
	return doRounds(ctx, c, &g, op, release, keep, false, v, nil, false)
}

// setupGroups is do's setup of a call under a Policy with groups, or a
// Hedger with Adaptives: the call is set up under the Policy of ctx's
// key, whose first attempt it then begins inline when that Policy
// allows. On a breaker's refusal it returns the error, and no call.
func setupGroups(ctx context.Context, h *Hedger, p *retry.Policy, maxHedges int) (c *call, in retry.Inline, inline bool, err error) {
	c = getCall()
	set := false
	defer func() {
		if !set { // a panic (or runtime.Goexit) below: c is no one's
			c.discard()
		}
	}()
	// Resolving the groups and the key's Adaptive may run user code
	// (a group's build, keep, release, Clock): before any permit is
	// taken, and on the resolved Policy, which BeginInline accepts.
	c.setup(ctx, h, c.resolveGroups(ctx, p), max(maxHedges, 0)) // key.go
	if c.max > 0 && c.limit != 1 {
		if in, inline, err = retry.BeginInline(ctx, c.p); err != nil {
			set = true
			c.put()
			return nil, in, false, err
		}
	}
	set = true
	return c, in, inline, nil
}

// doRounds is do's loop of rounds, from the first round's start, or
// (resumed) from its inline attempt's return with v and err, quiet when
// its hedge timer was stopped before it fired.
func doRounds[T any](ctx context.Context, c *call, g *doGuard[T], op func(context.Context) (T, error), release func(T), keep, resumed bool, v T, err error, quiet bool) (T, *attemptCtx, error) {
	// A release that panics on this goroutine does not unwind the call:
	// its panic is kept in rp, and re-raised once the call has ended and
	// every value Do holds is released (raise).
	var rp panicBox
	var kept *attemptCtx
	for {
		sl := &c.inline
		if !resumed {
			*sl = slot{}
			a, gerr := c.rc.Begin()
			if gerr != nil {
				g.settled = true
				c.put()
				return g.held, nil, gerr
			}
			sl.a = a
			sl.ctx = c.inlineCtx(a.Context, a.N)
			sl.running = true
			c.newRound()
			c.running, c.inflight = 1, 1
			// From here the attempt has begun: a panic (op's, or the
			// Clock's in armRound) ends it as op's would.
			g.inOp = true
			armed := c.armRound(sl, a.N)
			v, err = op(sl.ctx)
			g.cur, g.hasCur = v, true
			if c.ad != nil {
				sl.lat = c.clk.Since(sl.t0) // the attempt's, as in do
			}
			quiet = armed == nil || c.disarmFast(armed)
			g.inOp = false
		}
		resumed = false
		if quiet {
			// No hedge ran: nothing else touches the call. (An
			// inline first attempt that got here failed: rc adopts
			// it.)
			c.adoptLocked()
			err = c.rc.End(&sl.a, err)
			c.running, c.inflight, sl.running = 0, 0, false
			if err == nil {
				if c.ad != nil {
					c.observe(sl)
				}
				if keep {
					kept = sl.ctx
				} else {
					sl.ctx.cancel()
				}
				c.rc.Succeed()
				g.settled = true
				c.put()
				if g.hasHeld {
					releaseSafe(release, g.held, &rp)
				}
				if rp.set {
					raise(rp, release, v, kept, &rp)
				}
				return v, kept, nil
			}
			sl.ctx.cancel()
			prev, hadPrev := g.held, g.hasHeld
			g.held, g.hasHeld, g.hasCur = v, true, false
			if hadPrev {
				releaseSafe(release, prev, &rp)
			}
			if rp.set {
				// No retry after a release panicked: the call ends.
				abandonSafe(&c.rc)
				g.settled = true
				c.put()
				raise(rp, release, g.held, nil, &rp)
			}
			d, gerr := c.rc.Next(err)
			if gerr != nil {
				g.settled = true
				c.put()
				return g.held, nil, gerr
			}
			c.rc.Wait(d)
			continue
		}
		// The timer fired: hedges may be running.
		g.hasCur = false
		complete(c, sl, v, err, release)
		c.mu.Lock()
		for c.inflight > 0 {
			c.mu.Unlock()
			<-c.wake
			c.mu.Lock()
		}
		c.disarmLocked()
		relp := c.relPanic
		c.mu.Unlock()
		r := resultsOf[T](c)
		if c.hasPanic {
			g.settled = true
			func() {
				// Every value Do holds is released whatever
				// panics in hedgePanic (which keeps the
				// callbacks' panics from replacing c.panicVal).
				defer releaseAll(c, release, g.held, g.hasHeld)
				c.hedgePanic()
			}()
			c.discard()
			panic(c.panicVal)
		}
		for _, s := range c.slots {
			if !keep || s != c.winner {
				s.ctx.cancel()
			}
		}
		if c.winner != nil {
			if keep {
				kept = c.winner.ctx
			}
			last, hasLast := r.last, r.hasLast
			c.rc.Succeed()
			v = r.win
			g.settled = true
			c.put()
			if g.hasHeld {
				releaseSafe(release, g.held, &rp)
			}
			if hasLast { // a failure of this round, before the winner
				releaseSafe(release, last, &rp)
			}
			if relp.set {
				raise(relp, release, v, kept, &rp)
			}
			if rp.set {
				raise(rp, release, v, kept, &rp)
			}
			return v, kept, nil
		}
		if r.hasLast {
			prev, hadPrev := g.held, g.hasHeld
			g.held, g.hasHeld = r.last, true
			var zero T
			r.last, r.hasLast = zero, false
			if hadPrev {
				releaseSafe(release, prev, &rp)
			}
		}
		if relp.set || rp.set {
			// No retry after a release panicked: the call ends.
			if !relp.set {
				relp = rp
			}
			abandonSafe(&c.rc)
			g.settled = true
			c.put()
			if !g.hasHeld {
				panic(relp.v)
			}
			raise(relp, release, g.held, nil, &rp)
		}
		next := c.last
		if d, _ := retry.RetryAfter(next); next != nil && c.advice > d {
			// Another copy of the round advised a longer wait than the
			// last to fail: the longest advice holds for the retry.
			next = retry.After(next, c.advice)
		}
		if c.overloaded != nil {
			next = c.overloaded // never retried, at any layer
		}
		if c.fatal != nil {
			next, c.fixLast = c.fatal, c.fatal
		}
		d, gerr := c.rc.Next(next)
		if gerr != nil {
			if re, ok := gerr.(*retry.Error); ok && c.fixLast != nil {
				re.Last = c.fixLast
			}
			g.settled = true
			c.put()
			return g.held, nil, gerr
		}
		c.rc.Wait(d)
	}
}

// armRound arms the hedge timer of the round whose inline attempt sl,
// the call's nth, has begun, unless no hedge could start, and returns the
// arm, or nil. With Adaptive it reads the attempt's start from the Clock.
func (c *call) armRound(sl *slot, n int) *arm {
	delay := c.delay
	if c.ad != nil {
		sl.t0 = c.clk.Now()
		if d, ok := c.ad.DelayAt(sl.t0); ok {
			delay = d
		}
	}
	if a := c.arm; a != nil && a.real && c.realClk && delay >= coarseMin && a.st.d == int64(delay) && c.mayHedge(n) {
		// armTimer's path for the steady state of a busy Hedger on the
		// real clock: the call's entry is parked with this delay, and
		// one compare-and-swap arms it (sharedTimer.Reset), which
		// publishes these writes to the callback.
		c.delay, c.armed = delay, true
		if c.fired.Load() {
			c.fired.Store(false)
		}
		if a.st.state.CompareAndSwap(tParked, tListed) {
			return a
		}
	}
	return c.armTimer(delay, n)
}

// cancelAll cancels the context of every attempt of the round, once none
// is running: a call that ends by a panic leaves none live. A parent
// context whose Err panics is dropped here (the call's panic goes on),
// and ends none of the others.
func (c *call) cancelAll() {
	if x := c.inline.ctx; x != nil {
		x.cancelQuiet()
	}
	for _, s := range c.slots {
		if s.ctx != nil { // the inline slot, cleared for a Begin that panicked
			s.ctx.cancelQuiet()
		}
	}
}

// doGuard is what do's deferred check needs: a struct on do's stack
// rather than a closure's captured variables.
type doGuard[T any] struct {
	c       *call
	release func(T)
	held    T // the latest failed attempt's value, when hasHeld
	cur     T // the inline attempt's value, when hasCur: not yet returned, held or handed to complete
	hasHeld bool
	inOp    bool // op is running on the caller's goroutine
	hasCur  bool
	settled bool // nothing that can panic is left but release (kept in rp) and raise
	// succeeding: the inline attempt succeeded and the breaker is being
	// told (Inline.Succeed(nil)); the budget has not heard of it yet.
	succeeding bool
}

// check, called by do's deferred function with what it recovered (nil for
// runtime.Goexit) unless the call has settled, handles a panic on the
// caller's goroutine: the call is ended (inlinePanic for op's; a step's
// was reported by retry.Call already, and rc.Panic ends it otherwise),
// every attempt's context is
// cancelled, every value Do holds is released (the failed attempts', the
// inline attempt's not yet returned, the round's results), and the panic
// goes on.
func (g *doGuard[T]) check(r any) {
	c := g.c
	if g.inOp {
		c.inlinePanic(r)
	} else {
		// No hedge is running: the round's timer was stopped before it
		// fired, or every attempt has returned. The call ends through
		// rc as a step's panic ends it: a step of rc's has done so
		// already (Panic then does nothing more), but a panic between
		// steps (the Clock's NewTimer in Wait) would leave a retry the
		// budget granted reserved, and the Observer without CallEnd.
		c.cancelAll()
		if c.rcLive {
			c.rc.Panic(&retry.Attempt{}, r)
		}
	}
	releaseAll(c, g.release, g.held, g.hasHeld)
	if g.hasCur {
		var b panicBox
		releaseSafe(g.release, g.cur, &b)
	}
	// The call is not pooled again, and its per-P cell is left free.
	c.discard()
	if g.succeeding {
		// The breaker's done panicked (or called runtime.Goexit) as
		// the inline attempt succeeded: the budget hears the attempt
		// fail, as Inline.Succeed(c.p) would tell it. Last, once
		// every value is released: a Record that panics (its panic
		// goes on, as from Succeed) or calls runtime.Goexit leaves
		// nothing undone.
		g.succeeding = false
		if b := c.p.Budget; b != nil {
			b.Record(false, &retry.PanicError{Value: r})
		}
	}
	if r != nil {
		panic(r)
	}
}

// abandonSafe ends rc's call after a release panicked (Call.Abandon:
// ReasonPermanent). A callback that panics there (a Refund, the Clock, the
// Observer's CallEnd) ends it with Call.Panic instead (ReasonPanic, unless
// the Observer heard CallEnd already), and its panic is dropped: the
// release's is the one that goes on.
func abandonSafe(rc *retry.Call) {
	defer func() {
		if r := recover(); r != nil {
			rc.Panic(&retry.Attempt{}, r)
		}
	}()
	rc.Abandon()
}

// raise ends a call whose release panicked with b: kept's context is
// cancelled, x released (a panic of that release kept in rp, where the
// first one already is), and b's panic goes on.
func raise[T any](b panicBox, release func(T), x T, kept *attemptCtx, rp *panicBox) {
	if kept != nil {
		kept.cancelQuiet() // a parent's panic here is dropped: b's goes on
	}
	releaseSafe(release, x, rp)
	panic(b.v)
}

// releaseAll releases every value a panicking call holds. A release that
// panics too does not stop the others; the first panic goes on.
func releaseAll[T any](c *call, release func(T), held T, hasHeld bool) {
	if release == nil {
		return
	}
	var b panicBox
	if hasHeld {
		releaseSafe(release, held, &b)
	}
	if r, ok := c.res.(*results[T]); ok {
		if r.hasWin {
			releaseSafe(release, r.win, &b)
		}
		if r.hasLast {
			releaseSafe(release, r.last, &b)
		}
	}
}

// panicBox keeps the first panic of a release.
type panicBox struct {
	set bool
	v   any
}

func (b *panicBox) keep(r any) {
	if !b.set {
		b.set, b.v = true, r
	}
}

// releaseSafe calls release(v), when release is not nil, keeping a panic
// in b instead of letting it unwind the call.
func releaseSafe[T any](release func(T), v T, b *panicBox) {
	if release == nil {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			b.keep(r)
		}
	}()
	release(v)
}

// releasePanicLocked records a release's panic in a hedged round: the
// call stops (the attempts still running are cancelled as losers), and
// Do re-raises the panic once they have returned and every value it holds
// is released.
func (c *call) releasePanicLocked(r any) {
	c.relPanic.keep(r)
	c.stopHedging = true
	if !c.done {
		c.done = true
		c.stopOthersLocked(nil, false) // under c.mu with no recover: no Clock read
	}
}

// setup readies c for a call under p (not nil, its groups resolved) with
// ctx; it runs no user code but the Clock (when MaxElapsed is set) and
// Adaptives' For. do (for a first attempt BeginInline began) and doCall
// (for a Policy without groups) have copies of it inline; in all three,
// setupRest does what the real clock, no MaxElapsed, Observer or
// Adaptives and a positive Delay leave out.
func (c *call) setup(ctx context.Context, h *Hedger, p *retry.Policy, maxHedges int) {
	c.ctx, c.p, c.max, c.rcLive = ctx, p, maxHedges, false
	c.limit = p.AttemptLimit()
	c.clk, c.realClk = clock.Real, true
	c.ad, c.delay = h.Adaptive, h.Delay
	if p.Clock != nil || p.MaxElapsed > 0 || p.Observer != nil || c.delay <= 0 || h.Adaptives != nil {
		c.setupRest(ctx, h, p)
	}
}

// setupRest is setup's part for a Policy with a Clock, MaxElapsed or an
// Observer, a Delay of 0, or a Hedger with Adaptives.
func (c *call) setupRest(ctx context.Context, h *Hedger, p *retry.Policy) {
	c.worn = true
	if p.Clock != nil && p.Clock != clock.Real {
		c.clk, c.realClk = p.Clock, false
	}
	if p.MaxElapsed > 0 {
		c.start = c.clk.Now()
	}
	if h.Adaptives != nil {
		c.ad = h.adaptive(ctx) // key.go
	}
	if p.Observer != nil {
		c.pol = *p
		c.wrap.inner = p.Observer
		c.pol.Observer = &c.wrap
		if p.Breaker != nil {
			c.brw.inner = p.Breaker
			c.pol.Breaker = &c.brw
		}
		c.p = &c.pol
		c.obs.find(p.Observer)
	}
	if c.delay <= 0 {
		c.delay = DefaultDelay
	}
}

// adoptLocked hands an inline first attempt over to rc, which has not
// been set up for the call until then; c.mu is held, or no hedge or timer
// callback can run.
func (c *call) adoptLocked() {
	if !c.lazy {
		return
	}
	c.lazy = false
	c.inline.a = c.rc.Adopt(c.ctx, c.p, c.first)
	c.rcLive, c.worn = true, true
	c.first = retry.Inline{}
	c.newRound()
}

// newRound clears what a round of attempts finds out, its inline attempt
// the only one so far.
func (c *call) newRound() {
	c.slots = append(c.slots[:0], &c.inline)
	c.done, c.winner, c.fatal, c.last, c.overloaded = false, nil, nil, nil, nil
	c.advice, c.adviceUntil = 0, time.Time{}
}

// put returns c to the pool, dropping its references to the caller's
// world (pool.go lists what it keeps). Every attempt has ended; a late
// timer callback may still come, and reads only c.arm under mu: put keeps
// a real-clock arm, and drops another under mu.
func (c *call) put() {
	if c.hasPanic {
		return
	}
	// What only a hedged round sets (its timer fired, and do made res)
	// is cleared here, and the caller's world is dropped: the fields
	// setup and each round set are overwritten by the next call, but a
	// pooled call must not keep them alive meanwhile (pool.go says what
	// it keeps).
	if c.res != nil {
		clear(c.slots)
		c.slots = c.slots[:0]
		c.winner, c.fatal, c.last, c.fixLast = nil, nil, nil, nil
		c.res = nil
		c.hedges, c.stopHedging = 0, false
		c.relPanic = panicBox{}
	}
	if c.obs.n > 0 {
		c.obs.reset()
	}
	if c.worn {
		// The call used rc and its inline attempt's retry.Attempt, a
		// copy of the Policy, or a Clock of the Policy's: the fast
		// path uses none. rc and pol are left for the next call that
		// uses them to overwrite (zeroing them costs about 80
		// instructions a call with an Observer); the rest goes.
		c.worn = false
		c.inline.a = retry.Attempt{}
		c.wrap.inner, c.wrap.list[0], c.brw.inner = nil, nil, nil
		if !c.realClk {
			c.clk = nil
			if c.arm != nil {
				// Its timer: the next call makes its own. (Under
				// mu: a late callback reads c.arm, and finds it
				// changed.)
				c.mu.Lock()
				c.arm = nil
				c.mu.Unlock()
			}
		}
	}
	c.ctx, c.p, c.ad, c.op, c.release = nil, nil, nil, nil, nil
	putCall(c)
}

// armTimer starts the hedge timer for the round, whose inline attempt is
// the call's nth, unless no hedge could start. It returns the arm, or nil.
func (c *call) armTimer(d time.Duration, n int) *arm {
	if !c.mayHedge(n) {
		return nil
	}
	c.delay = d
	if c.fired.Load() { // only this arm's callback sets it, and it is not armed
		c.fired.Store(false)
	}
	c.armed = true
	if a := c.arm; a != nil && a.real && c.realClk {
		// The writes above reach the callback through the entry's
		// state: Reset's compare-and-swap (or the shard's lock) is
		// seen by the tick's, which the fire's sees, before it calls
		// back.
		a.st.Reset(d)
		return a
	}
	c.mu.Lock()
	a := &arm{c: c, real: c.realClk}
	made := false
	defer func() {
		if !made { // the Clock's AfterFunc panicked: no timer to stop
			c.armed, c.arm = false, nil
		}
		c.mu.Unlock()
	}()
	c.arm = a
	if a.real {
		a.st.init(a.fire)
		a.t = &a.st
		a.t.Reset(d)
	} else {
		a.t = c.clk.AfterFunc(d, a.fire)
	}
	made = true
	return a
}

// mayHedge reports whether a hedge could start in the round whose inline
// attempt is the call's nth.
func (c *call) mayHedge(n int) bool {
	return c.hedges < c.max && !c.stopHedging && c.p.Limiter == nil && (c.limit <= 0 || n < c.limit)
}

// disarmed records that the round's timer was stopped before it fired, and
// reports true.
func (c *call) disarmed() bool {
	c.armed = false
	return true
}

// disarmFast stops the round's timer a after the inline attempt returned,
// and reports whether it never fired this round (no hedge can be running,
// and no callback can come). It reads no field a hedge may write: c.arm
// may have been dropped meanwhile.
func (c *call) disarmFast(a *arm) bool {
	if a.stop() && !c.fired.Load() {
		c.armed = false
		return true
	}
	return false
}

// disarmLocked stops the timer; if a callback may still be on its way,
// the arm is dropped.
func (c *call) disarmLocked() {
	if !c.armed {
		return
	}
	c.armed = false
	if c.arm != nil && !c.stopArmLocked() {
		c.arm = nil
	}
}

// stopArmLocked stops c.arm's timer and reports whether it was pending.
// A Clock's timer whose Stop panics counts as not stopped (the arm is
// dropped, so that a late callback does nothing), and stops the call
// (panicLocked): disarmLocked runs where a panic must not unwind with
// c.mu held, in the panic paths too.
func (c *call) stopArmLocked() (stopped bool) {
	defer func() {
		if r := recover(); r != nil {
			stopped = false
			c.panicLocked(nil, r)
		}
	}()
	return c.arm.t.Stop()
}

// hedgeLocked starts a hedge, when the call, its limits, the breaker and
// the budget allow, and arms the timer for the next one.
func (c *call) hedgeLocked() {
	if c.done || c.running == 0 || c.stopHedging || c.hedges >= c.max || c.ctx.Err() != nil {
		return
	}
	// The hedge's start for Adaptive, read before anything is granted: a
	// Clock that panics here leaves no permit or budget grant behind.
	var t0 time.Time
	if c.ad != nil {
		t0 = c.clk.Now()
	}
	var reason retry.Reason
	switch {
	case c.limit > 0 && c.rc.Attempts() >= c.limit:
		reason = retry.ReasonAttempts
	case c.p.NestedForbids(c.ctx):
		reason = retry.ReasonNested
	case c.p.Limiter != nil:
		reason = retry.ReasonThrottled
	case !c.fits():
		reason = retry.ReasonDeadline
	case c.p.Breaker != nil && c.p.Breaker.Ready() != nil:
		reason = retry.ReasonBreaker
	}
	// The grants a hedge takes are refunded unless its attempt begins
	// (its Start and Record then account for them): when the Budget
	// refuses after the NestedBudget granted, when Begin is refused, and
	// when a callback panics on the way.
	gr := hedgeGrants{c: c, n: c.rc.Attempts()}
	defer gr.refundUnused()
	if reason == retry.ReasonSuccess && c.nested() {
		if gr.nested = c.p.NestedBudget.Withdraw(ErrHedge); !gr.nested {
			reason = retry.ReasonNested
		}
	}
	if reason == retry.ReasonSuccess && c.p.Budget != nil {
		if gr.budget = c.p.Budget.Withdraw(ErrHedge); !gr.budget {
			reason = retry.ReasonBudget
		}
	}
	if reason != retry.ReasonSuccess {
		c.stopHedging = true
		c.notify(evRefused, c.slots[len(c.slots)-1], reason)
		return
	}
	if c.p == &c.pol && c.pol.Breaker == &c.brw {
		// An Observer watches the call (setupRest put brw in): the
		// hedge asks the breaker itself, so that a refusal stops
		// hedging and leaves the call going on for the Observer
		// (Begin's refusal would end it: CallEnd). Begin takes the
		// permit (hedgeBreaker.Allow).
		done, berr := c.brw.inner.Allow()
		if berr != nil {
			c.stopHedging = true
			c.notify(evRefused, c.slots[len(c.slots)-1], retry.ReasonBreaker)
			return
		}
		c.brw.pending, c.brw.has = done, true
	}
	a, err := c.rc.Begin() // refused: the breaker, or the caller's context has ended
	if err != nil {
		c.stopHedging = true
		c.notify(evRefused, c.slots[len(c.slots)-1], retry.ReasonBreaker)
		return
	}
	sl := &slot{a: a, hedge: true, running: true, t0: t0}
	sl.ctx = newAttemptCtx(a.Context, a.N, true)
	c.hedges++
	c.slots = append(c.slots, sl)
	c.running++
	c.inflight++
	if c.wake == nil {
		c.wake = make(chan struct{}, 1)
	}
	c.op.launch(c, sl) // before the Observer, which may panic
	c.notify(evStarted, sl, 0)
	if c.hedges < c.max && (c.limit < 0 || c.rc.Attempts() < c.limit) {
		c.armed = true
		c.seq.Add(1)
		c.arm.t.Reset(c.delay)
	}
}

// hedgeBreaker stands between rc and the Policy's Breaker when an
// Observer watches the call (c.pol): a hedge asks the breaker's Allow
// itself before Begin, and Begin's Allow takes that permit.
type hedgeBreaker struct {
	inner   retry.Breaker
	pending func(error) // the hedge's permit, for Begin
	has     bool
}

// Allow returns the hedge's permit, when one is pending, or asks the
// breaker.
func (b *hedgeBreaker) Allow() (func(error), error) {
	if b.has {
		done := b.pending
		b.pending, b.has = nil, false
		return done, nil
	}
	return b.inner.Allow()
}

// Ready asks the breaker.
func (b *hedgeBreaker) Ready() error { return b.inner.Ready() }

// hedgeGrants is what a hedge withdrew from the NestedBudget and the
// Budget, before its attempt began.
type hedgeGrants struct {
	c              *call
	n              int // the call's attempts before the hedge's Begin
	nested, budget bool
}

// refundUnused refunds, to a BudgetTracker, each grant no attempt took:
// the hedge's Begin was not reached, refused, or panicked before the
// attempt began (Call.Attempts did not move). A begun attempt's Start and
// Record account for them. The breaker's unused permit, the NestedBudget's
// and the Budget's grants are each given back whatever of the others
// panics (deferred, as retry.Call refunds a retry's); a panic goes on
// (the last, when more than one does) and stops the call.
func (g *hedgeGrants) refundUnused() {
	c := g.c
	if (g.nested || g.budget) && c.rc.Attempts() <= g.n {
		if t, ok := c.p.Budget.(retry.BudgetTracker); ok && g.budget {
			defer t.Refund()
		}
		if t, ok := c.p.NestedBudget.(retry.BudgetTracker); ok && g.nested {
			defer t.Refund()
		}
	}
	if c.brw.has {
		// Begin did not take the breaker's permit (the caller's
		// context had ended, or a callback panicked first): it goes
		// back unused.
		done := c.brw.pending
		c.brw.pending, c.brw.has = nil, false
		if done != nil {
			done(context.Canceled)
		}
	}
}

// nested reports whether the layer rule makes a hedge withdraw from
// Policy.NestedBudget: the rule is NestedBudget (with a budget) and it
// governs the call.
func (c *call) nested() bool {
	return c.p.Nested == retry.NestedBudget && c.p.NestedBudget != nil && retry.CallerRetries(c.ctx)
}

// fits reports whether the caller's deadline and Policy.MaxElapsed leave
// Policy.MinAttemptTime for a hedge: no hedge starts past
// start+MaxElapsed, as no retry does.
func (c *call) fits() bool {
	dl, ok := c.ctx.Deadline()
	if !ok && c.p.MaxElapsed <= 0 {
		return true
	}
	need := c.clk.Now().Add(max(c.p.MinAttemptTime, 0))
	if ok && !need.Before(dl) {
		return false
	}
	return c.p.MaxElapsed <= 0 || need.Before(c.start.Add(c.p.MaxElapsed))
}

// complete ends attempt sl with its result and keeps or releases v. A
// release that panics stops the call (releasePanicLocked); so does a
// callback of finishLocked that panics (panicLocked). complete leaves
// (c.leave) last; only a runtime.Goexit in release can skip that, and a
// caller that recovers from it must leave itself.
func complete[T any](c *call, sl *slot, v T, err error, release func(T)) {
	var drop T
	dropping := false
	func() {
		c.mu.Lock()
		ended := false
		defer func() {
			if !ended {
				// A callback finishLocked made (Classify, the
				// Observers, the breaker, the budget) panicked: the
				// call stops, v (kept by no one) is released, and Do
				// re-raises the panic in the caller's goroutine.
				r := recover()
				if r == nil {
					r = errGoexit
				}
				c.panicLocked(nil, r)
				drop, dropping = v, true
			}
			c.mu.Unlock()
		}()
		vd := c.finishLocked(sl, err)
		r := resultsOf[T](c)
		switch vd {
		case vWin:
			r.win, r.hasWin = v, true
		case vLast:
			if r.hasLast {
				drop, dropping = r.last, true
			}
			r.last, r.hasLast = v, true
		default:
			drop, dropping = v, true
		}
		ended = true
	}()
	if dropping && release != nil {
		var b panicBox
		releaseSafe(release, drop, &b)
		if b.set {
			c.mu.Lock()
			c.releasePanicLocked(b.v)
			c.mu.Unlock()
		}
	}
	c.leave()
}

// leave counts a returned attempt out and wakes the caller.
func (c *call) leave() {
	c.mu.Lock()
	c.inflight--
	w := c.wake
	c.mu.Unlock()
	if w != nil {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (c *call) finishLocked(sl *slot, err error) verdict {
	c.adoptLocked()
	sl.running = false
	c.running--
	if sl.lost {
		if err != nil {
			err = retry.Permanent(&lostError{err})
		}
		c.endingLost = true
		c.rc.End(&sl.a, err)
		c.endingLost = false
		c.notify(evCancelled, sl, 0)
		return vLost
	}
	err = c.rc.End(&sl.a, err)
	if err == nil {
		c.done, c.winner = true, sl
		c.observe(sl)
		c.cancelOthersLocked(sl)
		if sl.hedge {
			c.notify(evWon, sl, 0)
		}
		return vWin
	}
	sl.ctx.cancel()
	if retry.IsOverloaded(err) && c.ctx.Err() == nil {
		// Server pushback that says "do not retry" (gRFC A6: a negative
		// grpc-retry-pushback-ms): no further hedge, but the copies
		// already sent may still answer. Next then ends the call with
		// ReasonOverloaded if none does.
		c.stopHedging = true
		c.disarmLocked()
		c.last, c.overloaded = err, err
		return vLast
	}
	if !c.retryable(err) {
		c.done, c.fatal = true, err
		c.cancelOthersLocked(sl)
		return vLast
	}
	if d, ok := retry.RetryAfter(err); ok && d > 0 && c.p.MaxRetryAfter >= 0 {
		c.adviseLocked(d)
	}
	c.last = err
	return vLast
}

// adviseLocked applies a copy's server advice d (retry.After, gRFC A6's
// positive pushback) to the round: the retry, if one follows, waits the
// longest advice of the round's copies (do), and the next hedge waits at
// least d from now, and never less than an earlier copy asked. Advice
// beyond MaxRetryAfter stops hedging, as it stops a retry: coming back at
// the cap would be sooner than the server asked.
func (c *call) adviseLocked(d time.Duration) {
	c.advice = max(c.advice, d)
	m := c.p.MaxRetryAfter
	if m == 0 {
		m = retry.DefaultMaxRetryAfter
	}
	if d > m {
		c.stopHedging = true
		c.disarmLocked()
		return
	}
	if !c.armed || c.arm == nil {
		return
	}
	now := c.clk.Now()
	until := now.Add(max(d, c.delay))
	if !until.After(c.adviceUntil) {
		return // an earlier copy's advice holds the hedge longer
	}
	c.adviceUntil = until
	c.seq.Add(1)
	c.arm.t.Reset(until.Sub(now))
}

// cancelOthersLocked cancels the running attempts but except, as losers,
// and stops the timer. Each one's time so far goes to Adaptive as
// unanswered (censored): its latency is more than that. The Clock is read
// for that last, once every loser is cancelled, so that a Clock that
// panics leaves none running uncancelled.
func (c *call) cancelOthersLocked(except *slot) {
	if c.stopOthersLocked(except, c.ad != nil) {
		now := c.clk.Now()
		for _, s := range c.slots {
			if s.censor {
				s.censor = false
				c.ad.ObserveUnansweredAt(now, now.Sub(s.t0))
			}
		}
	}
}

// stopOthersLocked cancels the running attempts but except, as losers,
// and stops the timer, calling back no user code but the Clock's timer's
// Stop. With censor, it marks the attempts it cancelled for Adaptive, and
// reports whether there is any. A call stopped by a panic uses it without
// censor: it reads no Clock, which may be what panicked.
func (c *call) stopOthersLocked(except *slot, censor bool) bool {
	marked := false
	for _, s := range c.slots {
		if s.running && s != except && !s.lost {
			s.lost = true
			if r := s.ctx.cancelQuiet(); r != nil {
				// The caller's context's Err panicked (the
				// context is cancelled all the same): c.mu is
				// held, so the panic is kept for the caller, as a
				// hedge's, and stops the call.
				c.keepPanicLocked(r)
			}
			if censor {
				s.censor, marked = true, true
			}
		}
	}
	c.disarmLocked()
	return marked
}

// retryable reports whether the Policy would retry err (an error End
// returned); an error it would not retry is fatal.
func (c *call) retryable(err error) bool {
	if c.ctx.Err() != nil || retry.IsPermanent(err) || retry.IsOverloaded(err) {
		return false
	}
	if errors.Is(err, retry.ErrAttemptTimeout) {
		return true
	}
	if c.p.Classify != nil {
		return c.p.Classify(err)
	}
	return retry.DefaultClassifier(err)
}

// observe feeds the latency of an attempt that answered to Adaptive.
func (c *call) observe(sl *slot) {
	if c.ad != nil {
		// sl.lat was read (Since: one monotonic read on the real
		// clock, where Now is two) as op returned; the time is t0
		// plus the latency either way.
		c.ad.ObserveAt(sl.t0.Add(sl.lat), sl.lat)
	}
}

// runHedge runs one hedge attempt in its own goroutine. A panic (or
// runtime.Goexit) is handed to the caller's goroutine.
func runHedge[T any](c *call, sl *slot) {
	op := c.op.(opFunc[T])
	release, _ := c.release.(func(T))
	stage := 0 // 0: op running, 3: op returned, its latency not read, 1: in complete, 2: all done
	var v T
	defer func() {
		if stage == 2 {
			return
		}
		// op panicked (or called runtime.Goexit), or the Clock did as
		// the latency was read, or, once complete was called, a
		// callback complete made did (a release's Goexit; its panic
		// complete keeps). complete has not left: leave, always, or the
		// caller waits for this hedge for ever.
		r := recover()
		if r == nil {
			r = errGoexit
		}
		c.mu.Lock()
		if stage == 0 || stage == 3 {
			c.panicLocked(sl, r)
		} else {
			c.panicLocked(nil, r)
		}
		c.mu.Unlock()
		if stage == 3 { // the value op returned is kept by no one
			var b panicBox
			releaseSafe(release, v, &b)
		}
		c.leave()
	}()
	v, err := op(sl.ctx)
	stage = 3
	if c.ad != nil {
		sl.lat = c.clk.Since(sl.t0) // a panic here is the attempt's, as op's
	}
	stage = 1
	complete(c, sl, v, err, release)
	stage = 2
}

// panicLocked records a hedge's panic (sl nil: a release's) for the
// caller, and stops the call.
func (c *call) panicLocked(sl *slot, r any) {
	c.endingLost = false // a callback may have panicked between its set and reset
	if sl != nil {
		sl.running = false
		c.running--
	}
	if c.hasPanic {
		if sl != nil { // a second panic: end its attempt now
			c.endPanicked(sl, r)
		}
	} else {
		c.hasPanic, c.panicked, c.panicVal = true, sl, r
	}
	c.done = true
	c.stopOthersLocked(nil, false)
}

// keepPanicLocked records a panic that ended no attempt (a parent
// context's, as an attempt's context was cancelled) for the caller, unless
// another is kept already, and stops the call.
func (c *call) keepPanicLocked(r any) {
	if !c.hasPanic {
		c.hasPanic, c.panicked, c.panicVal = true, nil, r
	}
	c.done = true
}

// discard keeps c out of the pool for good, once a panic has ended its
// call: put does nothing for it from here, and a per-P cell that holds
// it (on any P: the goroutine may have moved since it took it) drops it,
// so that the cell is not left taken and keeps the next call given back
// on its P.
func (c *call) discard() {
	c.hasPanic = true
	if raceBuild {
		return
	}
	for i := range cells {
		cells[i].c.CompareAndSwap(c, nil)
	}
}

// hedgePanic ends the call stopped by a panic on a goroutine of Do's (a
// hedge's op, a release, or a callback on the timer's or a hedge's
// goroutine), once every attempt has returned: every attempt's context is
// cancelled and the call ends with retry.Call.Panic (ReasonPanic, a
// granted retry refunded), the panicking hedge's attempt, if any, failed
// with a *retry.PanicError. A callback that panics meanwhile (the
// Observer's CallEnd, a Refund, the Clock) is dropped: c.panicVal goes on.
func (c *call) hedgePanic() {
	for _, s := range c.slots {
		s.ctx.cancelQuiet()
	}
	if c.panicked != nil {
		c.rc.Panic(&c.panicked.a, c.panicVal)
		return
	}
	c.rc.Panic(&retry.Attempt{}, c.panicVal)
}

// inlinePanic ends the call whose inline attempt panicked with r: the
// others are cancelled and waited for, then the attempt and the call are
// reported with Call.Panic.
func (c *call) inlinePanic(r any) {
	c.mu.Lock()
	adopted := c.adoptPanickedLocked(r)
	sl := &c.inline
	sl.running = false
	c.running--
	c.done = true
	c.stopOthersLocked(sl, false)
	c.inflight--
	for c.inflight > 0 {
		c.mu.Unlock()
		<-c.wake
		c.mu.Lock()
	}
	c.disarmLocked()
	other := c.panicked
	c.hasPanic = true // not pooled again
	c.mu.Unlock()
	for _, s := range c.slots {
		s.ctx.cancelQuiet()
	}
	if other != nil {
		c.endPanicked(other, c.panicVal)
	}
	if adopted {
		c.rc.Panic(&sl.a, r)
	}
}

// adoptPanickedLocked is adoptLocked for inlinePanic, whose inline
// attempt's op panicked with r; c.mu is held. op may have changed the
// Policy the call is then set up from (on the fast path, the caller's
// own), and the setup's callbacks (an Observer's CallStart, a Clock) may
// panic. So the breaker hears first that the attempt failed, whatever the
// setup does, and a panic of the setup's is dropped, c.mu still held (op's
// panic goes on): the budget hears the attempt fail, ok is false, and rc
// is not this call's.
func (c *call) adoptPanickedLocked(r any) (ok bool) {
	if !c.lazy {
		return true
	}
	if done := inlineDone(c.first); done != nil {
		c.first = retry.Inline{}
		tellPanicked(done, r)
	}
	defer func() {
		if !ok {
			_ = recover()
			c.lazy = false
			c.newRound() // the slots are this call's: its inline attempt's alone
			// rc never heard of the attempt: the budget (a
			// BudgetTracker's Start is open) still hears it fail.
			recordPanicked(c.p.Budget, r)
		}
	}()
	c.adoptLocked()
	return true
}

// recordPanicked tells b (if any) that an attempt failed with a panic r,
// dropping a panic of Record's own: r's goes on.
func recordPanicked(b retry.Budget, r any) {
	if b == nil {
		return
	}
	defer func() { _ = recover() }()
	b.Record(false, &retry.PanicError{Value: r})
}

// tellPanicked tells a breaker's done that its attempt panicked with r,
// dropping a panic of done's own (a listener's): r's goes on.
func tellPanicked(done func(error), r any) {
	defer func() { _ = recover() }()
	done(&retry.PanicError{Value: r})
}

// endPanicked ends attempt sl, which panicked with r while another panic
// stops the call, with a *retry.PanicError. A callback of End's that
// panics (the Observer's AttemptEnd, the breaker's done, a budget's
// Record) has End's other steps done and the call ended (ReasonPanic) by
// retry.Call, and is dropped here: it must not unwind a hedge's goroutine
// holding c.mu, nor the caller's cleanup, and the first panic goes on.
func (c *call) endPanicked(sl *slot, r any) {
	defer func() { _ = recover() }()
	c.rc.End(&sl.a, &retry.PanicError{Value: r})
}

// lostError is a loser's error: it matches ErrLost and context.Canceled.
type lostError struct{ err error }

func (e *lostError) Error() string { return ErrLost.Error() + ": " + e.err.Error() }
func (e *lostError) Unwrap() error { return e.err }
func (e *lostError) Is(target error) bool {
	return target == ErrLost || target == context.Canceled
}

// DownstreamFault reports false: a loser says nothing about the
// downstream's health (retry.IsDownstreamFault).
func (e *lostError) DownstreamFault() bool { return false }

type eventKind uint8

const (
	evStarted eventKind = iota
	evWon
	evCancelled
	evRefused
)

func (c *call) notify(k eventKind, sl *slot, reason retry.Reason) {
	if c.obs.n == 0 {
		return
	}
	e := Event{Operation: c.p.Operation, Attempt: sl.a.N, Hedge: sl.hedge, Delay: c.delay, Reason: reason}
	ctx := sl.a.Context
	for _, o := range c.obs.list[:c.obs.n] {
		switch k {
		case evStarted:
			o.HedgeStarted(ctx, e)
		case evWon:
			o.HedgeWon(ctx, e)
		case evCancelled:
			o.HedgeCancelled(ctx, e)
		case evRefused:
			o.HedgeRefused(ctx, e)
		}
	}
}
