package sim

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
)

// Result is what one run of a Model with one Variant measured.
type Result struct {
	// Metrics are the run's figures (Trials 1).
	Metrics Metrics
	// Series is the measured tier's load over time, at ChartStep
	// resolution, for charts.
	Series Series
	// Events is the number of events the run processed.
	Events uint64
}

// Run simulates m once with variant v. The seed determines every random
// draw: the clients' arrival times come from per-client streams derived from
// it, so that every variant sees the same workload; latencies, service times
// and faults come from the Sim's generator; jitter from a third stream.
func Run(m *Model, v Variant, seed uint64) (*Result, error) {
	return RunContext(context.Background(), m, v, seed)
}

// RunContext is Run that stops when ctx ends, returning ctx's error, and
// that stops a run making no progress (see Sim.RunUntilContext) with an
// error wrapping ErrNoProgress.
func RunContext(ctx context.Context, m *Model, v Variant, seed uint64) (*Result, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	r := newRunner(m, v, seed)
	if err := r.s.RunUntilContext(ctx, m.horizon(), m.MaxEvents); err != nil {
		return nil, err
	}
	r.recordOpenCalls(m.horizon())
	if r.agents != nil {
		r.recordPending()
	}
	res := &Result{Events: r.s.Events()}
	res.Metrics, res.Series = r.rec.finish(m)
	r.releaseBufs()
	return res, nil
}

// runBufs are the slices of attempts and calls a run grows, kept by
// runBufPool for the next run once one is done with them (runner.releaseBufs):
// growing them anew in every trial was half the bytes the default suite
// allocated (issue #36). A run that reuses them takes the same indices
// as with new ones: they start empty.
type runBufs struct {
	calls        []callRec
	atts         []attRec
	fns          []attFns
	freeC, freeA []int32
}

var runBufPool sync.Pool // of *runBufs, every slice empty and cleared

// releaseBufs gives the run's buffers (its attempts and calls, and its
// Sim's queue) to the next run: r must not be used after.
func (r *runner) releaseBufs() {
	clear(r.calls)
	clear(r.atts)
	clear(r.fns)
	runBufPool.Put(&runBufs{calls: r.calls[:0], atts: r.atts[:0], fns: r.fns[:0], freeC: r.freeC[:0], freeA: r.freeA[:0]})
	r.calls, r.atts, r.fns, r.freeC, r.freeA = nil, nil, nil, nil, nil
	r.s.release()
}

// recordOpenCalls hands the recorder the ages at end of the client calls
// still open then.
func (r *runner) recordOpenCalls(end time.Duration) {
	free := make([]bool, len(r.calls))
	for _, ci := range r.freeC {
		free[ci] = true
	}
	for ci := range r.calls {
		if c := &r.calls[ci]; !free[ci] && c.parent < 0 {
			r.rec.rec.Open = append(r.rec.rec.Open, end-c.start)
		}
	}
}

// Error codes carried by reply events.
const (
	codeOK int64 = iota
	codeUnavailable
	codeOverloaded
	codeServer
	codeMarked // shed with the overload marker (Policy.OverloadMarker)
)

var (
	// errMarked is a refusal carrying the core's overload marker;
	// errMarkedBudget is what a budget hears of it: marked Permanent, as
	// retry.Call.End tells a budget about an error the policy does not
	// retry.
	errMarked       = retry.Overloaded(ErrOverloaded)
	errMarkedBudget = retry.Permanent(errMarked)
	codeErr         = [...]error{nil, ErrUnavailable, ErrOverloaded, ErrServer, errMarked}
)

type runner struct {
	s       *Sim
	m       *Model
	tiers   []tierState
	callers []caller
	hops    []hop
	arrive  []ArrivalStream // per-client arrival streams
	calls   []callRec
	atts    []attRec
	fns     []attFns // by attempt, as atts
	freeC   []int32
	freeA   []int32
	measure int32
	rec     recorder
	// The fault window, for FaultAttempts: calls whose client call
	// started in [faultFrom, faultTo) count.
	faultFrom, faultTo time.Duration

	agents []agent // per client, with Model.Reports

	// Common random numbers: every draw about an attempt (its loss, legs,
	// service time, failure) comes from a generator seeded by the run's
	// seed, the attempt's key and the kind of draw, so that the same call
	// meets the same network and server under every policy compared.
	seed    uint64
	crn     rand.PCG
	crnRand *rand.Rand
	seqs    []uint64 // calls started per client

	hArrive, hRetry, hReach, hServed, hReply, hTimeout, hCapacity, hRestart, hResume, hHedge HandlerID

	ask askContext // the context limiters are asked with

	timers int64 // hedge timers armed so far: each round's timer has its own number
}

// hop is the per-tier part of a variant: the policy its callers use and the
// strategy built for this run.
type hop struct {
	pol     Policy
	strat   backoff.Strategy
	timeout time.Duration
	ad      *hedge.Adaptive // Policy.Hedge.Adaptive, for the hop
	tlane   LaneID          // the Sim lane of its attempt timeouts (timeout > 0)
}

