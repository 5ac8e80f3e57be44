package httpretry

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unsafe"

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

	will    bool           // the attempt in flight may be followed by another ((*retry.Call).WillRetry)
	n       int            // attempts started
	sent    bool           // an attempt's request went to the next RoundTripper, which owns req.Body from then
	prev    *http.Response // the last response, retryable, not yet released
	lastErr error          // the last transport error, as the transport below returned it
	actx    *attemptCtx    // the attempt in flight's context, when AttemptTimeout is set
	held    *http.Response // the response being classified

	op       func(context.Context) (*http.Response, error) // c.attempt, made once per pooled call
	returned bool                                          // roundTrip returned: RoundTrip's done has no panic to look for
}

// run drives the retry loop, step by step as retry.Do does, so that a
// panic in code the attempt calls (the next RoundTripper, a classifier, a
// GetBody) can be reported with Call.Panic before it goes on: the
// breaker's probe permit and the budget's slot are released. It returns
// the last attempt's response (nil when none came back) and nil, or the
// *retry.Error the loop gave up with.
func (c *call) run(ctx context.Context) (*http.Response, error) {
	if p := &c.policy; p.Breaker == nil && p.Budget == nil && p.Observer == nil && p.Limiter == nil && c.t.opts.hdr.WillRetry == "" {
		// No permit, slot or observer for a panic to leak, and no
		// WillRetry to announce: retry.Do, whose first attempt costs less
		// than a Call's, makes the same calls. An attempt that panics is
		// released by RoundTrip's deferred done, after retry.Do reported
		// it (to nothing of the call's: the policy has no breaker,
		// budget, limiter or observer).
		return retry.Do(ctx, p, c.op)
	}
	rc := retry.NewCall(ctx, &c.policy) // inlined, and kept on the stack
	var resp *http.Response
	for {
		a, err := rc.Begin()
		if err != nil {
			return resp, err
		}
		c.will = rc.WillRetry()
		resp, err = c.try(rc, &a)
		if resp != c.prev {
			// Released if End, Succeed or Next (an Observer, a breaker
			// listener, a budget) panics; c.prev is released anyway.
			c.held = resp
		}
		if err = rc.End(&a, err); err == nil {
			rc.Succeed()
			c.held = nil
			return resp, nil
		}
		d, err := rc.Next(err)
		c.held = nil
		if err != nil {
			return resp, err
		}
		rc.Wait(d)
	}
}

// try runs one attempt; if it does not return (a panic, or a
// runtime.Goexit, in the next RoundTripper, a classifier or GetBody), what
// the attempt holds is released, the attempt and the call are ended with
// Call.Panic (D1), and the panic goes on.
func (c *call) try(rc *retry.Call, a *retry.Attempt) (resp *http.Response, err error) {
	ok := false
	defer func() {
		if !ok {
			v := recover() // nil for runtime.Goexit, which goes on by itself
			c.release()
			rc.Panic(a, v)
			if v != nil {
				panic(v)
			}
		}
	}()
	resp, err = c.attempt(a.Context)
	ok = true
	return resp, err
}

// release frees what a panicking attempt holds: its timer and context,
// the response being classified or reported (held), the previous response
// kept for a retry (prev; never the same as held).
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

	c.sent = true
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

	// Below 400 only a WithClassifier rule can ask for a retry (see
	// classify), and no status below 429 carries the overload marker: a
	// success costs neither.
	overloaded, again := false, false
	if resp.StatusCode >= http.StatusBadRequest || c.t.opts.classify != nil {
		overloaded = c.overloaded(resp)
		c.held = resp // released if the classifier panics
		again = !overloaded && c.classify(resp, nil)
		c.held = nil
	}
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
	case overloaded:
		// "Overloaded; don't retry": not retried at any layer, and a
		// fault of the downstream.
		return resp, retry.Overloaded(&StatusError{StatusCode: code, Response: resp})
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

// overloaded reports whether resp carries the overload marker on a status
// that can mean "overloaded": 429 or 5xx. On any other status (a success,
// a redirect, another client error) the marker is ignored.
func (c *call) overloaded(resp *http.Response) bool {
	name := c.t.opts.hdr.Overloaded
	if name == "" || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500) {
		return false
	}
	v := resp.Header[name]
	return len(v) > 0 && strings.TrimSpace(v[0]) == "1"
}

// request returns the request for the attempt about to run, with context
// ctx: req itself when nothing differs, otherwise a shallow copy carrying
// the attempt's context, body and headers. req is never modified.
func (c *call) request(ctx context.Context) (*http.Request, error) {
	body, err := c.attemptBody()
	if err != nil {
		return nil, err
	}
	announce := c.t.opts.announces()
	if body == nil && !announce && c.sameCtx {
		return c.req, nil
	}
	var r *http.Request
	if announce {
		r = c.announce(ctx)
	} else {
		r = c.req.WithContext(ctx)
	}
	if body != nil {
		r.Body = body
		if c.mode == bodyBuffered {
			r.GetBody = replay(c.buf)
		}
	}
	return r, nil
}

