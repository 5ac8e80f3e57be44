package hedge

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// AdaptiveConfig configures an Adaptive delay. Every field is optional.
type AdaptiveConfig struct {
	// Percentile of recent latencies to hedge at, in (0, 1]. 0:
	// DefaultPercentile (0.95, as in "The Tail at Scale").
	Percentile float64
	// Window is how far back latencies count. 0: DefaultWindow (10s). It
	// is kept as ten slots of Window/10; a slot older than Window is
	// forgotten whole.
	Window time.Duration
	// Floor is the shortest delay Adaptive ever gives, so that a very fast
	// downstream is not hedged at once. 0: DefaultFloor (1ms).
	Floor time.Duration
	// Max, when positive, caps the delay.
	Max time.Duration
	// MinSamples is how many latencies the window must hold before the
	// percentile is used; until then the Hedger's fixed Delay applies.
	// 0: DefaultMinSamples (20).
	MinSamples int
	// Clock is read by Observe and Delay (not by their At twins, which
	// take the time). nil: clock.Real. Give it the Policy's clock.
	Clock clock.Clock
}

// Defaults of AdaptiveConfig.
const (
	DefaultPercentile = 0.95
	DefaultWindow     = 10 * time.Second
	DefaultFloor      = time.Millisecond
	DefaultMinSamples = 20
)

const (
	slots      = 10
	subBits    = 3
	subBuckets = 1 << subBits
	buckets    = (64 - subBits + 1) * subBuckets
)

// Adaptive computes a hedge delay from the latencies of recent attempts:
// a percentile (default p95) over a sliding window, never below a floor.
// Give one Adaptive to every Hedger of one downstream operation; Do feeds
// it the latency of every attempt that answered (Observe) and the running
// time of every attempt cancelled unanswered (ObserveUnanswered), so that
// the percentile is not biased low by the slow attempts that hedging cuts
// short.
//
// It keeps a fixed log-linear histogram per slot of the window (8
// sub-buckets per power of two: the delay is a bucket's upper bound, at
// most 12.5% above the true percentile), updated with atomic adds: Observe
// and Delay do not allocate or lock. The percentile is recomputed at most
// once per slot (Window/10), and cached in between. Counts from
// concurrent Observes racing a slot's rollover may land in the new slot;
// the percentile is an estimate, as any sliding one is.
//
// Adaptive is safe for concurrent use.
type Adaptive struct {
	q          float64
	width      int64 // slot width, ns
	floor, max int64
	minSamples uint64
	clk        clock.Clock

	base    atomic.Pointer[time.Time] // the first time seen; nil: unset
	next    atomic.Int64              // the slot index at which the cache is stale
	cached  atomic.Int64              // the delay, ns; -1: too few samples
	seen    atomic.Uint64             // the attempts the window held when cached was computed
	samples [slots]window
}

type window struct {
	epoch    atomic.Int64 // the slot index (time/width) it counts for, +1; 0: never
	counts   [buckets]atomic.Uint32
	censored [buckets]atomic.Uint32 // attempts cancelled unanswered after that long
}

// NewAdaptive returns an Adaptive configured by cfg.
func NewAdaptive(cfg AdaptiveConfig) *Adaptive {
	if cfg.Percentile <= 0 || cfg.Percentile > 1 || math.IsNaN(cfg.Percentile) {
		cfg.Percentile = DefaultPercentile
	}
	if cfg.Window <= 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Floor <= 0 {
		cfg.Floor = DefaultFloor
	}
	if cfg.MinSamples <= 0 {
		cfg.MinSamples = DefaultMinSamples
	}
	a := &Adaptive{
		q:          cfg.Percentile,
		width:      max(int64(cfg.Window/slots), 1),
		floor:      int64(cfg.Floor),
		max:        int64(cfg.Max),
		minSamples: uint64(cfg.MinSamples),
		clk:        clock.Or(cfg.Clock),
	}
	a.cached.Store(-1)
	return a
}

// Observe records the latency d of an attempt that answered, now.
func (a *Adaptive) Observe(d time.Duration) { a.ObserveAt(a.clk.Now(), d) }

// ObserveAt records the latency d of an attempt that answered at now.
func (a *Adaptive) ObserveAt(now time.Time, d time.Duration) {
	if a == nil || d < 0 {
		return
	}
	a.slot(now).counts[bucket(uint64(d))].Add(1)
}

// ObserveUnanswered records an attempt cancelled, now, after running for
// d without an answer (a hedge race's loser): its latency, unknown, is
// more than d.
func (a *Adaptive) ObserveUnanswered(d time.Duration) { a.ObserveUnansweredAt(a.clk.Now(), d) }

// ObserveUnansweredAt is ObserveUnanswered at the time now.
//
// Only answers give latencies, and under hedging the slowest first
// attempts never answer: the hedge wins and they are cancelled. A
// percentile of the answers alone is then biased low (for p95 of a
// lognormal latency, about 0.6 of the true p95, and twice the intended
// share of calls hedged). Do records every cancelled attempt here, and
// the percentile is the Kaplan-Meier estimate over answers and these
// right-censored samples together, which is unbiased when an attempt's
// latency does not depend on when it is cancelled.
func (a *Adaptive) ObserveUnansweredAt(now time.Time, d time.Duration) {
	if a == nil || d < 0 {
		return
	}
	a.slot(now).censored[bucket(uint64(d))].Add(1)
}