type tierState struct {
	cfg       *Tier
	busy      int
	eff       int // workers serving now (capacity faults applied)
	queue     ring
	inService []int32 // attempts holding a worker (for a restart to drop)
	faults    []*Fault
	// A constant service time's lane: a service that takes exactly
	// svcConst ends through it (svcLaned).
	svcLaned bool
	svcConst time.Duration
	svcLane  LaneID
}

// caller is one process that makes calls into a tier: a client, or a tier
// calling the next one. It owns its budget and breaker.
type caller struct {
	hop     int32
	budget  retry.Budget
	tracker retry.BudgetTracker
	breaker retry.Breaker
	limiter retry.Limiter
}

type callRec struct {
	key       uint64 // the call's identity for common random numbers
	start     time.Duration
	origin    time.Duration // start of the client call this call serves
	prev      time.Duration // previous backoff delay
	gen       int64
	parentGen int64 // the upstream attempt's generation
	parent    int32 // upstream attempt this call serves, -1 for a client's call
	caller    int32
	attempts  int32
	// inRetries: the inbound attempt this call serves comes from a caller
	// that retries it (announced Will-Retry, or an attempt above 1): the
	// layer rule governs the call.
	inRetries bool
	marked    bool  // the call ended on the overload marker
	open      int32 // attempts the caller waits for (several when hedging)
	hedges    int32 // hedges sent
	// The hedge timer of the call's current round of attempts (a first
	// attempt or a retry, and the hedges of it), as hedge.Do arms one per
	// round: its number (0: none armed; a timer event whose number is not
	// this is stale) and its delay.
	timer      int64
	roundDelay time.Duration
	// stopHedging: a budget, breaker or rule refused a hedge; the call
	// starts no further hedge (hedge.Do's stopHedging).
	stopHedging bool
	// live are the attempts the call has sent: the open ones among them
	// are cancelled when another wins, or when the call is cancelled.
	live []int32
	// heldLim is the done of an admission a limiter reserved for the
	// call's next attempt, which waits for it.
	heldLim func(error)
}

// An attRec holds no pointer, so that storing one into the pooled slice
// needs no write barrier and the collector never scans the slice: the
// functions an attempt holds are in attFns, at the same index.
type attRec struct {
	key        uint64 // the attempt's identity for common random numbers
	gen        int64
	callGen    int64 // its call's generation: a hedged call may end first
	caller     int32
	sent       time.Duration
	origin     time.Duration // start of the client call it serves
	call       int32
	tier       int32
	n          int32
	svc        int32 // index in its tier's inService, -1 when not holding a worker
	clientOpen bool  // the caller still waits for this attempt
	announce   bool  // the caller announced it will retry (AnnouncesRetry)
	pathRef    bool  // an event, the queue, a worker or a downstream call refers to it
	dropped    bool  // a restart dropped it, or its caller cancelled it; its service end is ignored
	cancelled  bool  // its caller cancelled it (a hedge's loser) before it reached the tier
	stage      uint8 // where the request is: stageSent, stageQueued, stageService or stageReplied
	scriptFail bool  // simHooks.service failed it
	child      int32 // the call its tier makes downstream for it, -1 for none
	childGen   int64 // that call's generation
	// timeout is its timeout event (noTimeout: none), skipped once the
	// caller stops waiting for the attempt otherwise, since onTimeout
	// would then do nothing.
	timeout LaneEvent
}

// attFns are the functions attempt ai (runner.fns[ai]) hands its result
// to: its breaker's done and its limiter's, each nil once called or when
// the attempt holds none. Both are nil whenever the attempt's slot is
// free, so that an attempt without them never writes its attFns.
type attFns struct {
	done func(error)
	lim  func(error) // the limiter's done
}

// noTimeout is the attRec.timeout of an attempt without a timeout: Skip
// ignores it.
const noTimeout = ^LaneEvent(0)

// Where an attempt's request is, for a caller that cancels it.
const (
	stageSent    uint8 = iota // on its way to the tier (or lost)
	stageQueued               // in the tier's queue
	stageService              // holding a worker (and maybe calling downstream)
	stageReplied              // answered or dropped: the tier holds nothing of it
)

