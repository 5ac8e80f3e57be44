package httpretry

import (
	"context"
	"errors"
	"net/http"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// inline reports whether the first attempt of a request without a body,
// under p, can be made without a pooled call, as retry.Do makes it
// inline: p needs nothing set up around it but its breaker and its
// budget (no Limiter, NestedBudget or Observer; no AttemptTimeout or
// MaxElapsed), and the transport gives requests no key (WithKey).
// retry.BeginInline still declines a policy whose breaker or budget is a
// group.
func (t *Transport) inline(p *retry.Policy) bool {
	return p.Observer == nil && p.Limiter == nil && p.NestedBudget == nil &&
		p.AttemptTimeout <= 0 && p.MaxElapsed <= 0 && t.opts.key == nil
}

// firstAttempt is what first and firstGuarded hand to a pooled call: the
// WithRetryable rule's verdict, and the first attempt when they made it.
type firstAttempt struct {
	repeat bool // the WithRetryable rule's verdict
	made   bool // the first attempt was made: resp, err, will, in
	resp   *http.Response
	err    error
	will   bool         // the announced will-retry value
	in     retry.Inline // the breaker's permit (retry.BeginInline)
}

// first is RoundTrip for a request without a body under a policy that
// inline accepts and that has no breaker or budget: it asks the
// WithRetryable rule, sends the request (see send) and returns a response
// below 400, which no rule but WithClassifier's can retry, as it is.
// Anything else — a transport error, a status of 400 or above, a
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
	var resp *http.Response
	var err error
	will := false
	if t.announces {
		resp, err, will = t.send(req, ctx, p, repeat)
	} else {
		resp, err = t.next.RoundTrip(req) // send's, written out
	}
	if err == nil && resp.StatusCode < http.StatusBadRequest && t.opts.classify == nil {
		resp.Request = req
		return resp, nil
	}
	return t.roundTripCall(req, p, &firstAttempt{repeat: repeat, made: true, resp: resp, err: err, will: will})
}

// firstGuarded is first for a policy with a breaker or a budget: the
// attempt begins with retry.BeginInline (the breaker's permit, a
// BudgetTracker's Start) and a success ends with Inline.Succeed. If the
// next RoundTripper, the Clock or the context panics (or calls
// runtime.Goexit), the attempt is ended as failed with Call.Panic, so the
// breaker's probe and the budget's slot are given back, and the panic
// goes on; if Succeed does (a breaker listener), the response is closed.
// BeginInline declines groups, and a context that ended: the pooled call
// takes over then, with the rule's verdict.
func (t *Transport) firstGuarded(req *http.Request, p *retry.Policy) (*http.Response, error) {
	ctx := req.Context()
	repeat := t.opts.repeatable(req)
	in, ok, err := retry.BeginInline(ctx, p)
	if err != nil {
		// The breaker refused the call, as Begin would have.
		var re *retry.Error
		if errors.As(err, &re) {
			return nil, &callError{re}
		}
		return nil, err
	}
	if !ok {
		return t.roundTripCall(req, p, &firstAttempt{repeat: repeat})
	}
	var resp *http.Response
	stage := 0 // 0: the attempt is in flight; 1: Succeed runs; 2: returned
	defer func() {
		switch stage {
		case 0:
			v := recover() // nil for runtime.Goexit, which goes on by itself
			var rc retry.Call
			a := rc.Adopt(ctx, p, in)
			rc.Panic(&a, v)
			if v != nil {
				panic(v)
			}
		case 1:
			discard(resp) // Succeed told the budget; the panic goes on
		}
	}()
	resp, err, will := t.send(req, ctx, p, repeat)
	if err == nil && resp.StatusCode < http.StatusBadRequest && t.opts.classify == nil {
		stage = 1
		in.Succeed(p)
		stage = 2
		resp.Request = req
		return resp, nil
	}
	stage = 2
	return t.roundTripCall(req, p, &firstAttempt{repeat: repeat, made: true, resp: resp, err: err, will: will, in: in})
}

// send makes the first attempt of req, with the caller's context ctx,
// under p, for a request that may be repeated or not: req itself, or a
// copy with the attempt headers when the transport announces them.
func (t *Transport) send(req *http.Request, ctx context.Context, p *retry.Policy, repeat bool) (resp *http.Response, err error, will bool) {
	r := req
	if t.announces {
		will = firstWillRetry(ctx, p, repeat)
		r = t.announce(req, nil, 1, will, clock.Or(p.Clock), 0)
	}
	resp, err = t.next.RoundTrip(r)
	return resp, err, will
}

// firstWillRetry is (*retry.Call).WillRetry for the first attempt of a
// call with context ctx under p, for a request that may be repeated or
// not (which the call sends under MaxAttempts 1): another attempt may
// follow when the attempt limit leaves room for one, and a caller that
// retries (retry.CallerRetries) retries the whole chain otherwise; the
// layer rule, which governs only calls whose caller retries, adds
// nothing. TestFirstAttemptAnnouncesAsCall checks it against a Call.
func firstWillRetry(ctx context.Context, p *retry.Policy, repeat bool) bool {
	if repeat && p.AttemptLimit() != 1 {
		return true
	}
	return retry.CallerRetries(ctx)
}
