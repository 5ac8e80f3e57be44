package httpretry

import (
	"errors"
	"net/http"
	"sync"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// Transport is the http.RoundTripper returned by New. It is safe for
// concurrent use. Its options are fixed by New; its policy is read from
// its retry.PolicySource at every request.
type Transport struct {
	next      http.RoundTripper
	src       retry.PolicySource
	opts      options
	announces bool // some attempt header is sent (options.announces)
}

var _ http.RoundTripper = (*Transport)(nil)

// zeroPolicy is the policy of a nil source.
var zeroPolicy retry.Policy

// New returns a RoundTripper that sends each request through next (nil:
// http.DefaultTransport) under the retry policy src gives (nil, or a nil
// *retry.Policy: the zero Policy), retrying transient failures of requests
// that are safe to repeat.
//
// src is a *retry.Policy (which gives itself) or anything that gives the
// current one, such as a *config.Handle: New does not keep a Policy, it
// asks src.Policy() once at the start of every request, so a reloaded
// policy — its attempts, backoff, Budget, Breaker, Classify, every other
// setting — governs the next request without rebuilding the client, and a
// request in flight keeps the policy it started with. A Policy src gives
// must not be modified while requests use it; its Budget and Breaker are
// shared by every request.
//
// Which attempts are retried: the function given to WithClassifier when
// there is one; otherwise the policy's Classify when set, asked with the
// error the attempt reports (a *StatusError for a response of status 400
// or above — use PolicyClassifier to write it as an HTTP classifier — or
// the transport error); otherwise DefaultClassifier. A response below 400
// is a success unless WithClassifier says otherwise. p.AttemptTimeout
// bounds each attempt until its response headers arrive; the body of the
// returned response is bounded only by the request's context.
func New(next http.RoundTripper, src retry.PolicySource, opts ...Option) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	t := &Transport{next: next, src: src}
	for _, o := range opts {
		if o != nil {
			o(&t.opts)
		}
	}
	if t.opts.repeatable == nil {
		t.opts.repeatable = Idempotent
	}
	t.opts.defaultHeaders()
	t.announces = t.opts.announces()
	if t.opts.bodyLimit <= 0 {
		t.opts.bodyLimit = DefaultBodyLimit
	}
	return t
}

// NewClient returns an http.Client whose Transport is
// New(http.DefaultTransport, src, opts...).
func NewClient(src retry.PolicySource, opts ...Option) *http.Client {
	return &http.Client{Transport: New(nil, src, opts...)}
}

// policy returns the policy for a request starting now.
func (t *Transport) policy() *retry.Policy {
	if t.src == nil {
		return &zeroPolicy
	}
	if p := t.src.Policy(); p != nil {
		return p
	}
	return &zeroPolicy
}

// CloseIdleConnections closes the idle connections of the next
// RoundTripper, if it has a CloseIdleConnections method. http.Client calls
// it from its own CloseIdleConnections.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// RoundTrip sends req, and sends it again after a transient failure when
// the request may be repeated and the policy allows. It implements
// http.RoundTripper: it does not modify req (each attempt that needs a
// different context, body or header gets a shallow copy), it closes
// req.Body exactly once (by handing it to the next RoundTripper, or itself),
// and it returns a nil error whenever a response came back, including the
// last response of a retryable status once the policy gives up.
//
// A request that may not be repeated (see WithRetryable) is sent once, still
// under the policy's Breaker, Budget and Observer.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body == nil || req.Body == http.NoBody {
		// Nothing to close if the policy source panics: read it here, and
		// make the first attempt without a pooled call when the policy
		// allows (first.go).
		p := t.policy()
		if t.inline(p) {
			if p.Breaker == nil && p.Budget == nil {
				return t.first(req, p)
			}
			return t.firstGuarded(req, p)
		}
		return t.roundTripCall(req, p, nil)
	}
	return t.roundTripCall(req, nil, nil)
}

