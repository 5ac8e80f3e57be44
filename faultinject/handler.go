package faultinject

import (
	"io"
	"net"
	"net/http"
)

// HeaderFault names the response header the Injector sets on the error
// responses it makes up: "abort", "outage", "reject", "closed" or
// "canceled". Real responses of the wrapped handler or transport never
// carry it.
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
// client closes the connection or its HTTP/2 stream. Over HTTP/1.x the
// server watches the connection only once the request body has been read,
// so a hang reads and discards the body in the background: a hung POST
// ends, and frees its Limit slot, when its client leaves. A queued or
// delayed HTTP/1.x request reads its body ahead (when its length is known
// and at most 64 KiB) for the same reason, and hands it on intact if it
// passes.
//
// A request whose context ends while it is queued, delayed or hanging
// (Cancel, or a Hang that the caller ended) is answered with the status it
// was to get (the Limit's Status for a queued request, the Abort status
// for a drawn abort, an outage window's Status) or DefaultStatus, with
// HeaderFault "canceled": never with an empty 200. When the client has
// left nobody reads it; when a middleware's deadline ended the context
// while the client is still connected, the client learns that the request
// failed.
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
	pf := prefetch{w: w, r: r}
	// Whatever ends the handler, a panic included (OnEvent, the Clock, the
	// wrapped handler), the body's read ahead or drain ends (normally it
	// has already: then stop does nothing), then the slot is freed. One
	// defer does both: each costs on every request.
	slot := false
	defer func() {
		pf.stop()
		if slot {
			in.release()
		}
	}()
	v := in.decide(r.Context(), r, &pf)
	slot = v.slot
	in.settle(&v, r)
	if v.action != Pass && v.action != Hang {
		pf.stop()
	}
	switch v.action {
	case Pass:
		pf.handOn()
		h.next.ServeHTTP(w, r)
		pf.stop() // the handler may have left the body unread
	case Abort, Reject:
		writeFault(w, &v)
	case Reset:
		resetConn(w)
	case Hang:
		if pf.br == nil {
			pf.br = drainBody(r)
		}
		closed := in.hang(r.Context())
		pf.stop()
		if closed {
			writeError(w, "closed", DefaultStatus, "")
		} else {
			writeCanceled(w, &v)
		}
	case Cancel:
		writeCanceled(w, &v)
	}
}

// writeCanceled answers a request whose context ended in the Injector.
func writeCanceled(w http.ResponseWriter, v *verdict) {
	writeError(w, "canceled", statusOr(v.status), retryAfterValue(v.retryAfter))
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
	case "canceled":
		return "faultinject: request canceled\n"
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
