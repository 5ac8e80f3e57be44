package httpretry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/stormguard/stormguard/retry"
)

// Idempotent reports whether r may be sent more than once by default: its
// method is GET, HEAD, OPTIONS, TRACE, PUT or DELETE (RFC 9110 §9.2.2), or
// it carries an Idempotency-Key (or X-Idempotency-Key) header, the
// convention net/http itself follows. It is the default of WithRetryable.
func Idempotent(r *http.Request) bool {
	switch r.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	if _, ok := r.Header["Idempotency-Key"]; ok {
		return true
	}
	_, ok := r.Header["X-Idempotency-Key"]
	return ok
}

// DefaultClassifier reports whether an attempt's outcome is worth another
// try. It is the default of WithClassifier.
//
// With a response (err nil) it retries 408 Request Timeout, 429 Too Many
// Requests, 502 Bad Gateway, 503 Service Unavailable and 504 Gateway
// Timeout, and nothing else: in particular never 400, 401, 403, 404, 409,
// 422 or 501 (500 only with WithRetry500).
//
// With an error it retries what RetryableError accepts.
func DefaultClassifier(resp *http.Response, err error) bool {
	if err != nil {
		return RetryableError(err)
	}
	if resp == nil {
		return false
	}
	return RetryableStatus(resp.StatusCode)
}

// RetryableStatus reports whether DefaultClassifier retries a response with
// status code code: 408, 429, 502, 503 and 504.
func RetryableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests,
		http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// RetryableError reports whether a transport error (no response came back)
// is worth another try of a repeatable request. It looks at typed errors
// with errors.Is and errors.As, never at error strings, and judges a
// failure the same over HTTP/1.1 and HTTP/2.
//
// Retried: attempts cut by the policy's AttemptTimeout
// (retry.ErrAttemptTimeout, checked first: over HTTP/2 such an attempt
// also ends as a context error), network timeouts, connection refused,
// reset or aborted, broken pipe, unreachable hosts, temporary DNS failures
// (all of retry.IsTransientNetError), and io.EOF or io.ErrUnexpectedEOF:
// net/http reports those when the server closed the connection before a
// complete response, which is how a crashing or overloaded server, or a
// proxy that dropped the connection, looks from the client over HTTP/1.1.
// Their HTTP/2 counterparts are retried too: a stream reset by the server
// with INTERNAL_ERROR or CANCEL (a handler that aborted), a connection
// closed after GOAWAY, and a stream refused with REFUSED_STREAM. The
// request may have reached the server, which is why only repeatable
// requests are ever retried — except after REFUSED_STREAM, which says the
// server did not process the request, and a refused dial, which never
// reached it: the transport retries those for any request whose body it
// can replay.
//
// net/http's HTTP/2 errors are unexported types. A stream error is read
// with errors.As into a struct of the same shape (StreamID, Code, Cause),
// through the As method net/http gives it for golang.org/x/net/http2
// compatibility; the GOAWAY error, which has no such hook, is recognised by
// its type's package path and name (net/http.http2GoAwayError, or
// golang.org/x/net/http2.GoAwayError), never by its message.
//
// Not retried: context.Canceled (the caller's own cancellation or
// deadline is in any case never retried, whatever the classifier says), DNS "no such host", TLS and
// certificate errors, malformed responses, other HTTP/2 error codes
// (PROTOCOL_ERROR, FLOW_CONTROL_ERROR, ...), and any other error.
func RetryableError(err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, retry.ErrAttemptTimeout):
		return true
	case errors.Is(err, context.Canceled):
		return false
	case retry.IsTransientNetError(err):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case h2Reset(err):
		return true
	}
	return false
}

// StatusError is the error an attempt reports to the retry policy (its
// Breaker, Budget and Observer) when the response's status is a failure: a
// status the classifier retries, or any 5xx. The transport never returns
// it: when a response came back, RoundTrip returns that response with a nil
// error, as the http.RoundTripper contract requires.
//
// A StatusError for a status below 500 that is not retried (a client
// error such as 404) is wrapped with retry.Permanent, so breakers that ignore
// permanent errors do not count it against the downstream's health.
type StatusError struct {
	// StatusCode is the response's status code.
	StatusCode int
	// Response is the attempt's response. Observers may read its status and
	// headers but must not read or close its body, which belongs to the
	// transport (and, for the last attempt, to the caller).
	Response *http.Response

	retry bool // the classifier's verdict
}

// Error returns "httpretry: " followed by the status, e.g.
// "httpretry: 503 Service Unavailable".
func (e *StatusError) Error() string {
	return "httpretry: " + strconv.Itoa(e.StatusCode) + " " + http.StatusText(e.StatusCode)
}

// DownstreamFault reports whether the status speaks against the
// downstream's health: 5xx and 429 do, other statuses (a 404, a 409, a
// 408 that is retried) do not. It makes StatusError a
// retry.FaultReporter, so a breaker behind the transport
// (breaker.DefaultIsFailure, retry.IsDownstreamFault) opens for a server
// that answers 500 and stays closed for one that answers 404.
func (e *StatusError) DownstreamFault() bool {
	return e.StatusCode >= 500 || e.StatusCode == http.StatusTooManyRequests
}

// policyClassify is installed as the per-request Policy.Classify: the
// transport has already classified every attempt, marking what must not be
// retried either with retry.Permanent or, for failures that should still
// count against the downstream's health, with a StatusError whose verdict
// is false.
func policyClassify(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.retry
	}
	return true
}

// PolicyClassifier turns an HTTP classifier (such as DefaultClassifier or
// config's PolicySpec.HTTPClassifier) into a retry.Policy.Classify, so
// that it travels with the policy: a Transport whose source gives a
// reloaded policy then classifies by the reloaded rule (see New). The
// Transport asks it with a *StatusError for a response of status 400 or
// above, whose Response f receives, and with the transport error
// otherwise; any other error reaches f as (nil, err), so retry.Do under
// the same policy retries what f accepts as a transport error.
func PolicyClassifier(f func(resp *http.Response, err error) bool) func(error) bool {
	if f == nil {
		f = DefaultClassifier
	}
	return func(err error) bool {
		var se *StatusError
		if errors.As(err, &se) && se.Response != nil {
			return f(se.Response, nil)
		}
		return f(nil, err)
	}
}
