package faultinject

import (
	"io"
	"net"
	"net/http"
)

// HeaderFault names the response header the Injector sets on the error
// responses it makes up: "abort", "outage", "reject" or "closed". Real
// responses of the wrapped handler or transport never carry it.
const HeaderFault = "X-Faultinject"

// Handler returns a middleware that injects faults in front of next, the
// server side of the Injector. A nil next answers 200 with an empty body,
// which makes a stub server with a capacity limit and a fault schedule.
//
// Reset hijacks the connection, sets SO_LINGER to 0 and closes it, so the
// client reads ECONNRESET. Where the connection cannot be hijacked (HTTP/2,
// a ResponseWriter without Hijack) it panics with http.ErrAbortHandler,
// which makes the server abort the response without logging.
//
// Hang waits for the request's context: the server cancels it when the
// client closes the connection or its HTTP/2 stream. A request the
// Injector cancels (its caller gave up while queued or delayed) gets no
// response at all, since no one is there to read it.
//
// Handler on a nil *Injector returns next (or the empty handler).
func (in *Injector) Handler(next http.Handler) http.Handler {
	if next == nil {
		next = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	}
	if in == nil {
		return next
	}
	return &handler{in: in, next: next}
}

type handler struct {
	in   *Injector
	next http.Handler
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	in := h.in
	v := in.decide(r.Context(), r)
	if v.slot {
		defer in.release()
	}
	in.settle(&v, r)
	switch v.action {
	case Pass:
		h.next.ServeHTTP(w, r)
	case Abort, Reject:
		writeFault(w, &v)
	case Reset:
		resetConn(w)
	case Hang:
		if in.hang(r.Context()) {
			writeError(w, "closed", DefaultStatus, "")
		}
	case Cancel:
		// The caller is gone; nothing to answer.
	}
}

// writeFault writes the error response of an Abort or Reject verdict.
func writeFault(w http.ResponseWriter, v *verdict) {
	writeError(w, v.kind(), v.status, retryAfterValue(v.retryAfter))
}

func writeError(w http.ResponseWriter, kind string, status int, retryAfter string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(HeaderFault, kind)
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, faultBody(kind))
}

func faultBody(kind string) string {
	switch kind {
	case "abort":
		return "faultinject: injected abort\n"
	case "outage":
		return "faultinject: injected outage\n"
	case "reject":
		return "faultinject: over capacity\n"
	default:
		return "faultinject: closed\n"
	}
}

// resetConn closes the client's connection with an RST.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	var c net.Conn = conn
	for {
		if u, ok := c.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
			c = u.NetConn()
			continue
		}
		break
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close() // the innermost connection: no TLS close_notify first
}
