package faultinject

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// ErrClosed is returned by the client side for a request that was hanging
// when the Injector was closed.
var ErrClosed = errors.New("faultinject: injector closed")

// Config configures an Injector. The zero value injects nothing, on the
// real clock, with seed 0.
type Config struct {
	// Rules are the initial rules. New panics if Rules.Validate rejects them.
	Rules Rules
	// Seed seeds the random draws (which fault, how much jitter). The same
	// seed, rules and order of requests give the same decisions. The zero
	// value is a seed like any other, so runs are reproducible by default.
	Seed uint64
	// Clock measures latency, queue timeouts and the outage schedule.
	// nil: clock.Real.
	Clock clock.Clock
	// Epoch is the instant the outage schedule is measured from.
	// Zero: Clock.Now() when New is called.
	Epoch time.Time
	// OnEvent, when set, is called synchronously for every request, with
	// what the Injector does with it (see Event). It must be quick and safe
	// for concurrent use.
	//
	// If it panics, the panic goes on to the request's caller (the server
	// goroutine running the Handler, or RoundTrip's caller) unchanged, and
	// the request gives back all it held first: its place in the queue,
	// its slot, its Hanging count; the client side closes its body. A
	// request whose Queue event panicked has no final action and is
	// counted in Counters.Panicked; one whose final event panicked is
	// counted by that action but not carried out. A panicking Clock is
	// handled the same way.
	OnEvent func(Event)
}

// Injector injects faults into HTTP traffic, on the server side as a
// middleware (Handler) and on the client side as a RoundTripper
// (Transport). Its rules can be replaced at any time with Update; a request
// uses the rules in force when it arrived, except the Limit: the one in
// force when it reaches the limiter decides whether it is admitted, queued
// or rejected, and the one in force when a slot is freed decides who gets
// it. Snapshot reports what it injected.
//
// An Injector is safe for concurrent use. A nil *Injector injects nothing:
// Handler and Transport return their argument unchanged, Update and
// SetEpoch change nothing, Snapshot returns zero counters.
type Injector struct {
	clk     clock.Clock
	onEvent func(Event)

	state  atomic.Pointer[state]
	update sync.Mutex // serialises writers of state

	rmu sync.Mutex // guards rnd
	rnd *rand.Rand

	lim    limiter
	c      counters
	closed atomic.Bool
	done   chan struct{}
	once   sync.Once
}

// state is immutable once published.
type state struct {
	rules Rules
	epoch time.Time
	// faultSum is the sum of the three percentages (0: no fault draw).
	faultSum float64
}

// New returns an Injector configured by cfg. It panics if cfg.Rules is
// invalid (see Rules.Validate).
func New(cfg Config) *Injector {
	if err := cfg.Rules.Validate(); err != nil {
		panic(err.Error())
	}
	clk := clock.Or(cfg.Clock)
	epoch := cfg.Epoch
	if epoch.IsZero() {
		epoch = clk.Now()
	}
	in := &Injector{
		clk:     clk,
		onEvent: cfg.OnEvent,
		rnd:     rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		done:    make(chan struct{}),
	}
	st := newState(cfg.Rules, epoch)
	in.state.Store(st)
	in.lim.limit = &st.rules.Limit
	return in
}

func newState(r Rules, epoch time.Time) *state {
	r = r.Clone()
	// Summed in the order decide compares, so the bands line up exactly.
	return &state{rules: r, epoch: epoch, faultSum: r.ResetPercent + r.HangPercent + r.Abort.Percent}
}

// Update replaces the rules, atomically: each request sees either the old
// or the new rules, never a mix. Invalid rules are refused with an error
// wrapping ErrInvalidRules and the old ones stay. A raised Limit admits
// queued requests at once; a lowered one lets running requests finish.
// The outage schedule keeps its epoch (see SetEpoch and UpdateWithEpoch).
//
// The rule change and the limiter's accounting are one linearizable step:
// concurrent Updates, and Updates racing requests that arrive or finish,
// never admit a request beyond the Limit in force at the moment it is
// admitted.
func (in *Injector) Update(r Rules) error {
	if err := r.Validate(); err != nil || in == nil {
		return err
	}
	in.update.Lock()
	defer in.update.Unlock()
	in.publish(newState(r, in.state.Load().epoch))
	return nil
}

// UpdateWithEpoch is Update that also moves the start of the outage
// schedule to epoch (see SetEpoch), in the same atomic step: no request
// sees the new rules measured from the old epoch, or the old rules from
// the new one. Use it with the injector clock's Now() to replace the rules
// and start their outage schedule afresh.
func (in *Injector) UpdateWithEpoch(r Rules, epoch time.Time) error {
	if err := r.Validate(); err != nil || in == nil {
		return err
	}
	in.update.Lock()
	defer in.update.Unlock()
	in.publish(newState(r, epoch))
	return nil
}

