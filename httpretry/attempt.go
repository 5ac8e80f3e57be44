package httpretry

import (
	"context"
	"errors"
	"fmt"
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
	repeat  bool          // the request may be sent more than once
	sameCtx bool          // attempts run with req's own context
	policy  retry.Policy  // the caller's policy, adapted to this request

	mode bodyMode
	buf  []byte        // bodyBuffered: the whole body
	body io.ReadCloser // bodyOnce: what the single attempt sends, when not req.Body

	n    int            // attempts started
	prev *http.Response // the last response, retryable, not yet released

	op func(context.Context) (*http.Response, error) // c.attempt, made once per pooled call
}

// attempt is the operation retry.Do runs: one round trip through the next
// RoundTripper, classified. A response that should be retried comes back
// with a *StatusError (wrapped with retry.After when the server sent a
// usable Retry-After); the response itself is always returned, so that Do
// hands the last one back when it gives up.
func (c *call) attempt(ctx context.Context) (*http.Response, error) {
	c.n++
	rctx := ctx
	var (
		timer  clock.Timer
		cancel context.CancelCauseFunc
	)
	if c.timeout > 0 {
		rctx, cancel = context.WithCancelCause(ctx)
		timer = c.clock.AfterFunc(c.timeout, func() { cancel(retry.ErrAttemptTimeout) })
	}
	r, err := c.request(rctx)
	if err != nil {
		if cancel != nil {
			timer.Stop()
			cancel(context.Canceled)
		}
		// The body cannot be replayed: stop, and let Do hand back the
		// previous response, which is still intact.
		return c.prev, retry.Permanent(err)
	}
	discard(c.prev)
	c.prev = nil

	resp, err := c.t.next.RoundTrip(r)
	if err != nil {
		if cancel != nil {
			if !timer.Stop() && ctx.Err() == nil && !errors.Is(err, retry.ErrAttemptTimeout) {
				err = fmt.Errorf("%w: %w", retry.ErrAttemptTimeout, err)
			}
			cancel(context.Canceled)
		}
		if ctx.Err() != nil || c.classify(nil, err) {
			return nil, err // the caller's end is never retried: Do checks ctx first
		}
		return nil, retry.Permanent(err)
	}

	again := c.classify(resp, nil)
	if again && c.repeat && (c.policy.MaxAttempts <= 0 || c.n < c.policy.MaxAttempts) {
		keepBody(resp)
	}
	if cancel != nil {
		if !timer.Stop() && ctx.Err() == nil {
			// Time ran out just as the response came: its body is cut.
			cancel(context.Canceled)
			discard(resp)
			err := fmt.Errorf("%w: response headers came too late", retry.ErrAttemptTimeout)
			if c.classify(nil, err) {
				return nil, err
			}
			return nil, retry.Permanent(err)
		}
		if resp.Body != nil {
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
		} else {
			cancel(context.Canceled)
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

// classify applies the transport's classifier and WithRetry500.
func (c *call) classify(resp *http.Response, err error) bool {
	if c.t.opts.retry500 && resp != nil && resp.StatusCode == http.StatusInternalServerError {
		return true
	}
	return c.t.opts.classify(resp, err)
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
