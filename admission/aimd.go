package admission

import (
	"math"
	"time"
)

// Defaults of zero AIMDConfig fields.
const (
	DefaultBackoffRatio = 0.5             // AIMDConfig.BackoffRatio
	DefaultAIMDTimeout  = 5 * time.Second // AIMDConfig.Timeout
)

// AIMDConfig configures an AIMD. The zero value halves the limit on a
// drop and counts a sample slower than 5 s as one.
type AIMDConfig struct {
	// InitialLimit, MinLimit and MaxLimit bound the limit, as in
	// Gradient2Config.
	InitialLimit, MinLimit, MaxLimit int
	// BackoffRatio multiplies the limit on a drop, in (0, 1). 0:
	// DefaultBackoffRatio (0.5: halve).
	BackoffRatio float64
	// Timeout is the RTT beyond which a sample counts as a drop. 0:
	// DefaultAIMDTimeout (5 s).
	Timeout time.Duration
}

// Validate reports the first problem of c, naming the field and the
// reason; errors wrap ErrInvalidConfig.
func (c AIMDConfig) Validate() error {
	_, err := c.resolve()
	return err
}

func (c AIMDConfig) resolve() (AIMDConfig, error) {
	b, err := resolveBounds("AIMDConfig", c.InitialLimit, c.MinLimit, c.MaxLimit)
	if err != nil {
		return c, err
	}
	c.InitialLimit, c.MinLimit, c.MaxLimit = int(b.initial), int(b.min), int(b.max)
	switch {
	case math.IsNaN(c.BackoffRatio) || c.BackoffRatio < 0 || c.BackoffRatio >= 1:
		return c, invalid("AIMDConfig.BackoffRatio", c.BackoffRatio, "want a fraction above 0 and below 1 (0: the default)")
	case c.Timeout < 0:
		return c, invalid("AIMDConfig.Timeout", c.Timeout, "want a positive duration (0: the default)")
	}
	if c.BackoffRatio == 0 {
		c.BackoffRatio = DefaultBackoffRatio
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultAIMDTimeout
	}
	return c, nil
}

// AIMD is the additive-increase, multiplicative-decrease limit of
// Netflix's AIMDLimit, for limits driven by errors rather than latency: a
// dropped sample (or one slower than Timeout) multiplies the limit by
// BackoffRatio; any other sample adds 1 while at least half the limit is
// in flight; bounded by MinLimit and MaxLimit. A sample with rtt <= 0
// that is not dropped is ignored.
type AIMD struct {
	c     AIMDConfig
	b     bounds
	limit float64
}

// NewAIMD returns an AIMD configured by c, or c's Validate error.
func NewAIMD(c AIMDConfig) (*AIMD, error) {
	c, err := c.resolve()
	if err != nil {
		return nil, err
	}
	a := &AIMD{c: c, b: bounds{float64(c.InitialLimit), float64(c.MinLimit), float64(c.MaxLimit)}}
	a.limit = a.b.initial
	return a, nil
}

// OnSample updates the limit from one sample.
func (a *AIMD) OnSample(_ time.Time, rtt time.Duration, inflight int, dropped bool) {
	switch {
	case dropped || rtt > a.c.Timeout:
		a.limit = a.b.clamp(a.limit * a.c.BackoffRatio)
	case rtt <= 0:
	case float64(inflight)*2 >= a.limit:
		a.limit = a.b.clamp(a.limit + 1)
	}
}

// Limit returns the current limit, rounded down.
func (a *AIMD) Limit() int { return int(a.limit) }
