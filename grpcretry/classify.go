package grpcretry

import (
	"context"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/metadata"
)

// attemptResult describes a failed attempt for classify.
type attemptResult struct {
	err        error       // what the client returned
	trailer    metadata.MD // the attempt's trailer (may be nil)
	idempotent bool        // the method may be sent twice
	notSent    bool        // the request provably never reached a server
	committed  bool        // a stream that may no longer be retried
	hedged     bool        // a copy of a hedged call: WithNonFatalCodes decides
}

// classify turns a failed attempt into the error the retry loop sees: an
// *AttemptError, marked retry.Permanent when it must not be retried and
// wrapped with retry.After when the server advised a delay, which then
// replaces bo's next wait. ctx is the caller's context, actx the attempt's.
func (ic *interceptor) classify(ctx, actx context.Context, r attemptResult, bo *pushbackBackoff) error {
	timedOut := ctx.Err() == nil && actx.Err() != nil
	ae := newAttemptError(r.err, timedOut)
	ae.NotSent, ae.Committed = r.notSent, r.committed
	ae.Pushback, ae.HasPushback, ae.Overloaded = parsePushback(r.trailer[PushbackKey])
	if ctx.Err() != nil {
		return ae // the caller gave up; the loop stops on its own
	}
	if ae.Overloaded {
		// The overload marker: no retry here, and none above — the call's
		// error wraps retry.ErrOverloaded, which a server interceptor
		// passes up as the marker again.
		return retry.Overloaded(ae)
	}
	if r.committed || (!r.idempotent && !r.notSent) {
		return retry.Permanent(ae)
	}
	if ae.HasPushback && ae.Pushback < 0 {
		return retry.Permanent(ae)
	}
	switch {
	case timedOut:
	case r.hedged:
		if !ic.nonFatal(ae.Code()) {
			return retry.Permanent(ae) // fatal (gRFC A6): ends the hedged call
		}
	case !ic.codeRetryable(ae, bo.classify, ae.HasPushback, ownDeadline(ctx, actx)):
		return retry.Permanent(ae)
	}
	if ae.HasPushback && !bo.ignoreAdvice { // a negative MaxRetryAfter ignores delays
		bo.push()
		return retry.After(ae, ae.Pushback)
	}
	return ae
}

// ownDeadline reports whether the attempt's context has a deadline earlier
// than the caller's: a DeadlineExceeded is then the attempt's, not the
// caller's.
func ownDeadline(ctx, actx context.Context) bool {
	ad, ok := actx.Deadline()
	if !ok {
		return false
	}
	cd, ok := ctx.Deadline()
	return !ok || ad.Before(cd)
}

// pushbackBackoff is the per-call backoff: the Policy's strategy, except
// that after a server pushback it returns 0, so that the wait is the
// pushback alone, as retry.After hands it to the retry loop (capped by
// MaxRetryAfter and jittered there) — even when shorter than the backoff,
// and no wait at all for a pushback of 0 — and the schedule then restarts
// from its first step, as gRFC A6 says. It is used by one call at a time.
type pushbackBackoff struct {
	base         backoff.Strategy
	ignoreAdvice bool             // the call's Policy.MaxRetryAfter is negative
	classify     func(error) bool // the call's Policy.Classify, with WithPolicyClassify
	pushed       bool             // the last attempt carried a pushback
	fromErr      bool             // hedged: the pushback is read from the error DelayAfter hears
	offset       int              // retries made up to the last pushback
	prev         time.Duration    // the last delay base returned
}

// push makes the next wait the server's.
func (b *pushbackBackoff) push() {
	if !b.fromErr {
		b.pushed = true
	}
}

// clear forgets a pushback that was not used (set by an earlier attempt).
func (b *pushbackBackoff) clear() {
	if !b.fromErr {
		b.pushed = false
	}
}

// Delay implements backoff.Strategy.
func (b *pushbackBackoff) Delay(n int, prev time.Duration) time.Duration {
	return b.DelayAfter(n, prev, nil)
}

// DelayAfter implements retry.ErrorBackoff, so that a Policy.Backoff whose
// wait depends on the failure (awsretry.Rules) still hears it through
// the pushback wrapper.
func (b *pushbackBackoff) DelayAfter(n int, _ time.Duration, err error) time.Duration {
	pushed := b.pushed
	if b.fromErr {
		_, pushed = retry.RetryAfter(err)
		pushed = pushed && !b.ignoreAdvice
	}
	if pushed {
		b.pushed = false
		b.offset, b.prev = n, 0
		return 0
	}
	var d time.Duration
	if eb, ok := b.base.(retry.ErrorBackoff); ok {
		d = eb.DelayAfter(n-b.offset, b.prev, err)
	} else {
		d = b.base.Delay(n-b.offset, b.prev)
	}
	b.prev = d
	return d
}