func newRunner(m *Model, v Variant, seed uint64) *runner {
	s := New(seed)
	r := &runner{s: s, m: m, measure: int32(m.MeasureTier()), seed: seed}
	if b, ok := runBufPool.Get().(*runBufs); ok {
		r.calls, r.atts, r.fns, r.freeC, r.freeA = b.calls, b.atts, b.fns, b.freeC, b.freeA
	}
	r.crnRand = rand.New(&r.crn)
	r.seqs = make([]uint64, m.Clients)
	r.hArrive = s.Register(r.onArrive)
	r.hRetry = s.Register(r.onRetry)
	r.hReach = s.Register(r.onReach)
	r.hServed = s.Register(r.onServed)
	r.hReply = s.Register(r.onReply)
	r.hTimeout = s.Register(r.onTimeout)
	r.hCapacity = s.Register(r.onCapacity)
	r.hRestart = s.Register(r.onRestart)
	r.hResume = s.Register(r.onResume)
	r.hHedge = s.Register(r.onHedge)

	if m.Reports != nil {
		r.agents = make([]agent, m.Clients)
	}

	jitter := rand.NewPCG(seed^0x6a09e667f3bcc909, seed+0xbb67ae8584caa73b)
	r.hops = make([]hop, len(m.Tiers))
	for i := range r.hops {
		h := &r.hops[i]
		if i < len(v.Policies) {
			h.pol = v.Policies[i]
		} else {
			h.pol = Policy{Name: "none", MaxAttempts: 1}
		}
		if h.pol.Backoff != nil {
			h.strat = h.pol.Backoff(jitter)
		}
		h.timeout = h.pol.AttemptTimeout
		if h.timeout == 0 {
			h.timeout = m.Tiers[i].Timeout
		}
		if h.timeout > 0 {
			h.tlane = s.Lane(h.timeout)
		}
		if hg := h.pol.Hedge; hg != nil && hg.Adaptive != nil {
			c := *hg.Adaptive
			c.Clock = s.Clock()
			h.ad = hedge.NewAdaptive(c)
		}
	}

	r.tiers = make([]tierState, len(m.Tiers))
	for i := range r.tiers {
		t := &r.tiers[i]
		t.cfg = &m.Tiers[i]
		t.eff = t.cfg.Workers
		if t.eff == 0 {
			t.eff = math.MaxInt
		}
		if sv := t.cfg.Service; sv.Kind == DistConst && sv.A >= 0 {
			t.svcLaned, t.svcConst, t.svcLane = true, sv.A, s.Lane(sv.A)
		}
	}
	for i := range m.Faults {
		f := &m.Faults[i]
		r.tiers[f.Tier].faults = append(r.tiers[f.Tier].faults, f)
		switch f.Kind {
		case FaultCapacity:
			s.Schedule(f.Start, r.hCapacity, int32(f.Tier), 0)
			s.Schedule(f.End, r.hCapacity, int32(f.Tier), 0)
		case FaultRestart:
			s.Schedule(f.Start, r.hRestart, int32(f.Tier), 0)
		}
	}

	// Callers: the clients, then one per tier that calls the next.
	env := Env{Clock: s.Clock(), Rand: rand.NewPCG(seed^0x3c6ef372fe94f82b, seed+0xa54ff53a5f1d36f1)}
	r.callers = make([]caller, m.Clients+len(m.Tiers)-1)
	shared := make([]retry.Budget, len(m.Tiers))     // per hop, for ShareBudget
	sharedBrk := make([]retry.Breaker, len(m.Tiers)) // per hop, for ShareBreaker
	for i := range r.callers {
		c := &r.callers[i]
		if i >= m.Clients {
			c.hop = int32(i - m.Clients + 1)
		}
		p := &r.hops[c.hop].pol
		switch {
		case p.Budget != nil && p.ShareBudget:
			if shared[c.hop] == nil {
				shared[c.hop] = p.Budget(env)
			}
			c.budget = shared[c.hop]
		case p.Budget != nil:
			c.budget = p.Budget(env)
		}
		if c.budget != nil {
			c.tracker, _ = c.budget.(retry.BudgetTracker)
		}
		switch {
		case p.Breaker != nil && p.ShareBreaker:
			if sharedBrk[c.hop] == nil {
				sharedBrk[c.hop] = p.Breaker(env)
			}
			c.breaker = sharedBrk[c.hop]
		case p.Breaker != nil:
			c.breaker = p.Breaker(env)
		}
		if p.Limiter != nil {
			c.limiter = p.Limiter(env)
		}
	}

	r.rec.init(m)
	r.faultFrom, r.faultTo, _ = FaultWindow(m.Faults)
	r.arrive = make([]ArrivalStream, m.Clients)
	for i := range r.arrive {
		r.arrive[i] = m.Arrival.Stream(seed, i)
		if first := r.arrive[i].First(); first < m.Duration {
			s.Schedule(first, r.hArrive, int32(i), 0)
		}
	}
	return r
}

func (r *runner) onArrive(e Event) {
	if r.agents != nil {
		r.offer(e.Ref)
	} else {
		r.startCall(e.Ref, -1, 0)
	}
	if t := r.s.now + r.arrive[e.Ref].Next(); t < r.m.Duration {
		r.s.Schedule(t, r.hArrive, e.Ref, 0)
	}
}

func (r *runner) allocCall() int32 {
	if n := len(r.freeC); n > 0 {
		i := r.freeC[n-1]
		r.freeC = r.freeC[:n-1]
		return i
	}
	r.calls = append(r.calls, callRec{})
	return int32(len(r.calls) - 1)
}

func (r *runner) allocAtt() int32 {
	if n := len(r.freeA); n > 0 {
		i := r.freeA[n-1]
		r.freeA = r.freeA[:n-1]
		return i
	}
	r.atts = append(r.atts, attRec{})
	r.fns = append(r.fns, attFns{})
	return int32(len(r.atts) - 1)
}

func (r *runner) maybeFreeAtt(ai int32) {
	a := &r.atts[ai]
	if !a.clientOpen && !a.pathRef {
		if f := &r.fns[ai]; f.done != nil || f.lim != nil {
			*f = attFns{}
		}
		r.freeA = append(r.freeA, ai)
	}
}

