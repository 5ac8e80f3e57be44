package grpcretry

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// AdaptiveUnaryServerInterceptor returns UnaryServerInterceptor(opts...)
// with an admission.Limiter in front of the handler: the one src has in
// force when the call arrives — src is a *admission.Limiter, which never
// changes, or config's *AdmissionHandle, whose Limiter a reload of the
// policy file swaps, so the new settings admit from the next call on
// while each call admitted earlier gives its slot back to the Limiter it
// took it from. A call is served as that Limiter l admits it — at once
// under its adaptive limit, or after a short wait in its CoDel queue,
// newest first while a queue stands — and a call l sheds is answered at
// once, without running the handler,
// RESOURCE_EXHAUSTED with the trailer grpc-retry-pushback-ms: -1 (the
// overload marker, "overloaded; don't retry"), which the client
// interceptors read as retry.ErrOverloaded, so no layer of the caller's
// chain retries it. The answer's message names the shed reason, and on
// the server side the error wraps l's (errors.Is(err, admission.ErrShed))
// and retry.ErrOverloaded, for interceptors further out.
//
// The call's inbound facts are read first, as UnaryServerInterceptor
// reads them, so a call whose caller has gone — its context ended (the
// caller cancelled, or its grpc-timeout, or the WithMaxInboundDeadline
// bound, passed) when it arrives or while it waits in the queue — is
// shed before any work starts (admission.ErrCallerGone), and answered
// as a shed.
//
// The call's slot is given back when the handler returns and when it
// panics, or when judging its end panics — its error's own methods, or
// the context's Err or Value, run then (the panic goes on; grpc-go does
// not recover handler panics, so a server that lives through one has a
// recovery interceptor outside this one). For l's algorithm, a handler
// error that wraps retry.ErrOverloaded or whose code is
// RESOURCE_EXHAUSTED or UNAVAILABLE, while the call's context is live, is
// a drop, and so is a call that
// reached WithMaxInboundDeadline's bound (its context's cause is
// ErrInboundDeadline: the server's own bound). A call whose grpc-timeout
// passed (any other deadline on the context is taken for the caller's,
// one an interceptor outside this one set included) is a served call,
// whose time is a sample but not a drop: a drop would let any caller
// halve an AIMD limit for everyone with a short grpc-timeout, while its
// time (at least the caller's timeout) still tells a latency-based
// algorithm, and AIMD's Timeout, that the server is slow when overload
// pushes its latency past its callers' timeouts. A call whose caller
// cancelled, and one that panics, gives no sample; any other is a served
// call.
// Handler errors are answered as UnaryServerInterceptor answers them.
// WithMaxInFlight, if given, applies before l. src must not be nil nor
// give a nil Limiter when the interceptor is built (it panics
// otherwise); a call for which src gives nil later is admitted by the
// last Limiter src gave, never by none.
func AdaptiveUnaryServerInterceptor(src admission.Source, opts ...ServerOption) grpc.UnaryServerInterceptor {
	a := newAdmitter(src, "AdaptiveUnaryServerInterceptor")
	o := resolveServer(opts)
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if o.limit != nil {
			if !o.limit.acquire() {
				_ = grpc.SetTrailer(ctx, overloadTrailer)
				return nil, Overloaded(errInFlight)
			}
			defer o.limit.release()
		}
		ctx, cancel := o.inbound(ctx)
		if cancel != nil {
			defer cancel()
		}
		p, err := a.limiter().Acquire(ctx)
		if err != nil {
			_ = grpc.SetTrailer(ctx, overloadTrailer)
			return nil, shedStatus(err)
		}
		served := false
		defer func() {
			if !served { // the handler panicked: give the slot back, let the panic go on
				p.Ignore()
			}
		}()
		resp, err := handler(ctx, req)
		kind := unaryEnd(ctx, err) // runs err's methods: if they panic, the slot is ignored above
		served = true
		endPermit(p, kind)
		return resp, answer(err, func(md metadata.MD) { _ = grpc.SetTrailer(ctx, md) })
	}
}

