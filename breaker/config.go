package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// Config configures a Breaker. Every field is optional: the zero Config
// opens after 5 consecutive failures, stays open for 60s (shortened by up
// to 10% of jitter), then lets one probe call through and closes on its
// success.
//
// The trip condition is chosen by which fields are set (see the package
// documentation for how to pick one):
//
//   - ReadyToTrip set: the custom condition.
//   - Window.Calls or Window.Duration set: a failure-rate and/or slow-call-rate
//     condition over that window.
//   - otherwise: ConsecutiveFailures (default 5).
//
// Setting fields of two conditions at once is a configuration error.
type Config struct {
	// ConsecutiveFailures opens the breaker after this many failures in a
	// row in the closed state. 0: DefaultConsecutiveFailures, unless Window
	// or ReadyToTrip choose another condition.
	ConsecutiveFailures int

	// Window opens the breaker on the failure rate or slow-call rate of the
	// recent calls: the last Window.Calls calls, or the calls of the last
	// Window.Duration. The zero Window is unused.
	Window Window

	// ReadyToTrip, if set, is the trip condition: it is called with the
	// current Counts after every failure and every slow call recorded in
	// the closed state, and the breaker opens when it returns true. Counts
	// cover Window when one is set, else everything since the breaker
	// last closed. It is called with the breaker's lock held, so it must be
	// quick and must not call the breaker.
	ReadyToTrip func(Counts) bool

	// OpenTimeout is how long the breaker stays open before it lets probe
	// calls through. 0: DefaultOpenTimeout.
	OpenTimeout time.Duration

	// MaxOpenTimeout, when larger than OpenTimeout, makes the open period
	// grow on repeated trips (a trip from the half-open state, or a failed
	// active probe, before the breaker closed again): the n-th open period
	// lasts OpenTimeout·OpenTimeoutMultiplier^(n-1), capped at
	// MaxOpenTimeout. 0: no growth.
	MaxOpenTimeout time.Duration

	// OpenTimeoutMultiplier is the growth factor of the open period.
	// 0: DefaultOpenTimeoutMultiplier. Used only with MaxOpenTimeout.
	OpenTimeoutMultiplier float64

	// OpenJitter shortens every open period by a random share of up to
	// OpenJitter (0 < OpenJitter ≤ 1), so that a fleet of clients whose
	// breakers tripped together does not probe in lockstep. The period is
	// uniform in [d·(1−OpenJitter), d] for the nominal period d.
	// 0: DefaultOpenJitter. Negative: no jitter.
	OpenJitter float64

	// MaxProbes is how many calls the half-open breaker admits at once;
	// more get ErrTooManyProbes. 0: 1.
	MaxProbes int

	// SuccessThreshold is how many successful calls close the half-open
	// breaker. Any failure reopens it. 0: MaxProbes.
	SuccessThreshold int

	// Probe, if set, is an active health check. It runs ProbeOffset before
	// the open period ends (never earlier than halfway through it), with a
	// context bounded by ProbeTimeout. Success moves the breaker to
	// half-open at once; failure (or an answer after the timeout) restarts
	// the open period, counting as a repeated trip. While probing is active
	// only a successful probe ends the open period; after Close the
	// breaker falls back to moving to half-open when the period ends.
	//
	// The probe runs in the goroutine of the clock's AfterFunc: its own
	// goroutine on the real clock, the goroutine advancing time on a
	// virtual one (where it must not wait for that clock). It must return
	// when its context ends.
	Probe func(ctx context.Context) error

	// ProbeOffset is how long before the end of the open period the active
	// probe starts. 0: DefaultProbeOffset.
	ProbeOffset time.Duration

	// ProbeTimeout bounds one active probe. 0: DefaultProbeTimeout.
	ProbeTimeout time.Duration

	// IsFailure reports whether a call's non-nil error counts against the
	// downstream; errors for which it returns false count as successes
	// (the downstream answered). It is never called with nil (always a
	// success) nor with errors IsExcluded accepts. If it (or IsExcluded)
	// panics, the call counts as a failure — a half-open probe slot is
	// released — and the panic goes on out of the done function.
	// nil: DefaultIsFailure.
	IsFailure func(err error) bool

	// IsExcluded reports whether a call's non-nil error says nothing about
	// the downstream, so that the call counts neither as success nor as
	// failure (a half-open probe slot is still released).
	// nil: DefaultIsExcluded (the caller's own cancellation).
	IsExcluded func(err error) bool

	// Clock measures time: open periods, time windows, slow calls, probe
	// timers. nil: clock.Real.
	//
	// On the real clock, the end of each open period is marked by a
	// timer set for it (it fires at that instant or a scheduler's latency
	// later), so that a refusal by an open breaker reads no clock. On any
	// other clock the breaker sets no timer of its own but the probe's:
	// each refusal reads Now, so that on a fake or simulated clock the
	// period ends exactly at its end.
	Clock clock.Clock

	// Rand draws the jitter of open periods. nil: math/rand/v2's global
	// generator. Set a seeded source (rand.NewPCG) for reproducible runs.
	// Any source will do, safe for concurrent use or not: every breaker
	// draws from it through backoff.Shared, under the lock backoff and
	// retry take for such a source, so a Config, and its Rand, may be
	// shared by any number of breakers, backoff strategies and policies.
	// Other code that draws from the same source must do so through
	// backoff.Shared.
	Rand rand.Source

	// OnStateChange, if set, is called on every state change, like a
	// listener added with Subscribe.
	OnStateChange func(from, to State)
}

