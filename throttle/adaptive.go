package throttle

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// Defaults for zero AdaptiveConfig fields: the constants of the AWS SDKs'
// adaptive retry mode.
const (
	DefaultBeta          = 0.7 // AdaptiveConfig.Beta
	DefaultScaleConstant = 0.4 // AdaptiveConfig.ScaleConstant
	DefaultSmoothing     = 0.8 // AdaptiveConfig.Smoothing
	DefaultMinFillRate   = 0.5 // AdaptiveConfig.MinFillRate, tokens per second
)

// minFillRateFloor is the least MinFillRate accepted: one token in about
// 11.6 days. A slower floor would mean no limit worth the name, and waits
// that only saturation keeps finite.
const minFillRateFloor = 1e-6

// maxRateScale bounds a new rate by this multiple of the measured send
// rate (the SDKs' MAX_RATE_ADJUST_SCALE).
const maxRateScale = 2.0

// rateBucket is the span over which the send rate is measured (the SDKs'
// TIME_BUCKET_RANGE: half a second).
const rateBucket = 0.5

// AdaptiveConfig configures an Adaptive rate limiter. The zero value is the
// AWS SDKs' adaptive retry mode.
type AdaptiveConfig struct {
	// Beta is the share of the rate kept after a throttling answer
	// (multiplicative decrease), in (0, 1). 0: DefaultBeta (0.7).
	Beta float64
	// ScaleConstant is CUBIC's C: how fast the rate grows back, in
	// tokens/s per s³; positive. 0: DefaultScaleConstant (0.4).
	ScaleConstant float64
	// Smoothing is the weight of the newest half-second of the measured
	// send rate, in (0, 1]. 0: DefaultSmoothing (0.8).
	Smoothing float64
	// MinFillRate is the least rate tokens are refilled at, in tokens per
	// second, from 1e-6 (a token in about 11.6 days) to 1e9. 0:
	// DefaultMinFillRate (0.5).
	MinFillRate float64
	// Throttled reports whether an attempt's error is a throttling answer.
	// nil: IsOverload (HTTP 429 and 503, OverloadReporter errors, the
	// retry package's overload marker). For AWS services, whose throttling
	// answers are mostly HTTP 400s with an error code, use
	// awsretry.IsThrottle (the AWS throttling error codes and HTTP 429), as
	// the AWS SDKs' adaptive mode does, or a function that accepts what
	// either accepts. If it panics, the panic goes on to done's caller and
	// the answer leaves the rate as it was.
	Throttled func(error) bool
	// Clock tells the time and waits. nil: clock.Real.
	Clock clock.Clock
}

// Validate reports whether c can make an Adaptive limiter. Errors wrap
// ErrInvalidConfig.
func (c AdaptiveConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c AdaptiveConfig) resolve() (AdaptiveConfig, error) {
	ok := func(x, lo, hi float64, openHi bool) bool {
		if math.IsNaN(x) || x == 0 {
			return x == 0
		}
		return x > lo && (x < hi || !openHi && x == hi)
	}
	switch {
	case !ok(c.Beta, 0, 1, true):
		return c, invalid("AdaptiveConfig.Beta is %v, want a fraction in (0, 1)", c.Beta)
	case !ok(c.ScaleConstant, 0, 1e6, false):
		return c, invalid("AdaptiveConfig.ScaleConstant is %v, want a number in (0, 1e6]", c.ScaleConstant)
	case !ok(c.Smoothing, 0, 1, false):
		return c, invalid("AdaptiveConfig.Smoothing is %v, want a fraction in (0, 1]", c.Smoothing)
	case !ok(c.MinFillRate, 0, 1e9, false) || c.MinFillRate != 0 && c.MinFillRate < minFillRateFloor:
		return c, invalid("AdaptiveConfig.MinFillRate is %v, want tokens per second in [%v, 1e9] (0: the default %v)", c.MinFillRate, minFillRateFloor, DefaultMinFillRate)
	}
	if c.Beta == 0 {
		c.Beta = DefaultBeta
	}
	if c.ScaleConstant == 0 {
		c.ScaleConstant = DefaultScaleConstant
	}
	if c.Smoothing == 0 {
		c.Smoothing = DefaultSmoothing
	}
	if c.MinFillRate == 0 {
		c.MinFillRate = DefaultMinFillRate
	}
	if c.Throttled == nil {
		c.Throttled = IsOverload
	}
	c.Clock = clock.Or(c.Clock)
	return c, nil
}

