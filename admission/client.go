package admission

import (
	"context"
	"errors"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
	"github.com/stormguard/stormguard/throttle"
)

// RetryLimiter returns l as a retry.Limiter, for the client side: each
// attempt of a retry.Do whose Policy.Limiter it is must be admitted by l
// (waiting in its queue as Acquire does, never past the call's context),
// so a client bounds its own calls in flight to a downstream by the
// latency that downstream shows. A refusal ends the call with the shed
// error (retry's ReasonThrottled).
//
// The attempt's result is judged as a sample: success, or an error that
// is not about capacity, is a served request; an overload answer
// (throttle.IsOverload: the overload marker, 429, 503, an
// OverloadReporter), an attempt timeout or a deadline is a drop; the
// caller's cancellation and a breaker's refusal (the attempt was never
// sent) give no sample; if judging the error panics (its own methods
// run), the permit is ended without a sample and the panic goes on. Each
// admitted attempt costs one allocation (the done function).
func (l *Limiter) RetryLimiter() retry.Limiter { return clientLimiter{l} }

type clientLimiter struct{ l *Limiter }

func (c clientLimiter) Acquire(ctx context.Context, _ bool) (func(error), error) {
	p, err := c.l.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return p.done, nil
}

// done ends p as the attempt's result err says. Judging err runs its
// own methods (errors.Is): if they panic, p is ended without a sample
// and the panic goes on.
func (p Permit) done(err error) {
	kind := sampleNone
	defer func() { p.l.release(p, kind) }()
	kind = judge(err)
}

// judge returns the sample an attempt's result err gives.
func judge(err error) int {
	switch {
	case err == nil:
		return sampleOK
	case errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrTooManyProbes):
		return sampleNone
	case throttle.IsOverload(err) || errors.Is(err, retry.ErrAttemptTimeout) || errors.Is(err, context.DeadlineExceeded):
		return sampleDrop
	case errors.Is(err, context.Canceled):
		return sampleNone
	}
	return sampleOK
}