// publish puts st in force together with its Limit. in.update must be held.
func (in *Injector) publish(st *state) {
	in.lim.setLimit(&st.rules.Limit, func() { in.state.Store(st) })
}

// Rules returns a copy of the rules in force.
func (in *Injector) Rules() Rules {
	if in == nil {
		return Rules{}
	}
	return in.state.Load().rules.Clone()
}

// Epoch returns the instant the outage schedule is measured from.
func (in *Injector) Epoch() time.Time {
	if in == nil {
		return time.Time{}
	}
	return in.state.Load().epoch
}

// SetEpoch moves the start of the outage schedule to t, e.g. to the
// injector clock's Now() to start a schedule afresh.
func (in *Injector) SetEpoch(t time.Time) {
	if in == nil {
		return
	}
	in.update.Lock()
	old := in.state.Load()
	st := *old
	st.epoch = t
	in.state.Store(&st)
	in.update.Unlock()
}

// Outage returns the outage window in force now, if any.
func (in *Injector) Outage() (Window, bool) {
	if in == nil {
		return Window{}, false
	}
	st := in.state.Load()
	if w := st.rules.outageAt(in.clk.Since(st.epoch)); w != nil {
		return *w, true
	}
	return Window{}, false
}

// Snapshot returns the counters and gauges.
func (in *Injector) Snapshot() Counters {
	if in == nil {
		return Counters{}
	}
	c := in.c.snapshot()
	in.lim.gauges(&c)
	return c
}

// Close releases every request the Injector holds: hanging requests end
// (the server side answers 503, the client side returns ErrClosed), queued
// ones are rejected and delays end early. Afterwards every request passes
// through untouched. Close it before shutting down a server whose handler
// it wraps, so that Shutdown need not wait for hung requests' callers to
// give up. Close is idempotent.
func (in *Injector) Close() {
	if in == nil {
		return
	}
	in.once.Do(func() {
		in.closed.Store(true)
		close(in.done)
	})
}

// verdict is the Injector's decision for one request.
type verdict struct {
	action     Action
	outage     bool
	slot       bool // holds a limiter slot: release it when done
	status     int
	retryAfter time.Duration
	delay      time.Duration
	waited     time.Duration
}

// kind names an Abort or Reject verdict in the HeaderFault header and the
// made-up body: "outage" when an outage window decided it, else the action.
func (v *verdict) kind() string {
	if v.outage {
		return "outage"
	}
	return v.action.String()
}

// decide runs the request through outages, the limit, the random draw and
// the latency, and returns what to do with it. The caller must call settle,
// then carry out the action, then release the slot if verdict.slot.
//
// If a callback panics inside decide (OnEvent on the Queue event, the
// Clock), the request gives back what it held — it leaves the queue, its
// slot is freed — and the panic goes on.
//
// pf, on the server side, reads the body ahead before the request waits
// (see prefetch); the client side passes nil.
func (in *Injector) decide(ctx context.Context, r *http.Request, pf *prefetch) verdict {
	in.c.requests.Add(1)
	if in.closed.Load() {
		return verdict{action: Pass}
	}
	// h gives back what the request holds (a place in the queue, a slot)
	// and counts it as Panicked if a callback panics before decide
	// returns: decide marks it done at every return.
	h := hold{in: in}
	defer h.unwind()
	st := in.state.Load()
	rules := &st.rules

	if len(rules.Outages) > 0 {
		if w := rules.outageAt(in.clk.Since(st.epoch)); w != nil {
			in.c.outage.Add(1)
			h.done = true
			return verdict{action: w.action(), outage: true, status: statusOr(w.Status), retryAfter: w.RetryAfter}
		}
	}

	var v verdict
	e, w, lim := in.lim.enter()
	if e == full {
		h.done = true
		return verdict{action: Reject, status: statusOr(lim.Status), retryAfter: lim.RetryAfter}
	}
	h.w, h.slot = w, e == admitted
	if e == queued {
		in.c.queued.Add(1)
		in.emit(Event{Action: Queue, Request: r})
		pf.start()
		start := in.clk.Now()
		a, granted := in.await(ctx, w, lim.QueueTimeout)
		h.w, h.slot = nil, granted
		if granted && a == Cancel {
			h.slot = false
			in.release()
		}
		v.waited = in.clk.Since(start)
		if a != Pass {
			h.done = true
			return verdict{action: a, waited: v.waited, status: statusOr(lim.Status), retryAfter: lim.RetryAfter}
		}
	}
	v.slot = true

	var x float64
	var jitter time.Duration
	if st.faultSum > 0 || rules.Jitter > 0 {
		in.rmu.Lock()
		if st.faultSum > 0 {
			x = in.rnd.Float64() * 100
		}
		if rules.Jitter > 0 {
			jitter = time.Duration(in.rnd.Uint64N(uint64(rules.Jitter) + 1))
		}
		in.rmu.Unlock()
		switch {
		case st.faultSum == 0:
		case x < rules.ResetPercent:
			v.action = Reset
		case x < rules.ResetPercent+rules.HangPercent:
			v.action = Hang
		case x < st.faultSum:
			v.action = Abort
			v.status = statusOr(rules.Abort.Status)
			v.retryAfter = rules.Abort.RetryAfter
		}
	}

	if d := rules.Latency + jitter; d > 0 {
		in.c.delayed.Add(1)
		pf.start()
		waited, ok := in.sleep(ctx, d)
		in.c.delayTotal.Add(int64(waited))
		v.delay = waited
		if !ok {
			v.action = Cancel
		}
	}
	h.done = true // the slot is the caller's now, with v.slot
	return v
}