// Adaptive is the client-side rate limiter of the AWS SDKs' adaptive retry
// mode: a token bucket whose fill rate follows CUBIC congestion control.
// Each attempt takes a token, waiting for one if the bucket is empty; each
// answer updates the rate:
//
//   - a throttling answer sets the rate to Beta (0.7) times the lower of
//     the measured send rate and the current fill rate, and remembers that
//     rate as CUBIC's W_max;
//   - any other answer sets it to C·(t − K)³ + W_max, t the time since the
//     last throttle and K = ∛(W_max·(1−Beta)/C): the rate climbs back
//     quickly, levels off near W_max, then probes above it;
//   - the new rate is at most twice the measured send rate, which is
//     counted in half-second buckets and smoothed (0.8 new, 0.2 old);
//   - tokens are refilled at the new rate, at least MinFillRate (0.5/s),
//     and the bucket holds at most max(rate, 1) tokens.
//
// As in the SDKs, the bucket is not used until the first throttling
// answer: until then attempts never wait. The algorithm, its constants and
// its reference test table come from the public AWS SDK sources:
// aws-sdk-go-v2 aws/retry/adaptive_ratelimit.go (and its
// TestAdaptiveRateLimit_Update table, reproduced in this package's tests)
// and botocore retries/adaptive.py, throttling.py and bucket.py, which
// implement the SDKs' shared "retry behavior" specification.
//
// Differences from the SDKs: a waiting attempt reserves its token and waits
// once, for as long as the rate at the time of asking says (the SDKs wait
// in a loop and re-read the rate); the wait is bounded by the context: an
// attempt whose wait would end after the context's deadline is refused at
// once with ErrWaitTooLong (matching retry.ErrDeadlineTooClose), and one
// whose context ends during the wait gives its token back (within the
// bucket's capacity) and returns the context's error.
//
// Make one with NewAdaptive, share it between every caller of one
// downstream, and set it as a retry.Policy's Limiter. It is safe for
// concurrent use; it takes a mutex for each attempt and answer, and does
// not allocate unless an attempt waits. A nil *Adaptive admits every
// attempt at once.
type Adaptive struct {
	c    AdaptiveConfig
	done func(error) // a.record, made once

	mu       sync.Mutex
	enabled  bool    // a throttle has been seen: attempts take tokens
	tokens   float64 // may be negative: tokens reserved by waiting attempts
	capacity float64
	fillRate float64
	refilled time.Time // zero until the first refill

	measured   float64 // smoothed send rate, requests per second
	lastBucket float64 // start of the current half-second bucket, Unix seconds
	count      int64   // answers in the current bucket

	lastMax      float64   // CUBIC's W_max
	lastThrottle time.Time // CUBIC's time of the last decrease
	window       float64   // CUBIC's K, seconds
	calculated   float64   // the last rate CUBIC computed

	waits, refused atomic.Uint64
}

// NewAdaptive returns an Adaptive limiter configured by c. It panics if
// c.Validate fails.
func NewAdaptive(c AdaptiveConfig) *Adaptive {
	c, err := c.resolve()
	if err != nil {
		panic(err)
	}
	now := c.Clock.Now()
	a := &Adaptive{
		c:            c,
		capacity:     1,
		lastBucket:   math.Floor(unixSeconds(now)),
		lastThrottle: now,
	}
	a.done = a.record
	return a
}

