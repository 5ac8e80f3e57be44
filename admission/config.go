package admission

import (
	"fmt"
	"math"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// Defaults of zero Config fields.
const (
	DefaultWindow        = 100 * time.Millisecond // Config.Window
	DefaultWindowSamples = 10                     // Config.WindowSamples
	DefaultProbeInterval = time.Minute            // Config.ProbeInterval
	DefaultProbeJitter   = 0.15                   // Config.ProbeJitter
	DefaultProbeLimit    = 3                      // Config.ProbeLimit
	DefaultQueueLength   = 100                    // Config.QueueLength
	DefaultQueueTarget   = 5 * time.Millisecond   // Config.QueueTarget
	DefaultQueueInterval = 100 * time.Millisecond // Config.QueueInterval
)

// Config configures a Limiter. The zero value is a Gradient2 limit with
// its defaults, re-measured without load every minute or so, behind a
// queue of 100 with CoDel's 5 ms target over a 100 ms interval.
type Config struct {
	// Limit is the algorithm that sets the limit. nil: a Gradient2 of
	// Gradient2Config{}. A Limit must not be shared between Limiters.
	Limit Limit

	// Window is how long the Limiter averages requests before it gives
	// the algorithm one sample (their mean RTT, the most in flight,
	// whether any was dropped): a window closes at the first release at
	// least Window after it opened that has seen WindowSamples samples,
	// or at the first one 10 × Window after it opened. 0: DefaultWindow
	// (100 ms).
	Window time.Duration
	// WindowSamples is the fewest samples a window closes with before
	// 10 × Window. 0: DefaultWindowSamples (10).
	WindowSamples int

	// ProbeInterval is how often the no-load RTT is measured anew, as
	// Envoy's adaptive concurrency filter does: the limit is pinned to
	// ProbeLimit for ProbeLength (one window by default), and the mean RTT
	// of the requests that started in the probe is given to the algorithm
	// (NoLoadSetter). The interval is stretched by a random share of up
	// to ProbeJitter so that servers do not probe together. 0:
	// DefaultProbeInterval (1 minute); negative: never. A Limit that is
	// not a NoLoadSetter (Fixed, AIMD) is never probed, whatever
	// ProbeInterval says: nothing would read the measurement.
	ProbeInterval time.Duration
	// ProbeJitter is the most the interval is stretched, as a share of
	// it, in [0, 1]. 0: DefaultProbeJitter (0.15); negative: none.
	ProbeJitter float64
	// ProbeLimit is the limit while the no-load RTT is measured. 0:
	// DefaultProbeLimit (3).
	ProbeLimit int
	// ProbeLength is how long a probe pins the limit to ProbeLimit: the
	// probe ends at the first release at least ProbeLength after it began
	// that has seen WindowSamples samples, or at the first one 10 ×
	// ProbeLength after, as a window does. It may be shorter than Window
	// (long windows for a steady long-term RTT, a short probe that sheds
	// little). 0: one Window (DefaultWindow's 100 ms when Window is left
	// out), the probe a window long; negative: refused.
	ProbeLength time.Duration

	// QueueLength bounds the requests waiting for a slot. 0:
	// DefaultQueueLength (100); negative: no queue, a request beyond the
	// limit is shed at once.
	QueueLength int
	// QueueTarget is how long a request may wait while a queue stands
	// (CoDel's target): the queue has not been empty for QueueInterval.
	// At most QueueInterval. 0: DefaultQueueTarget (5 ms), or
	// QueueInterval when that is shorter.
	QueueTarget time.Duration
	// QueueInterval is how long a request may wait otherwise, and how
	// long the queue must stay non-empty to stand (CoDel's interval). 0:
	// DefaultQueueInterval (100 ms).
	QueueInterval time.Duration
	// FIFO turns adaptive LIFO off: queued requests are served in
	// arrival order also while a queue stands (the CoDel target still
	// applies then). false: the newest first while a queue stands.
	FIFO bool

	// Clock tells the time. nil: clock.Real (its monotonic reading). A
	// Clock whose Now panics takes no slot in Acquire; in a Release it
	// gives the slot back, and hands it to a queued request, before the
	// panic goes on.
	Clock clock.Clock
	// Seed seeds the probe jitter, unless Rand is set: the same Seed gives
	// the same probe times. 0: a seed drawn at random for each Limiter,
	// so that servers started together (the same file, the same deploy)
	// do not probe together.
	Seed uint64
	// Rand returns a number in [0, 1) for the probe jitter (any other
	// result counts as 0). nil: a generator seeded by Seed. It is called
	// only when the Limiter probes (see ProbeInterval). New calls it
	// for the first probe (its panic goes on to New's caller), and a
	// Release that ends a probe calls it for the next, with the
	// Limiter's window lock held: if it panics then, the panic goes on
	// to that Release, with the limit back from ProbeLimit and the next
	// probe at the next window.
	Rand func() float64
}

// Validate reports the first problem of c, naming the field and the
// reason; errors wrap ErrInvalidConfig.
func (c Config) Validate() error {
	_, err := c.resolve()
	return err
}

func (c Config) resolve() (Config, error) {
	switch {
	case c.Window < 0:
		return c, invalid("Config.Window", c.Window, "want a positive duration (0: the default)")
	case c.WindowSamples < 0:
		return c, invalid("Config.WindowSamples", c.WindowSamples, "want at least 1 (0: the default)")
	case c.ProbeLength < 0:
		return c, invalid("Config.ProbeLength", c.ProbeLength, "want a positive duration (0: one Window)")
	case c.ProbeLimit < 0:
		return c, invalid("Config.ProbeLimit", c.ProbeLimit, "want at least 1 (0: the default)")
	case math.IsNaN(c.ProbeJitter) || c.ProbeJitter > 1:
		return c, invalid("Config.ProbeJitter", c.ProbeJitter, "want a share of at most 1 (0: the default, negative: none)")
	case c.QueueTarget < 0:
		return c, invalid("Config.QueueTarget", c.QueueTarget, "want a positive duration (0: the default)")
	case c.QueueInterval < 0:
		return c, invalid("Config.QueueInterval", c.QueueInterval, "want a positive duration (0: the default)")
	}
	if c.Window == 0 {
		c.Window = DefaultWindow
	}
	if c.Window > math.MaxInt64/10 {
		return c, invalid("Config.Window", c.Window, "too long")
	}
	if c.ProbeLength == 0 {
		c.ProbeLength = c.Window
	}
	if c.ProbeLength > math.MaxInt64/10 {
		return c, invalid("Config.ProbeLength", c.ProbeLength, "too long")
	}
	if c.WindowSamples == 0 {
		c.WindowSamples = DefaultWindowSamples
	}
	if c.ProbeInterval == 0 {
		c.ProbeInterval = DefaultProbeInterval
	}
	switch {
	case c.ProbeJitter == 0:
		c.ProbeJitter = DefaultProbeJitter
	case c.ProbeJitter < 0:
		c.ProbeJitter = 0
	}
	if c.ProbeLimit == 0 {
		c.ProbeLimit = DefaultProbeLimit
	}
	if c.QueueLength == 0 {
		c.QueueLength = DefaultQueueLength
	}
	if c.QueueInterval == 0 {
		c.QueueInterval = DefaultQueueInterval
	}
	if c.QueueTarget == 0 {
		c.QueueTarget = min(DefaultQueueTarget, c.QueueInterval)
	}
	if c.QueueTarget > c.QueueInterval {
		return c, invalid("Config.QueueTarget", c.QueueTarget, fmt.Sprintf("want at most QueueInterval (%v): a standing queue may wait less than a passing one", c.QueueInterval))
	}
	if v, ok := c.Limit.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return c, err
		}
	}
	if c.Limit == nil {
		g, err := NewGradient2(Gradient2Config{})
		if err != nil {
			return c, err
		}
		c.Limit = g
	}
	return c, nil
}