func (r *runner) startCall(caller int32, parent int32, parentGen int64) {
	ci := r.allocCall()
	c := &r.calls[ci]
	c.gen++
	live := c.live[:0]
	*c = callRec{start: r.s.now, origin: r.s.now, gen: c.gen, parent: parent, parentGen: parentGen, caller: caller, live: live}
	if parent < 0 {
		r.seqs[caller]++
		c.key = splitmix(uint64(caller)<<32 ^ r.seqs[caller])
		r.rec.callStarted()
		if r.inFault(r.s.now) {
			r.rec.rec.FaultCalls++
		}
	} else {
		pa := &r.atts[parent]
		c.origin = pa.origin
		c.key = splitmix(pa.key ^ 0x5bd1e995)
		c.inRetries = pa.announce || pa.n > 1
		pa.child, pa.childGen = ci, c.gen
	}
	r.tryAttempt(ci, false)
}

// tryAttempt makes the call's next attempt, in retry.Do's order: breaker
// Allow, budget Start, the attempt. A hedge (hedged) is an attempt of the
// current round; any other starts a round, with a hedge timer of its own
// when the hop hedges (hedge.Do's armTimer).
func (r *runner) tryAttempt(ci int32, hedged bool) {
	cl := &r.calls[ci]
	c := &r.callers[cl.caller]
	h := &r.hops[c.hop]
	n := cl.attempts + 1
	isRetry := n > 1
	var done, lim func(error)
	if c.limiter != nil && cl.heldLim != nil {
		// The admission reserved before the wait that just ended.
		lim, cl.heldLim = cl.heldLim, nil
	} else if c.limiter != nil {
		// The call's deadline (MaxElapsed) bounds the limiter's wait, as
		// a context deadline bounds Acquire's.
		r.ask.has = h.pol.MaxElapsed > 0
		if r.ask.has {
			r.ask.dl = r.s.Clock().Now().Add(satAdd(cl.start, h.pol.MaxElapsed) - r.s.now)
		} else if _, ok := c.limiter.(reserver); !ok {
			// A limiter that could block (a throttle.Adaptive not built by
			// AdaptiveLimiter) would wait for virtual time that cannot
			// pass while it blocks: with no deadline of the call's, it is
			// asked with a deadline of now, so it refuses instead.
			r.ask.has, r.ask.dl = true, r.s.Clock().Now()
		}
		d, err := c.limiter.Acquire(&r.ask, isRetry)
		if err == nil {
			if rs, ok := c.limiter.(reserver); ok {
				if wait, waited := rs.reserved(); waited && wait > 0 {
					// Reserved: the attempt goes out when the wait ends.
					cl.heldLim = d
					r.s.After(wait, r.hRetry, ci, cl.gen)
					return
				}
			}
		}
		if err != nil {
			if c.hop == r.measure {
				r.rec.rec.LocalRejected++
			}
			if isRetry && c.tracker != nil {
				c.tracker.Refund()
			}
			r.finishCall(ci, false)
			return
		}
		lim = d
	}
	if c.breaker != nil {
		d, err := c.breaker.Allow()
		switch {
		case err == nil:
			done = d
		case h.pol.BreakerRetriesOnly && !isRetry:
			// First attempts go out whatever the breaker says.
		default:
			if lim != nil {
				lim(err)
			}
			if isRetry && c.tracker != nil {
				c.tracker.Refund()
			}
			if hedged {
				// A refused hedge: the running attempts go on, and the
				// call starts no further hedge.
				cl.stopHedging = true
				return
			}
			r.finishCall(ci, false)
			return
		}
	}
	if c.tracker != nil {
		c.tracker.Start(isRetry)
	}
	cl.attempts = n

	ai := r.allocAtt()
	a := &r.atts[ai]
	a.gen++
	cl.open++
	*a = attRec{key: splitmix(cl.key + uint64(n)), gen: a.gen, callGen: cl.gen, caller: cl.caller, sent: r.s.now, origin: cl.origin, call: ci, tier: c.hop, n: n, svc: -1, clientOpen: true,
		announce: AnnouncesRetry(int(n), h.pol.MaxAttempts, cl.inRetries), child: -1}
	if done != nil || lim != nil {
		r.fns[ai] = attFns{done: done, lim: lim}
	}
	if r.rec.rec.FaultTierAttempts != nil && r.inFault(cl.origin) {
		r.rec.rec.FaultTierAttempts[c.hop]++
	}
	if c.hop == r.measure {
		r.rec.attemptSent(r.s.now, isRetry)
		if r.inFault(cl.origin) {
			r.rec.rec.FaultAttempts++
		}
	}
	a.timeout = noTimeout
	if h.timeout > 0 {
		a.timeout = r.s.AfterLaneEvent(h.tlane, r.hTimeout, ai, a.gen)
	}
	cl.live = append(cl.live, ai)
	if h.pol.Hedge != nil {
		r.armHedge(ci, h, c, hedged)
	}
	t := &r.tiers[c.hop]
	for _, f := range t.faults {
		if f.Kind == FaultLoss && f.active(r.s.now) && r.draw(ai, drawLoss).Float64() < f.Prob {
			return // lost: only the timeout will end it
		}
	}
	a.pathRef = true
	r.s.After(r.leg(t, ai, drawRequestLeg), r.hReach, ai, 0)
}

