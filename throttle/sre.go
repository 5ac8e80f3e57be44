package throttle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/internal/stripe"
)

// Defaults for zero SREConfig fields.
const (
	DefaultWindow       = 2 * time.Minute // SREConfig.Window, the SRE book's
	DefaultBuckets      = 12              // SREConfig.Buckets: 10 s each with DefaultWindow
	DefaultK            = 2.0             // SREConfig.K, the SRE book's
	DefaultMaxRejection = 1.0             // SREConfig.MaxRejection: the formula alone
	DefaultMinRequests  = 16              // SREConfig.MinRequests
)

// Limits Validate enforces on SREConfig.
const (
	MaxBuckets = 1000
	MinK       = 1.0 // below 1 a healthy backend's traffic would be shed
	MaxK       = 1e6 // beyond it the throttler never rejects anything
	minWidth   = time.Millisecond
)

// SREConfig configures an SRE throttler. Every zero field takes its documented
// default: the zero SREConfig is the SRE book's client-side throttling with
// K = 2 over the last two minutes.
type SREConfig struct {
	// Window is how far back requests and accepts are counted.
	// 0: DefaultWindow (2 minutes).
	Window time.Duration

	// Buckets is the number of slices the window is split into; a slice's
	// counts are forgotten at once when it leaves the window. Each spans
	// Window/Buckets (at least 1 ms). 0: DefaultBuckets (12).
	Buckets int

	// K is the multiplier of the accepts: the throttler lets through about
	// K requests per request the backend accepts, and rejects the rest
	// locally. 2 wastes some of the backend's capacity on rejected
	// requests and reacts gently; 1.1 rejects sooner. At least MinK (1).
	// 0: DefaultK (2).
	K float64

	// MaxRejection caps the local rejection probability, a fraction in
	// (0, 1]: with 0.9, at least one request in ten is sent whatever the
	// counts (Envoy's admission control caps at 0.8 by default).
	// 0: DefaultMaxRejection (1, the formula alone, which stays below 1).
	MaxRejection float64

	// MinRequests is the least number of requests the window must hold
	// before any is rejected. Requests are counted before they are sent,
	// so a client that starts with C calls in flight counts C requests
	// and no accept yet: by the formula alone (MinRequests negative) its
	// second concurrent call is rejected with probability 1/2. The floor
	// lets a cold client through its first calls; under a sustained
	// overload it is reached within a few requests. 0: DefaultMinRequests
	// (16). Negative: none.
	MinRequests int

	// Overload reports whether an attempt's error is an overload signal of
	// the backend (the request was not accepted). nil: IsOverload (HTTP
	// 429 and 503, errors implementing OverloadReporter, the retry
	// package's overload marker). If it panics, the panic goes on to
	// done's caller and the request stays counted without an accept, as a
	// rejected one is.
	Overload func(error) bool

	// Clock tells the time. nil: clock.Real.
	Clock clock.Clock

	// Rand draws the rejections. nil: math/rand/v2's generator. Any source
	// may be shared (see backoff.Uniform); a source from backoff.NewSource
	// is drawn from without a lock. If it panics, the panic goes on to
	// Allow's caller and the request stays counted, as a rejected one is.
	Rand rand.Source
}

// Validate reports whether c can make a SRE. Errors wrap
// ErrInvalidConfig.
func (c SREConfig) Validate() error {
	_, err := c.resolve()
	return err
}

type params struct {
	width    time.Duration
	buckets  int
	k, maxP  float64
	minReq   uint64
	overload func(error) bool
	clock    clock.Clock
	rand     rand.Source
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}

func (c SREConfig) resolve() (params, error) {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case c.Window < 0:
		return params{}, invalid("SREConfig.Window is %v, want >= 0", c.Window)
	case c.Buckets < 0 || c.Buckets > MaxBuckets:
		return params{}, invalid("SREConfig.Buckets is %d, want 0 to %d", c.Buckets, MaxBuckets)
	case !finite(c.K) || c.K != 0 && (c.K < MinK || c.K > MaxK):
		return params{}, invalid("SREConfig.K is %v, want 0 (default 2) or a number from %v to %v", c.K, MinK, MaxK)
	case !finite(c.MaxRejection) || c.MaxRejection < 0 || c.MaxRejection > 1:
		return params{}, invalid("SREConfig.MaxRejection is %v, want a fraction in (0, 1] (0: default 1)", c.MaxRejection)
	}
	p := params{
		buckets: c.Buckets, k: c.K, maxP: c.MaxRejection,
		overload: c.Overload, clock: clock.Or(c.Clock), rand: c.Rand,
	}
	window := c.Window
	if window == 0 {
		window = DefaultWindow
	}
	if p.buckets == 0 {
		p.buckets = DefaultBuckets
	}
	if p.width = window / time.Duration(p.buckets); p.width < minWidth {
		return params{}, invalid("SREConfig.Window %v is too short for %d buckets of at least %v", window, p.buckets, minWidth)
	}
	if p.k == 0 {
		p.k = DefaultK
	}
	if p.maxP == 0 {
		p.maxP = DefaultMaxRejection
	}
	if p.overload == nil {
		p.overload = IsOverload
	}
	switch {
	case c.MinRequests == 0:
		p.minReq = DefaultMinRequests
	case c.MinRequests > 0:
		p.minReq = uint64(c.MinRequests)
	}
	return p, nil
}