// AdaptiveStreamServerInterceptor is AdaptiveUnaryServerInterceptor for
// streams, over StreamServerInterceptor(opts...): a stream is admitted by
// the Limiter src has in force before its handler runs, holds its slot
// there until the handler returns (or panics), also across a swap, and a
// stream the Limiter sheds is answered RESOURCE_EXHAUSTED with the
// overload marker. A stream gives the Limiter's algorithm no sample: how
// long a stream lasts is up to its caller, and says nothing of the
// server's latency. Give both interceptors the same source for one limit
// over unary calls and streams together.
func AdaptiveStreamServerInterceptor(src admission.Source, opts ...ServerOption) grpc.StreamServerInterceptor {
	a := newAdmitter(src, "AdaptiveStreamServerInterceptor")
	o := resolveServer(opts)
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if o.limit != nil {
			if !o.limit.acquire() {
				ss.SetTrailer(overloadTrailer)
				return Overloaded(errInFlight)
			}
			defer o.limit.release()
		}
		ctx, cancel := o.inbound(ss.Context())
		if cancel != nil {
			defer cancel()
		}
		if ctx != ss.Context() {
			ss = &inboundStream{ServerStream: ss, ctx: ctx}
		}
		p, err := a.limiter().Acquire(ctx)
		if err != nil {
			ss.SetTrailer(overloadTrailer)
			return shedStatus(err)
		}
		defer p.Ignore() // also when the handler panics
		return answer(handler(srv, ss), ss.SetTrailer)
	}
}

// admitter gives an adaptive interceptor the Limiter in force.
type admitter struct {
	src  admission.Source
	last atomic.Pointer[admission.Limiter] // the last non-nil Limiter src gave
}

// newAdmitter checks src for the interceptor name.
func newAdmitter(src admission.Source, name string) *admitter {
	var l *admission.Limiter
	if src != nil {
		l = src.Limiter()
	}
	if l == nil {
		panic("grpcretry: " + name + " needs an admission.Source giving a non-nil *admission.Limiter")
	}
	a := &admitter{src: src}
	a.last.Store(l)
	return a
}

// limiter returns the Limiter in force: src's, or the last it gave when
// it gives nil.
func (a *admitter) limiter() *admission.Limiter {
	l := a.src.Limiter()
	if l == nil {
		return a.last.Load()
	}
	if a.last.Load() != l {
		a.last.Store(l)
	}
	return l
}

// How a permit ends.
const (
	endRelease = iota
	endDrop
	endIgnore
)

// unaryEnd says how a unary call's permit ends, from its result (see
// AdaptiveUnaryServerInterceptor).
func unaryEnd(ctx context.Context, err error) int {
	// The context first: a call whose caller's grpc-timeout ended it is
	// no drop whatever its error says (a downstream cut short by the same
	// context may have answered UNAVAILABLE).
	cerr := ctx.Err()
	switch {
	case cerr == nil:
		if err != nil && capacityError(err) {
			return endDrop
		}
		return endRelease
	case errors.Is(cerr, context.DeadlineExceeded):
		if errors.Is(context.Cause(ctx), ErrInboundDeadline) {
			return endDrop // the server's bound on the caller's deadline
		}
		return endRelease // the caller's grpc-timeout: a served call, its time a sample
	}
	return endIgnore // the caller cancelled
}

// endPermit ends p as kind says.
func endPermit(p admission.Permit, kind int) {
	switch kind {
	case endDrop:
		p.Drop()
	case endIgnore:
		p.Ignore()
	default:
		p.Release()
	}
}

// capacityError reports whether a handler's error says it failed for
// lack of capacity.
func capacityError(err error) bool {
	if retry.IsOverloaded(err) {
		return true
	}
	switch status.Code(err) {
	case codes.ResourceExhausted, codes.Unavailable:
		return true
	}
	return false
}

// answer is the server interceptors' answer to a handler error, as
// UnaryServerInterceptor gives it; setTrailer sets the overload marker.
func answer(err error, setTrailer func(metadata.MD)) error {
	if err == nil {
		return nil
	}
	if retry.IsOverloaded(err) {
		setTrailer(overloadTrailer)
		return overloadedStatus(err)
	}
	return nestedStatus(err)
}

// shedStatus is the answer to a call the Limiter shed: RESOURCE_EXHAUSTED
// naming the reason, wrapping the shed error and retry.ErrOverloaded.
func shedStatus(err error) error {
	return &shedError{st: status.New(codes.ResourceExhausted, "grpcretry: overloaded, not retried: "+err.Error()), err: err}
}

// shedError is the status error of a shed call.
type shedError struct {
	st  *status.Status
	err error
}

func (e *shedError) Error() string              { return e.st.Err().Error() }
func (e *shedError) GRPCStatus() *status.Status { return e.st }
func (e *shedError) Unwrap() []error            { return []error{retry.ErrOverloaded, e.err} }