// slot returns the window slot of now, cleared first if it last counted
// for an older slot index.
func (a *Adaptive) slot(now time.Time) *window {
	idx := a.index(now)
	s := &a.samples[idx%slots]
	if e := s.epoch.Load(); e != idx+1 && s.epoch.CompareAndSwap(e, idx+1) {
		for i := range s.counts {
			s.counts[i].Store(0)
			s.censored[i].Store(0)
		}
	}
	return s
}

// Delay returns the hedge delay now, and false when the window holds too
// few samples (the Hedger then uses its fixed Delay).
func (a *Adaptive) Delay() (time.Duration, bool) { return a.DelayAt(a.clk.Now()) }

// DelayAt is Delay at the time now.
func (a *Adaptive) DelayAt(now time.Time) (time.Duration, bool) {
	if a == nil {
		return 0, false
	}
	idx := a.index(now)
	if n := a.next.Load(); idx >= n && a.next.CompareAndSwap(n, idx+1) {
		d, n := a.compute(idx)
		a.seen.Store(n)
		a.cached.Store(d)
	}
	d := a.cached.Load()
	return time.Duration(d), d >= 0
}

// Samples returns how many attempts, answered or cancelled unanswered,
// the window held when the delay was last worked out (at most one slot,
// Window/10, ago: Samples works it out again when it is older, as Delay
// does): the traffic a has seen lately. Metrics rank the keys of a group
// of Adaptives by it.
func (a *Adaptive) Samples() uint64 {
	if a == nil {
		return 0
	}
	a.Delay() // brings the cached figures up to the current slot
	return a.seen.Load()
}

// index returns the slot index of now: the number of slot widths since the
// first time a saw. Times are compared with time.Time.Sub, which uses
// their monotonic clock readings when both have one (time.Now's do), so a
// step of the wall clock does not move the window.
func (a *Adaptive) index(now time.Time) int64 {
	b := a.base.Load()
	if b == nil {
		first := now
		if !a.base.CompareAndSwap(nil, &first) {
			b = a.base.Load()
		} else {
			b = &first
		}
	}
	d := now.Sub(*b)
	if d < 0 {
		return 0
	}
	return int64(d) / a.width
}

// compute returns the delay from the slots of the window ending at slot
// idx, or -1 when they hold fewer than minSamples answers, and the number
// of attempts (answered or not) they hold.
func (a *Adaptive) compute(idx int64) (delay int64, seen uint64) {
	var sum, cens [buckets]uint64
	var total, censored uint64
	for i := range a.samples {
		s := &a.samples[i]
		e := s.epoch.Load() - 1
		if e < 0 || e > idx || e <= idx-slots {
			continue
		}
		for j := range s.counts {
			c := uint64(s.counts[j].Load())
			sum[j] += c
			total += c
			u := uint64(s.censored[j].Load())
			cens[j] += u
			censored += u
		}
	}
	seen = total + censored
	if total == 0 || total < a.minSamples {
		return -1, seen
	}
	var d int64
	if censored == 0 {
		d = a.rank(&sum, total)
	} else {
		d = a.kaplanMeier(&sum, &cens, total+censored)
	}
	d = max(d, a.floor)
	if a.max > 0 {
		d = min(d, a.max)
	}
	return d, seen
}

// rank returns the q-quantile of the answers alone: the upper bound of the
// bucket holding the ceil(q*total)th.
func (a *Adaptive) rank(sum *[buckets]uint64, total uint64) int64 {
	rank := uint64(math.Ceil(a.q * float64(total)))
	var seen uint64
	for j, c := range sum {
		seen += c
		if seen >= rank {
			return int64(min(upper(j), math.MaxInt64))
		}
	}
	return 0
}

// kaplanMeier returns the q-quantile of the latency from answers (sum) and
// right-censored samples (cens, attempts cancelled unanswered), n in all:
// the upper bound of the first bucket where the Kaplan-Meier survival
// estimate falls to 1-q. A sample censored in a bucket is counted at risk
// for that bucket's answers. When the estimate never falls that far (the
// quantile lies beyond every answer), it returns the upper bound of the
// highest bucket holding any sample, a lower bound of the quantile.
func (a *Adaptive) kaplanMeier(sum, cens *[buckets]uint64, n uint64) int64 {
	surv := 1.0
	target := 1 - a.q + 1e-12 // (absorbs rounding when nothing is censored)
	atRisk := n
	top := 0
	for j := range sum {
		if sum[j] > 0 && atRisk > 0 {
			surv *= 1 - float64(sum[j])/float64(atRisk)
			if surv <= target {
				return int64(min(upper(j), math.MaxInt64))
			}
		}
		if sum[j]+cens[j] > 0 {
			top = j
		}
		atRisk -= sum[j] + cens[j]
	}
	return int64(min(upper(top), math.MaxInt64))
}

// bucket returns the histogram bucket of v: values below 8 have one each,
// then each power of two is split into 8.
func bucket(v uint64) int {
	if v < subBuckets {
		return int(v)
	}
	e := bits.Len64(v) - 1 // >= subBits
	m := (v >> (e - subBits)) & (subBuckets - 1)
	return (e-subBits+1)*subBuckets + int(m)
}

// upper returns the least value above bucket j.
func upper(j int) uint64 {
	if j < subBuckets {
		return uint64(j) + 1
	}
	e := j/subBuckets + subBits - 1
	m := uint64(j % subBuckets)
	hi := (subBuckets + m + 1) << (e - subBits)
	if hi == 0 { // the top bucket
		return math.MaxUint64
	}
	return hi
}
