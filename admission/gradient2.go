package admission

import (
	"math"
	"time"
)

// Defaults of zero Gradient2Config fields.
const (
	DefaultGradientSmoothing = 0.2 // Gradient2Config.Smoothing
	DefaultGradientTolerance = 1.5 // Gradient2Config.Tolerance
	DefaultLongWindow        = 600 // Gradient2Config.LongWindow, in samples
	DefaultShortWindow       = 1   // Gradient2Config.ShortWindow, in samples
)

// Gradient2Config configures a Gradient2. The zero value has the
// defaults of Netflix's Gradient2Limit — initial limit 20, smoothing 0.2,
// RTT tolerance 1.5, a long window of 600 samples after a plain average
// of the first 10 — with two departures: the queue allowance is √limit
// (Netflix's is 4; they agree near the initial limit, and √limit lets a
// larger limit keep a larger queue), and the bounds are [4, 1000], every
// algorithm's here (Netflix's Gradient2Limit: [20, 200]).
type Gradient2Config struct {
	// InitialLimit, MinLimit and MaxLimit bound the limit: it starts at
	// InitialLimit and stays within [MinLimit, MaxLimit]. 0:
	// DefaultInitialLimit (20), DefaultMinLimit (4), DefaultMaxLimit
	// (1000), each kept within the others when only some are set.
	InitialLimit, MinLimit, MaxLimit int
	// Smoothing is the share of each new estimate taken into the limit,
	// in (0, 1]. 0: DefaultGradientSmoothing (0.2).
	Smoothing float64
	// Tolerance is how much the short-term RTT may exceed the long-term
	// one before the limit shrinks, at least 1 (1.5: 50% more). 0:
	// DefaultGradientTolerance (1.5).
	Tolerance float64
	// LongWindow is the number of samples the long-term RTT averages
	// over (an exponential average). 0: DefaultLongWindow (600).
	LongWindow int
	// ShortWindow is the number of samples the short-term RTT averages
	// over. 0: DefaultShortWindow (1: the sample itself; a Limiter
	// already averages a window of requests into each sample).
	ShortWindow int
	// QueueSize is the allowance of requests that may queue at the
	// server without shrinking the limit, as a function of the limit;
	// a result below 1 or NaN counts as 1. nil: √limit, at least 1.
	// Behind a Limiter it is called as a window closes: if it panics, the
	// panic goes on to the Release that closed the window, that request's
	// slot is given back, and the limit stays as it was.
	QueueSize func(limit float64) float64
}

// Validate reports the first problem of c, naming the field and the
// reason; errors wrap ErrInvalidConfig.
func (c Gradient2Config) Validate() error {
	_, err := c.resolve()
	return err
}

func (c Gradient2Config) resolve() (Gradient2Config, error) {
	b, err := resolveBounds("Gradient2Config", c.InitialLimit, c.MinLimit, c.MaxLimit)
	if err != nil {
		return c, err
	}
	c.InitialLimit, c.MinLimit, c.MaxLimit = int(b.initial), int(b.min), int(b.max)
	if err := ratio("Gradient2Config.Smoothing", c.Smoothing, 1); err != nil {
		return c, err
	}
	if c.Smoothing == 0 {
		c.Smoothing = DefaultGradientSmoothing
	}
	switch {
	case math.IsNaN(c.Tolerance) || math.IsInf(c.Tolerance, 0) || (c.Tolerance != 0 && c.Tolerance < 1):
		return c, invalid("Gradient2Config.Tolerance", c.Tolerance, "want a finite number of at least 1 (0: the default)")
	case c.LongWindow < 0:
		return c, invalid("Gradient2Config.LongWindow", c.LongWindow, "want at least 1 sample (0: the default)")
	case c.ShortWindow < 0:
		return c, invalid("Gradient2Config.ShortWindow", c.ShortWindow, "want at least 1 sample (0: the default)")
	}
	if c.Tolerance == 0 {
		c.Tolerance = DefaultGradientTolerance
	}
	if c.LongWindow == 0 {
		c.LongWindow = DefaultLongWindow
	}
	if c.ShortWindow == 0 {
		c.ShortWindow = DefaultShortWindow
	}
	if c.ShortWindow > c.LongWindow {
		return c, invalid("Gradient2Config.ShortWindow", c.ShortWindow, "want at most LongWindow")
	}
	return c, nil
}

// Gradient2 is Netflix's Gradient2Limit: it compares a short-term RTT
// with a long-term one and lets the limit grow while they agree, shrink
// when the short-term one rises beyond the tolerance:
//
//	gradient = clamp(Tolerance × longRTT / shortRTT, 0.5, 1)
//	estimate = limit × gradient + QueueSize(limit)
//	limit    = limit × (1 − Smoothing) + estimate × Smoothing
//
// bounded by MinLimit and MaxLimit. At a steady RTT the gradient is 1 and
// the limit grows by the queue allowance (√limit) times Smoothing per
// sample; one outlier at most halves the estimate. When the long-term RTT
// is more than twice the short-term one (latency back to normal after a
// long overload) it decays by 5% a sample, so the baseline follows. While
// fewer than half the limit are in flight the limit is left alone (the
// server is not the bottleneck). Drops are judged by their RTT only.
//
// A sample with rtt <= 0 is ignored, and one sample far too short (a
// clock that stepped back during a request) cannot shrink the limit: a
// short-term RTT below the long-term one means a gradient of 1.
type Gradient2 struct {
	c     Gradient2Config
	b     bounds
	limit float64
	long  ewma
	short ewma
}

// NewGradient2 returns a Gradient2 configured by c, or c's Validate error.
func NewGradient2(c Gradient2Config) (*Gradient2, error) {
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	g := &Gradient2{c: c, b: bounds{float64(c.InitialLimit), float64(c.MinLimit), float64(c.MaxLimit)}}
	g.limit = g.b.initial
	g.long = ewma{n: c.LongWindow, warmup: min(10, c.LongWindow)}
	g.short = ewma{n: c.ShortWindow}
	return g, nil
}

// OnSample updates the limit from one sample.
func (g *Gradient2) OnSample(_ time.Time, rtt time.Duration, inflight int, _ bool) {
	if rtt <= 0 {
		return
	}
	x := float64(rtt)
	short := g.short.add(x)
	long := g.long.add(x)
	if long/short > 2 {
		g.long.v *= 0.95
		long = g.long.v
	}
	if float64(inflight) < g.limit/2 {
		return
	}
	gradient := math.Max(0.5, math.Min(1, g.c.Tolerance*long/short))
	q := math.Sqrt(g.limit)
	if g.c.QueueSize != nil {
		q = g.c.QueueSize(g.limit)
	}
	if !(q >= 0) {
		q = 0
	}
	q = math.Max(q, 1)
	est := g.limit*gradient + q
	g.limit = g.b.clamp(g.limit*(1-g.c.Smoothing) + est*g.c.Smoothing)
}

// SetNoLoadRTT sets the long-term RTT to rtt (ignored unless > 0), as a
// Limiter's re-measurement found it.
func (g *Gradient2) SetNoLoadRTT(rtt time.Duration) {
	if rtt > 0 {
		g.long.set(float64(rtt))
	}
}

// Limit returns the current limit, rounded down.
func (g *Gradient2) Limit() int { return int(g.limit) }
