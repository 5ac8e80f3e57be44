package grpcretry

import (
	"math"
	"strconv"
	"time"

	"google.golang.org/grpc/metadata"
)

// Metadata keys of gRFC A6 that the interceptors read and write.
const (
	// PushbackKey is the trailer in which a server advises the client when
	// to retry: a delay in milliseconds, or a negative value for "do not".
	PushbackKey = "grpc-retry-pushback-ms"
	// PreviousAttemptsKey is the request header that tells the server how
	// many attempts of this call came before this one. The first attempt
	// does not carry it.
	PreviousAttemptsKey = "grpc-previous-rpc-attempts"
)

// ParsePushback reads the values of the grpc-retry-pushback-ms trailer (as
// in md[PushbackKey]). It returns ok false when there is none. Otherwise d
// is the delay the server asks for, 0 meaning "retry at once", or -1 when
// the server asks not to retry: a negative value, one that is not a decimal
// integer that fits in 64 bits, or more than one value (gRFC A6, as grpc-go
// reads it). Delays too large for a time.Duration are clamped to the
// largest one.
func ParsePushback(values []string) (d time.Duration, ok bool) {
	d, ok, _ = parsePushback(values)
	return d, ok
}

// parsePushback is ParsePushback, also reporting overloaded: the one value
// is a well-formed negative integer, the "overloaded, do not retry" marker
// (see Overloaded), rather than a malformed or repeated value.
func parsePushback(values []string) (d time.Duration, ok, overloaded bool) {
	switch len(values) {
	case 0:
		return 0, false, false
	case 1:
	default:
		return -1, true, false
	}
	ms, err := strconv.ParseInt(values[0], 10, 64)
	switch {
	case err != nil:
		return -1, true, false
	case ms < 0:
		return -1, true, true
	case ms > math.MaxInt64/int64(time.Millisecond):
		return time.Duration(math.MaxInt64), true, false
	}
	return time.Duration(ms) * time.Millisecond, true, false
}

// PushbackTrailer returns the trailer a server sets (with grpc.SetTrailer)
// to advise a retry after d, or, for a negative d, no retry at all. d is
// rounded down to whole milliseconds.
func PushbackTrailer(d time.Duration) metadata.MD {
	if d < 0 {
		return metadata.Pairs(PushbackKey, "-1")
	}
	return metadata.Pairs(PushbackKey, strconv.FormatInt(d.Milliseconds(), 10))
}
