package backoff

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Strategy computes the wait before a retry. n is the retry number (1 for
// the wait after the first attempt failed); prev is the delay returned for
// the previous retry of the same call (0 before the first). Implementations
// must be safe for concurrent use and should not allocate.
type Strategy interface {
	// Delay returns the wait before retry n (n ≥ 1 from retry.Do; an
	// implementation should treat a smaller n as 1) given prev, the value
	// it returned for retry n-1 of the same call (0 for the first). It is
	// called from many goroutines at once. Zero or a negative result means
	// retry at once. It may panic: retry.Do then ends the call, releasing
	// what it holds, and the panic goes on.
	Delay(n int, prev time.Duration) time.Duration
}

// Func adapts a function to a Strategy.
type Func func(n int, prev time.Duration) time.Duration

// Delay calls f, clamping a negative result to zero.
func (f Func) Delay(n int, prev time.Duration) time.Duration {
	d := f(n, prev)
	if d < 0 {
		return 0
	}
	return d
}

// Jitter selects how a strategy randomises its delay.
type Jitter uint8

// Jitter modes. See the package documentation for the formulas.
const (
	None Jitter = iota
	Full
	Equal
	Decorrelated
	Proportional
)

var jitterNames = [...]string{"none", "full", "equal", "decorrelated", "proportional"}

// String returns the mode's name as used in configuration ("full", ...).
func (j Jitter) String() string {
	if int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return "jitter(" + strconv.Itoa(int(j)) + ")"
}

// ParseJitter returns the mode named s ("none", "full", "equal",
// "decorrelated", "proportional").
func ParseJitter(s string) (Jitter, bool) {
	for i, n := range jitterNames {
		if n == s {
			return Jitter(i), true
		}
	}
	return 0, false
}

// DefaultFactor is the Proportional jitter factor used when Factor is zero.
const DefaultFactor = 0.2

// Defaults for zero fields of Exponential and Linear.
const (
	DefaultBase       = 100 * time.Millisecond
	DefaultMax        = 10 * time.Second
	DefaultMultiplier = 2.0
)

// Exponential waits Base·Multiplier^(n-1), capped at Max, then jitters it.
//
// Zero fields take the defaults, so the zero Exponential is 100ms, 200ms,
// 400ms … 10s without jitter.
type Exponential struct {
	// Base is the wait before the first retry, before jitter. Zero or
	// negative: DefaultBase (100ms).
	Base time.Duration
	// Max caps the un-jittered wait (and Decorrelated's and Proportional's
	// draws). Zero or negative: DefaultMax (10s); a Max below Base is
	// raised to Base.
	Max time.Duration
	// Multiplier is the growth factor from one retry to the next. Zero:
	// DefaultMultiplier (2); 1 or below (or NaN) keeps every wait at Base.
	Multiplier float64
	// Jitter is the randomisation applied to the capped wait. Zero: None.
	// Decorrelated draws from [Base, min(Max, 3·prev)] and so ignores
	// Multiplier.
	Jitter Jitter
	// Factor is Proportional jitter's spread: the wait T is drawn from
	// [T·(1−Factor), min(Max, T·(1+Factor))]. Zero, negative or NaN:
	// DefaultFactor (0.2); above 1 counts as 1. Other modes ignore it.
	Factor float64
	// Rand is the source of the jitter draws. nil: math/rand/v2's global
	// generator. Any source may be shared by goroutines (see Uniform).
	Rand rand.Source
}

// Delay implements Strategy.
func (e Exponential) Delay(n int, prev time.Duration) time.Duration {
	// Small enough to inline, into the (*Exponential).Delay wrapper an
	// interface call goes through too: e is read through a pointer, not
	// passed field by field in registers that the callee spills again.
	return exponentialDelay(&e, n, prev)
}

// exponentialDelay is Exponential.Delay.
func exponentialDelay(e *Exponential, n int, prev time.Duration) time.Duration {
	if m := math.Float64bits(e.Multiplier); e.Jitter != Full || e.Rand != nil || m != 0 && m != bits2 {
		return e.jittered(n, prev)
	}
	// The default shape (doubling, full jitter, the global generator),
	// with globalUniform written out: nothing is called but the
	// generator. t ≤ max < 2^63, so bound cannot wrap.
	base, max := bounds(e.Base, e.Max, DefaultBase, DefaultMax)
	bound := uint64(doubled(base, max, n)) + 1
	hi, lo := bits.Mul64(runtimeRand(), bound)
	if lo < bound {
		hi = globalReject(hi, lo, bound)
	}
	return time.Duration(hi)
}

// bits2 is math.Float64bits(2), the default Multiplier's.
const bits2 = 0x4000000000000000

// jittered is Exponential.Delay for any Multiplier, Jitter and Rand (a
// Multiplier of -0 is 0 here too).
func (e *Exponential) jittered(n int, prev time.Duration) time.Duration {
	base, max := bounds(e.Base, e.Max, DefaultBase, DefaultMax)
	m := e.Multiplier
	if m == 0 {
		m = DefaultMultiplier
	}
	return jitter(e.Jitter, expCeiling(base, max, m, n), base, max, prev, e.Factor, e.Rand)
}

// doubled returns min(max, base·2^(n-1)) for 0 < base ≤ max, saturating.
func doubled(base, max time.Duration, n int) time.Duration {
	k := uint(n - 1)
	if n <= 1 {
		return base
	}
	if k >= 63 || uint64(base) > uint64(max)>>k {
		return max
	}
	return base << k
}

// Linear waits Base + Step·(n-1), capped at Max, then jitters it. Zero
// fields take the defaults, so the zero Linear is 100ms, 200ms, 300ms …
// 10s without jitter.
type Linear struct {
	// Base is the wait before the first retry, before jitter. Zero or
	// negative: DefaultBase (100ms).
	Base time.Duration
	// Step is added to the wait for each further retry. Zero or negative:
	// Base.
	Step time.Duration
	// Max caps the un-jittered wait (and Decorrelated's and Proportional's
	// draws). Zero or negative: DefaultMax (10s); a Max below Base is
	// raised to Base.
	Max time.Duration
	// Jitter is the randomisation applied to the capped wait. Zero: None.
	// Decorrelated draws from [Base, min(Max, 3·prev)] and so ignores
	// Step.
	Jitter Jitter
	// Factor is Proportional jitter's spread, as Exponential.Factor: zero,
	// negative or NaN is DefaultFactor (0.2), above 1 counts as 1.
	Factor float64
	// Rand is the source of the jitter draws. nil: math/rand/v2's global
	// generator. Any source may be shared by goroutines (see Uniform).
	Rand rand.Source
}

// Delay implements Strategy.
func (l Linear) Delay(n int, prev time.Duration) time.Duration {
	base, max := bounds(l.Base, l.Max, DefaultBase, DefaultMax)
	step := l.Step
	if step <= 0 {
		step = base
	}
	if n < 1 {
		n = 1
	}
	t := max
	if k := uint64(n - 1); k == 0 {
		t = base
	} else if hi, lo := bits.Mul64(uint64(step), k); hi == 0 && lo <= uint64(max-base) {
		t = base + time.Duration(lo)
	}
	return jitter(l.Jitter, t, base, max, prev, l.Factor, l.Rand)
}

// Constant waits Interval before every retry, jittered. (With Decorrelated
// jitter the delay is always Interval, since Base = Max.) Unlike
// Exponential and Linear it has no defaults: the zero Constant retries
// at once.
type Constant struct {
	// Interval is the wait before every retry, before jitter; it is also
	// the cap of Proportional's draws. Zero or negative: no wait.
	Interval time.Duration
	// Jitter is the randomisation applied to Interval. Zero: None.
	Jitter Jitter
	// Factor is Proportional jitter's spread: the wait is drawn from
	// [Interval·(1−Factor), Interval]. Zero, negative or NaN:
	// DefaultFactor (0.2); above 1 counts as 1.
	Factor float64
	// Rand is the source of the jitter draws. nil: math/rand/v2's global
	// generator. Any source may be shared by goroutines (see Uniform).
	Rand rand.Source
}

// Delay implements Strategy.
func (c Constant) Delay(n int, prev time.Duration) time.Duration {
	if c.Jitter == None {
		return max(c.Interval, 0) // jitter's answer, without the call: Delay inlines
	}
	return c.jittered(prev)
}

// jittered is Delay with a Jitter, kept out of line so that Delay
// inlines (into the method wrapper of a *Constant, too).
//
//go:noinline
func (c *Constant) jittered(prev time.Duration) time.Duration {
	d := max(c.Interval, 0)
	return jitter(c.Jitter, d, d, d, prev, c.Factor, c.Rand)
}

func bounds(base, max, defBase, defMax time.Duration) (time.Duration, time.Duration) {
	if base <= 0 {
		base = defBase
	}
	if max <= 0 {
		max = defMax
	}
	if max < base {
		max = base
	}
	return base, max
}

// expCeiling returns min(max, base·m^(n-1)), saturating.
func expCeiling(base, max time.Duration, m float64, n int) time.Duration {
	if n <= 1 || !(m > 1) { // also catches a NaN multiplier
		return base
	}
	k := n - 1
	if m == 2 {
		return doubled(base, max, n)
	}
	// Multiply step by step while that is short (the usual case: the cap is
	// reached within a few dozen steps); math.Pow beyond.
	f, limit := float64(base), float64(max)
	if k <= 64 {
		for ; k > 0 && f < limit; k-- {
			f *= m
		}
	} else {
		f *= math.Pow(m, float64(k))
	}
	if f >= limit || f != f {
		return max
	}
	return time.Duration(f)
}

// jitter applies mode j to the ceiling t (0 ≤ t ≤ max).
func jitter(j Jitter, t, base, max, prev time.Duration, factor float64, src rand.Source) time.Duration {
	switch j {
	case Full:
		return time.Duration(uniform(src, uint64(t)))
	case Equal:
		h := t / 2
		return t - h + time.Duration(uniform(src, uint64(h)))
	case Decorrelated:
		if prev < base {
			prev = base
		}
		hi := max
		if prev <= max/3 {
			hi = 3 * prev
		}
		return base + time.Duration(uniform(src, uint64(hi-base)))
	case Proportional:
		if factor <= 0 || factor != factor {
			factor = DefaultFactor
		}
		if factor > 1 {
			factor = 1
		}
		// t is already capped; the window [t−spread, t+spread] is cut at
		// max before drawing, not after, so that no share of the draws
		// piles up on max (at the cap the wait is uniform in
		// [max·(1−f), max]).
		spread := time.Duration(float64(t) * factor)
		lo := t - spread
		hi := max
		if spread <= max-t {
			hi = t + spread
		}
		return lo + time.Duration(uniform(src, uint64(hi-lo)))
	default:
		return t
	}
}

// Uniform returns a uniform integer in [0, n] drawn from src (nil: the
// global generator of math/rand/v2). It is safe for concurrent use whatever
// src is, and does not allocate: a source made by NewSource is drawn from
// without a lock; any other source (rand.NewPCG, rand.NewChaCha8, a user's
// type) is drawn from under a process-wide lock, since rand.Source does not
// say whether it may be shared. The strategies of this package and
// retry.Policy.Rand draw through it. A broken source whose draws keep
// being rejected (one that always returns 0) gets an in-range value after
// 64 tries instead of holding the lock forever.
func Uniform(src rand.Source, n uint64) uint64 { return uniform(src, n) }

// sourceMu serialises draws from sources not known to be safe for
// concurrent use: Uniform's and Shared's, so that one source used in both
// ways is still drawn from by one goroutine at a time.
var sourceMu sync.Mutex

// Shared returns a source safe for concurrent use that draws from src under
// the lock Uniform takes for it, for code that draws from a source it also
// hands to a strategy of this package, to retry.Policy.Rand or to
// breaker.Config.Rand (the breaker draws through Shared). It returns src
// itself when src is nil, made by NewSource, or already returned by Shared.
func Shared(src rand.Source) rand.Source {
	switch src.(type) {
	case nil, *splitMix, *lockedSource:
		return src
	}
	return &lockedSource{src}
}

// lockedSource is a source drawn from under sourceMu (see Shared).
type lockedSource struct{ src rand.Source }

func (l *lockedSource) Uint64() uint64 {
	sourceMu.Lock()
	defer sourceMu.Unlock() // a panicking source must not wedge every draw
	return l.src.Uint64()
}

// uniform returns a uniform integer in [0, n].
func uniform(src rand.Source, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	if src == nil {
		return globalUniform(n)
	}
	switch x := src.(type) {
	case *splitMix:
		return uniformSplitMix(x, n)
	case *lockedSource:
		src = x.src // drawn under sourceMu below, not twice
	}
	return lockedUniform(src, n)
}

// lockedUniform is uniformFrom under sourceMu, released with defer: a
// source that panics must not wedge every locked draw in the process.
func lockedUniform(src rand.Source, n uint64) uint64 {
	sourceMu.Lock()
	defer sourceMu.Unlock()
	return uniformFrom(src, n)
}

// globalUniform returns a uniform integer in [0, n] from math/rand/v2's
// global generator (the runtime's per-thread ChaCha8, safe for concurrent
// use; see runtimeRand): rand.Uint64N's multiply-shift with rejection,
// without its interface call.
func globalUniform(n uint64) uint64 {
	x := runtimeRand()
	bound := n + 1
	if bound == 0 { // n is math.MaxUint64: every value
		return x
	}
	hi, lo := bits.Mul64(x, bound)
	if lo < bound { // rarely: lo < -bound%bound would bias the draw
		return globalReject(hi, lo, bound)
	}
	return hi
}

// globalReject finishes globalUniform's draw for a bound whose first
// product fell in the range that may have to be rejected.
func globalReject(hi, lo, bound uint64) uint64 {
	thresh := -bound % bound
	for lo < thresh {
		hi, lo = bits.Mul64(runtimeRand(), bound)
	}
	return hi
}

// maxRejections bounds uniformFrom's rejection loop. Each draw of a
// uniform source is rejected with probability below 1/2 whatever the
// bound (2^64 mod bound is below both bound and 2^64-bound; far less for
// delays), so 64 rejections in a row happen with
// probability below 2^-64: only a broken source (one that always returns
// 0, say) gets there, and it must not spin forever while holding the
// process-wide lock of the locked sources.
const maxRejections = 64

// uniformFrom returns a uniform integer in [0, n], n > 0, from src. A
// source that keeps giving rejected values (a broken one) gets the last
// value after maxRejections tries instead of a loop without end.
func uniformFrom(src rand.Source, n uint64) uint64 {
	if n == math.MaxUint64 {
		return src.Uint64()
	}
	bound := n + 1
	// Lemire's multiply-shift with rejection, as in math/rand/v2.
	hi, lo := bits.Mul64(src.Uint64(), bound)
	if lo < bound {
		thresh := -bound % bound
		for i := 0; lo < thresh && i < maxRejections; i++ {
			hi, lo = bits.Mul64(src.Uint64(), bound)
		}
	}
	return hi
}

// uniformSplitMix is uniformFrom for NewSource's type, with direct calls.
func uniformSplitMix(src *splitMix, n uint64) uint64 {
	if n == math.MaxUint64 {
		return src.Uint64()
	}
	bound := n + 1
	hi, lo := bits.Mul64(src.Uint64(), bound)
	if lo < bound {
		thresh := -bound % bound
		for lo < thresh {
			hi, lo = bits.Mul64(src.Uint64(), bound)
		}
	}
	return hi
}

// NewSource returns a seeded random source that is safe for concurrent use
// and lock-free, for reproducible jitter shared by many goroutines. It is
// SplitMix64 over an atomic counter: the sequence of draws is fixed by the
// seed; with several goroutines, which goroutine takes which draw is up to
// the scheduler.
func NewSource(seed uint64) rand.Source {
	s := &splitMix{}
	s.state.Store(seed)
	return s
}

type splitMix struct{ state atomic.Uint64 }

func (s *splitMix) Uint64() uint64 {
	z := s.state.Add(0x9e3779b97f4a7c15)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