// armHedge arms call ci's hedge timer after it sent an attempt, as hedge.Do
// does: an attempt that starts a round (the first, or a retry once every
// attempt of the previous round has failed) drops the previous round's
// timer and arms one of its own for the delay as of now (Adaptive's
// percentile once it has its samples), unless the call has no hedge left
// (MaxHedges), a refusal stopped its hedging, the hop has a Limiter or the
// attempt is the last MaxAttempts allows; a hedge re-arms the round's
// timer for the round's delay while hedges and attempts remain.
func (r *runner) armHedge(ci int32, h *hop, c *caller, hedged bool) {
	cl := &r.calls[ci]
	p := &h.pol
	maxH := hedgeMax(p.Hedge)
	if hedged {
		if int(cl.hedges) < maxH && (p.MaxAttempts <= 0 || int(cl.attempts) < p.MaxAttempts) {
			r.s.After(cl.roundDelay, r.hHedge, ci, cl.timer)
		}
		return
	}
	cl.timer = 0
	if int(cl.hedges) >= maxH || cl.stopHedging || c.limiter != nil || p.MaxAttempts > 0 && int(cl.attempts) >= p.MaxAttempts {
		return
	}
	cl.roundDelay = r.hedgeDelay(h)
	r.timers++
	cl.timer = r.timers
	r.s.After(cl.roundDelay, r.hHedge, ci, cl.timer)
}

// CapacityWorkers returns the workers that serve during a capacity fault
// of factor on a tier of workers: factor × workers rounded to the nearest
// whole worker, at least one when factor > 0 (none at 0). The live lab
// cuts its concurrency by the same rule.
func CapacityWorkers(workers int, factor float64) int {
	if factor <= 0 {
		return 0
	}
	return max(1, int(math.Round(factor*float64(workers))))
}

// inFault reports whether a client call started at t started inside the
// fault window.
func (r *runner) inFault(t time.Duration) bool { return t >= r.faultFrom && t < r.faultTo }

// Kinds of draws about an attempt (see runner.draw).
const (
	drawLoss uint64 = iota + 1
	drawRequestLeg
	drawService
	drawFail
	drawReplyLeg
	drawReplyLoss
)

// draw returns the generator for draws of kind about attempt ai: seeded
// from the run's seed, the attempt's key and the kind alone, so that the
// same attempt draws the same values whatever happened before it.
func (r *runner) draw(ai int32, kind uint64) *rand.Rand {
	r.crn.Seed(r.seed^kind*0x9e3779b97f4a7c15, r.atts[ai].key)
	return r.crnRand
}

// leg draws one network leg's latency into tier t for attempt ai, with
// latency faults.
func (r *runner) leg(t *tierState, ai int32, kind uint64) time.Duration {
	rng := r.draw(ai, kind)
	d := t.cfg.Latency.Sample(rng)
	for _, f := range t.faults {
		if f.Kind == FaultLatency && f.active(r.s.now) {
			d += f.Extra.Sample(rng)
		}
	}
	return d
}

func (r *runner) onReach(e Event) {
	ai := e.Ref
	a := &r.atts[ai]
	if a.cancelled {
		// Its caller cancelled it on the way: the tier never serves it.
		a.pathRef = false
		a.stage = stageReplied
		r.maybeFreeAtt(ai)
		return
	}
	ti := a.tier
	t := &r.tiers[ti]
	for _, f := range t.faults {
		if !f.active(r.s.now) {
			continue
		}
		switch f.Kind {
		case FaultUnavailable, FaultRestart:
			r.reply(ai, codeUnavailable)
			return
		case FaultHang:
			a.pathRef = false
			a.stage = stageReplied
			r.maybeFreeAtt(ai)
			return
		}
	}
	switch {
	case t.busy < t.eff:
		r.startService(ti, ai)
	case t.cfg.Queue == 0 || t.queue.len() < t.cfg.Queue: // 0: unlimited; -1: none
		t.queue.push(ai)
		a.stage = stageQueued
		if ti == r.measure {
			r.rec.server(r.s.now, t.busy, t.queue.len())
		}
	case r.hops[ti].pol.OverloadMarker:
		r.reply(ai, codeMarked)
	default:
		r.reply(ai, codeOverloaded)
	}
}

func (r *runner) startService(ti int32, ai int32) {
	t := &r.tiers[ti]
	t.busy++
	a := &r.atts[ai]
	a.stage = stageService
	a.svc = int32(len(t.inService))
	t.inService = append(t.inService, ai)
	if ti == r.measure {
		r.rec.server(r.s.now, t.busy, t.queue.len())
	}
	rng := r.draw(ai, drawService)
	var d time.Duration
	if hk := r.m.hooks; hk != nil && hk.service != nil {
		d, a.scriptFail = hk.service(r.s.now, int(ti), int(a.n))
	} else if t.cfg.StragglerProb > 0 && rng.Float64() < t.cfg.StragglerProb {
		d = t.cfg.Straggler.Sample(rng)
	} else {
		d = t.cfg.Service.Sample(rng)
	}
	if f := t.cfg.Degrade.factor(t.queue.len(), t.cfg.Workers); f != 1 {
		d = time.Duration(float64(d) * f)
	}
	for _, f := range t.faults {
		if f.Kind == FaultSlow && f.active(r.s.now) {
			d += f.Extra.Sample(rng)
		}
	}
	if t.svcLaned && d == t.svcConst {
		r.s.AfterLane(t.svcLane, r.hServed, ai, a.gen) // After(d), cheaper
		return
	}
	r.s.After(d, r.hServed, ai, a.gen)
}