// waitFor returns how long the bucket takes to refill tokens at rate,
// rounded up to the nanosecond, saturating at the longest Duration instead
// of overflowing (a tiny rate, a long queue of waiters).
func waitFor(tokens, rate float64) time.Duration {
	ns := math.Ceil(tokens / rate * 1e9)
	if !(ns < math.MaxInt64) { // NaN and +Inf too
		return math.MaxInt64
	}
	return time.Duration(ns)
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

func seconds(d time.Duration) float64 { return float64(d) / 1e9 }

// Acquire takes a token for one attempt, first or retry alike, waiting for
// it if the bucket is empty (see Adaptive). It returns ErrWaitTooLong at
// once if the wait would end after ctx's deadline, and ctx's error if ctx
// ends during the wait. Otherwise done must be called once with the
// attempt's result.
func (a *Adaptive) Acquire(ctx context.Context, _ bool) (done func(err error), err error) {
	if a == nil {
		return nop, nil
	}
	wait, ok := a.take(ctx)
	switch {
	case !ok:
		a.refused.Add(1)
		return nil, ErrWaitTooLong
	case wait == 0:
		return a.done, nil
	}
	a.waits.Add(1)
	t := a.c.Clock.NewTimer(wait)
	select {
	case <-t.C():
		return a.done, nil
	case <-ctx.Done():
		t.Stop()
		a.mu.Lock()
		// The reservation is given back, within the capacity: the
		// bucket may have refilled to it meanwhile, reservation
		// included (the rate rose after the wait was computed).
		a.tokens = min(a.tokens+1, a.capacity)
		a.mu.Unlock()
		return nil, ctx.Err()
	}
}

// take takes a token, or reserves one and returns the wait until it is
// refilled; ok is false when that wait would end after ctx's deadline. The
// deferred unlock keeps the limiter usable when the Clock panics.
func (a *Adaptive) take(ctx context.Context) (wait time.Duration, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.enabled {
		return 0, true
	}
	now := a.c.Clock.Now()
	a.refill(now)
	if a.tokens >= 1 {
		a.tokens--
		return 0, true
	}
	wait = waitFor(1-a.tokens, a.fillRate)
	if dl, ok := ctx.Deadline(); ok && wait > dl.Sub(now) {
		return 0, false
	}
	a.tokens-- // reserved: the tokens refilled until the wait ends pay for it
	return wait, true
}

// record is done: it updates the rate with an attempt's answer. An attempt
// the breaker refused was never sent: its token is given back and the rate
// left alone.
func (a *Adaptive) record(err error) {
	if notSent(err) {
		a.mu.Lock()
		if a.enabled {
			a.tokens = min(a.tokens+1, a.capacity)
		}
		a.mu.Unlock()
		return
	}
	throttled := err != nil && a.c.Throttled(err)
	a.mu.Lock()
	defer a.mu.Unlock() // a panicking Clock must not leave it locked
	a.update(a.c.Clock.Now(), throttled)
}

// update is the SDKs' UpdateClientSendingRate. a.mu must be held.
func (a *Adaptive) update(now time.Time, throttled bool) {
	a.measure(now)
	if throttled {
		rate := a.measured
		if a.enabled {
			rate = min(a.measured, a.fillRate)
		}
		a.lastMax = rate
		a.cubicWindow()
		a.lastThrottle = now
		a.calculated = rate * a.c.Beta
		a.enabled = true
	} else {
		a.cubicWindow()
		dt := seconds(now.Sub(a.lastThrottle))
		a.calculated = a.c.ScaleConstant*math.Pow(dt-a.window, 3) + a.lastMax
	}
	a.setRate(now, min(a.calculated, maxRateScale*a.measured))
}

// cubicWindow computes CUBIC's K: the time the rate takes to climb back to
// W_max after a decrease.
func (a *Adaptive) cubicWindow() {
	a.window = math.Cbrt(a.lastMax * (1 - a.c.Beta) / a.c.ScaleConstant)
}

// measure counts one answer in the send rate, smoothed over half-second
// buckets of the clock's Unix time, as the SDKs do.
func (a *Adaptive) measure(now time.Time) {
	bucket := math.Floor(unixSeconds(now)/rateBucket) * rateBucket
	a.count++
	if bucket > a.lastBucket {
		current := float64(a.count) / (bucket - a.lastBucket)
		a.measured = current*a.c.Smoothing + a.measured*(1-a.c.Smoothing)
		a.count = 0
		a.lastBucket = bucket
	}
}

// setRate refills at the old rate up to now, then sets the new one.
func (a *Adaptive) setRate(now time.Time, rate float64) {
	a.refill(now)
	a.fillRate = max(rate, a.c.MinFillRate)
	a.capacity = max(rate, 1)
	a.tokens = min(a.tokens, a.capacity)
}

func (a *Adaptive) refill(now time.Time) {
	if a.refilled.IsZero() {
		a.refilled = now
		return
	}
	if dt := seconds(now.Sub(a.refilled)); dt > 0 {
		a.tokens = min(a.capacity, a.tokens+dt*a.fillRate)
		a.refilled = now
	}
}

// AdaptiveStats are an Adaptive limiter's state and counters.
type AdaptiveStats struct {
	// Enabled reports whether a throttling answer has been seen, so that
	// attempts take tokens.
	Enabled bool
	// FillRate is the rate tokens are refilled at, per second;
	// MeasuredRate the smoothed rate answers came back at; Tokens the
	// tokens in the bucket (negative while attempts wait for reserved
	// ones), as of the last attempt or answer.
	FillRate, MeasuredRate, Tokens float64
	// Waits counts attempts that waited for a token; Refused those
	// refused because the wait would not fit before their deadline.
	Waits, Refused uint64
}

// Stats returns the limiter's state. A nil Adaptive reports zeros.
func (a *Adaptive) Stats() AdaptiveStats {
	if a == nil {
		return AdaptiveStats{}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return AdaptiveStats{
		Enabled: a.enabled, FillRate: a.fillRate, MeasuredRate: a.measured, Tokens: a.tokens,
		Waits: a.waits.Load(), Refused: a.refused.Load(),
	}
}