// roundTripCall is RoundTrip on a pooled call: under p (nil: read the
// source under the call's guard), continuing from the first attempt pre
// made or the rule it asked (nil: neither).
func (t *Transport) roundTripCall(req *http.Request, p *retry.Policy, pre *firstAttempt) (*http.Response, error) {
	// The per-request state, with this request's copy of the policy. One
	// defer and one return, so that the compiler open-codes the defer
	// (roundTrip's many returns would make it a runtime defer record).
	c := getCall()
	defer c.done()
	c.t, c.req = t, req
	if pre != nil {
		c.asked, c.repeat = true, pre.repeat
		c.pre, c.preResp, c.preErr, c.will, c.in = pre.made, pre.resp, pre.err, pre.will, pre.in
	}
	resp, err := c.roundTrip(p)
	c.returned = true
	return resp, err
}

// done ends RoundTrip: it gives the call back to the pool. When roundTrip
// did not return — a user callback panicked or called runtime.Goexit (the
// WithRetryable rule, the policy source, the body's Read while it is
// buffered, an Observer, Limiter, Budget or Backoff, or an attempt's code
// on retry.Do's path) — it first releases what the call holds (the
// attempt's timer and context, the request body when no attempt sent it,
// as the RoundTripper contract wants, the response kept for a retry) and
// lets the panic go on.
func (c *call) done() {
	if !c.returned {
		v := recover() // nil for runtime.Goexit, which goes on by itself
		defer putCall(c)
		c.release()
		c.closeUnsentOnPanic()
		if v != nil {
			panic(v)
		}
		return
	}
	putCall(c)
}

// roundTrip is RoundTrip's body, on the pooled call c.
func (c *call) roundTrip(src *retry.Policy) (*http.Response, error) {
	t, req := c.t, c.req
	if src == nil {
		src = t.policy() // the one read of the source
	}
	c.policy = *src
	ctx := t.keyContext(req, &c.policy) // key.go: the request's key, its groups' members
	c.classifyPolicy = c.policy.Classify
	if c.policy.Limiter != nil {
		c.lim.inner = c.policy.Limiter
		c.policy.Limiter = &c.lim
	}
	if !c.asked {
		c.repeat = t.opts.repeatable(req) // first asked it otherwise
	}
	if err := c.prepareBody(); err != nil {
		return nil, err
	}
	p := &c.policy
	c.clock, c.timeout = clock.Or(p.Clock), p.AttemptTimeout
	c.limit = p.AttemptLimit()
	// The transport classifies every attempt itself and runs the attempt
	// timeout itself, so that the returned response's body outlives it.
	p.Classify = policyClassify
	p.AttemptTimeout = 0
	if !c.repeat {
		p.MaxAttempts = 1 // raised only after REFUSED_STREAM (see attempt)
	}
	c.sameCtx = c.timeout <= 0 && p.Observer == nil && ctx == req.Context()

	resp, err := c.run(ctx)
	c.closeUnsent()
	if err == nil {
		if c.n > 1 {
			return withOutcome(resp, req, Outcome{Reason: retry.ReasonSuccess, Attempts: c.n}), nil
		}
		resp.Request = req
		return resp, nil
	}
	if resp != nil && ctx.Err() != nil {
		// The caller gave up (during a wait, typically): as net/http does
		// for a cancelled request, return the context's error, not the
		// response held for a retry that will not come.
		discard(resp)
		resp = nil
	}
	var re *retry.Error
	if resp != nil {
		// A response came back: the RoundTripper contract wants it with a
		// nil error, whatever the policy's reason to stop; Result tells
		// the caller that reason.
		if errors.As(err, &re) {
			return withOutcome(resp, req, Outcome{Reason: reasonOf(re, c.lim.refused), Attempts: re.Attempts, Err: re}), nil
		}
		resp.Request = req
		return resp, nil
	}
	if c.n == 1 && c.lastErr != nil && !c.repeat {
		// A single send: the transport's own error, as net/http returns it.
		return nil, c.lastErr
	}
	if errors.As(err, &re) {
		return nil, &callError{re}
	}
	return nil, err
}

// calls recycles the per-request state, so that a request that succeeds at
// once costs no allocation beyond what the next RoundTripper makes
// (BenchmarkOverhead). Nothing keeps a call after RoundTrip returns:
// request copies, response bodies, attempt contexts and timers do not
// refer to it.
var calls = sync.Pool{New: func() any {
	c := new(call)
	c.op = c.attempt
	return c
}}

func getCall() *call { return calls.Get().(*call) }

func putCall(c *call) {
	*c = call{op: c.op}
	calls.Put(c)
}
