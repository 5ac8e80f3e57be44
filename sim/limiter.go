package sim

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// nowContext is the context a run asks limiters with: its deadline is the
// virtual now, so that a limiter that would wait (throttle.Adaptive)
// answers at once with throttle.ErrWaitTooLong instead of blocking on a
// timer; the run then waits on the virtual clock (limiterWait). It never
// ends and holds no values.
type nowContext struct{ c *Clock }

func (n nowContext) Deadline() (time.Time, bool) { return n.c.Now(), true }
func (nowContext) Done() <-chan struct{}         { return nil }
func (nowContext) Err() error                    { return nil }
func (nowContext) Value(any) any                 { return nil }

var _ context.Context = nowContext{}

// limiterWait returns how long an attempt that lim refused with err must
// wait before asking again, when the refusal was only the wait: a
// throttle.Adaptive bucket short of a token, waiting (1 − tokens) ÷ fill
// rate, as its Acquire would.
func limiterWait(lim retry.Limiter, err error) (time.Duration, bool) {
	a, ok := lim.(*throttle.Adaptive)
	if !ok || !errors.Is(err, throttle.ErrWaitTooLong) {
		return 0, false
	}
	st := a.Stats()
	if !(st.FillRate > 0) {
		return 0, false
	}
	return max(time.Duration(math.Ceil((1-st.Tokens)/st.FillRate*1e9)), time.Microsecond), true
}

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
// unless c sets one.
func AdaptiveLimiter(c throttle.AdaptiveConfig) func(Env) retry.Limiter {
	return func(e Env) retry.Limiter {
		c := c
		c.Clock = e.Clock
		if c.Throttled == nil {
			c.Throttled = IsSimOverload
		}
		return throttle.NewAdaptive(c)
	}
}
