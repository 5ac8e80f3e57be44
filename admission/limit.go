package admission

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Limit is a concurrency-limit algorithm: it hears samples of the
// requests served and says how many may be in flight at once. It is pure
// and clock-free — every time it sees comes in a sample — so the same type
// runs in tests, in the simulator and behind a Limiter.
//
// The algorithms here (Gradient2, Vegas, AIMD, Fixed) are not safe for
// concurrent use: a Limiter calls them from one goroutine at a time.
type Limit interface {
	// OnSample hears one sample: a request (or, behind a Limiter, a
	// window of requests, averaged) that started at start and took rtt;
	// inflight requests were in flight when it started, itself included;
	// dropped says it failed for lack of capacity (an overload answer, a
	// timeout). A sample with rtt <= 0 — a clock that stepped back during
	// the request — is ignored.
	OnSample(start time.Time, rtt time.Duration, inflight int, dropped bool)
	// Limit returns the current limit, at least 1.
	Limit() int
}

// NoLoadSetter is implemented by a Limit that keeps an estimate of the
// round-trip time without load (Gradient2's long-term RTT, Vegas's
// no-load RTT). A Limiter that re-measures it (Config.ProbeInterval)
// gives it the measurement.
type NoLoadSetter interface {
	// SetNoLoadRTT replaces the estimate with rtt, the mean round-trip
	// time of the requests that started during a probe (always > 0 from a
	// Limiter; an implementation should ignore rtt <= 0). The Limiter
	// calls it between OnSample calls, never at the same time, and reads
	// Limit right after it.
	SetNoLoadRTT(rtt time.Duration)
}

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("admission: invalid config")

func invalid(field string, v any, reason string) error {
	return fmt.Errorf("%w: %s is %v, %s", ErrInvalidConfig, field, v, reason)
}

// Default bounds of the algorithms' limits.
const (
	DefaultInitialLimit = 20   // Gradient2Config.InitialLimit and the others'
	DefaultMinLimit     = 4    // MinLimit of every algorithm
	DefaultMaxLimit     = 1000 // MaxLimit of every algorithm
	// MaxMaxLimit is the largest limit Validate accepts, in any of
	// InitialLimit, MinLimit, MaxLimit and Fixed.N.
	MaxMaxLimit = 1 << 30
)

// bounds are the resolved InitialLimit, MinLimit and MaxLimit of an
// algorithm.
type bounds struct{ initial, min, max float64 }

// resolveBounds applies the defaults to initial, lo and hi and checks
// them; prefix names the config type in errors.
func resolveBounds(prefix string, initial, lo, hi int) (bounds, error) {
	want := fmt.Sprintf("want 1 to %d (0: the default)", MaxMaxLimit)
	switch {
	case initial < 0 || initial > MaxMaxLimit:
		return bounds{}, invalid(prefix+".InitialLimit", initial, want)
	case lo < 0 || lo > MaxMaxLimit:
		return bounds{}, invalid(prefix+".MinLimit", lo, want)
	case hi < 0 || hi > MaxMaxLimit:
		return bounds{}, invalid(prefix+".MaxLimit", hi, want)
	}
	if hi == 0 {
		hi = max(DefaultMaxLimit, lo, initial)
	}
	if lo == 0 {
		lo = min(DefaultMinLimit, hi)
		if initial > 0 {
			lo = min(lo, initial)
		}
	}
	if initial == 0 {
		initial = min(max(DefaultInitialLimit, lo), hi)
	}
	switch {
	case lo > hi:
		return bounds{}, invalid(prefix+".MinLimit", lo, fmt.Sprintf("want at most MaxLimit (%d)", hi))
	case initial < lo || initial > hi:
		return bounds{}, invalid(prefix+".InitialLimit", initial, fmt.Sprintf("want between MinLimit (%d) and MaxLimit (%d)", lo, hi))
	}
	return bounds{float64(initial), float64(lo), float64(hi)}, nil
}

// clamp bounds v by b; NaN reads as the minimum.
func (b bounds) clamp(v float64) float64 {
	if !(v >= b.min) {
		return b.min
	}
	return math.Min(v, b.max)
}

// ratio checks that v is 0 (the default) or in (0, hi].
func ratio(field string, v, hi float64) error {
	if math.IsNaN(v) || v < 0 || v > hi {
		return invalid(field, v, fmt.Sprintf("want a number above 0 and at most %g (0: the default)", hi))
	}
	return nil
}

// Fixed is a static limit of N: layer.Limit's bound as a Limit, for
// comparisons and for services whose capacity is known.
type Fixed struct {
	// N is the limit, from 1 to MaxMaxLimit. Validate (and so New and
	// Config.Validate) refuses anything else; Limit reads a smaller N
	// as 1.
	N int
}

// Validate refuses an N below 1 (a limit of none would be no
// protection) or above MaxMaxLimit.
func (f Fixed) Validate() error {
	if f.N < 1 || f.N > MaxMaxLimit {
		return invalid("Fixed.N", f.N, fmt.Sprintf("want 1 to %d", MaxMaxLimit))
	}
	return nil
}

// OnSample does nothing.
func (Fixed) OnSample(time.Time, time.Duration, int, bool) {}

// Limit returns N, at least 1.
func (f Fixed) Limit() int { return max(f.N, 1) }

// ewma is an exponentially weighted moving average over a window of n
// samples, whose first samples (up to warmup) are averaged plainly: v is
// the mean of their sum, as in Netflix's ExpAvgMeasurement, so a change
// of v by hand during the warm-up (Gradient2's decay) lasts until the
// next sample only.
type ewma struct {
	n, warmup, count int
	sum, v           float64
}

func (e *ewma) add(x float64) float64 {
	if e.count < e.warmup {
		e.count++
		e.sum += x
		e.v = e.sum / float64(e.count)
		return e.v
	}
	if e.count == 0 {
		e.count = 1
		e.v = x
		return x
	}
	f := 2 / float64(e.n+1)
	e.v = e.v*(1-f) + x*f
	return e.v
}

// set makes x the average, also for the rest of the warm-up: the
// samples so far count as x each.
func (e *ewma) set(x float64) {
	e.v = x
	if e.count == 0 {
		e.count = 1
	}
	e.sum = x * float64(e.count)
}
