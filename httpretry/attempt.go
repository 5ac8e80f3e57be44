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

	asked   bool           // first asked the WithRetryable rule: its verdict is repeat
	pre     bool           // the first attempt was made by first: its result is preResp, preErr
	preResp *http.Response // released by release until the attempt takes it
	preErr  error
	in      retry.Inline // the breaker's permit for that attempt (firstGuarded)

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
	if p := &c.policy; !c.pre && p.Breaker == nil && p.Budget == nil && p.Observer == nil && p.Limiter == nil && c.t.opts.hdr.WillRetry == "" {
		// No permit, slot or observer for a panic to leak, and no
		// WillRetry to announce: retry.Do, whose first attempt costs less
		// than a Call's, makes the same calls. An attempt that panics is
		// released by RoundTrip's deferred done, after retry.Do reported
		// it (to nothing of the call's: the policy has no breaker,
		// budget, limiter or observer).
		return retry.Do(ctx, p, c.op)
	}
	var rc retry.Call
	var a retry.Attempt
	if c.pre {
		// The first attempt was made already (first.go), begun by
		// retry.BeginInline (firstGuarded) or under a policy with
		// nothing to begin it with (first, whose Inline is zero, as
		// BeginInline's would be): the Call adopts it. No user code ran
		// since first handed it over, so nothing could leak its permit.
		a = rc.Adopt(ctx, &c.policy, c.in)
	} else {
		rc.Reset(ctx, &c.policy)
	}
	var resp *http.Response
	for begun := c.pre; ; begun = false {
		if !begun {
			var err error
			if a, err = rc.Begin(); err != nil {
				return resp, err
			}
			c.will = rc.WillRetry()
		}
		var err error
		resp, err = c.try(&rc, &a)
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
	discard(c.preResp)
	c.prev, c.held, c.preResp = nil, nil, nil
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
	if c.pre {
		// Made by first.go, with the caller's context, no
		// AttemptTimeout and no body: judge it.
		resp, err := c.preResp, c.preErr
		c.pre, c.preResp, c.preErr, c.sent = false, nil, nil, true
		return c.judge(ctx, nil, resp, err)
	}
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
	return c.judge(ctx, actx, resp, err)
}

// judge classifies the outcome of an attempt with context ctx, bounded by
// actx when AttemptTimeout is set, that the next RoundTripper answered
// with resp or err; see attempt.
func (c *call) judge(ctx context.Context, actx *attemptCtx, resp *http.Response, err error) (*http.Response, error) {
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
		c.held = resp // released if the body's Read panics
		keepBody(resp)
		c.held = nil
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
	announce := c.t.announces
	if body == nil && !announce && c.sameCtx {
		return c.req, nil
	}
	var r *http.Request
	if announce {
		r = c.t.announce(c.req, ctx, c.n, c.will, c.clock, c.timeout)
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

// announced is an attempt's request copy together with the values it
// announces (the attempt number, will-retry and deadline headers, each a
// one-element array the header map's value slice points into) and the
// deadline's digits, in one allocation (376 bytes, the 384-byte size
// class; a bare http.Request copy takes 320); the header map is the other.
// No announced value is shared between requests: a request's header
// values are its own, as its header map is.
type announced struct {
	r        http.Request
	att, wil [1]string
	dl       [1]string
	num      [20]byte
}

// smallHeader is the most keys a Go map holds in its one group of slots
// before it grows into a table.
const smallHeader = 8

// announce returns a copy of req for attempt n (whose failure may be
// retried when will is set), with context ctx (req's own when nil), whose
// header is req's plus the attempt headers (layer.HeaderAttempt, ...); clk
// and timeout are the policy's Clock and AttemptTimeout, which bound the
// deadline announced.
//
// The copy costs one allocation (the request with its announced values,
// announced) and its header map two (the map and its group, sized once
// for req's keys and the announced ones). While they fit in one group of
// 8 slots, the map is a clone of req's, whose group is copied whole with
// no key hashed again, the announced keys then set; else a new map.
//
// The map is new for every attempt, and so are the announced values: the
// request of an attempt must not share them with the caller's (which the
// RoundTripper contract forbids modifying) or with another attempt's
// (which net/http may still read after that attempt's RoundTrip returned:
// "RoundTrip may read fields of the request in a separate goroutine"),
// and they cannot be pooled for the same reason. Nor are they shared
// between requests, not even prebuilt ones for a first attempt: an
// *http.Transport hands the request to code of the user's (its Proxy
// function, a protocol registered with RegisterProtocol, a TLSNextProto
// RoundTripper) that might write to the header or into a value, and a
// shared map or value would then carry one request's header into every
// later one (TestRegisteredProtocolWritingHeaderLeaksNothing,
// TestWriteIntoAnnouncedValueLeaksNothing). The caller's value slices
// are copied by reference, not cloned as Header.Clone does: they are the
// caller's request's already, so the copy sees exactly the caller's
// values.
func (t *Transport) announce(req *http.Request, ctx context.Context, n int, will bool, clk clock.Clock, timeout time.Duration) *http.Request {
	h := &t.opts.hdr
	var a *announced
	if ctx == nil {
		ctx = req.Context()
		a = &announced{r: *req}
	} else {
		a = &announced{r: *req.WithContext(ctx)} // inlined: no allocation beyond a's
	}
	extra := 0
	if h.Attempt != "" {
		a.att[0] = strconv.Itoa(n) // no allocation below 100
		extra++
	}
	if h.WillRetry != "" {
		a.wil[0] = smallDigits[b2i(will)]
		extra++
	}
	deadline := false
	if h.Deadline != "" {
		dl, ok := ctx.Deadline()
		if ok || timeout > 0 {
			now := clk.Now()
			if timeout > 0 {
				if end := now.Add(timeout); !ok || end.Before(dl) {
					dl = end
				}
			}
			a.dl[0] = digits(a.num[:0], max(0, dl.Sub(now).Milliseconds()))
			deadline = true
			extra++
		}
	}
	caller := req.Header
	var hdr http.Header
	if caller != nil && len(caller)+extra <= smallHeader {
		// Room for the announced keys in the one group of a small map:
		// a clone copies that group (and the map's hash seed) whole,
		// where a new map would hash and insert every key again.
		hdr = maps.Clone(caller)
	} else {
		hdr = make(http.Header, len(caller)+extra)
		for k, v := range caller {
			hdr[k] = v
		}
	}
	if h.Attempt != "" {
		hdr[h.Attempt] = a.att[:]
	}
	if h.WillRetry != "" {
		hdr[h.WillRetry] = a.wil[:]
	}
	if deadline {
		hdr[h.Deadline] = a.dl[:]
	}
	a.r.Header = hdr
	return &a.r
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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
