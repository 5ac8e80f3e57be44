package faultinject

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ErrInjected is matched (errors.Is) by every error the client side makes
// up, so a test can tell an injected failure from a real one.
var ErrInjected = errors.New("faultinject: injected fault")

// Transport returns a RoundTripper that injects faults in front of next,
// the client side of the Injector. A nil next means http.DefaultTransport.
//
// Abort, outage and Reject answers are made-up responses (no request is
// sent) carrying the HeaderFault header; Reset returns an error that
// matches syscall.ECONNRESET and ErrInjected; Hang blocks until the
// request's context ends and returns its cause, as http.Transport does. A
// request that is not sent has its body closed, also when a callback
// (Config.OnEvent, Config.Clock) panics; once next has the request, its
// body is next's to close, as with any RoundTripper.
//
// The Limit counts a request as running until RoundTrip returns (its
// response headers have arrived), not until its body is read.
//
// Transport on a nil *Injector returns next (or http.DefaultTransport).
func (in *Injector) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if in == nil {
		return next
	}
	return &transport{in: in, next: next}
}

type transport struct {
	in   *Injector
	next http.RoundTripper
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	in := t.in
	ctx := req.Context()
	// Until the request is handed to next, its body is the Injector's to
	// close: also when OnEvent or the Clock panics. One defer closes it
	// then and frees the slot: each defer costs on every request.
	handed, slot := false, false
	defer func() {
		if !handed && req.Body != nil {
			_ = req.Body.Close()
		}
		if slot {
			in.release()
		}
	}()
	v := in.decide(ctx, req, nil)
	slot = v.slot
	in.settle(&v, req)
	handed = true // to next, or closed here
	if v.action == Pass {
		return t.next.RoundTrip(req)
	}
	if req.Body != nil {
		_ = req.Body.Close()
	}
	switch v.action {
	case Abort, Reject:
		return faultResponse(req, &v), nil
	case Reset:
		return nil, &injectedError{err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
	case Hang:
		if in.hang(ctx) {
			return nil, ErrClosed
		}
	}
	return nil, context.Cause(ctx) // Hang or Cancel: the caller gave up
}

// faultResponse makes up the response of an Abort or Reject verdict.
func faultResponse(req *http.Request, v *verdict) *http.Response {
	kind := v.kind()
	body := faultBody(kind)
	h := http.Header{
		"Content-Type":           {"text/plain; charset=utf-8"},
		"X-Content-Type-Options": {"nosniff"},
		HeaderFault:              {kind},
		"Content-Length":         {strconv.Itoa(len(body))},
	}
	if ra := retryAfterValue(v.retryAfter); ra != "" {
		h.Set("Retry-After", ra)
	}
	return &http.Response{
		Status:        strconv.Itoa(v.status) + " " + http.StatusText(v.status),
		StatusCode:    v.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          nopCloser{strings.NewReader(body)},
		ContentLength: int64(len(body)),
		Request:       req,
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// injectedError wraps an error the client side made up; it matches
// ErrInjected and unwraps to the imitated network error.
type injectedError struct{ err error }

func (e *injectedError) Error() string        { return "faultinject: injected " + e.err.Error() }
func (e *injectedError) Unwrap() error        { return e.err }
func (e *injectedError) Is(target error) bool { return target == ErrInjected }
