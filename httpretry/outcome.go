package httpretry

import (
	"context"
	"errors"
	"net/http"

	"github.com/stormguard/stormguard/retry"
)

// Outcome is how the retry policy ended a call that returned a response:
// why it stopped, after how many attempts, and the error it gave up with.
// Result reads it from the response.
type Outcome struct {
	// Reason says why the call ended: retry.ReasonSuccess when the
	// response is a success (after retries), otherwise why the policy gave
	// up on it (retry.ReasonBudget, ReasonAttempts, ReasonBreaker,
	// ReasonAdvice, ReasonDeadline, ReasonPermanent, ...).
	Reason retry.Reason
	// Attempts is the number of attempts made, the first included.
	Attempts int
	// Err is the *retry.Error the policy gave up with (nil on success):
	// errors.Is finds its sentinel (retry.ErrBudgetExhausted,
	// retry.ErrAttemptsExhausted, breaker.ErrOpen, ...) and the last
	// attempt's *StatusError; errors.As the *retry.Error. Its type is
	// error, so that assigning it to an error variable keeps a nil nil.
	Err error
}

// Result returns the Outcome of the call that produced resp, when resp
// came back from a Transport that retried the request or gave up on it.
// It returns false for a response without a record: one that succeeded at
// its first attempt (which costs no allocation, so carries none), or that
// did not come through a Transport.
//
// RoundTrip keeps the http.RoundTripper contract — a response always comes
// back with a nil error — so this is how a caller learns that the policy
// stopped on that response, and why:
//
//	resp, err := client.Do(req)
//	if err == nil {
//		defer resp.Body.Close()
//		if o, ok := httpretry.Result(resp); ok {
//			err = o.Err // nil unless the policy gave up on this response
//		}
//	}
//	if errors.Is(err, retry.ErrBudgetExhausted) || errors.Is(err, breaker.ErrOpen) {
//		// the downstream is struggling: degrade instead of piling on
//	}
//
// The record hangs on resp.Request, which is then a shallow copy of the
// caller's request whose context carries it (same deadline and values): it
// survives reading, closing or wrapping the body, an http.Client (with or
// without Timeout; after redirects the final response has its own
// record) and RoundTrippers stacked above that return the same response.
// It is lost only if something replaces resp.Request or builds a new
// Response. Without a response (an error came back), errors.As finds the
// *retry.Error in the error itself.
func Result(resp *http.Response) (Outcome, bool) {
	if resp == nil || resp.Request == nil {
		return Outcome{}, false
	}
	rc, ok := resp.Request.Context().Value(outcomeKey{}).(*outcomeCtx)
	if !ok {
		return Outcome{}, false
	}
	return rc.o, true
}

// outcomeKey is the context key of the record; outcomeCtx is both the
// record and the context node carrying it (one allocation).
type outcomeKey struct{}

type outcomeCtx struct {
	context.Context
	o Outcome
}

func (c *outcomeCtx) Value(key any) any {
	if key == (outcomeKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// withOutcome returns resp with Request set to a copy of req carrying o.
func withOutcome(resp *http.Response, req *http.Request, o Outcome) *http.Response {
	resp.Request = req.WithContext(&outcomeCtx{Context: req.Context(), o: o})
	return resp
}

// reasonOf names the retry.Reason of a *retry.Error from its sentinel;
// throttled says that the policy's Limiter refused the last attempt (its
// error, the sentinel, is the limiter's own); any other sentinel the retry
// package does not define is the breaker's refusal.
func reasonOf(re *retry.Error, throttled bool) retry.Reason {
	switch r := re.Reason; {
	case r == nil:
		return retry.ReasonPermanent
	case r == retry.ErrAttemptsExhausted:
		return retry.ReasonAttempts
	case r == retry.ErrBudgetExhausted:
		return retry.ReasonBudget
	case r == retry.ErrElapsed, r == retry.ErrDeadlineTooClose:
		return retry.ReasonDeadline
	case r == retry.ErrAdviceExceedsCap:
		return retry.ReasonAdvice
	case r == retry.ErrNestedRetry:
		return retry.ReasonNested
	case r == retry.ErrOverloaded:
		return retry.ReasonOverloaded
	case errors.Is(r, retry.ErrPanicked):
		return retry.ReasonPanic
	case r == context.Canceled, r == context.DeadlineExceeded:
		return retry.ReasonContext
	case throttled:
		return retry.ReasonThrottled
	}
	return retry.ReasonBreaker
}

// limiterSpy stands in for the policy's Limiter during one call, to tell
// its refusal from the breaker's.
type limiterSpy struct {
	inner   retry.Limiter
	refused bool
}

func (l *limiterSpy) Acquire(ctx context.Context, retry bool) (func(error), error) {
	done, err := l.inner.Acquire(ctx, retry)
	l.refused = err != nil
	return done, err
}
