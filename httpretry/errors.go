package httpretry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/stormguard/stormguard/retry"
)

// errAttemptTimeout is the cause an attempt's context is cancelled with
// when Policy.AttemptTimeout runs out. net/http's HTTP/1 transport returns
// the context's cause, so it behaves as net/http's own timeouts do:
// Timeout and Temporary report true, and errors.Is finds
// retry.ErrAttemptTimeout and context.DeadlineExceeded.
var errAttemptTimeout error = attemptTimeoutError{}

type attemptTimeoutError struct{}

func (attemptTimeoutError) Error() string   { return "httpretry: attempt timed out" }
func (attemptTimeoutError) Timeout() bool   { return true }
func (attemptTimeoutError) Temporary() bool { return true }

// DownstreamFault reports true: an attempt that ran out of time speaks
// against the downstream's health (retry.FaultReporter).
func (attemptTimeoutError) DownstreamFault() bool { return true }
func (attemptTimeoutError) Is(target error) bool {
	return target == retry.ErrAttemptTimeout || target == context.DeadlineExceeded
}

// timedOut marks the error of an attempt that AttemptTimeout cut, when the
// transport below reported something else (HTTP/2 reports the context's
// Err, a dial its own error): it reads "httpretry: attempt timed out: ...",
// matches retry.ErrAttemptTimeout and context.DeadlineExceeded, reports
// Timeout, and wraps the transport's error.
type timedOut struct{ err error }

func (e *timedOut) Error() string {
	if e.err == nil || e.err == context.DeadlineExceeded {
		return errAttemptTimeout.Error()
	}
	return errAttemptTimeout.Error() + ": " + e.err.Error()
}
func (e *timedOut) Unwrap() error   { return e.err }
func (e *timedOut) Timeout() bool   { return true }
func (e *timedOut) Temporary() bool { return true }

// DownstreamFault reports true, as attemptTimeoutError does.
func (e *timedOut) DownstreamFault() bool { return true }
func (e *timedOut) Is(target error) bool  { return errAttemptTimeout.(attemptTimeoutError).Is(target) }

// markTimedOut returns err marked as an attempt timeout, unless it already
// is one.
func markTimedOut(err error) error {
	if errors.Is(err, retry.ErrAttemptTimeout) {
		return err
	}
	return &timedOut{err}
}

// callError is what RoundTrip returns when a repeatable request ends
// without a response. It wraps the *retry.Error (so errors.Is finds the
// sentinel and the last attempt's error, and errors.As the *retry.Error)
// and behaves as net/http's errors do when an http.Client wraps it in a
// *url.Error: Timeout and Temporary report what the errors it wraps
// report, so (*url.Error).Timeout is true for a deadline or a timeout.
type callError struct {
	re *retry.Error
}

func (e *callError) Unwrap() error { return e.re }

// DownstreamFault answers for the call as a whole (retry.FaultReporter),
// for a breaker around code that calls through the transport: what the
// last attempt's error says (retry.IsDownstreamFault), or, when no attempt
// ran, what the reason the call stopped says (an open breaker is a fault,
// the caller's cancellation is not).
func (e *callError) DownstreamFault() bool {
	if e.re.Last != nil {
		return retry.IsDownstreamFault(e.re.Last)
	}
	return retry.IsDownstreamFault(e.re.Reason)
}

// Error reads "httpretry: <why it stopped> after N attempts: <last error>",
// without repeating the reason when the last error is that reason (the
// caller's deadline, say), and naming the last status when a response
// was dropped because the caller gave up.
func (e *callError) Error() string {
	re := e.re
	switch {
	case re.Reason == nil && re.Last != nil:
		return re.Last.Error() // not retryable: the attempt's own error
	case re.Reason == nil:
		return "httpretry: failed after " + attempts(re.Attempts)
	}
	var b strings.Builder
	b.WriteString("httpretry: ")
	b.WriteString(strings.TrimPrefix(re.Reason.Error(), "httpretry: "))
	b.WriteString(" after ")
	b.WriteString(attempts(re.Attempts))
	if re.Last != nil && !errors.Is(re.Last, re.Reason) {
		var se *StatusError
		if errors.As(re.Last, &se) {
			b.WriteString("; last response: ")
			b.WriteString(strconv.Itoa(se.StatusCode) + " " + http.StatusText(se.StatusCode))
		} else {
			b.WriteString(": ")
			b.WriteString(strings.TrimPrefix(re.Last.Error(), "httpretry: "))
		}
	}
	return b.String()
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return strconv.Itoa(n) + " attempts"
}

// Timeout reports whether the call ended on a timeout: the caller's
// deadline, an attempt timeout, or a network timeout.
func (e *callError) Timeout() bool {
	return retry.Find(e.re, func(err error) bool {
		t, ok := err.(interface{ Timeout() bool })
		return ok && t.Timeout()
	})
}

// Temporary reports whether an error it wraps says it is temporary, as
// net.Error's (deprecated) Temporary does.
func (e *callError) Temporary() bool {
	return retry.Find(e.re, func(err error) bool {
		t, ok := err.(interface{ Temporary() bool })
		return ok && t.Temporary()
	})
}
