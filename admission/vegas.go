package admission

import (
	"math"
	"math/rand/v2"
	"time"
)

// Defaults of zero VegasConfig fields.
const (
	DefaultVegasSmoothing  = 1.0 // VegasConfig.Smoothing
	DefaultProbeMultiplier = 30  // VegasConfig.ProbeMultiplier
)

// VegasConfig configures a Vegas. The zero value is the default of
// Netflix's VegasLimit.
type VegasConfig struct {
	// InitialLimit, MinLimit and MaxLimit bound the limit, as in
	// Gradient2Config.
	InitialLimit, MinLimit, MaxLimit int
	// Smoothing is the share of each new estimate taken into the limit,
	// in (0, 1]. 0: DefaultVegasSmoothing (1: none).
	Smoothing float64
	// ProbeMultiplier sets how often the no-load RTT is forgotten and
	// measured anew: after about ProbeMultiplier × limit samples (between
	// half that and all of it, at random from Seed). 0:
	// DefaultProbeMultiplier (30); negative: never.
	ProbeMultiplier int
	// Seed seeds the probe's jitter: the same Seed gives the same probe
	// counts. 0: a seed drawn at random for each Vegas, so that servers
	// started together do not re-measure together.
	Seed uint64
}

// Validate reports the first problem of c, naming the field and the
// reason; errors wrap ErrInvalidConfig.
func (c VegasConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c VegasConfig) resolve() (VegasConfig, error) {
	b, err := resolveBounds("VegasConfig", c.InitialLimit, c.MinLimit, c.MaxLimit)
	if err != nil {
		return c, err
	}
	c.InitialLimit, c.MinLimit, c.MaxLimit = int(b.initial), int(b.min), int(b.max)
	if err := ratio("VegasConfig.Smoothing", c.Smoothing, 1); err != nil {
		return c, err
	}
	if c.Smoothing == 0 {
		c.Smoothing = DefaultVegasSmoothing
	}
	if c.ProbeMultiplier == 0 {
		c.ProbeMultiplier = DefaultProbeMultiplier
	}
	return c, nil
}

// Vegas is Netflix's VegasLimit, after TCP Vegas: it estimates the queue
// at the server from the no-load RTT (the smallest seen) and the sample's
// RTT,
//
//	queue = ⌈limit × (1 − noLoadRTT / rtt)⌉
//
// and, with α = 3·log10(limit), β = 6·log10(limit) and the threshold
// log10(limit) (each at least 1), grows the limit by β when queue is
// at most the threshold, by log10(limit) when it is below α, shrinks it by
// log10(limit) when it is above β or the sample was dropped, and leaves it
// otherwise; bounded by MinLimit and MaxLimit, smoothed by Smoothing.
// While fewer than half the limit are in flight (and nothing dropped) the
// limit is left alone. Every ProbeMultiplier × limit samples or so the
// no-load RTT is measured anew from the next sample.
//
// A sample with rtt <= 0 is ignored. A sample that ended before one heard
// earlier (its start plus rtt is before theirs: the clock stepped back)
// is judged, but cannot lower the no-load RTT, so a clock step does not
// make every later sample look queued and shrink the limit to MinLimit.
type Vegas struct {
	c       VegasConfig
	b       bounds
	limit   float64
	noLoad  float64 // 0: not measured
	lastEnd time.Time
	seen    bool // lastEnd is set
	count   int  // samples since the last probe
	probeAt int  // the sample count at which to probe
	rand    splitmix
}

// NewVegas returns a Vegas configured by c, or c's Validate error.
func NewVegas(c VegasConfig) (*Vegas, error) {
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	seed := c.Seed
	if seed == 0 {
		seed = rand.Uint64() // each Vegas its own: servers started together re-measure apart
	}
	v := &Vegas{c: c, b: bounds{float64(c.InitialLimit), float64(c.MinLimit), float64(c.MaxLimit)}, rand: splitmix(seed)}
	v.limit = v.b.initial
	v.nextProbe()
	return v, nil
}

func (v *Vegas) nextProbe() {
	v.count = 0
	if v.c.ProbeMultiplier < 0 {
		v.probeAt = -1
		return
	}
	n := float64(v.c.ProbeMultiplier) * v.limit * (0.5 + v.rand.float64()/2)
	v.probeAt = int(math.Min(n, 1<<40))
}

func log10(x float64) float64 { return math.Max(1, math.Log10(x)) }

// OnSample updates the limit from one sample.
func (v *Vegas) OnSample(start time.Time, rtt time.Duration, inflight int, dropped bool) {
	if rtt <= 0 {
		return
	}
	end := start.Add(rtt)
	inOrder := !v.seen || !end.Before(v.lastEnd)
	if inOrder {
		v.lastEnd, v.seen = end, true
	}
	x := float64(rtt)
	v.count++
	if v.probeAt >= 0 && v.count > v.probeAt {
		v.nextProbe()
		v.noLoad = x
		return
	}
	if v.noLoad == 0 || (x < v.noLoad && inOrder) {
		v.noLoad = x
		return
	}
	l := v.limit
	t := log10(l)
	var est float64
	switch {
	case dropped:
		est = l - t
	case float64(inflight)*2 < l:
		return
	default:
		queue := math.Ceil(l * (1 - v.noLoad/x))
		switch {
		case queue <= t:
			est = l + 6*t
		case queue < 3*t:
			est = l + t
		case queue > 6*t:
			est = l - t
		default:
			return
		}
	}
	v.limit = v.b.clamp(l*(1-v.c.Smoothing) + est*v.c.Smoothing)
}

// SetNoLoadRTT sets the no-load RTT to rtt (ignored unless > 0), as a
// Limiter's re-measurement found it.
func (v *Vegas) SetNoLoadRTT(rtt time.Duration) {
	if rtt > 0 {
		v.noLoad = float64(rtt)
	}
}

// Limit returns the current limit, rounded down.
func (v *Vegas) Limit() int { return int(v.limit) }

// splitmix is a splitmix64 generator: small, seedable, good enough for
// jitter.
type splitmix uint64

func (s *splitmix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 returns a number in [0, 1).
func (s *splitmix) float64() float64 { return float64(s.next()>>11) / (1 << 53) }