// Window is a sliding window of recent calls over which failure and
// slow-call rates are measured. Set exactly one of Calls (a count window)
// and Duration (a time window).
type Window struct {
	// Calls makes a count window: the outcomes of the last Calls calls.
	Calls int

	// Duration makes a time window: the outcomes of the calls that ended
	// within the last Duration, kept in Buckets buckets of Duration/Buckets
	// each. The window slides one bucket at a time, so it covers between
	// Duration−Duration/Buckets and Duration.
	Duration time.Duration

	// Buckets is the number of buckets of a time window.
	// 0: DefaultBuckets.
	Buckets int

	// MinCalls is the least number of calls in the window before a rate is
	// judged. 0: Calls for a count window, DefaultMinCalls for a time
	// window.
	MinCalls int

	// FailureRatio opens the breaker when failures make up at least this
	// share of the calls in the window, as a fraction in (0, 1]: 0.5 is
	// half of them. 0: not checked, unless
	// SlowCallRatio is 0 too, in which case DefaultFailureRatio.
	FailureRatio float64

	// SlowCallDuration makes calls that take at least this long slow (a
	// slow call is still a success or a failure as well). 0: no call is
	// slow.
	SlowCallDuration time.Duration

	// SlowCallRatio opens the breaker when slow calls make up at least
	// this share of the calls in the window, as a fraction in (0, 1]
	// (resilience4j's slowCallRateThreshold divided by 100). It needs SlowCallDuration. A slow probe in the
	// half-open state then counts as a failure. 0: not checked.
	SlowCallRatio float64
}

func (w Window) isZero() bool { return w == Window{} }

// Defaults used for zero Config fields.
const (
	DefaultConsecutiveFailures   = 5
	DefaultOpenTimeout           = 60 * time.Second
	DefaultOpenTimeoutMultiplier = 2.0
	DefaultOpenJitter            = 0.1
	DefaultProbeOffset           = 100 * time.Millisecond
	DefaultProbeTimeout          = time.Second
	DefaultBuckets               = 10
	DefaultMinCalls              = 10
	DefaultFailureRatio          = 0.5
)

// maxBuckets bounds Window.Buckets; finer windows buy nothing.
const maxBuckets = 1 << 12

// maxWindowCalls bounds Window.Calls (one byte per call is kept).
const maxWindowCalls = 1 << 24

// DefaultIsFailure is the default Config.IsFailure: retry.IsDownstreamFault,
// which asks whether an outcome speaks against the downstream's health —
// a separate question from whether to retry it. An error that reports its
// own verdict (retry.FaultReporter: httpretry's 5xx and 429, grpcretry's
// Unavailable, Internal, Unknown, ResourceExhausted, DataLoss and attempt
// deadlines) is counted as it says, even when it is not retried; any other
// error counts against the downstream unless it was marked retry.Permanent
// (the downstream answered, the request was at fault) or it is the
// caller's cancellation (context.Canceled). Attempt timeouts
// (retry.ErrAttemptTimeout) and context.DeadlineExceeded are failures: a
// downstream too slow to answer in time is not healthy.
func DefaultIsFailure(err error) bool { return retry.IsDownstreamFault(err) }

// DefaultIsExcluded is the default Config.IsExcluded: the caller's own
// cancellation (context.Canceled that is not also an attempt timeout or a
// deadline) says nothing about the downstream and is not counted.
func DefaultIsExcluded(err error) bool {
	return err != nil && errors.Is(err, context.Canceled) &&
		!errors.Is(err, retry.ErrAttemptTimeout) && !errors.Is(err, context.DeadlineExceeded)
}

