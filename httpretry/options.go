package httpretry

import (
	"net/http"
	"net/textproto"

	"github.com/stormguard/stormguard/layer"
)

// DefaultBodyLimit is the largest request body, without GetBody, that New
// buffers in memory so that it can be sent again. A larger body is sent
// once.
const DefaultBodyLimit = 1 << 20

// drainLimit is how much of a failed response's body is read so that its
// connection can be reused.
const drainLimit = 4 << 10

// Option configures New and NewClient.
type Option func(*options)

type options struct {
	repeatable func(*http.Request) bool
	classify   func(*http.Response, error) bool
	retry500   bool
	bodyLimit  int64
	hdr        Headers // canonical names; set by New from DefaultHeaders unless hdrSet
	hdrSet     bool
	key        func(*http.Request) string // WithKey's (key.go)
}

// WithRetryable replaces the rule that says which requests may be sent more
// than once (default: Idempotent). A request for which f returns false is
// sent exactly once, whatever the policy says. Compose with Idempotent to
// widen or narrow the default:
//
//	httpretry.WithRetryable(func(r *http.Request) bool {
//		return httpretry.Idempotent(r) && r.URL.Path != "/charge"
//	})
//
// A nil f restores the default. f runs before anything is sent; if it
// panics, the request body is closed and the panic goes on.
func WithRetryable(f func(*http.Request) bool) Option {
	return func(o *options) { o.repeatable = f }
}

// WithClassifier replaces the rule that says which outcomes of an attempt
// are worth another try (default: the policy's Classify when set, else
// DefaultClassifier; see New). A classifier given here is fixed for the
// transport's life: to have it follow a reloaded policy, set it as the
// policy's Classify with PolicyClassifier instead. f is called after
// every attempt, with the response and a nil error when one came back, or
// with a nil response and the transport error; its verdict matters only for
// requests that may be repeated (see WithRetryable), and decides which
// errors the policy's Breaker and Budget see as retryable failures.
// It must not read or close the response body. The caller's own
// cancellation is never retried, whatever f says. A nil f restores the
// default.
func WithClassifier(f func(resp *http.Response, err error) (retry bool)) Option {
	return func(o *options) { o.classify = f }
}

// WithRetry500 also retries 500 Internal Server Error, on top of the
// classifier in use.
func WithRetry500() Option {
	return func(o *options) { o.retry500 = true }
}

// WithBodyLimit sets how many bytes of a request body without GetBody are
// buffered so that the request can be repeated (default DefaultBodyLimit).
// A larger body is streamed and the request is sent once. n <= 0 restores
// the default.
func WithBodyLimit(n int64) Option {
	return func(o *options) { o.bodyLimit = n }
}

// Headers names the headers through which the transport tells a server
// about each attempt, so that the server's own calls retry at one layer
// (see the layer package, whose Middleware reads them), and the response
// header it reads the overload marker from. An empty name turns that
// header off.
type Headers struct {
	// Attempt carries the attempt number: "1" for the first attempt, "2"
	// for the first retry, ... (default layer.HeaderAttempt).
	Attempt string
	// WillRetry is "1" when a failure of this attempt may be retried, here
	// or by a caller above ((*retry.Call).WillRetry), "0" otherwise; a
	// tier that leaves retrying to its caller thus tells the next tier so,
	// and a chain retries at its outermost layer only (default
	// layer.HeaderWillRetry).
	WillRetry string
	// Deadline carries the milliseconds left before the attempt's end —
	// the request's deadline or the policy's AttemptTimeout, the earlier —
	// on the policy's clock, rounded down; it is sent only when there is
	// such an end (default layer.HeaderDeadline).
	Deadline string
	// Overloaded is read on every response of status 429 or 5xx (on any
	// other status it is ignored): "1" means "overloaded; don't
	// retry". The attempt then reports retry.Overloaded(*StatusError): it
	// is never retried, the call ends with retry.ReasonOverloaded, Result
	// gives an Err for which errors.Is(err, retry.ErrOverloaded), and a
	// service built with the layer package passes the marker up (default
	// layer.HeaderOverloaded).
	Overloaded string
}

// DefaultHeaders returns the names the transport uses unless told
// otherwise: layer.HeaderAttempt, layer.HeaderWillRetry,
// layer.HeaderDeadline and layer.HeaderOverloaded.
func DefaultHeaders() Headers {
	return Headers{
		Attempt:    layer.HeaderAttempt,
		WillRetry:  layer.HeaderWillRetry,
		Deadline:   layer.HeaderDeadline,
		Overloaded: layer.HeaderOverloaded,
	}
}

// WithHeaders replaces the names of the headers announced on every attempt
// and of the overload marker read on responses (default DefaultHeaders()).
// Each name is canonicalized; an empty name turns that header off. An
// announced header replaces any value the caller set.
func WithHeaders(h Headers) Option {
	return func(o *options) {
		o.hdr = Headers{
			Attempt:    textproto.CanonicalMIMEHeaderKey(h.Attempt),
			WillRetry:  textproto.CanonicalMIMEHeaderKey(h.WillRetry),
			Deadline:   textproto.CanonicalMIMEHeaderKey(h.Deadline),
			Overloaded: textproto.CanonicalMIMEHeaderKey(h.Overloaded),
		}
		o.hdrSet = true
	}
}

// WithoutAnnounce sends none of the attempt headers (for calls to third
// parties, which have no use for them); the overload marker is still read.
// Requests then go out exactly as the caller built them.
func WithoutAnnounce() Option {
	return func(o *options) {
		o.defaultHeaders()
		o.hdr.Attempt, o.hdr.WillRetry, o.hdr.Deadline = "", "", ""
	}
}

// WithAttemptHeader renames the header that carries the attempt number
// ("1" for the first attempt, "2" for the first retry, ...), replacing any
// value the caller set; an empty name stops sending it. The other
// announced headers are unchanged.
//
// Deprecated: use WithHeaders. Before the layer headers, this option was
// the only announcement and was off by default; the attempt number is now
// sent by default as layer.HeaderAttempt, together with
// layer.HeaderWillRetry and layer.HeaderDeadline.
func WithAttemptHeader(name string) Option {
	return func(o *options) {
		o.defaultHeaders()
		o.hdr.Attempt = textproto.CanonicalMIMEHeaderKey(name)
	}
}

// defaultHeaders starts o.hdr from DefaultHeaders, once.
func (o *options) defaultHeaders() {
	if !o.hdrSet {
		o.hdr, o.hdrSet = DefaultHeaders(), true
	}
}

// announces reports whether the transport sends any attempt header.
func (o *options) announces() bool {
	return o.hdr.Attempt != "" || o.hdr.WillRetry != "" || o.hdr.Deadline != ""
}
