package layer

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/retry"
)

// Overload answers "overloaded; don't retry": 503 Service Unavailable
// with Retry-After (retryAfter in whole seconds rounded up, at least 1,
// saturating near math.MaxInt64) and
// Stormguard-Overloaded: 1. httpretry never retries such an answer, at
// any layer, and reports it as retry.ErrOverloaded; a service built with
// Middleware passes it up on its own response. A Content-Length already
// set (for other content) is removed, as http.Error does. Call it before
// writing anything else to w.
func Overload(w http.ResponseWriter, retryAfter time.Duration) {
	h := w.Header()
	h.Del("Content-Length")
	h.Set("Retry-After", retryAfterSeconds(retryAfter))
	h.Set(HeaderOverloaded, "1")
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte("overloaded; do not retry\n"))
}

// HandlerFunc is an http.Handler that returns an error, so that a
// downstream's "overloaded; don't retry" can travel up the chain: return
// the error (or one that wraps it) and, unless the handler has already
// written its response,
//
//   - an error that wraps retry.ErrOverloaded is answered with Overload;
//   - an error that a call made here did not retry only because the
//     caller retries (NotRetriedHere: it wraps retry.ErrNestedRetry) is
//     answered with NotRetried — 503 without the overload marker, which
//     the caller retries, so that the one layer that retries makes its
//     attempts;
//   - any other error with 500 Internal Server Error (its text is not
//     sent).
//
// Inside Middleware, or Limit, the overload answer's Retry-After is the
// nearest one's (WithRetryAfter: Limit's own when given, else that of a
// Middleware directly around Limit); served alone, DefaultRetryAfter.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// ServeHTTP calls f and answers its error as described above.
func (f HandlerFunc) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.serve(w, r, DefaultRetryAfter)
}

// serve calls f and answers its error; retryAfter is the overload
// answer's Retry-After.
func (f HandlerFunc) serve(w http.ResponseWriter, r *http.Request, retryAfter time.Duration) {
	tw := &trackedWriter{ResponseWriter: w}
	err := f(tw, r)
	if err == nil || tw.wrote {
		return
	}
	if retry.IsOverloaded(err) {
		Overload(w, retryAfter)
		return
	}
	if NotRetriedHere(err) {
		NotRetried(w, err)
		return
	}
	http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
}

// trackedWriter notes whether the handler began its response. Unwrap lets
// http.ResponseController reach w's Flush, Hijack and deadlines.
type trackedWriter struct {
	http.ResponseWriter
	wrote bool
}

func (t *trackedWriter) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		t.wrote = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackedWriter) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// WriteString writes s as Write does, with the wrapped writer's
// WriteString when it has one, so that io.WriteString copies nothing.
func (t *trackedWriter) WriteString(s string) (int, error) {
	t.wrote = true
	return io.WriteString(t.ResponseWriter, s)
}

// Push pushes target as http.Pusher does, with the wrapped writer's Push;
// it returns http.ErrNotSupported when that writer has none (HTTP/1).
func (t *trackedWriter) Push(target string, opts *http.PushOptions) error {
	if p, ok := t.ResponseWriter.(http.Pusher); ok {
		return p.Push(target, opts)
	}
	return http.ErrNotSupported
}

// ReadFrom copies r to the response with the wrapped writer's ReadFrom
// when it has one (net/http's uses sendfile for a file), else as io.Copy
// does with Write.
func (t *trackedWriter) ReadFrom(r io.Reader) (int64, error) {
	t.wrote = true
	if rf, ok := t.ResponseWriter.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(writerOnly{t.ResponseWriter}, r)
}

// Flush flushes the response, which begins it.
func (t *trackedWriter) Flush() {
	t.wrote = true
	http.NewResponseController(t.ResponseWriter).Flush()
}

// Unwrap returns the ResponseWriter it wraps.
func (t *trackedWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Limit returns a handler that serves at most n requests with h at once
// and answers the others at once with Overload — load shedding whose
// answer tells every caller up the chain not to retry. n must be at least
// 1 (Limit panics otherwise: a limit of none would be no protection). It
// costs no allocation per request.
func Limit(n int, h http.Handler, opts ...Option) http.Handler {
	if n < 1 {
		panic("layer: Limit needs n >= 1, got " + strconv.Itoa(n))
	}
	return &limiter{next: h, n: int64(n), o: resolve(opts)}
}

type limiter struct {
	next     http.Handler
	n        int64
	inflight atomic.Int64
	o        options
}

func (l *limiter) ServeHTTP(w http.ResponseWriter, r *http.Request) { l.serve(w, r, nil) }

// serve serves r; outer is the options of a Middleware directly around
// l (nil: none), whose WithRetryAfter holds unless l has its own.
func (l *limiter) serve(w http.ResponseWriter, r *http.Request, outer *options) {
	retryAfter := l.o.retryAfter
	if !l.o.afterSet && outer != nil {
		retryAfter = outer.retryAfter
	}
	if l.inflight.Add(1) > l.n {
		l.inflight.Add(-1)
		Overload(w, retryAfter)
		return
	}
	defer l.inflight.Add(-1)
	if f, ok := l.next.(HandlerFunc); ok {
		f.serve(w, r, retryAfter)
		return
	}
	l.next.ServeHTTP(w, r)
}
