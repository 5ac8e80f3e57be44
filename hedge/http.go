package hedge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/retry"
)

// Hedgeable reports whether req may be hedged: sent more than once, with
// copies in flight at the same time. It must be idempotent by
// httpretry.Idempotent's rule (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or
// an Idempotency-Key header), the rule httpretry uses for retries, and its
// body must be replayable for every copy: none, http.NoBody, or GetBody
// set (http.NewRequest sets it for in-memory bodies).
func Hedgeable(req *http.Request) bool {
	if !httpretry.Idempotent(req) {
		return false
	}
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// Transport is an http.RoundTripper that hedges the requests Hedgeable
// accepts through Next, under Hedger; any other request is sent exactly
// once (still asking the Policy's breaker and telling its observer).
//
// Each copy is a clone of the request with its own context and a body
// from GetBody. A response whose status httpretry.RetryableStatus accepts
// (408, 429, 502, 503, 504) is a failure that does not stop the other
// copies (its Retry-After is advice for a retry); any other 5xx is fatal;
// everything else is an answer and wins. Losers are cancelled (so the
// server sees their requests' contexts end) and their bodies drained and
// closed; the winner's response keeps its context until its body is
// closed. When every attempt failed, the last failed response is returned
// with its body buffered (up to 64 KiB), with a nil error, as the
// RoundTripper contract asks; with no response, the *retry.Error.
//
// Policy.AttemptTimeout bounds each copy until its response headers come,
// not the reading of the winner's body. Transport does not modify the
// caller's request, and closes its body, whether or not it was sent (a
// request the breaker refused, or whose context had ended, included, and
// on the way out of a callback's panic).
type Transport struct {
	Next   http.RoundTripper // nil: http.DefaultTransport
	Hedger *Hedger           // nil: the zero Hedger

	// Key gives each request its key, as httpretry.WithKey does (key.go):
	// the Policy's groups and Hedger.Adaptives use its members. nil: the
	// key the request's context carries, else httpretry.HostKey, when the
	// Policy has groups or Hedger.Adaptives is set.
	Key func(*http.Request) string
}

// maxKeep bounds the body of a failed response kept in memory.
const maxKeep = 64 << 10

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	a := &httpAttempt{req: req}
	if req.Body != nil {
		// The RoundTripper contract: the body is closed on every path
		// (the breaker refused, the context had ended, a callback
		// panicked), unless the next RoundTripper was given it.
		defer a.closeUnsent()
	}
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	h := t.Hedger
	if h == nil {
		h = &zeroHedger
	}
	var p *retry.Policy
	if h.Policy != nil {
		p = h.Policy.Policy()
	}
	if p == nil {
		p = &zeroPolicy
	}
	ctx := t.keyContext(req, h, p) // key.go
	pc := *p
	timeout := pc.AttemptTimeout
	pc.AttemptTimeout = 0 // applied by attempt, to the headers only
	hc := *h
	hc.Policy = &pc
	a.next, a.timeout, a.clk = next, timeout, clock.Or(pc.Clock)
	if !Hedgeable(req) {
		// Sent exactly once, as it is: the next RoundTripper closes its
		// body (each copy of a hedgeable request has one from GetBody).
		pc.MaxAttempts = 1
		hc.MaxHedges = NoHedges
		a.once = true
	}
	resp, kept, err := do(ctx, &hc, a.do, discard, true)
	if resp == nil {
		return nil, err
	}
	if kept != nil {
		if resp.Body != nil {
			resp.Body = &keptBody{ReadCloser: resp.Body, ctx: kept}
		} else {
			kept.cancelSafe() // no body to end it
		}
	}
	return resp, nil
}

// closeUnsent closes the caller's request body, unless the request itself
// was sent (a request sent once: the next RoundTripper then closes it).
func (a *httpAttempt) closeUnsent() {
	if !a.sent {
		a.req.Body.Close()
	}
}

type httpAttempt struct {
	next    http.RoundTripper
	req     *http.Request
	timeout time.Duration
	clk     clock.Clock
	once    bool // not hedgeable: send req itself, body and all
	sent    bool // once: req went to next, which closes its body
}

// errHeaderTimeout is the cause of a copy cut by AttemptTimeout.
var errHeaderTimeout = errors.New("hedge: attempt timed out waiting for response headers")

type headerTimeout struct{ err error }

func (e *headerTimeout) Error() string        { return errHeaderTimeout.Error() + ": " + e.err.Error() }
func (e *headerTimeout) Unwrap() error        { return e.err }
func (e *headerTimeout) Is(target error) bool { return target == retry.ErrAttemptTimeout }

