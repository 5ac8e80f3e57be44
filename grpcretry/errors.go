package grpcretry

import (
	"context"
	"errors"
	"time"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// AttemptError is the error of one failed attempt, as the Policy's Observer
// (AttemptEnd.Err, RetryScheduled.Err), Budget and Breaker see it, possibly
// wrapped by retry.Permanent, retry.After or an attempt-timeout marker.
// status.Code and status.FromError find its status through that wrapping,
// and so does errors.As:
//
//	var ae *grpcretry.AttemptError
//	if errors.As(e.Err, &ae) { label = ae.Code().String() }
//
// The error a call returns wraps the last attempt's AttemptError too.
//
// An AttemptError is a retry.FaultReporter (see DownstreamFault): whether
// it is retried and whether it counts against the server's health are
// separate questions.
type AttemptError struct {
	// Status is the attempt's gRPC status; never nil, never OK. An attempt
	// cut by the Policy's AttemptTimeout reports DeadlineExceeded.
	Status *status.Status
	// Pushback is the delay the server advised in grpc-retry-pushback-ms,
	// valid when HasPushback; negative when it asked not to retry.
	Pushback    time.Duration
	HasPushback bool
	// Overloaded reports the overload marker: a pushback of a negative
	// integer (grpc-retry-pushback-ms: -1, gRFC A6's "do not retry"), as
	// Overloaded builds it. Such an attempt is marked retry.Overloaded, so
	// that no layer retries the call: the call's error wraps
	// retry.ErrOverloaded, and a server interceptor that meets it passes
	// the marker up on its own response. (A malformed or repeated pushback
	// also stops the call, but is no marker.)
	Overloaded bool
	// NotSent reports that the request provably never reached a server (no
	// transport was assigned to a unary attempt of a method that is not
	// idempotent, or the stream could not be created), so that even a method
	// that is not idempotent may be retried.
	NotSent bool
	// Committed reports that the attempt could not be retried whatever its
	// code: the server had sent response headers (a response that is not
	// Trailers-Only, gRFC A6), or, for a stream, a response message had
	// been received, the replay limit passed or the client failed a send.
	Committed bool

	err error // what the invoker or stream returned
}

// Code returns the attempt's status code.
func (e *AttemptError) Code() codes.Code { return e.Status.Code() }

// GRPCStatus returns the attempt's status, for status.FromError.
func (e *AttemptError) GRPCStatus() *status.Status { return e.Status }

// Error returns the status in grpc-go's form ("rpc error: code = … desc = …").
func (e *AttemptError) Error() string { return e.Status.Err().Error() }

// Unwrap returns the error the gRPC client returned for the attempt.
func (e *AttemptError) Unwrap() error { return e.err }

// DownstreamFault implements retry.FaultReporter: whether the attempt
// speaks against the server's health, which a circuit breaker counts
// (breaker.DefaultIsFailure asks retry.IsDownstreamFault), apart from
// whether it is retried. Unavailable, Internal, Unknown, DeadlineExceeded
// (an attempt that ran out of time: its own AttemptTimeout, the caller's
// deadline while it was in flight, or the server's report), ResourceExhausted
// and DataLoss are faults — Internal, Unknown and DataLoss although they
// are not retried, so a breaker opens for a crashing server. Every other
// code is not: the request was at fault (InvalidArgument, NotFound,
// PermissionDenied, …) or the caller gave up (Canceled).
func (e *AttemptError) DownstreamFault() bool { return IsFault(e.Code()) }

// Overload implements throttle.OverloadReporter: whether the server
// refused the attempt for want of capacity — ResourceExhausted,
// Unavailable, or the overload marker (a pushback of -1) — which client-side
// adaptive throttling (throttle.SRE, throttle.Adaptive) counts as a
// rejection rather than an accept.
func (e *AttemptError) Overload() bool {
	c := e.Code()
	return e.Overloaded || c == codes.ResourceExhausted || c == codes.Unavailable
}

// IsFault reports whether an attempt that ended with code speaks against
// the server's health: the codes AttemptError.DownstreamFault counts.
func IsFault(c codes.Code) bool {
	switch c {
	case codes.Unavailable, codes.Internal, codes.Unknown, codes.DeadlineExceeded,
		codes.ResourceExhausted, codes.DataLoss:
		return true
	}
	return false
}

// newAttemptError builds the AttemptError of a failed attempt. timedOut
// reports that the attempt's own deadline (AttemptTimeout) cut it.
func newAttemptError(err error, timedOut bool) *AttemptError {
	st, ok := status.FromError(err)
	if !ok && err != nil {
		// Context errors that did not pass through the gRPC client.
		if cst := status.FromContextError(err); cst.Code() != codes.Unknown {
			st = cst
		}
	}
	if timedOut && st.Code() != codes.DeadlineExceeded {
		st = status.New(codes.DeadlineExceeded, st.Message())
	}
	return &AttemptError{Status: st, err: err}
}

// callError is what a failed call returns: it reads as the retry story
// (*retry.Error) and carries the last attempt's status for status.FromError
// and status.Code, unchanged (message and details), so that code which
// inspects gRPC errors works as without the interceptor.
type callError struct {
	err *retry.Error
	st  *status.Status
}

func (e *callError) Error() string              { return e.err.Error() }
func (e *callError) Unwrap() error              { return e.err }
func (e *callError) GRPCStatus() *status.Status { return e.st }

// finalError turns what retry.Do (or a stream's retry.Call) returned into the
// error a caller sees.
func finalError(err error) error {
	var re *retry.Error
	if err == nil || !errors.As(err, &re) {
		return err
	}
	return &callError{err: re, st: callStatus(re)}
}

// callStatus picks the status a failed call reports. When the caller's
// context ended the call (or its deadline could not hold another attempt),
// the code is the context's, Canceled or DeadlineExceeded, as grpc-go's own
// retries report it, with the retry story as the message. Otherwise it is
// the last attempt's status, unchanged, or Unavailable when no attempt ran
// (the breaker refused).
func callStatus(re *retry.Error) *status.Status {
	if errors.Is(re.Reason, context.Canceled) || errors.Is(re.Reason, context.DeadlineExceeded) {
		return status.New(status.FromContextError(re.Reason).Code(), re.Error())
	}
	if re.Last != nil {
		var ae *AttemptError
		if errors.As(re.Last, &ae) {
			return ae.Status
		}
		return status.Convert(re.Last)
	}
	return status.New(codes.Unavailable, re.Error())
}
