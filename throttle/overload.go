package throttle

import (
	"errors"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/retry"
)

// OverloadReporter is implemented by errors that know whether they are an
// overload signal of the downstream (the backend refused the request
// because it is out of capacity). IsOverload asks the first error in the
// chain that implements it. Adapters make their attempt errors implement
// it: grpcretry's AttemptError for RESOURCE_EXHAUSTED and UNAVAILABLE,
// httpretry's StatusError for 429 and 503, so that this package imports
// no adapter.
type OverloadReporter interface {
	// Overload reports whether the error is an overload signal: true
	// when the downstream refused the request for lack of capacity.
	// IsOverload takes the answer of the first error in the chain that
	// implements it as final (no status code is then looked at), unless
	// the chain carries the retry package's overload marker, which is
	// always an overload. It should be quick and not allocate: IsOverload
	// runs on the attempt path.
	Overload() bool
}

// IsOverload is the default overload classification of a SRE and an
// Adaptive limiter: whether err says the downstream refused a request for lack
// of capacity. In order:
//
//   - nil is not an overload;
//   - an error carrying the retry package's overload marker
//     (retry.Overloaded, retry.ErrOverloaded: "overloaded, don't retry")
//     is one;
//   - the first error in the chain implementing OverloadReporter decides;
//   - otherwise an error reporting an HTTP status (retry.StatusReporter)
//     of 429 (Too Many Requests) or 503 (Service Unavailable) is one;
//   - anything else is not (a timeout, a reset, a 500, the caller's
//     cancellation: the backend answered, or did not, but did not say it
//     is overloaded).
//
// It does not allocate.
func IsOverload(err error) bool {
	if err == nil {
		return false
	}
	if overloadMarked(err) {
		return true
	}
	if r, ok := errors.AsType[overloadError](err); ok {
		return r.Overload()
	}
	code, ok := retry.HTTPStatusCode(err)
	return ok && (code == 429 || code == 503)
}

// overloadError is an error implementing OverloadReporter.
type overloadError interface {
	error
	OverloadReporter
}

// notSent reports whether done heard that the attempt never left the
// client: the breaker refused it after the limiter had counted it.
func notSent(err error) bool {
	return err != nil && errors.Is(err, breaker.ErrOpen)
}