func (a *httpAttempt) do(ctx context.Context) (*http.Response, error) {
	var r *http.Request
	if a.once {
		r = a.req.WithContext(ctx)
		a.sent = true
	} else if r = a.req.Clone(ctx); a.req.Body != nil && a.req.Body != http.NoBody {
		b, err := a.req.GetBody()
		if err != nil {
			return nil, retry.Permanent(err)
		}
		r.Body = b
	}
	if a.timeout <= 0 {
		resp, err := a.next.RoundTrip(r)
		return classify(resp, err, a.clk)
	}
	rctx, cancel := context.WithCancelCause(ctx)
	var (
		t     clock.Timer
		resp  *http.Response
		err   error
		stage = 0 // 0: AfterFunc or RoundTrip running, 1: the timer's Stop, 2: stopped
	)
	defer func() {
		switch stage {
		case 0:
			// The Clock's AfterFunc or the next RoundTripper
			// panicked: the timer and the context end with the
			// attempt, and that panic goes on, even if Stop's
			// would replace it.
			defer cancel(nil)
			if t != nil {
				stopQuiet(t)
			}
		case 1:
			// The timer's Stop panicked: what the next
			// RoundTripper returned is dropped, its body closed,
			// and the context ends; Stop's panic goes on.
			defer cancel(nil)
			discard(resp)
		}
	}()
	t = a.clk.AfterFunc(a.timeout, func() { cancel(errHeaderTimeout) })
	resp, err = a.next.RoundTrip(r.WithContext(rctx))
	stage = 1
	stopped := t.Stop()
	stage = 2
	if !stopped && ctx.Err() == nil {
		discard(resp)
		cancel(nil)
		if err == nil {
			err = errHeaderTimeout
		}
		return nil, &headerTimeout{err}
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	if resp.Body == nil { // not what a RoundTripper may return, but nothing to wrap
		cancel(nil)
		return classify(resp, nil, a.clk)
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: func() { cancel(nil) }}
	return classify(resp, nil, a.clk)
}

// stopQuiet stops t, dropping a panic of its Stop: another panic is going
// on.
func stopQuiet(t clock.Timer) {
	defer func() { _ = recover() }()
	t.Stop()
}

// classify turns a response into the attempt's result: an answer (nil
// error), a failure worth another copy (a retryable status), or a fatal
// one (another 5xx). A failed response's body is read into memory, so
// that it outlives the attempt's context and its connection is reused.
// Its Retry-After is read on clk (an HTTP date is relative to it); one
// too large for a time.Duration is clamped to the longest one, not
// ignored, so that the Policy's MaxRetryAfter stops the call.
func classify(resp *http.Response, err error, clk clock.Clock) (*http.Response, error) {
	if err != nil {
		return nil, err
	}
	code := resp.StatusCode
	if code < 500 && !httpretry.RetryableStatus(code) {
		return resp, nil
	}
	keep(resp)
	var fail error = &httpretry.StatusError{StatusCode: code, Response: resp}
	if !httpretry.RetryableStatus(code) {
		return resp, retry.Permanent(fail)
	}
	if v := resp.Header.Get("Retry-After"); v != "" {
		if d, ok := httpretry.ParseRetryAfter(v, clk.Now()); ok {
			fail = retry.After(fail, d)
		} else if hugeRetryAfter(v) {
			fail = retry.After(fail, math.MaxInt64)
		}
	}
	return resp, fail
}

// hugeRetryAfter reports whether v, which httpretry.ParseRetryAfter
// refused, is well formed but beyond what a time.Duration holds: digits
// only, or an HTTP date.
func hugeRetryAfter(v string) bool {
	v = strings.Trim(v, " \t")
	if v == "" {
		return false
	}
	if strings.Trim(v, "0123456789") == "" {
		return true
	}
	_, err := http.ParseTime(v)
	return err == nil
}

func keep(resp *http.Response) {
	body := resp.Body
	if body == nil || body == http.NoBody {
		return
	}
	defer body.Close() // a Read that panics leaves it open otherwise
	b, err := io.ReadAll(io.LimitReader(body, maxKeep))
	var rest io.Reader = bytes.NewReader(b)
	if err != nil {
		rest = io.MultiReader(rest, errReader{err})
	}
	resp.Body = io.NopCloser(rest)
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// discard releases a response Do does not return: a little of its body is
// drained (so an HTTP/1 connection may be reused) and it is closed.
func discard(resp *http.Response) {
	if resp == nil || resp.Body == nil {
		return
	}
	defer resp.Body.Close() // a Read that panics leaves it open otherwise
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
}

// cancelBody ends its attempt's header timer context when closed.
type cancelBody struct {
	io.ReadCloser
	cancel func()
}

func (b *cancelBody) Close() error {
	defer b.cancel() // even when the body's Close panics
	return b.ReadCloser.Close()
}

// keptBody is the winner's body: its attempt's context ends when it is
// closed.
type keptBody struct {
	io.ReadCloser
	ctx *attemptCtx
}

func (b *keptBody) Close() error {
	defer b.ctx.cancelSafe() // even when the body's Close panics
	return b.ReadCloser.Close()
}