// Validate reports the first problem with c, or nil. New panics on a Config
// that Validate rejects.
func (c Config) Validate() error {
	w := c.Window
	switch {
	case c.ConsecutiveFailures < 0 || c.ConsecutiveFailures > math.MaxInt32:
		return errors.New("breaker: ConsecutiveFailures must be between 0 and 2147483647")
	case c.OpenTimeout < 0:
		return errors.New("breaker: OpenTimeout must not be negative")
	case c.MaxOpenTimeout < 0:
		return errors.New("breaker: MaxOpenTimeout must not be negative")
	case c.MaxOpenTimeout > 0 && c.MaxOpenTimeout < c.openTimeout():
		return errors.New("breaker: MaxOpenTimeout must not be shorter than OpenTimeout")
	case c.OpenTimeoutMultiplier != 0 && !(c.OpenTimeoutMultiplier >= 1 && c.OpenTimeoutMultiplier <= 1e6):
		return errors.New("breaker: OpenTimeoutMultiplier must be between 1 and 1e6")
	case c.OpenJitter > 1 || math.IsNaN(c.OpenJitter):
		return fmt.Errorf("breaker: OpenJitter is %v, want a fraction of at most 1 (0.1 is 10%%; negative: none)", c.OpenJitter)
	case c.MaxProbes < 0:
		return errors.New("breaker: MaxProbes must not be negative")
	case c.SuccessThreshold < 0:
		return errors.New("breaker: SuccessThreshold must not be negative")
	case c.ProbeOffset < 0:
		return errors.New("breaker: ProbeOffset must not be negative")
	case c.ProbeTimeout < 0:
		return errors.New("breaker: ProbeTimeout must not be negative")
	case w.Calls < 0 || w.Calls > maxWindowCalls:
		return errors.New("breaker: Window.Calls must be between 0 and 16777216")
	case w.Duration < 0:
		return errors.New("breaker: Window.Duration must not be negative")
	case w.Buckets < 0 || w.Buckets > maxBuckets:
		return errors.New("breaker: Window.Buckets must be between 0 and 4096")
	case w.MinCalls < 0:
		return errors.New("breaker: Window.MinCalls must not be negative")
	case w.Calls > 0 && w.MinCalls > w.Calls:
		return errors.New("breaker: Window.MinCalls must not exceed Window.Calls")
	case w.SlowCallDuration < 0:
		return errors.New("breaker: Window.SlowCallDuration must not be negative")
	case !validRatio(w.FailureRatio):
		return ratioError("Window.FailureRatio", w.FailureRatio)
	case !validRatio(w.SlowCallRatio):
		return ratioError("Window.SlowCallRatio", w.SlowCallRatio)
	case w.SlowCallRatio > 0 && w.SlowCallDuration == 0:
		return errors.New("breaker: Window.SlowCallRatio needs Window.SlowCallDuration")
	case w.Calls > 0 && w.Duration > 0:
		return errors.New("breaker: set either Window.Calls or Window.Duration, not both")
	case !w.isZero() && w.Calls == 0 && w.Duration == 0:
		return errors.New("breaker: Window needs Calls or Duration")
	case w.Duration > 0 && w.Duration < time.Duration(w.buckets()):
		return errors.New("breaker: Window.Duration is shorter than one nanosecond per bucket")
	case c.ConsecutiveFailures > 0 && !w.isZero():
		return errors.New("breaker: choose one trip condition: ConsecutiveFailures or Window")
	case c.ReadyToTrip != nil && c.ConsecutiveFailures > 0:
		return errors.New("breaker: choose one trip condition: ConsecutiveFailures or ReadyToTrip")
	case c.ReadyToTrip != nil && (w.FailureRatio > 0 || w.SlowCallRatio > 0):
		return errors.New("breaker: choose one trip condition: ReadyToTrip or Window rates")
	}
	return nil
}

// ratioError reports a share outside [0, 1], naming the field and the unit.
func ratioError(field string, v float64) error {
	return fmt.Errorf("breaker: %s is %v, want a fraction from 0 to 1 (0.5 is 50%%)", field, v)
}

func validRatio(p float64) bool { return p >= 0 && p <= 1 } // false for NaN

func (c Config) openTimeout() time.Duration {
	if c.OpenTimeout == 0 {
		return DefaultOpenTimeout
	}
	return c.OpenTimeout
}

