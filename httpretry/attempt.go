package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// call is the state of one RoundTrip.
type call struct {
	t       *Transport
	req     *http.Request
	clock   clock.Clock   // the policy's Clock, or clock.Real
	timeout time.Duration // the policy's AttemptTimeout
	limit   int           // the policy's attempt limit: DefaultMaxAttempts for 0, -1 for none
	repeat  bool          // the request may be sent more than once
	sameCtx bool          // attempts run with req's own context
	policy  retry.Policy  // the caller's policy, adapted to this request

	classifyPolicy func(error) bool // the policy's own Classify, when WithClassifier is not given
	lim            limiterSpy       // stands in for the policy's Limiter

	mode bodyMode
	buf  []byte        // bodyBuffered: the whole body
	body io.ReadCloser // bodyOnce: what the single attempt sends, when not req.Body

	n       int            // attempts started
	prev    *http.Response // the last response, retryable, not yet released
	lastErr error          // the last transport error, as the transport below returned it
	actx    *attemptCtx    // the attempt in flight's context, when AttemptTimeout is set
	held    *http.Response // the response being classified

	op func(context.Context) (*http.Response, error) // c.guarded, made once per pooled call
}

// run drives the retry loop, step by step as retry.Do does, so that a
// panic in code the attempt calls (the next RoundTripper, a classifier, a
// GetBody) can be reported with Call.Panic before it goes on: the
// breaker's probe permit and the budget's slot are released. It returns
// the last attempt's response (nil when none came back) and nil, or the
// *retry.Error the loop gave up with.
func (c *call) run(ctx context.Context) (*http.Response, error) {
	if p := &c.policy; p.Breaker == nil && p.Budget == nil && p.Observer == nil && p.Limiter == nil {
		// No permit, slot or observer for a panic to leak: retry.Do, whose
		// first attempt costs less than a Call's, makes the same calls.
		return retry.Do(ctx, p, c.op)
	}
	rc := retry.NewCall(ctx, &c.policy) // inlined, and kept on the stack
	var resp *http.Response
	for {
		a, err := rc.Begin()
		if err != nil {
			return resp, err
		}
		resp, err = c.try(rc, &a)
		if err = rc.End(&a, err); err == nil {
			rc.Succeed()
			return resp, nil
		}
		d, err := rc.Next(err)
		if err != nil {
			return resp, err
		}
		rc.Wait(d)
	}
}

// try runs one attempt; if it panics, the attempt and the call are ended
// with Call.Panic (D1) and the panic goes on.
func (c *call) try(rc *retry.Call, a *retry.Attempt) (*http.Response, error) {
	defer func() {
		if v := recover(); v != nil {
			c.release()
			rc.Panic(a, v)
			panic(v)
		}
	}()
	return c.attempt(a.Context)
}

// guarded is the operation retry.Do runs when there is no breaker, budget
// or observer: a panic releases what the attempt holds and goes on.
func (c *call) guarded(ctx context.Context) (*http.Response, error) {
	defer func() {
		if v := recover(); v != nil {
			c.release()
			panic(v)
		}
	}()
	return c.attempt(ctx)
}

// release frees what a panicking attempt holds: its timer and context,
// the response being classified, the previous response kept for a retry.
func (c *call) release() {
	if c.actx != nil {
		c.actx.stop()
		c.actx.cancel(context.Canceled)
		c.actx = nil
	}
	discard(c.prev)
	discard(c.held)
	c.prev, c.held = nil, nil
}

// errLate is the error of an attempt whose response headers came just as
// its AttemptTimeout ran out.
var errLate = errors.New("response headers came too late")

