package httpretry

import (
	"errors"
	"github.com/stormguard/stormguard/retry"
	"net"
	"reflect"
)

// HTTP/2 failures, judged as their HTTP/1.1 counterparts.
//
// net/http bundles its HTTP/2 implementation with unexported error types.
// What Go 1.26 offers to tell them apart without reading messages:
//
//   - The stream error (RST_STREAM) has an As method (net/http's
//     h2_error.go) that fills any struct with the same fields, StreamID
//     uint32, Code (a uint32 type) and Cause error; it exists so that
//     errors.As works with golang.org/x/net/http2.StreamError. h2Stream is
//     such a struct, so errors.As reads the code with no reflection of ours
//     and no message parsing.
//   - The error returned when the server sent GOAWAY and then closed the
//     connection (http2GoAwayError: LastStreamID, ErrCode, DebugData) has
//     no such hook and no exported type, in net/http or in HTTP2Config. It
//     is recognised by its type's identity, package path and name
//     (reflect.Type.PkgPath and Name, never the message), for net/http's
//     bundled copy and for golang.org/x/net/http2's GoAwayError; the
//     tests provoke a real GOAWAY over a real connection, so a rename in a
//     future Go release fails them rather than going unnoticed.
//
// How each is judged:
//
//   - REFUSED_STREAM: the server did not process the stream (RFC 9113
//     §8.7), so it is retried even for a request that may not be repeated,
//     provided its body can be replayed. net/http's HTTP/2 transport
//     retries it internally first, and hands it on only once it gives up.
//   - INTERNAL_ERROR and CANCEL from the server (a handler that panicked or
//     aborted, a proxy that gave up on its upstream): the counterpart of an
//     HTTP/1.1 connection closed before the response (io.EOF), retried for
//     repeatable requests only.
//   - GOAWAY followed by the connection's close while the stream was in
//     flight: the server may have processed it, like an HTTP/1.1
//     connection closed mid-request; retried for repeatable requests only.
//     (Streams the GOAWAY shows as unprocessed are retried by net/http
//     itself on a new connection.)
//   - Other codes (PROTOCOL_ERROR, FLOW_CONTROL_ERROR, COMPRESSION_ERROR,
//     HTTP_1_1_REQUIRED, ...) say the exchange itself is broken, like a
//     malformed HTTP/1.1 response, and are not retried.

// h2Code is an HTTP/2 error code (RFC 9113 §7).
type h2Code uint32

const (
	h2Internal      h2Code = 0x2
	h2RefusedStream h2Code = 0x7
	h2Cancel        h2Code = 0x8
)

// h2Stream has the shape of net/http's (and x/net/http2's) StreamError, so
// that errors.As fills it through the bundled error's As method.
type h2Stream struct {
	StreamID uint32
	Code     h2Code
	Cause    error
}

func (h2Stream) Error() string { return "http2 stream error" }

// h2StreamCode returns the code of the HTTP/2 stream error err holds.
func h2StreamCode(err error) (h2Code, bool) {
	var se h2Stream
	if errors.As(err, &se) {
		return se.Code, true
	}
	return 0, false
}

// refusedStream reports whether err says the server refused the stream
// without processing it (RST_STREAM REFUSED_STREAM).
func refusedStream(err error) bool {
	code, ok := h2StreamCode(err)
	return ok && code == h2RefusedStream
}

// neverSent reports whether err says the request never reached a server
// that could act on it: the stream was refused (REFUSED_STREAM), or over
// HTTP/1.1 the connection could not be made (a dial error such as
// connection refused). Such a request is retried even when it may not be
// repeated.
func neverSent(err error) bool {
	var oe *net.OpError
	return refusedStream(err) || errors.As(err, &oe) && oe.Op == "dial"
}

// h2Reset reports whether err is an HTTP/2 failure worth retrying for a
// repeatable request: a stream refused, reset by the server with
// INTERNAL_ERROR or CANCEL, or a connection closed after GOAWAY.
func h2Reset(err error) bool {
	if code, ok := h2StreamCode(err); ok {
		switch code {
		case h2RefusedStream, h2Internal, h2Cancel:
			return true
		}
		return false
	}
	return retry.Find(err, isGoAway)
}

func isGoAway(err error) bool {
	t := reflect.TypeOf(err)
	if t.Kind() != reflect.Struct {
		return false
	}
	switch t.PkgPath() + "." + t.Name() {
	case "net/http.http2GoAwayError", "golang.org/x/net/http2.GoAwayError":
		return true
	}
	return false
}
