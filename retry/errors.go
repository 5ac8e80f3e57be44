package retry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Sentinels that say why Do gave up. The returned *Error wraps exactly one
// of them (or the breaker's or the context's error) together with the last
// attempt's error.
var (
	// ErrAttemptsExhausted: MaxAttempts attempts were made and all failed.
	ErrAttemptsExhausted = errors.New("retry: attempts exhausted")
	// ErrBudgetExhausted: the retry budget refused another retry.
	ErrBudgetExhausted = errors.New("retry: budget exhausted")
	// ErrElapsed: Policy.MaxElapsed cannot hold another wait and attempt.
	ErrElapsed = errors.New("retry: time allowance exhausted")
	// ErrAttemptTimeout marks an attempt cut short by Policy.AttemptTimeout.
	// Such an attempt is retryable.
	ErrAttemptTimeout error = &sentinelError{"retry: attempt timed out"}
	// ErrAdviceExceedsCap: the server asked to wait (Retry-After, gRPC
	// pushback) longer than Policy.MaxRetryAfter. Do stops rather than
	// come back sooner than the server asked.
	ErrAdviceExceedsCap = errors.New("retry: server asked to wait longer than MaxRetryAfter")
	// ErrDeadlineTooClose: the caller's context was still live, but its
	// deadline could not hold the next wait plus Policy.MinAttemptTime, so
	// Do stopped early rather than sleep only to fail. For compatibility
	// errors.Is(ErrDeadlineTooClose, context.DeadlineExceeded) is true;
	// test for ErrDeadlineTooClose to tell this predictive stop from a
	// deadline that has passed.
	ErrDeadlineTooClose error = deadlineTooClose{}
	// ErrPanicked marks an attempt that panicked (see PanicError). Do
	// reports such an attempt as a failure to the Observer, the breaker and
	// the budget, then lets the panic go on.
	ErrPanicked = errors.New("retry: attempt panicked")
)

// sentinelError is the type of a sentinel that DefaultClassifier compares
// every error of a chain with: of a type of its own, an error of another
// type (errors.New's, say) differs from it by its type word alone, with no
// call of the runtime's comparison.
type sentinelError struct{ msg string }

func (e *sentinelError) Error() string { return e.msg }

type deadlineTooClose struct{}

func (deadlineTooClose) Error() string {
	return "retry: deadline too close: it cannot hold the next wait and attempt"
}

// Is makes a predictive stop match context.DeadlineExceeded too.
func (deadlineTooClose) Is(target error) bool { return target == context.DeadlineExceeded }

// PanicError is the error an attempt that panicked is recorded with: the
// breaker, the budget and the Observer see it as the attempt's failure.
// errors.Is(err, ErrPanicked) is true for it.
type PanicError struct {
	Value any // what the attempt panicked with
}

// Error describes the panic.
func (p *PanicError) Error() string { return ErrPanicked.Error() + ": " + fmt.Sprint(p.Value) }

// Is reports whether target is ErrPanicked.
func (p *PanicError) Is(target error) bool { return target == ErrPanicked }

// Error is returned by Do when the call fails. It wraps the reason Do
// stopped (Reason, one sentinel; nil when the last error was simply not
// retryable), the last attempt's error (Last; nil when no attempt ran) and,
// when the caller's context ended with a cause of its own
// (context.WithCancelCause, WithDeadlineCause, WithTimeoutCause), that
// cause (Cause), so that errors.Is finds each of them.
type Error struct {
	Attempts int   // attempts made, the first included
	Reason   error // ErrAttemptsExhausted, ErrBudgetExhausted, ErrElapsed, ErrDeadlineTooClose, ErrAdviceExceedsCap, the breaker's or the context's error, or nil
	Last     error // the last attempt's error
	Cause    error // context.Cause of the caller's context when Reason is its Err and the cause differs; else nil
}

// Error describes the reason and the last error.
func (e *Error) Error() string {
	n := strconv.Itoa(e.Attempts)
	if e.Reason == nil {
		if e.Last == nil {
			return "retry: failed after " + n + " attempts"
		}
		return e.Last.Error()
	}
	reason := e.Reason.Error()
	if e.Cause != nil {
		reason += " (cause: " + e.Cause.Error() + ")"
	}
	if e.Last == nil {
		return reason + " (after " + n + " attempts)"
	}
	return reason + " after " + n + " attempts: " + e.Last.Error()
}

// Unwrap returns the reason, the context's cause and the last error that
// are set, so that errors.Is and errors.As find each.
func (e *Error) Unwrap() []error {
	errs := make([]error, 0, 3)
	for _, err := range [...]error{e.Reason, e.Cause, e.Last} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// Permanent marks err as not worth retrying: Do returns at once. It returns
// nil when err is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

// IsPermanent reports whether err, or an error it wraps, was marked by
// Permanent.
func IsPermanent(err error) bool {
	return walk(err, func(e error) bool {
		_, ok := e.(*permanentError)
		return ok
	})
}

// After marks err as retryable no sooner than d from now: the next wait is
// at least d, capped by Policy.MaxRetryAfter, plus a little jitter. Use it
// for a server's Retry-After or pushback. It returns nil when err is nil.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &afterError{err: err, d: d}
}

type afterError struct {
	err error
	d   time.Duration
}

func (a *afterError) Error() string { return a.err.Error() }
func (a *afterError) Unwrap() error { return a.err }

// RetryAfter returns the delay attached to err by After, if any.
func RetryAfter(err error) (d time.Duration, ok bool) {
	walk(err, func(e error) bool {
		if a, is := e.(*afterError); is {
			d, ok = a.d, true
		}
		return ok
	})
	return d, ok
}

// attemptTimeoutError is the error of an attempt cut by AttemptTimeout. It
// matches ErrAttemptTimeout and wraps what the operation returned.
type attemptTimeoutError struct{ err error }

func (a *attemptTimeoutError) Error() string {
	if a.err == nil {
		return ErrAttemptTimeout.Error()
	}
	return ErrAttemptTimeout.Error() + ": " + a.err.Error()
}
func (a *attemptTimeoutError) Is(target error) bool { return target == ErrAttemptTimeout }
func (a *attemptTimeoutError) Unwrap() error        { return a.err }
