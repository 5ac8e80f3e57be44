package grpcretry

import (
	"context"
	"strconv"

	"google.golang.org/grpc/metadata"
)

// Request metadata the client interceptors send on every attempt (unless
// WithAnnounce(false)) and the server interceptors read, so that a server
// knows whether its caller retries the call itself (the layer rule,
// retry.Policy.Nested). The caller's deadline travels natively, as
// grpc-timeout.
const (
	// AttemptKey carries the attempt number: "1" for a call's first
	// attempt, "2" for its first retry, and so on.
	AttemptKey = "stormguard-attempt"
	// WillRetryKey carries "1" when a failure of the attempt may be
	// retried, "0" when not: retry.Call.WillRetry, which is true while this
	// client has attempts left, and also while a caller further up retries
	// the inbound call this one serves — so a tier that leaves retrying to
	// its caller still tells the next tier that retries happen above, and
	// the chain retries at its outermost layer only.
	WillRetryKey = "stormguard-will-retry"
)

// WithAnnounce(false) stops the client interceptors from sending
// AttemptKey and WillRetryKey, for calls to third parties that have no
// use for them. grpc-previous-rpc-attempts (PreviousAttemptsKey), the
// standard header of gRFC A6 that grpc-go's own retries send too, is sent
// on every retry either way. On by default.
func WithAnnounce(on bool) Option {
	return optionFunc(func(o *options) { o.noAnnounce = !on })
}

// announce returns the context of attempt n: actx with the attempt's
// facts appended to its outgoing metadata — AttemptKey and WillRetryKey
// (willRetry, the retry.Call's word) unless turned off, and PreviousAttemptsKey on a retry, as grpc-go sends
// it. It costs one metadata.AppendToOutgoingContext (and nothing for a
// first attempt with announcing off).
func (ic *interceptor) announce(actx context.Context, n int, willRetry bool) context.Context {
	switch {
	case ic.o.noAnnounce && n <= 1:
		return actx
	case ic.o.noAnnounce:
		return metadata.AppendToOutgoingContext(actx, PreviousAttemptsKey, strconv.Itoa(n-1))
	case n <= 1:
		return metadata.AppendToOutgoingContext(actx, AttemptKey, "1", WillRetryKey, flag(willRetry))
	}
	return metadata.AppendToOutgoingContext(actx, AttemptKey, strconv.Itoa(n), WillRetryKey, flag(willRetry),
		PreviousAttemptsKey, strconv.Itoa(n-1))
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