func (w Window) buckets() int {
	if w.Buckets == 0 {
		return DefaultBuckets
	}
	return w.Buckets
}

// tripMode is the trip condition a Config chose.
type tripMode uint8

const (
	tripConsecutive tripMode = iota
	tripCountWindow
	tripTimeWindow
	tripCustom
)

// settings is a Config with its defaults applied.
type settings struct {
	mode          tripMode
	consecutive   uint64
	windowCalls   int
	windowDur     time.Duration
	buckets       int
	minCalls      uint64
	failPct       float64
	slowPct       float64
	slowDur       time.Duration
	readyToTrip   func(Counts) bool
	openTimeout   time.Duration
	maxOpen       time.Duration
	multiplier    float64
	jitter        float64
	maxProbes     int
	successes     int
	probe         func(context.Context) error
	probeOffset   time.Duration
	probeTimeout  time.Duration
	isFailure     func(error) bool
	isExcluded    func(error) bool
	clk           clock.Clock
	rand          rand.Source
	onStateChange func(from, to State)
}

// WithDefaults returns c as New reads it: every field that c leaves to a
// default set to its effective value (the trip condition's, the open
// period's, the probes' and the hooks'). OpenJitter stays negative (none)
// if c's is. The result of a valid Config is valid and is its own
// defaults. A breaker implemented elsewhere (redisstore's shared breaker)
// uses it to follow exactly the rules of a Breaker.
func (c Config) WithDefaults() Config {
	w := &c.Window
	switch {
	case w.Calls > 0 || w.Duration > 0:
		if w.Duration > 0 && w.Buckets == 0 {
			w.Buckets = DefaultBuckets
		}
		if w.MinCalls == 0 {
			w.MinCalls = DefaultMinCalls
			if w.Calls > 0 {
				w.MinCalls = w.Calls
			}
		}
		if c.ReadyToTrip == nil && w.FailureRatio == 0 && w.SlowCallRatio == 0 {
			w.FailureRatio = DefaultFailureRatio
		}
	case c.ReadyToTrip == nil && c.ConsecutiveFailures == 0:
		c.ConsecutiveFailures = DefaultConsecutiveFailures
	}
	c.OpenTimeout = c.openTimeout()
	c.MaxOpenTimeout = max(c.MaxOpenTimeout, c.OpenTimeout)
	if c.OpenTimeoutMultiplier == 0 {
		c.OpenTimeoutMultiplier = DefaultOpenTimeoutMultiplier
	}
	if c.OpenJitter == 0 {
		c.OpenJitter = DefaultOpenJitter
	}
	if c.MaxProbes == 0 {
		c.MaxProbes = 1
	}
	if c.SuccessThreshold == 0 {
		c.SuccessThreshold = c.MaxProbes
	}
	if c.ProbeOffset == 0 {
		c.ProbeOffset = DefaultProbeOffset
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = DefaultProbeTimeout
	}
	if c.IsFailure == nil {
		c.IsFailure = DefaultIsFailure
	}
	if c.IsExcluded == nil {
		c.IsExcluded = DefaultIsExcluded
	}
	return c
}

func (c *Config) settings() settings {
	d := c.WithDefaults()
	w := d.Window
	s := settings{
		mode:          tripConsecutive,
		consecutive:   uint64(d.ConsecutiveFailures),
		windowCalls:   w.Calls,
		windowDur:     w.Duration,
		buckets:       w.Buckets,
		minCalls:      uint64(w.MinCalls),
		failPct:       100 * w.FailureRatio,
		slowPct:       100 * w.SlowCallRatio,
		slowDur:       w.SlowCallDuration,
		readyToTrip:   d.ReadyToTrip,
		openTimeout:   d.OpenTimeout,
		maxOpen:       d.MaxOpenTimeout,
		multiplier:    d.OpenTimeoutMultiplier,
		jitter:        max(d.OpenJitter, 0),
		maxProbes:     d.MaxProbes,
		successes:     d.SuccessThreshold,
		probe:         d.Probe,
		probeOffset:   d.ProbeOffset,
		probeTimeout:  d.ProbeTimeout,
		isFailure:     d.IsFailure,
		isExcluded:    d.IsExcluded,
		clk:           clock.Or(d.Clock),
		rand:          backoff.Shared(d.Rand),
		onStateChange: d.OnStateChange,
	}
	switch {
	case d.ReadyToTrip != nil:
		s.mode = tripCustom
	case w.Calls > 0:
		s.mode = tripCountWindow
	case w.Duration > 0:
		s.mode = tripTimeWindow
	}
	return s
}