func (r *runner) onServed(e Event) {
	ai := e.Ref
	if a := &r.atts[ai]; a.gen != e.Arg || a.dropped {
		return // a restart dropped it
	}
	ti := r.atts[ai].tier
	t := &r.tiers[ti]
	// The failure draws, from drawFail's generator, seeded only when
	// there is one to draw (the seeding makes the same draws whenever it
	// happens).
	var rng *rand.Rand
	fail := false
	if t.cfg.FailProb > 0 {
		rng = r.draw(ai, drawFail)
		fail = rng.Float64() < t.cfg.FailProb
	}
	fail = fail || r.atts[ai].scriptFail
	for _, f := range t.faults {
		if f.Kind == FaultErrors && f.active(r.s.now) {
			if rng == nil {
				rng = r.draw(ai, drawFail)
			}
			if rng.Float64() < f.Prob {
				fail = true
			}
		}
	}
	if fail {
		r.finishService(ai, codeServer)
		return
	}
	if int(ti) < len(r.tiers)-1 {
		// The worker stays busy while this tier calls the next one.
		r.startCall(int32(r.m.Clients)+ti, ai, r.atts[ai].gen)
		return
	}
	r.finishService(ai, codeOK)
}

// finishService frees the worker holding attempt ai, replies and takes the
// next request from the queue.
func (r *runner) finishService(ai int32, code int64) {
	ti := r.atts[ai].tier
	r.release(ai)
	r.reply(ai, code)
	r.dispatch(ti)
}

// release frees the worker that attempt ai holds.
func (r *runner) release(ai int32) {
	a := &r.atts[ai]
	t := &r.tiers[a.tier]
	t.busy--
	last := t.inService[len(t.inService)-1]
	t.inService[a.svc] = last
	r.atts[last].svc = a.svc
	t.inService = t.inService[:len(t.inService)-1]
	a.svc = -1
}

// onRestart drops everything the tier holds: its callers hear
// ErrUnavailable at once; work in progress is abandoned.
func (r *runner) onRestart(e Event) {
	ti := e.Ref
	t := &r.tiers[ti]
	for len(t.inService) > 0 {
		ai := t.inService[len(t.inService)-1]
		r.release(ai)
		r.atts[ai].dropped = true
		r.reply(ai, codeUnavailable)
	}
	for t.queue.len() > 0 {
		r.reply(t.queue.pop(), codeUnavailable)
	}
	if ti == r.measure {
		r.rec.server(r.s.now, t.busy, t.queue.len())
	}
}

func (r *runner) dispatch(ti int32) {
	t := &r.tiers[ti]
	for t.busy < t.eff && t.queue.len() > 0 {
		r.startService(ti, t.queue.pop())
	}
	if ti == r.measure {
		r.rec.server(r.s.now, t.busy, t.queue.len())
	}
}

func (r *runner) reply(ai int32, code int64) {
	r.atts[ai].stage = stageReplied
	t := &r.tiers[r.atts[ai].tier]
	for _, f := range t.faults {
		if f.Kind == FaultReplyLoss && f.active(r.s.now) && r.draw(ai, drawReplyLoss).Float64() < f.Prob {
			// Lost on the way back: only the caller's timeout ends it.
			a := &r.atts[ai]
			a.pathRef = false
			r.maybeFreeAtt(ai)
			return
		}
	}
	r.s.After(r.leg(t, ai, drawReplyLeg), r.hReply, ai, code)
}

func (r *runner) onReply(e Event) {
	ai := e.Ref
	a := &r.atts[ai]
	a.pathRef = false
	if a.clientOpen {
		r.attemptEnded(ai, codeErr[e.Arg])
	}
	r.maybeFreeAtt(ai)
}

func (r *runner) onTimeout(e Event) {
	a := &r.atts[e.Ref]
	if a.gen != e.Arg || !a.clientOpen {
		return
	}
	r.attemptEnded(e.Ref, retry.ErrAttemptTimeout)
	r.maybeFreeAtt(e.Ref)
}

func (r *runner) onCapacity(e Event) {
	t := &r.tiers[e.Ref]
	w := t.cfg.Workers
	if w == 0 {
		return
	}
	eff := w
	for _, f := range t.faults {
		if f.Kind == FaultCapacity && f.active(r.s.now) {
			eff = min(eff, CapacityWorkers(w, f.Factor))
		}
	}
	t.eff = eff
	r.dispatch(e.Ref)
}

