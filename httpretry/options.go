package httpretry

import (
	"net/http"
	"net/textproto"
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
	repeatable    func(*http.Request) bool
	classify      func(*http.Response, error) bool
	retry500      bool
	bodyLimit     int64
	attemptHeader string
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
// A nil f restores the default.
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

// WithAttemptHeader sends the attempt number ("1" for the first attempt,
// "2" for the first retry, ...) in the named header on every attempt,
// replacing any value the caller set. An empty name turns it off.
func WithAttemptHeader(name string) Option {
	return func(o *options) { o.attemptHeader = textproto.CanonicalMIMEHeaderKey(name) }
}