// sharedAttempts is the highest attempt number whose announced value is
// prebuilt.
const sharedAttempts = 16

// attemptValues[n] is the value of the Attempt header for attempt n
// (1..sharedAttempts), willRetryValues[0] and [1] those of WillRetry. They
// are shared by every request copy that announces them, and safe to share:
// net/http and every RoundTripper only read a request's header (the
// RoundTripper contract), a header map is the request copy's own (see
// announce), and each slice has capacity 1, so that even an append through
// the copy's map (Header.Add, against the contract) reallocates instead
// of writing into the shared array.
var (
	attemptValues = func() (v [sharedAttempts + 1][]string) {
		for n := 1; n <= sharedAttempts; n++ {
			v[n] = []string{strconv.Itoa(n)}
		}
		return v
	}()
	willRetryValues = [2][]string{{"0"}, {"1"}}
)

// announced is an attempt's request copy together with the value of its
// deadline header and that value's digits, in one allocation (352 bytes,
// the size class of a bare http.Request copy plus 32); the header map is
// the other.
type announced struct {
	r   http.Request
	dl  [1]string
	num [20]byte
}

// smallHeader is the most keys a Go map holds in its one group of slots
// before it grows into a table.
const smallHeader = 8

// announce returns a copy of req for an attempt with context ctx, whose
// header is req's plus the attempt headers (layer.HeaderAttempt, ...).
//
// The copy costs one allocation (the request; announced when there is a
// deadline to announce) and its header map two (the map and its group, sized once
// for req's keys and the announced ones; while they fit in one group of 8
// slots, a clone of req's map, whose group is copied whole). The map is new for every
// attempt: the request of an attempt must not share one with the caller's
// (which the RoundTripper contract forbids modifying) or with another
// attempt's (which net/http may still read after that attempt's RoundTrip
// returned: "RoundTrip may read fields of the request in a separate
// goroutine"), and cannot be pooled for the same reason. The caller's
// value slices are copied by reference, not cloned as Header.Clone does:
// nothing writes to them (net/http only reads a request's header; a
// RoundTripper that wrote into a value slice would be writing into its
// caller's request), so the copy sees exactly the caller's values.
func (c *call) announce(ctx context.Context) *http.Request {
	h := &c.t.opts.hdr
	var attempt, will, deadline []string
	var a *announced
	if h.Attempt != "" {
		if c.n <= sharedAttempts {
			attempt = attemptValues[c.n]
		} else {
			// Past 16 attempts, one more allocation does not show.
			attempt = []string{strconv.Itoa(c.n)}
		}
	}
	if h.WillRetry != "" {
		if c.will {
			will = willRetryValues[1]
		} else {
			will = willRetryValues[0]
		}
	}
	if h.Deadline != "" {
		dl, ok := ctx.Deadline()
		if ok || c.timeout > 0 {
			now := c.clock.Now()
			if c.timeout > 0 {
				if end := now.Add(c.timeout); !ok || end.Before(dl) {
					dl = end
				}
			}
			a = &announced{r: *c.req.WithContext(ctx)} // inlined: no allocation beyond a's
			a.dl[0] = digits(a.num[:0], max(0, dl.Sub(now).Milliseconds()))
			deadline = a.dl[:]
		}
	}
	var r *http.Request
	if a != nil {
		r = &a.r
	} else {
		r = c.req.WithContext(ctx)
	}
	n := len(c.req.Header)
	for _, v := range [...][]string{attempt, will, deadline} {
		if v != nil {
			n++
		}
	}
	var hdr http.Header
	if c.req.Header != nil && n <= smallHeader {
		// Room for the announced keys in the one group of a small map:
		// a clone copies that group (and the map's hash seed) whole,
		// where a new map would hash and insert every key again.
		hdr = maps.Clone(c.req.Header)
	} else {
		hdr = make(http.Header, n)
		for k, v := range c.req.Header {
			hdr[k] = v
		}
	}
	if attempt != nil {
		hdr[h.Attempt] = attempt
	}
	if will != nil {
		hdr[h.WillRetry] = will
	}
	if deadline != nil {
		hdr[h.Deadline] = deadline
	}
	r.Header = hdr
	return r
}

// digits formats n into buf (which lives as long as the request it
// belongs to) as a string sharing buf's memory: no allocation.
func digits(buf []byte, n int64) string {
	if n >= 0 && n < 10 {
		return smallDigits[n]
	}
	buf = strconv.AppendInt(buf, n, 10)
	return unsafe.String(unsafe.SliceData(buf), len(buf))
}

var smallDigits = [...]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}