// attemptEnded handles the end of an attempt as the caller sees it, in
// retry.Do's order: breaker done, budget Record; on failure the attempt
// limit, the backoff, the deadline, breaker Ready, budget Withdraw. With
// hedging it follows hedge.Do: the first success wins and cancels the
// attempts still running; a failure while others run waits for them; the
// overload marker stops further hedges and retries; once every attempt
// of the round has failed, the round's timer goes and the call retries as
// retry.Call.Next would, counting every attempt begun (hedges included).
func (r *runner) attemptEnded(ai int32, err error) {
	a := &r.atts[ai]
	a.clientOpen = false
	r.s.Skip(a.timeout) // onTimeout would return at once
	ci := a.call
	cl := &r.calls[ci]
	if cl.gen != a.callGen {
		// Its call has ended without it (cancelled before it answered).
		r.abandoned(ai)
		return
	}
	cl.open--
	c := &r.callers[cl.caller]
	h := &r.hops[c.hop]
	if c.hop == r.measure {
		r.rec.attemptEnded(r.s.now, err == nil)
	}
	if c.breaker != nil || c.limiter != nil { // else the attempt holds no function
		if f := &r.fns[ai]; f.done != nil {
			f.done(err)
			f.done = nil
		}
		if f := &r.fns[ai]; f.lim != nil {
			f.lim(err)
			f.lim = nil
		}
	}
	// The overload marker is never retried (retry.Call.Next classifies
	// it first), and a budget hears it marked Permanent.
	marked := err != nil && retry.IsOverloaded(err)
	if c.budget != nil {
		if marked {
			c.budget.Record(a.n > 1, errMarkedBudget)
		} else {
			c.budget.Record(a.n > 1, err)
		}
	}
	if err == nil {
		if h.ad != nil {
			h.ad.ObserveAt(r.s.Clock().Now(), r.s.now-a.sent)
		}
		if cl.open > 0 {
			r.cancelLosers(ci, ai)
		}
		r.finishCall(ci, true)
		return
	}
	if marked {
		// Pushback: no further hedge and no retry, but the copies in
		// flight may still answer.
		cl.marked, cl.stopHedging = true, true
	}
	if cl.open > 0 {
		return // a hedge still runs: wait for it
	}
	cl.timer = 0 // the round is over, and its hedge timer with it
	if cl.marked {
		r.finishCall(ci, false)
		return
	}
	n := cl.attempts // retry.Call counts every attempt begun, hedges too
	p := &h.pol
	if p.MaxAttempts > 0 && int(n) >= p.MaxAttempts {
		r.finishCall(ci, false)
		return
	}
	if p.LayerRule && cl.inRetries {
		// retry.NestedOneLayer: the inbound caller retries the chain.
		r.finishCall(ci, false)
		return
	}
	var delay time.Duration
	if h.strat != nil {
		delay = h.strat.Delay(int(n), cl.prev)
		cl.prev = delay
	}
	if p.MaxElapsed > 0 && satAdd(satAdd(r.s.now, max(delay, 0)), max(p.MinAttemptTime, 0)) >= satAdd(cl.start, p.MaxElapsed) {
		r.finishCall(ci, false)
		return
	}
	if c.breaker != nil && c.breaker.Ready() != nil {
		r.finishCall(ci, false)
		return
	}
	if c.budget != nil && !c.budget.Withdraw(err) {
		r.finishCall(ci, false)
		return
	}
	r.s.After(delay, r.hRetry, ci, cl.gen)
}

// cancelLosers cancels the attempts of call ci still running when attempt
// won answered, as hedge.Do cancels its losers' contexts: see cancelAttempt.
func (r *runner) cancelLosers(ci, won int32) {
	cl := &r.calls[ci]
	for _, o := range cl.live {
		if a := &r.atts[o]; o != won && a.clientOpen && a.call == ci && a.callGen == cl.gen {
			r.cancelAttempt(o)
		}
	}
}

// cancelAttempt cancels attempt ai, as a cancelled context does: its
// caller stops waiting for it (its breaker, limiter and budget hear the
// cancellation, which counts against none of them), and the tier gives
// up on it: a request still on its way is dropped when it arrives, a
// queued one leaves the queue, and one in service frees its worker and
// cancels the call its tier makes downstream for it (hedge.Transport
// cancels a loser's request; a server handler's context ends with it).
func (r *runner) cancelAttempt(ai int32) {
	a := &r.atts[ai]
	a.clientOpen = false
	r.s.Skip(a.timeout) // onTimeout would return at once
	r.calls[a.call].open--
	if a.tier == r.measure {
		r.rec.attemptCancelled(r.s.now)
	}
	if hk := r.m.hooks; hk != nil && hk.cancelled != nil {
		hk.cancelled(r.s.now, int(a.tier), int(a.n))
	}
	r.abandoned(ai)
	t := &r.tiers[a.tier]
	switch a.stage {
	case stageSent:
		if a.pathRef {
			a.cancelled = true // onReach drops it
		}
	case stageQueued:
		t.queue.remove(ai)
		a.pathRef = false
		a.stage = stageReplied
		if a.tier == r.measure {
			r.rec.server(r.s.now, t.busy, t.queue.len())
		}
	case stageService:
		if a.child >= 0 {
			r.cancelCall(a.child, a.childGen)
		}
		r.release(ai)
		a.dropped, a.pathRef = true, false
		a.stage = stageReplied
		r.dispatch(a.tier)
	}
	r.maybeFreeAtt(ai)
}

// cancelCall ends call ci (of generation gen), which a tier makes for an
// attempt its caller cancelled: its running attempts are cancelled, its
// pending retry or hedge never comes, and its result goes nowhere.
func (r *runner) cancelCall(ci int32, gen int64) {
	cl := &r.calls[ci]
	if cl.gen != gen {
		return
	}
	for _, o := range cl.live {
		if a := &r.atts[o]; a.clientOpen && a.call == ci && a.callGen == gen {
			r.cancelAttempt(o)
		}
	}
	if cl.heldLim != nil {
		cl.heldLim(errWaitCancelled)
		cl.heldLim = nil
	}
	cl.gen++
	r.freeC = append(r.freeC, ci)
}