// SRE is the client-side adaptive throttling of Google's SRE book
// (chapter 21, "Handling Overload"): each client remembers, over the last
// Window, how many requests it made and how many of them the backend
// accepted, and rejects a new request locally, without sending it, with
// probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// capped at MaxRejection, and 0 while the window holds fewer than
// MinRequests requests (16 by default). While the backend accepts everything the
// probability is 0; when it refuses most requests, the client sends about K
// requests per accepted one, so the backend's offered load settles near K
// times what it can take instead of the full demand, and the rejected
// requests cost it nothing.
//
// A request counts when Allow is called, before it is sent (counting at
// the answer undercounts exactly when answers are slow: under load); a
// local rejection counts as a request too, so the probability keeps
// following the demand. An accept counts when done hears an answer that
// is not an overload signal (SREConfig.Overload). A request the breaker then
// refuses (done hears breaker.ErrOpen) was never sent, and is taken back.
//
// Make one with NewSRE, share it between every caller of one downstream, and
// set it as a retry.Policy's Limiter: retry.Do, httpretry and grpcretry
// then ask it before every attempt, and a rejected attempt ends the call
// with ErrThrottled. A SRE is safe for concurrent use; Allow and done
// take no lock and do not allocate. A nil *SRE allows everything.
//
// The window moves on at each slot boundary (Window/Buckets) by a timer of
// the Clock that runs while requests come and stops after a slot without
// any; Allow and done read no clock. The counts are exact when calls do
// not overlap. Under concurrency every request and accept is added to one
// bucket by an atomic operation, but a decision may see some of the
// concurrent requests and not others, and a request or answer racing with
// a slot change may be missed by the decisions of the slots after it.
type SRE struct {
	p     params
	start time.Time
	done  func(error) // t.record, made once so Allow does not allocate
	timer clock.Timer // runs tick at each slot boundary while requests come
	_     [64]byte

	// head is the current slot with the sums of the window's earlier
	// slots, replaced at each slot boundary by tick (while requests come)
	// or by the first Allow after a quiet spell, so that Allow and done
	// neither read the clock (a clock read costs more than the rest of
	// Allow on many machines) nor add up the buckets.
	head atomic.Pointer[head]
	// ticking: the timer is armed. active: a request came since the last
	// tick. Both are read far more often than written.
	ticking, active atomic.Bool
	_               [54]byte

	// buckets[k % len] holds slot k's counts. Each word packs the slot
	// number (high 32 bits, modulo 2^32) and the count (low 32 bits), so
	// that a count moves to a new slot and restarts at one atomic step.
	buckets []bucket

	rejected stripe.Counter // local rejections since NewSRE
}

type bucket struct{ req, acc atomic.Uint64 }

// head is a current slot and the counts of the slots of its window before
// it, which no longer change.
type head struct {
	slot     int64
	req, acc uint64
}

// NewSRE returns a SRE configured by c. It panics if c.Validate fails.
func NewSRE(c SREConfig) *SRE {
	p, err := c.resolve()
	if err != nil {
		panic(err)
	}
	t := &SRE{p: p, start: p.clock.Now(), buckets: make([]bucket, p.buckets)}
	t.done = t.record
	t.head.Store(&head{})
	t.timer = p.clock.AfterFunc(time.Hour, t.tick)
	t.timer.Stop() // armed by the first request
	return t
}

func nop(error) {}

// Allow asks to send one request. It counts the request, then rejects it
// with the probability above: it returns ErrThrottled, and the request must
// not be sent. Otherwise done must be called once with the request's
// result (nil on success). Allow on a nil SRE allows every request.
func (t *SRE) Allow() (done func(err error), err error) {
	if t == nil {
		return nop, nil
	}
	if !t.ticking.Load() {
		t.wake()
	}
	if !t.active.Load() {
		t.active.Store(true)
	}
	h := t.head.Load()
	req, acc := t.sums(h)
	add(&t.buckets[h.slot%int64(len(t.buckets))].req, h.slot)
	if p := t.probability(req, acc); p > 0 && t.draw() < p {
		t.rejected.Add(1)
		return nil, ErrThrottled
	}
	return t.done, nil
}

// record is done: it counts an accept, or takes back a request that was
// never sent.
func (t *SRE) record(err error) {
	k := t.head.Load().slot
	b := &t.buckets[k%int64(len(t.buckets))]
	switch {
	case err == nil:
		add(&b.acc, k)
	case notSent(err):
		sub(&b.req, k)
	case !t.p.overload(err):
		add(&b.acc, k)
	}
}

