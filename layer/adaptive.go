package layer

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync/atomic"

	"github.com/stormguard/stormguard/admission"
)

// Adaptive returns a handler that serves requests with h as the
// admission.Limiter l admits them — at once under its adaptive limit, or
// after a short wait in its CoDel queue, newest first while a queue
// stands — and answers the requests l sheds with Overload (503,
// Retry-After, Stormguard-Overloaded: 1), as Limit does, so no caller up
// the chain retries them. A request whose context has ended when it
// arrives — inside Middleware, one whose caller's deadline header leaves
// it no time (Stormguard-Deadline-Ms: 0) — is shed (answered so) before
// h sees it, and so is a queued request whose caller's deadline passes
// while it waits.
//
// The request's slot is given back when h returns, when h panics (the
// panic goes on), and when h hijacks the connection (the connection is no
// longer an HTTP request in flight). For l's algorithm, a request that h
// answers with 503 or 429 while its context is live is a drop, and so is
// one whose context's
// deadline passed while h served it when that deadline is the server's
// own (a timeout a handler outside Adaptive set, say, or Middleware's
// WithMaxDeadline bound on the caller's: cause ErrMaxDeadline). One whose
// caller's deadline passed — the context's cause is ErrInboundDeadline,
// the deadline Middleware sets from the caller's header — is a served
// request, whose time is a sample but not a drop: a drop would let any
// caller halve an AIMD limit for everyone with a short deadline header,
// while its time (at least the caller's deadline) still tells a
// latency-based algorithm, and AIMD's Timeout, that the server is slow
// when overload pushes its latency past its callers' deadlines. One whose
// caller cancelled, and one that panics or hijacks, gives no sample; any
// other is a served request. The context is judged before the status: a
// request whose caller's deadline passed is no drop even when it is
// answered 503 (as an http.TimeoutHandler inside Adaptive answers it).
// Judging the end runs user code (the context's Err and Value, the
// error's Is): if it panics, the slot is given back without a sample and
// the panic goes on. When h is a HandlerFunc, its errors are answered as
// Middleware answers them.
//
// The writer h is given notes the status and the hijack, and keeps the
// optional interfaces of the one it wraps: WriteString (io.StringWriter)
// and ReadFrom (io.ReaderFrom, sendfile for io.Copy from a file) reach
// that writer's own when it has them, Push (http.Pusher) likewise or
// returns http.ErrNotSupported; Flush, Hijack and the rest of
// http.ResponseController reach it through Unwrap. It costs one
// allocation per request, that writer (and a HandlerFunc's own, when h is
// one). l must not be nil.
func Adaptive(l *admission.Limiter, h http.Handler, opts ...Option) http.Handler {
	if l == nil {
		panic("layer: Adaptive needs a non-nil *admission.Limiter")
	}
	return &adaptive{l: l, next: h, o: resolve(opts)}
}

type adaptive struct {
	l    *admission.Limiter
	next http.Handler
	o    options
}

func (a *adaptive) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.serve(w, r, nil) }

// serve serves r; outer is the options of a Middleware directly around
// a (nil: none), whose WithRetryAfter holds unless a has its own.
func (a *adaptive) serve(w http.ResponseWriter, r *http.Request, outer *options) {
	retryAfter := a.o.retryAfter
	if !a.o.afterSet && outer != nil {
		retryAfter = outer.retryAfter
	}
	p, err := a.l.Acquire(r.Context())
	if err != nil {
		Overload(w, retryAfter)
		return
	}
	sw := &slotWriter{ResponseWriter: w, p: p}
	served := false
	defer func() {
		if !served { // h panicked: give the slot back, let the panic go on
			sw.end(endIgnore)
		}
	}()
	if f, ok := a.next.(HandlerFunc); ok {
		f.serve(sw, r, retryAfter)
	} else {
		a.next.ServeHTTP(sw, r)
	}
	// The end is judged before served is set: judging runs user code (the
	// context's methods, an error's Is), and if it panics the deferred
	// Ignore above gives the slot back.
	kind := endKind(r.Context(), sw.status)
	served = true
	sw.end(kind)
}

// endKind says how the permit of a request that ended with status and
// ctx ends (see Adaptive).
func endKind(ctx context.Context, status int) int {
	// The context first: a request whose caller's deadline ended it is
	// no drop whatever the status (an http.TimeoutHandler inside Adaptive
	// answers it 503).
	cerr := ctx.Err()
	switch {
	case cerr == nil:
		if status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests {
			return endDrop
		}
		return endRelease
	case errors.Is(cerr, context.DeadlineExceeded):
		if cause := context.Cause(ctx); errors.Is(cause, ErrInboundDeadline) && !errors.Is(cause, ErrMaxDeadline) {
			return endRelease // the caller's deadline: a served request, its time a sample
		}
		return endDrop // the server's own deadline, or its bound on the caller's
	}
	return endIgnore // the caller cancelled
}

const (
	endRelease = iota
	endDrop
	endIgnore
)

// slotWriter holds a request's admission.Permit: it notes the status
// written, and gives the slot back on Hijack. Unwrap lets
// http.ResponseController reach the writer's other methods.
type slotWriter struct {
	http.ResponseWriter
	p      admission.Permit
	status int
	ended  atomic.Bool
}

// end ends the permit once, as kind says.
func (s *slotWriter) end(kind int) {
	if s.ended.Swap(true) {
		return
	}
	switch kind {
	case endRelease:
		s.p.Release()
	case endDrop:
		s.p.Drop()
	default:
		s.p.Ignore()
	}
}

func (s *slotWriter) WriteHeader(code int) {
	if s.status == 0 && code >= 200 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *slotWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// WriteString writes s as Write does, with the wrapped writer's
// WriteString when it has one, so that io.WriteString copies nothing.
func (s *slotWriter) WriteString(str string) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return io.WriteString(s.ResponseWriter, str)
}

// ReadFrom copies r to the response with the wrapped writer's ReadFrom
// when it has one (net/http's uses sendfile for a file), else as io.Copy
// does with Write.
func (s *slotWriter) ReadFrom(r io.Reader) (int64, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if rf, ok := s.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{s.ResponseWriter}, r)
}

// writerOnly hides every method of a writer but Write, so that io.Copy
// does not come back to ReadFrom.
type writerOnly struct{ io.Writer }

// Push pushes target as http.Pusher does, with the wrapped writer's Push;
// it returns http.ErrNotSupported when that writer has none (HTTP/1).
func (s *slotWriter) Push(target string, opts *http.PushOptions) error {
	if p, ok := s.ResponseWriter.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// Flush flushes the response.
func (s *slotWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	http.NewResponseController(s.ResponseWriter).Flush()
}

// Hijack takes over the connection, as http.Hijacker does, and gives the
// request's slot back: a hijacked connection is no request in flight. It
// returns http.ErrNotSupported when the writer cannot be hijacked
// (HTTP/2).
func (s *slotWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err == nil {
		s.end(endIgnore)
	}
	return c, rw, err
}

// Unwrap returns the ResponseWriter it wraps.
func (s *slotWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