// abandoned reports a cancelled attempt to its caller's breaker, limiter
// and budget as cancelled (retry.Call hears a hedge's loser so: no
// failure).
func (r *runner) abandoned(ai int32) {
	a := &r.atts[ai]
	c := &r.callers[a.caller]
	if c.breaker != nil || c.limiter != nil { // else the attempt holds no function
		if f := &r.fns[ai]; f.done != nil {
			f.done(context.Canceled)
			f.done = nil
		}
		if f := &r.fns[ai]; f.lim != nil {
			f.lim(context.Canceled)
			f.lim = nil
		}
	}
	if c.budget != nil {
		c.budget.Record(a.n > 1, context.Canceled)
	}
}

// hedgeMax is the hedges a call may start: hedge.Hedger's MaxHedges rule
// (0: DefaultMaxHedges; negative, NoHedges: none).
func hedgeMax(hg *Hedge) int {
	switch {
	case hg.MaxHedges < 0:
		return 0
	case hg.MaxHedges == 0:
		return hedge.DefaultMaxHedges
	}
	return hg.MaxHedges
}

// hedgeDelay is the hedge delay of a round starting now on hop h: the
// Adaptive percentile once it has its samples, else the fixed Delay.
func (r *runner) hedgeDelay(h *hop) time.Duration {
	if h.ad != nil {
		if d, ok := h.ad.DelayAt(r.s.Clock().Now()); ok {
			return d
		}
	}
	if h.pol.Hedge.Delay > 0 {
		return h.pol.Hedge.Delay
	}
	return hedge.DefaultDelay
}

// onHedge is the round timer of call e.Ref going off: it sends a hedge
// when the round still waits and its limits, the layer rule, the breaker
// and the budget allow, in the order hedge's hedgeLocked asks them; a
// refusal stops the call's hedging.
func (r *runner) onHedge(e Event) {
	ci := e.Ref
	cl := &r.calls[ci]
	if cl.timer == 0 || cl.timer != e.Arg || cl.open == 0 {
		return // a stale timer: its round is over
	}
	c := &r.callers[cl.caller]
	h := &r.hops[c.hop]
	p := &h.pol
	if cl.stopHedging || int(cl.hedges) >= hedgeMax(p.Hedge) {
		return
	}
	refused := p.MaxAttempts > 0 && int(cl.attempts) >= p.MaxAttempts ||
		p.LayerRule && cl.inRetries || // retry.Policy.NestedForbids
		c.limiter != nil ||
		c.breaker != nil && c.breaker.Ready() != nil ||
		c.budget != nil && !c.budget.Withdraw(hedge.ErrHedge)
	if refused {
		cl.stopHedging = true
		return
	}
	cl.hedges++
	r.tryAttempt(ci, true)
}

func (r *runner) onRetry(e Event) {
	if r.calls[e.Ref].gen != e.Arg {
		return
	}
	r.tryAttempt(e.Ref, false)
}

func (r *runner) finishCall(ci int32, ok bool) {
	cl := &r.calls[ci]
	parent, parentGen, start, marked := cl.parent, cl.parentGen, cl.start, cl.marked
	cl.gen++ // any stale event for this call is ignored from now on
	r.freeC = append(r.freeC, ci)
	if parent < 0 {
		r.rec.callEnded(r.s.now, r.s.now-start, ok)
		if r.agents != nil {
			r.delivered(cl.caller, ok)
		}
		return
	}
	if a := &r.atts[parent]; a.gen != parentGen || a.dropped {
		return // the request this call served was dropped by a restart
	}
	code := codeOK
	switch {
	case !ok && marked:
		code = codeMarked // passed up, as the server middleware does
	case !ok:
		code = codeServer
	}
	r.finishService(parent, code)
}

// ring is a FIFO of attempt indices. Its buffer's length is 0 or a power
// of two (16, 32, ...), so that a position wraps with a mask.
type ring struct {
	buf        []int32
	head, size int
}

func (q *ring) len() int { return q.size }

func (q *ring) push(v int32) {
	if q.size == len(q.buf) {
		nb := make([]int32, max(16, 2*len(q.buf)))
		for i := 0; i < q.size; i++ {
			nb[i] = q.buf[(q.head+i)&(len(q.buf)-1)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)&(len(q.buf)-1)] = v
	q.size++
}

// remove takes v out of the queue, keeping the order of the rest.
func (q *ring) remove(v int32) {
	mask := len(q.buf) - 1
	for i := 0; i < q.size; i++ {
		if q.buf[(q.head+i)&mask] != v {
			continue
		}
		for j := i; j < q.size-1; j++ {
			q.buf[(q.head+j)&mask] = q.buf[(q.head+j+1)&mask]
		}
		q.size--
		return
	}
}

func (q *ring) pop() int32 {
	v := q.buf[q.head]
	q.head = (q.head + 1) & (len(q.buf) - 1)
	q.size--
	return v
}
