package httpretry

import (
	"context"
	"net/http"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// plain reports whether the first attempt of a request without a body,
// under p, can be made without a pooled call: p has nothing to set up,
// ask or tell around it (no Breaker, Budget, Limiter, NestedBudget or
// Observer, hence no group; no AttemptTimeout or MaxElapsed), and the
// transport gives requests no key (WithKey). retry.Do makes such a first
// attempt inline too, with nothing around it.
func (t *Transport) plain(p *retry.Policy) bool {
	return p.Breaker == nil && p.Budget == nil && p.Observer == nil && p.Limiter == nil && p.NestedBudget == nil &&
		p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && t.opts.key == nil
}

// firstAttempt is what first hands to a pooled call when its attempt
// needs more than a look at the status.
type firstAttempt struct {
	resp   *http.Response
	err    error
	repeat bool // the WithRetryable rule's verdict
	will   bool // the announced will-retry value
}

// first is RoundTrip for a request without a body under a plain policy
// p: it asks the WithRetryable rule, sends the request (a copy with the
// attempt headers when the transport announces them) and returns a
// response below 400, which no rule but WithClassifier's can retry, as it
// is. Anything else — a transport error, a status of 400 or above, a
// WithClassifier to ask — goes on in a pooled call, which judges the
// attempt as its own first and retries from there. Nothing is held around
// the attempt, so a panic in the next RoundTripper has nothing to release.
func (t *Transport) first(req *http.Request, p *retry.Policy) (*http.Response, error) {
	ctx := req.Context()
	if ctx.Err() != nil {
		// The caller gave up already: the call gives up as Do does.
		return t.roundTripCall(req, p, nil)
	}
	repeat := t.opts.repeatable(req)
	will := false
	r := req
	shared := false
	if t.announces {
		will = firstWillRetry(ctx, p, repeat)
		r, shared = t.announce(req, nil, 1, will, clock.Or(p.Clock), 0, t.stdNext)
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil && resp.StatusCode < http.StatusBadRequest && t.opts.classify == nil {
		resp.Request = req
		return resp, nil
	}
	if shared && resp != nil {
		// The classifier, the Observer and a *StatusError in the returned
		// error see the response: none of them sees the shared header.
		resp.Request = req
	}
	return t.roundTripCall(req, p, &firstAttempt{resp: resp, err: err, repeat: repeat, will: will})
}

// firstWillRetry is (*retry.Call).WillRetry for the first attempt of a
// call with context ctx under p, for a request that may be repeated or
// not (which the call sends under MaxAttempts 1): another attempt may
// follow when the attempt limit leaves room for one, and a caller that
// retries (retry.CallerRetries) retries the whole chain otherwise; the
// layer rule, which governs only calls whose caller retries, adds
// nothing. TestFirstWillRetryAsCall checks it against a Call.
func firstWillRetry(ctx context.Context, p *retry.Policy, repeat bool) bool {
	if repeat && p.AttemptLimit() != 1 {
		return true
	}
	return retry.CallerRetries(ctx)
}