// attempt is one round trip through the next RoundTripper, classified. A
// response that should be retried comes back with a *StatusError (wrapped
// with retry.After when the server sent a usable Retry-After); the
// response itself is always returned, so that run hands the last one back
// when it gives up.
func (c *call) attempt(ctx context.Context) (*http.Response, error) {
	c.n++
	rctx := ctx
	var actx *attemptCtx
	if c.timeout > 0 {
		actx = newAttemptCtx(ctx, c.clock, c.timeout)
		c.actx, rctx = actx, actx
	}
	r, err := c.request(rctx)
	if err != nil {
		if actx != nil {
			actx.stop()
			actx.cancel(context.Canceled)
			c.actx = nil
		}
		// The body cannot be replayed: stop, and let run hand back the
		// previous response, which is still intact.
		return c.prev, retry.Permanent(err)
	}
	discard(c.prev)
	c.prev = nil

	resp, err := c.t.next.RoundTrip(r)
	if err != nil {
		if actx != nil {
			if actx.stop() && ctx.Err() == nil {
				// Cut by AttemptTimeout. HTTP/1 reports the context's cause
				// (errAttemptTimeout), HTTP/2 its Err (DeadlineExceeded), a
				// dial its own error: mark them all alike.
				err = markTimedOut(err)
			}
			actx.cancel(context.Canceled)
			c.actx = nil
		}
		c.lastErr = err
		if ctx.Err() != nil {
			return nil, err // the caller's end is never retried: Next checks ctx first
		}
		if !c.classify(nil, err) {
			return nil, retry.Permanent(err)
		}
		if !c.repeat && neverSent(err) && c.mode != bodyOnce && (c.limit < 0 || c.n < c.limit) {
			// The server did not get or did not process the request, so
			// even one that may not be repeated is sent again, one more
			// attempt at a time, within the policy's attempt limit.
			c.policy.MaxAttempts = c.n + 1
		}
		return nil, err
	}

	c.held = resp // released if the classifier panics
	again := c.classify(resp, nil)
	c.held = nil
	if again && c.repeat && (c.limit < 0 || c.n < c.limit) {
		keepBody(resp)
	}
	if actx != nil {
		c.actx = nil
		if actx.stop() && ctx.Err() == nil {
			// Time ran out just as the response came: its body is cut.
			actx.cancel(context.Canceled)
			discard(resp)
			err := markTimedOut(errLate)
			c.lastErr = err
			if c.classify(nil, err) {
				return nil, err
			}
			return nil, retry.Permanent(err)
		}
		switch body := resp.Body.(type) {
		case nil:
			actx.cancel(context.Canceled)
		case io.ReadWriteCloser:
			// A protocol upgrade (101 Switching Protocols): the body is the
			// connection, and stays one.
			resp.Body = &cancelRWBody{ReadWriteCloser: body, cancel: actx.cancel}
		default:
			resp.Body = &cancelBody{ReadCloser: body, cancel: actx.cancel}
		}
	}

	code := resp.StatusCode
	switch {
	case again:
		c.prev = resp
		se := &StatusError{StatusCode: code, Response: resp, retry: true}
		if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
			if v := resp.Header.Get("Retry-After"); v != "" {
				if d, ok := ParseRetryAfter(v, c.clock.Now()); ok && d > 0 {
					return resp, retry.After(se, d)
				}
			}
		}
		return resp, se
	case code >= 500:
		// Not retried, but a failure of the downstream.
		return resp, &StatusError{StatusCode: code, Response: resp}
	case code >= 400:
		// The request's fault, not the downstream's health.
		return resp, retry.Permanent(&StatusError{StatusCode: code, Response: resp})
	}
	return resp, nil
}

// classify applies WithRetry500 and the classifier in force: the
// transport's (WithClassifier), else the policy's Classify (asked with a
// *StatusError for a status of 400 or above), else DefaultClassifier.
func (c *call) classify(resp *http.Response, err error) bool {
	if c.t.opts.retry500 && resp != nil && resp.StatusCode == http.StatusInternalServerError {
		return true
	}
	if f := c.t.opts.classify; f != nil {
		return f(resp, err)
	}
	if f := c.classifyPolicy; f != nil {
		if resp == nil {
			return f(err)
		}
		if resp.StatusCode < 400 {
			return false
		}
		return f(&StatusError{StatusCode: resp.StatusCode, Response: resp})
	}
	return DefaultClassifier(resp, err)
}

// request returns the request for the attempt about to run, with context
// ctx: req itself when nothing differs, otherwise a shallow copy carrying
// the attempt's context, body and headers. req is never modified.
func (c *call) request(ctx context.Context) (*http.Request, error) {
	body, err := c.attemptBody()
	if err != nil {
		return nil, err
	}
	hdr := c.t.opts.attemptHeader
	if body == nil && hdr == "" && c.sameCtx {
		return c.req, nil
	}
	r := c.req.WithContext(ctx)
	if body != nil {
		r.Body = body
		if c.mode == bodyBuffered {
			r.GetBody = replay(c.buf)
		}
	}
	if hdr != "" {
		h := make(http.Header, len(c.req.Header)+1)
		for k, v := range c.req.Header {
			h[k] = v
		}
		h[hdr] = []string{strconv.Itoa(c.n)}
		r.Header = h
	}
	return r, nil
}
