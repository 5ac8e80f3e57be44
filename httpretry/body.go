package httpretry

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stormguard/stormguard/clock"
)

// bodyMode says how a request's body is supplied to each attempt.
type bodyMode uint8

const (
	bodyNone     bodyMode = iota // no body
	bodyGetBody                  // the first attempt sends req.Body, later ones call req.GetBody
	bodyBuffered                 // buffered in memory; every attempt reads a fresh copy
	bodyOnce                     // sent once: not repeatable, or too large to buffer
)

// prepareBody decides how the body of c.req is replayed, buffering it when
// the request may be repeated, has no GetBody and fits the limit. A body too
// large to buffer makes the request unrepeatable.
func (c *call) prepareBody() error {
	r := c.req
	switch {
	case r.Body == nil || r.Body == http.NoBody:
		c.mode = bodyNone
		return nil
	case !c.repeat && r.GetBody != nil:
		c.mode = bodyGetBody // replayed only after REFUSED_STREAM
		return nil
	case !c.repeat:
		c.mode = bodyOnce
		return nil
	case r.GetBody != nil:
		c.mode = bodyGetBody
		return nil
	}
	limit := c.t.opts.bodyLimit
	if r.ContentLength > limit {
		c.mode, c.repeat = bodyOnce, false
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		r.Body.Close()
		return fmt.Errorf("httpretry: reading request body: %w", err)
	}
	if int64(len(b)) > limit {
		// Too large: send what was read followed by the rest, once.
		c.mode, c.repeat = bodyOnce, false
		c.body = &readCloser{Reader: io.MultiReader(bytes.NewReader(b), r.Body), Closer: r.Body}
		return nil
	}
	r.Body.Close()
	c.mode, c.buf = bodyBuffered, b
	return nil
}

// attemptBody returns the body for the attempt about to run, or nil when
// the attempt sends c.req.Body itself.
func (c *call) attemptBody() (io.ReadCloser, error) {
	switch c.mode {
	case bodyGetBody:
		if c.n == 1 {
			return nil, nil
		}
		b, err := c.req.GetBody()
		if err != nil {
			return nil, fmt.Errorf("httpretry: rewinding request body: %w", err)
		}
		if b == nil {
			b = http.NoBody
		}
		return b, nil
	case bodyBuffered:
		return io.NopCloser(bytes.NewReader(c.buf)), nil
	case bodyOnce:
		if c.body != nil {
			return c.body, nil
		}
	}
	return nil, nil
}

// replay returns the GetBody of attempts that send the buffered body b, so
// that net/http's own replay on a dead keep-alive connection works too.
// It refers to b only, not to the (recycled) call.
func replay(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// closeUnsent closes the request body when no attempt sent it (the breaker
// or the limiter refused the call): the RoundTripper contract requires it
// to be closed, and no transport below has taken ownership of it.
func (c *call) closeUnsent() {
	if c.sent {
		return
	}
	switch c.mode {
	case bodyGetBody:
		c.req.Body.Close()
	case bodyOnce:
		if c.body != nil {
			c.body.Close()
		} else {
			c.req.Body.Close()
		}
	}
}

// closeUnsentOnPanic is closeUnsent for a call that a panic ended, at any
// point: before prepareBody decided how the body is sent (the
// WithRetryable rule, the policy source), while it buffered the body (the
// body's own Read), or before any attempt sent it.
func (c *call) closeUnsentOnPanic() {
	if c.sent || c.req == nil {
		return
	}
	switch {
	case c.mode == bodyBuffered:
		// Closed once it was read into memory.
	case c.mode == bodyOnce && c.body != nil:
		c.body.Close()
	case c.req.Body != nil && c.req.Body != http.NoBody:
		c.req.Body.Close()
	}
}

type readCloser struct {
	io.Reader
	io.Closer
}

// keepBody reads up to drainLimit bytes of the body of a response that is
// about to be retried. When that is the whole body the connection is
// released at once (it goes back to the pool while the retry waits) and the
// bytes stay readable, so the response can still be returned intact if no
// retry follows. A longer body keeps its connection; the bytes read are put
// back in front of the rest.
func keepBody(resp *http.Response) {
	body := resp.Body
	if body == nil || body == http.NoBody {
		return
	}
	b, err := io.ReadAll(io.LimitReader(body, drainLimit+1))
	switch {
	case err != nil:
		body.Close()
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), errReader{err}))
	case len(b) <= drainLimit:
		body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
	default:
		resp.Body = &readCloser{Reader: io.MultiReader(bytes.NewReader(b), body), Closer: body}
	}
}

// discard releases a response that is being retried. keepBody has already
// read (at most drainLimit bytes of) it, so this only closes it.
func discard(resp *http.Response) {
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// cancelBody ends an attempt's context when the response body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(context.Canceled)
	return err
}

// cancelRWBody is cancelBody for the body of a protocol upgrade, which is
// the connection itself: it stays an io.ReadWriteCloser, as WebSocket and
// other upgrading clients require.
type cancelRWBody struct {
	io.ReadWriteCloser
	cancel context.CancelCauseFunc
}

func (b *cancelRWBody) Close() error {
	err := b.ReadWriteCloser.Close()
	b.cancel(context.Canceled)
	return err
}

// attemptCtx is the context of an attempt bounded by AttemptTimeout. When
// the attempt's timer fires it is cancelled with cause errAttemptTimeout
// and its Err is context.DeadlineExceeded, as for a context past its
// deadline: net/http returns the cause over HTTP/1 and Err over HTTP/2, so
// either way the attempt's error says it timed out. Unlike a
// context.WithDeadline, the timer is stopped once the response headers
// arrive, so the returned body outlives it (bounded by the caller's
// context alone); for the same reason it reports no deadline of its own.
type attemptCtx struct {
	context.Context
	cancel context.CancelCauseFunc
	timer  clock.Timer
}

func newAttemptCtx(parent context.Context, clk clock.Clock, d time.Duration) *attemptCtx {
	ctx, cancel := context.WithCancelCause(parent)
	a := &attemptCtx{Context: ctx, cancel: cancel}
	a.timer = clk.AfterFunc(d, func() { cancel(errAttemptTimeout) })
	return a
}

// stop stops the attempt's timer and reports whether it had fired.
func (a *attemptCtx) stop() (expired bool) { return !a.timer.Stop() }

// Err is context.DeadlineExceeded once the attempt's own time ran out.
func (a *attemptCtx) Err() error {
	err := a.Context.Err()
	if err == context.Canceled && context.Cause(a.Context) == errAttemptTimeout {
		return context.DeadlineExceeded
	}
	return err
}