// slot reads the clock, makes the current slot the head and returns it,
// and the time until the next slot begins.
func (t *SRE) slot() (*head, time.Duration) {
	d := t.p.clock.Since(t.start)
	h := t.head.Load()
	if d < 0 {
		return h, t.p.width
	}
	k := int64(d / t.p.width)
	for k > h.slot {
		n := &head{slot: k}
		n.req, n.acc = t.past(k)
		if t.head.CompareAndSwap(h, n) {
			h = n
			break
		}
		h = t.head.Load()
	}
	return h, t.p.width - d%t.p.width
}

// wake starts the ticks after a quiet spell: it brings the head up to date
// and arms the timer for the next slot boundary.
func (t *SRE) wake() {
	_, next := t.slot()
	if t.ticking.CompareAndSwap(false, true) {
		t.timer.Reset(next)
	}
}

// tick runs at each slot boundary while requests come: it moves the head
// on, and stops ticking when no request came since the previous tick (the
// next Allow wakes it), so that an idle SRE holds no armed timer.
func (t *SRE) tick() {
	_, next := t.slot()
	if t.active.Swap(false) {
		t.timer.Reset(next)
		return
	}
	t.ticking.Store(false)
}

// past returns the requests and accepts of the slots of slot k's window
// before k.
func (t *SRE) past(k int64) (req, acc uint64) {
	oldest := uint32(k - int64(len(t.buckets))) // the last slot out of the window
	in := func(w uint64) uint64 {
		if e := uint32(w >> 32); int32(e-oldest) > 0 && e != uint32(k) {
			return w & countMask
		}
		return 0
	}
	for i := range t.buckets {
		req += in(t.buckets[i].req.Load())
		acc += in(t.buckets[i].acc.Load())
	}
	return req, acc
}

// sums returns the requests and accepts of the window ending with head h.
func (t *SRE) sums(h *head) (req, acc uint64) {
	b := &t.buckets[h.slot%int64(len(t.buckets))]
	return h.req + count(&b.req, h.slot), h.acc + count(&b.acc, h.slot)
}

// count returns w's count if it holds slot k, else 0.
func count(w *atomic.Uint64, k int64) uint64 {
	if v := w.Load(); uint32(v>>32) == uint32(k) {
		return v & countMask
	}
	return 0
}

func (t *SRE) probability(req, acc uint64) float64 {
	if req < t.p.minReq {
		return 0
	}
	r := float64(req)
	p := (r - t.p.k*float64(acc)) / (r + 1)
	if p <= 0 {
		return 0
	}
	return min(p, t.p.maxP)
}

// draw returns a uniform number in [0, 1).
func (t *SRE) draw() float64 {
	if t.p.rand == nil {
		return rand.Float64()
	}
	return float64(backoff.Uniform(t.p.rand, 1<<53-1)) / (1 << 53)
}

const countMask = 1<<32 - 1

// add counts one in w for slot k: it restarts the count at 1 if w holds an
// older slot.
func add(w *atomic.Uint64, k int64) {
	e := uint32(k)
	for {
		old := w.Load()
		if int32(uint32(old>>32)-e) >= 0 {
			if old&countMask != countMask { // saturate rather than carry into the slot
				w.Add(1)
			}
			return
		}
		if w.CompareAndSwap(old, uint64(e)<<32|1) {
			return
		}
	}
}

// sub takes one from w if it still holds slot k and a count.
func sub(w *atomic.Uint64, k int64) {
	e := uint32(k)
	for {
		old := w.Load()
		if uint32(old>>32) != e || old&countMask == 0 || w.CompareAndSwap(old, old-1) {
			return
		}
	}
}

// RejectionProbability returns the probability with which Allow would
// reject a request now, for metrics (a gauge). A nil SRE reports 0.
func (t *SRE) RejectionProbability() float64 {
	if t == nil {
		return 0
	}
	h, _ := t.slot()
	req, acc := t.sums(h)
	return t.probability(req, acc)
}

// Stats are a SRE's counts.
type Stats struct {
	// Requests and Accepts are the counts of the current window: requests
	// asked for (local rejections included) and answers that were not an
	// overload signal.
	Requests, Accepts uint64
	// Rejected counts the requests rejected locally since NewSRE.
	Rejected uint64
	// Probability is the current rejection probability.
	Probability float64
}

// Stats returns the SRE's counts. Read while calls are under way,
// they may count some of the concurrent calls and not others. A nil
// SRE reports zeros.
func (t *SRE) Stats() Stats {
	if t == nil {
		return Stats{}
	}
	h, _ := t.slot()
	req, acc := t.sums(h)
	return Stats{Requests: req, Accepts: acc, Rejected: t.rejected.Load(), Probability: t.probability(req, acc)}
}