// hold is what a request holds inside decide: a waiter in the limiter's
// queue, or a slot. decide sets done at every return, so unwind does
// something only when a callback panicked: it gives back what the
// request holds and counts it as Panicked.
type hold struct {
	in   *Injector
	w    *waiter // queued: leave the queue (releasing a slot granted meanwhile)
	slot bool    // holds a slot: release it
	done bool    // decide returned
}

func (h *hold) unwind() {
	if !h.done {
		h.giveBack()
	}
}

// giveBack is unwind's work after a panic, apart so that unwind inlines.
func (h *hold) giveBack() {
	h.in.c.panicked.Add(1)
	if h.w != nil && h.in.lim.leave(h.w) {
		h.slot = true // granted meanwhile
	}
	if h.slot {
		h.in.release()
	}
}

// await waits for w's slot. It returns Pass when the slot is granted,
// Cancel when ctx ends first, Reject when the timeout passes or the
// Injector is closed. granted reports whether the slot is the caller's:
// always with Pass, and with Cancel when it was granted as ctx ended (the
// caller must release it). If it panics (the Clock), w may still be queued
// or granted: the caller must leave it.
func (in *Injector) await(ctx context.Context, w *waiter, timeout time.Duration) (a Action, granted bool) {
	var expired <-chan time.Time
	if timeout > 0 {
		t := in.clk.NewTimer(timeout)
		defer t.Stop()
		expired = t.C()
	}
	select {
	case <-w.ready:
		return Pass, true
	case <-ctx.Done():
		a = Cancel
	case <-expired:
		a = Reject
	case <-in.done:
		a = Reject
	}
	if in.lim.leave(w) { // granted meanwhile: the slot is ours
		if a != Cancel {
			return Pass, true
		}
		return Cancel, true
	}
	return a, false
}

// sleep waits d on the clock. It reports the time waited and false when
// ctx ended first; Close ends the wait early with true.
func (in *Injector) sleep(ctx context.Context, d time.Duration) (time.Duration, bool) {
	start := in.clk.Now()
	t := in.clk.NewTimer(d)
	defer t.Stop() // also when the Clock panics; a fired timer's Stop does nothing
	select {
	case <-t.C():
		return d, true
	case <-ctx.Done():
		return in.clk.Since(start), false
	case <-in.done:
		return in.clk.Since(start), true
	}
}

// hang blocks until ctx ends or the Injector is closed; it reports whether
// the Injector was closed. settle has counted the request as hanging.
func (in *Injector) hang(ctx context.Context) (closed bool) {
	defer in.c.hanging.Add(-1)
	select {
	case <-ctx.Done():
		return false
	case <-in.done:
		return true
	}
}

// settle counts v's final action and reports it to OnEvent. A Hang counts
// as hanging from here, so that whoever sees its event sees it hanging;
// hang, which must follow, ends the count — or settle itself, when OnEvent
// panics (the request then does not hang).
func (in *Injector) settle(v *verdict, r *http.Request) {
	in.c.byAction[v.action].Add(1)
	if v.action == Hang {
		in.c.hanging.Add(1)
		emitted := false
		defer func() {
			if !emitted {
				in.c.hanging.Add(-1)
			}
		}()
		in.emit(Event{Action: v.action, Outage: v.outage, Delay: v.delay, Waited: v.waited, Request: r})
		emitted = true
		return
	}
	in.emit(Event{Action: v.action, Outage: v.outage, Delay: v.delay, Waited: v.waited, Request: r})
}

func (in *Injector) emit(e Event) {
	if in.onEvent != nil {
		in.onEvent(e)
	}
}

// release frees a limiter slot under the limit now in force.
func (in *Injector) release() {
	in.lim.release()
}
