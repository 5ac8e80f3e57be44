package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// askContext is the context a run asks limiters with: its deadline is the
// call's (its start plus the policy's MaxElapsed; none without one), its
// Done channel nil: it never ends and holds no values. A run keeps one
// and sets it before each Acquire (limiters do not keep the context past
// it).
type askContext struct {
	dl  time.Time
	has bool
}

func (a *askContext) Deadline() (time.Time, bool) { return a.dl, a.has }
func (*askContext) Done() <-chan struct{}         { return nil }
func (*askContext) Err() error                    { return nil }
func (*askContext) Value(any) any                 { return nil }

var _ context.Context = (*askContext)(nil)

// reserver is a limiter whose Acquire may have reserved an admission
// for later: reserved reports the wait the last Acquire reserved (ok
// false when it admitted at once).
type reserver interface {
	reserved() (wait time.Duration, ok bool)
}

// waitClock is the clock an AWS adaptive limiter runs on in the
// simulator: the run's clock, except that NewTimer, which Acquire waits
// on after reserving its token, records the wait and returns a timer
// that has fired already, so that Acquire returns at once with the token
// reserved and the run delays the attempt by the wait itself (nothing
// can block in virtual time).
type waitClock struct {
	clock.Clock
	wait   time.Duration
	waited bool
}

func (w *waitClock) NewTimer(d time.Duration) clock.Timer {
	w.wait, w.waited = d, true
	t := &firedTimer{ch: make(chan time.Time, 1)}
	t.ch <- w.Now().Add(d)
	return t
}

// firedTimer is a timer whose one value is ready on its channel.
type firedTimer struct{ ch chan time.Time }

func (t *firedTimer) C() <-chan time.Time      { return t.ch }
func (t *firedTimer) Stop() bool               { return false }
func (t *firedTimer) Reset(time.Duration) bool { return false }

// simAdaptive is throttle.Adaptive on a waitClock: an attempt short of a
// token reserves one, as the real Acquire does (the bucket goes negative,
// so later attempts wait behind it, one refill apart, instead of asking
// again together), and waits the reserved time on the virtual clock.
type simAdaptive struct {
	*throttle.Adaptive
	clk *waitClock
}

func (a *simAdaptive) Acquire(ctx context.Context, retry bool) (func(error), error) {
	a.clk.waited = false
	return a.Adaptive.Acquire(ctx, retry)
}

func (a *simAdaptive) reserved() (time.Duration, bool) { return a.clk.wait, a.clk.waited }

// errWaitCancelled gives an attempt's reserved token back when its call
// is cancelled during the wait: throttle.Adaptive treats an attempt the
// breaker refused (breaker.ErrOpen) as never sent and returns its token,
// which is what its own Acquire does for a wait whose context ends.
var errWaitCancelled = fmt.Errorf("sim: call cancelled during the limiter's wait: %w", breaker.ErrOpen)

// IsSimOverload is the overload classification the simulator hands its
// limiters: the tiers' 503s (ErrUnavailable, ErrOverloaded: a full queue)
// and the core's overload marker. Timeouts and 500s are answers the
// backend accepted, as throttle.IsOverload has it.
func IsSimOverload(err error) bool {
	return errors.Is(err, ErrOverloaded) || errors.Is(err, ErrUnavailable) || retry.IsOverloaded(err)
}

// SRELimiter returns a Policy.Limiter constructor for throttle.NewSRE(c)
// on the run's virtual clock and seeded random source, with
// IsSimOverload as its Overload classification unless c sets one.
func SRELimiter(c throttle.SREConfig) func(Env) retry.Limiter {
	return func(e Env) retry.Limiter {
		c := c
		c.Clock = e.Clock
		c.Rand = rand.NewPCG(rand.New(e.Rand).Uint64(), 0x853c49e6748fea9b)
		if c.Overload == nil {
			c.Overload = IsSimOverload
		}
		return throttle.NewSRE(c)
	}
}

// AdaptiveLimiter returns a Policy.Limiter constructor for
// throttle.NewAdaptive(c) (the AWS SDKs' adaptive retry mode) on the run's
// virtual clock, with IsSimOverload as its Throttled classification
// unless c sets one. An attempt short of a token reserves one and waits
// for it on the virtual clock, as the real Acquire does; one whose wait
// would end after its call's deadline (Policy.MaxElapsed) is refused.
func AdaptiveLimiter(c throttle.AdaptiveConfig) func(Env) retry.Limiter {
	return func(e Env) retry.Limiter {
		c := c
		wc := &waitClock{Clock: clock.Or(e.Clock)}
		c.Clock = wc
		if c.Throttled == nil {
			c.Throttled = IsSimOverload
		}
		return &simAdaptive{Adaptive: throttle.NewAdaptive(c), clk: wc}
	}
}
