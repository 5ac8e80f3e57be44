package retry

import (
	"context"
	"errors"
)

// FaultReporter is implemented by errors that know whether they speak of
// the downstream's health, apart from whether the call should be retried.
// An adapter's error for an HTTP 500 or a gRPC Internal is not worth
// retrying and still says the downstream is failing; a 404 says nothing
// against it. IsDownstreamFault asks the first FaultReporter it finds in an
// error chain.
type FaultReporter interface {
	// DownstreamFault reports whether the outcome counts against the
	// downstream's health (a circuit breaker's failure).
	DownstreamFault() bool
}

// IsDownstreamFault reports whether err speaks against the downstream's
// health, the question a circuit breaker asks (breaker.DefaultIsFailure),
// which is separate from whether to retry:
//   - nil is no fault;
//   - otherwise the first error in the chain that implements FaultReporter
//     decides (httpretry and grpcretry errors do: HTTP 5xx and 429, gRPC
//     Unavailable, Internal, Unknown, ResourceExhausted, DataLoss and an
//     attempt's own DeadlineExceeded are faults; other answers are not);
//   - otherwise an error marked Permanent is no fault (the downstream
//     answered and the request was at fault);
//   - otherwise the caller's own cancellation (context.Canceled that is not
//     also an attempt timeout or a deadline) is no fault;
//   - everything else is a fault, attempt timeouts and deadlines included.
//
// Fault marks an error as a fault whatever else it is.
func IsDownstreamFault(err error) bool {
	if err == nil {
		return false
	}
	found, verdict := false, false
	walk(err, func(e error) bool {
		if f, ok := e.(FaultReporter); ok {
			found, verdict = true, f.DownstreamFault()
		}
		return found
	})
	switch {
	case found:
		return verdict
	case IsPermanent(err):
		return false
	case errors.Is(err, ErrAttemptTimeout) || errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return !errors.Is(err, context.Canceled)
}

// Fault marks err as speaking against the downstream's health, so that
// IsDownstreamFault (and a breaker's default) counts it as a failure even
// when it is also marked Permanent: Fault(Permanent(err)) is a failure not
// worth retrying, such as a server's crash report. It returns nil when err
// is nil.
func Fault(err error) error {
	if err == nil {
		return nil
	}
	return &faultError{err}
}

type faultError struct{ err error }

func (f *faultError) Error() string         { return f.err.Error() }
func (f *faultError) Unwrap() error         { return f.err }
func (f *faultError) DownstreamFault() bool { return true }
