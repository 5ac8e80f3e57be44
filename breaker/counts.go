package breaker

import (
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/internal/stripe"
)

// Counts is a snapshot of the outcomes the breaker is judging, as handed to
// Config.ReadyToTrip and returned by Breaker.Counts. Excluded outcomes (see
// Config.IsExcluded) are in none of the fields but Requests.
//
// In the closed state with a Window, Successes, Failures and SlowCalls are
// those in the window; otherwise all counts start from zero at every state
// change. In the open state all counts are zero.
type Counts struct {
	// Requests is the number of calls whose result was reported since the
	// state began, excluded ones included (calls still in flight are not
	// counted yet).
	Requests uint64
	// Successes is the number of calls that succeeded.
	Successes uint64
	// Failures is the number of calls that failed.
	Failures uint64
	// SlowCalls is the number of calls, successful or not, that took at
	// least Window.SlowCallDuration.
	SlowCalls uint64
	// ConsecutiveSuccesses is the number of successes since the last
	// failure (or the start of the state).
	ConsecutiveSuccesses uint64
	// ConsecutiveFailures is the number of failures since the last success
	// (or the start of the state).
	ConsecutiveFailures uint64
}

// Calls returns Successes + Failures: the calls with a counted outcome.
func (c Counts) Calls() uint64 { return c.Successes + c.Failures }

// FailureRate returns Failures / Calls, or 0 when no call was counted.
func (c Counts) FailureRate() float64 {
	if n := c.Calls(); n > 0 {
		return float64(c.Failures) / float64(n)
	}
	return 0
}

// SlowCallRate returns SlowCalls / Calls, or 0 when no call was counted.
func (c Counts) SlowCallRate() float64 {
	if n := c.Calls(); n > 0 {
		return float64(c.SlowCalls) / float64(n)
	}
	return 0
}

// outcome is how one call ended, as the breaker sees it.
type outcome uint8

const (
	outSuccess  outcome = 0
	outFailure  outcome = 1
	outSlow     outcome = 2 // bit, combined with success or failure
	outExcluded outcome = 4
)

func (o outcome) failed() bool { return o&outFailure != 0 }
func (o outcome) slow() bool   { return o&outSlow != 0 }

// stripeCounts is one cell of the closed state's striped counters
// (stripe.Array): a call updates its goroutine's cell, so that goroutines
// running in parallel rarely write the same cache line; Counts sums the
// cells.
type stripeCounts struct {
	excluded  atomic.Uint64
	successes atomic.Uint64
	failures  atomic.Uint64
	slow      atomic.Uint64
}

// totals is a sum of the stripes.
type totals struct{ excluded, successes, failures, slow uint64 }

func (t totals) minus(u totals) totals {
	return totals{t.excluded - u.excluded, t.successes - u.successes, t.failures - u.failures, t.slow - u.slow}
}

func sumStripes(s *stripe.Array[stripeCounts]) totals {
	var t totals
	for i := range stripe.N {
		c := s.At(i)
		t.excluded += c.excluded.Load()
		t.successes += c.successes.Load()
		t.failures += c.failures.Load()
		t.slow += c.slow.Load()
	}
	return t
}

// tally counts outcomes under the breaker's lock: in the half-open state,
// and in the closed state of the window and custom conditions.
type tally struct {
	requests                  uint64 // outcomes reported, excluded ones included
	successes, failures, slow uint64
	consecSuccesses           uint64
	consecFailures            uint64
}

func (t *tally) add(o outcome) {
	t.requests++
	if o == outExcluded {
		return
	}
	if o.slow() {
		t.slow++
	}
	if o.failed() {
		t.failures++
		t.consecFailures++
		t.consecSuccesses = 0
	} else {
		t.successes++
		t.consecSuccesses++
		t.consecFailures = 0
	}
}

// window is the sliding window of a rate trip condition. Its methods are
// called with the breaker's lock held.
type window interface {
	add(now time.Time, o outcome)
	// sums returns the successes, failures and slow calls in the window.
	sums(now time.Time) (successes, failures, slow uint64)
	reset(now time.Time)
}

// countWindow holds the outcomes of the last len(ring) calls.
type countWindow struct {
	ring                      []outcome
	pos, n                    int
	successes, failures, slow uint64
}

func newCountWindow(size int) *countWindow { return &countWindow{ring: make([]outcome, size)} }

func (w *countWindow) add(_ time.Time, o outcome) {
	if w.n == len(w.ring) {
		w.count(w.ring[w.pos], ^uint64(0)) // evict the oldest: subtract one
	} else {
		w.n++
	}
	w.ring[w.pos] = o
	w.count(o, 1)
	if w.pos++; w.pos == len(w.ring) {
		w.pos = 0
	}
}

// count adds d (1, or ^0 to subtract one) to the sums for o.
func (w *countWindow) count(o outcome, d uint64) {
	if o.failed() {
		w.failures += d
	} else {
		w.successes += d
	}
	if o.slow() {
		w.slow += d
	}
}

func (w *countWindow) sums(time.Time) (uint64, uint64, uint64) {
	return w.successes, w.failures, w.slow
}

func (w *countWindow) reset(time.Time) {
	clear(w.ring)
	w.pos, w.n, w.successes, w.failures, w.slow = 0, 0, 0, 0, 0
}

// timeWindow holds the outcomes of the last len(buckets)·width, one bucket
// per width of time. Bucket k covers [base+k·width, base+(k+1)·width).
type timeWindow struct {
	width   time.Duration
	base    time.Time
	last    int64 // the newest bucket index seen; time never goes back here
	buckets []bucket
}

type bucket struct {
	index                     int64
	successes, failures, slow uint64
}

func newTimeWindow(d time.Duration, n int, now time.Time) *timeWindow {
	w := &timeWindow{width: d / time.Duration(n), buckets: make([]bucket, n)}
	w.reset(now)
	return w
}

func (w *timeWindow) index(now time.Time) int64 {
	k := int64(now.Sub(w.base) / w.width)
	if k < w.last {
		return w.last // the clock went back: count in the newest bucket
	}
	w.last = k
	return k
}

func (w *timeWindow) add(now time.Time, o outcome) {
	k := w.index(now)
	b := &w.buckets[k%int64(len(w.buckets))]
	if b.index != k {
		*b = bucket{index: k}
	}
	if o.failed() {
		b.failures++
	} else {
		b.successes++
	}
	if o.slow() {
		b.slow++
	}
}

func (w *timeWindow) sums(now time.Time) (s, f, sl uint64) {
	k := w.index(now)
	oldest := k - int64(len(w.buckets)) + 1
	for i := range w.buckets {
		if b := &w.buckets[i]; b.index >= oldest && b.index <= k {
			s += b.successes
			f += b.failures
			sl += b.slow
		}
	}
	return s, f, sl
}

func (w *timeWindow) reset(now time.Time) {
	w.base, w.last = now, 0
	for i := range w.buckets {
		w.buckets[i] = bucket{index: -1}
	}
}
