package grpcretry

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/layer"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Bounds on what a caller may claim, used by the server interceptors unless
// a ServerOption sets others: an attempt number above
// DefaultMaxInboundAttempt (10) reads as DefaultMaxInboundAttempt, and a
// deadline further than DefaultMaxInboundDeadline (5 minutes) away reads as
// DefaultMaxInboundDeadline from now (and bounds the handler's context
// there). They are the bounds of the HTTP middleware (layer.Middleware).
const (
	DefaultMaxInboundAttempt  = layer.DefaultMaxAttempt
	DefaultMaxInboundDeadline = layer.DefaultMaxDeadline
)

// ErrInboundDeadline is the cause (context.Cause) of a handler's context
// that a server interceptor ended at WithMaxInboundDeadline's bound, the
// caller having claimed a later deadline; Err reports
// context.DeadlineExceeded.
var ErrInboundDeadline = errors.New("grpcretry: the bound on the caller's deadline passed")

// A ServerOption configures UnaryServerInterceptor and
// StreamServerInterceptor.
type ServerOption func(*serverOptions)

type serverOptions struct {
	maxAttempt  int
	maxDeadline time.Duration
	clock       clock.Clock
	limit       *inFlight // nil: no limit
}

func resolveServer(opts []ServerOption) *serverOptions {
	o := &serverOptions{maxAttempt: DefaultMaxInboundAttempt, maxDeadline: DefaultMaxInboundDeadline, clock: clock.Real}
	for _, f := range opts {
		if f != nil {
			f(o)
		}
	}
	return o
}

// WithMaxInboundAttempt caps the attempt number a caller may claim
// (default DefaultMaxInboundAttempt); n <= 0 restores the default.
func WithMaxInboundAttempt(n int) ServerOption {
	return func(o *serverOptions) {
		if n <= 0 {
			n = DefaultMaxInboundAttempt
		}
		o.maxAttempt = n
	}
}

// WithMaxInboundDeadline caps how far away a caller's deadline may be
// (default DefaultMaxInboundDeadline): a handler never gets more time than
// d from a caller's grpc-timeout. d <= 0 restores the default.
func WithMaxInboundDeadline(d time.Duration) ServerOption {
	return func(o *serverOptions) {
		if d <= 0 {
			d = DefaultMaxInboundDeadline
		}
		o.maxDeadline = d
	}
}

// WithInboundClock sets the clock that the caller's deadline is measured
// on and that ends a capped handler context (default clock.Real), for
// tests and simulations.
func WithInboundClock(c clock.Clock) ServerOption {
	return func(o *serverOptions) { o.clock = clock.Or(c) }
}

// WithMaxInFlight sheds calls beyond n served at once: such a call is
// answered at once, without running its handler, with Overloaded's marker
// (UNAVAILABLE, grpc-retry-pushback-ms: -1), which no caller retries — load
// shedding with the signal in one line. The count is kept by the option
// value, so give the same value to both interceptors for one limit over
// unary calls and streams together:
//
//	limit := grpcretry.WithMaxInFlight(100)
//	grpc.ChainUnaryInterceptor(grpcretry.UnaryServerInterceptor(limit)),
//	grpc.ChainStreamInterceptor(grpcretry.StreamServerInterceptor(limit)),
//
// A stream holds its slot until its handler returns. n <= 0: no limit
// (the default).
func WithMaxInFlight(n int) ServerOption {
	var l *inFlight
	if n > 0 {
		l = &inFlight{max: int64(n)}
	}
	return func(o *serverOptions) { o.limit = l }
}

// errInFlight is the message of the answer WithMaxInFlight sheds a call with.
const errInFlight = "grpcretry: too many calls in flight"

// inFlight counts the calls being served under one WithMaxInFlight.
type inFlight struct {
	n   atomic.Int64
	max int64
}

// acquire takes a slot, or reports false when all are taken.
func (l *inFlight) acquire() bool {
	if l.n.Add(1) > l.max {
		l.n.Add(-1)
		return false
	}
	return true
}

func (l *inFlight) release() { l.n.Add(-1) }

// UnaryServerInterceptor returns an interceptor that reads what the caller
// said about the call and serves it:
//
//   - its attempt number: AttemptKey (stormguard-attempt), else
//     grpc-previous-rpc-attempts plus one (as grpc-go's own retries send
//     it); at most WithMaxInboundAttempt's bound;
//   - whether the caller retries the call itself: WillRetryKey "1" (and "0"
//     that it does not); without it, a call that carries
//     grpc-previous-rpc-attempts comes from a retrying client and is taken
//     to retry;
//   - its deadline, native to gRPC; at most WithMaxInboundDeadline's bound
//     from now, which then also ends the handler's context (cause
//     ErrInboundDeadline).
//
// When any is present, the handler's context carries them as a
// retry.Inbound (retry.InboundOf), so that every retry.Do, httpretry and
// grpcretry call made while serving obeys its policy's layer rule
// (retry.Policy.Nested). Malformed values are ignored (the last value of
// a repeated key counts: the client interceptor appends its own after any
// the caller forwarded). A call with none of them is served as it came,
// at no allocation.
//
// When the handler's error wraps retry.ErrOverloaded — a downstream's
// "overloaded; don't retry", as the client interceptors report it, or
// Overloaded's answer — the call is answered UNAVAILABLE with the trailer
// grpc-retry-pushback-ms: -1, so the marker travels up the chain and no
// caller retries. When it wraps retry.ErrNestedRetry — a call made while
// serving that the layer rule did not retry because this call's caller
// retries — it is answered UNAVAILABLE (keeping its status's message)
// without the marker, unless its code is already one callers retry
// (UNAVAILABLE, ABORTED): the error was worth retrying, and the caller is
// the layer that retries, so exactly one layer of the chain makes the
// attempts. The answer still wraps the handler's error for interceptors
// further out. Other errors go out unchanged. WithMaxInFlight sheds calls
// beyond a limit with the overload answer.
func UnaryServerInterceptor(opts ...ServerOption) grpc.UnaryServerInterceptor {
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
		resp, err := handler(ctx, req)
		if err != nil {
			if retry.IsOverloaded(err) {
				_ = grpc.SetTrailer(ctx, overloadTrailer)
				return resp, overloadedStatus(err)
			}
			err = nestedStatus(err)
		}
		return resp, err
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streams: the
// stream's Context carries the inbound facts, and a handler error that
// wraps retry.ErrOverloaded is answered UNAVAILABLE with the trailer
// grpc-retry-pushback-ms: -1, one that wraps retry.ErrNestedRetry
// UNAVAILABLE without it; WithMaxInFlight counts a stream until its
// handler returns.
func StreamServerInterceptor(opts ...ServerOption) grpc.StreamServerInterceptor {
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
		err := handler(srv, ss)
		if err != nil {
			if retry.IsOverloaded(err) {
				ss.SetTrailer(overloadTrailer)
				return overloadedStatus(err)
			}
			err = nestedStatus(err)
		}
		return err
	}
}

// nestedStatus returns the answer to a handler error: err itself, unless
// it wraps retry.ErrNestedRetry with a code callers do not retry, which
// is then answered UNAVAILABLE with its status's message (the handler's
// own error still wrapped).
func nestedStatus(err error) error {
	if !errors.Is(err, retry.ErrNestedRetry) {
		return err
	}
	st := status.Convert(err)
	switch st.Code() {
	case codes.Unavailable, codes.Aborted:
		return err
	}
	return &nestedError{st: status.New(codes.Unavailable, st.Message()), err: err}
}

// nestedError is the UNAVAILABLE answer to a handler error that the layer
// rule left to this call's caller to retry.
type nestedError struct {
	st  *status.Status
	err error
}

func (e *nestedError) Error() string              { return e.st.Err().Error() }
func (e *nestedError) GRPCStatus() *status.Status { return e.st }
func (e *nestedError) Unwrap() error              { return e.err }

// inboundStream is a server stream whose Context carries the inbound facts.
type inboundStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *inboundStream) Context() context.Context { return s.ctx }

// inbound returns ctx with the caller's facts, capped, when it has any,
// and the cancel function of a context bounded by the deadline cap (nil:
// none made). It does not allocate for a call without facts.
func (o *serverOptions) inbound(ctx context.Context) (context.Context, context.CancelFunc) {
	in, ok := o.read(ctx)
	dl, hasDeadline := ctx.Deadline()
	if !ok && !hasDeadline {
		return ctx, nil
	}
	var cancel context.CancelFunc
	if hasDeadline {
		now := o.clock.Now()
		if dl.Sub(now) > o.maxDeadline {
			dl = now.Add(o.maxDeadline)
			ctx, cancel = clock.WithTimeout(ctx, o.clock, o.maxDeadline, ErrInboundDeadline)
		}
		in.Deadline = dl
	}
	return retry.WithInbound(ctx, in), cancel
}

// read returns the attempt and will-retry facts of ctx's request metadata,
// capped; ok is false when it carries neither.
func (o *serverOptions) read(ctx context.Context) (in retry.Inbound, ok bool) {
	attempt, previous := false, false
	if n, valid := parseAttempt(last(metadata.ValueFromIncomingContext(ctx, AttemptKey))); valid {
		in.Attempt, attempt = n, true
	}
	if v := metadata.ValueFromIncomingContext(ctx, PreviousAttemptsKey); len(v) > 0 {
		if n, valid := parsePreviousAttempts(last(v)); valid {
			previous = true
			if !attempt {
				in.Attempt, attempt = n+1, true
			}
		}
	}
	if in.Attempt > o.maxAttempt || in.Attempt < 0 { // < 0: n+1 overflowed
		in.Attempt = o.maxAttempt
	}
	retries, known := parseWillRetry(last(metadata.ValueFromIncomingContext(ctx, WillRetryKey)))
	switch {
	case known:
		in.Retries = retries
	case previous:
		in.Retries = true // a retrying client that did not say: assume it retries
	}
	return in, attempt || known || previous
}

// last returns the last of values, or "".
func last(values []string) string {
	if len(values) == 0 {
		return ""
	}
	return values[len(values)-1]
}

// parseAttempt reads an attempt number as AttemptKey carries it: decimal
// digits, at least 1, surrounding blanks allowed. A number too large for
// an int reads as the largest int (read caps it further). It does not
// allocate.
func parseAttempt(s string) (n int, ok bool) {
	v, ok := parseUint(s)
	if !ok || v == 0 {
		return 0, false
	}
	return int(min(v, uint64(maxInt))), true
}

// parsePreviousAttempts reads grpc-previous-rpc-attempts: decimal digits,
// 0 or more, surrounding blanks allowed; a number too large for an int
// reads as the largest int. It does not allocate.
func parsePreviousAttempts(s string) (n int, ok bool) {
	v, ok := parseUint(s)
	if !ok {
		return 0, false
	}
	return int(min(v, uint64(maxInt))), true
}

// parseWillRetry reads WillRetryKey: "1" (retries), "0" (does not),
// surrounding blanks allowed; known is false for anything else.
func parseWillRetry(s string) (retries, known bool) {
	s = strings.Trim(s, " \t")
	switch s {
	case "1":
		return true, true
	case "0":
		return false, true
	}
	return false, false
}

const maxInt = int(^uint(0) >> 1)

// parseUint reads decimal digits between optional blanks, saturating at
// the largest uint64.
func parseUint(s string) (uint64, bool) {
	i, j := 0, len(s)
	for i < j && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	for j > i && (s[j-1] == ' ' || s[j-1] == '\t') {
		j--
	}
	if i == j {
		return 0, false
	}
	var v uint64
	for ; i < j; i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (1<<64-1-d)/10 {
			v = 1<<64 - 1 // saturate, keep validating
			continue
		}
		v = v*10 + d
	}
	return v, true
}

// overloadTrailer is the marker a server sends: pushback -1.
var overloadTrailer = PushbackTrailer(-1)

// overloadedStatus is the status error a server interceptor answers an
// overloaded handler error with: UNAVAILABLE, with the message of the
// first gRPC status in the error's chain (a downstream's, say), else the
// error's text.
func overloadedStatus(err error) error {
	var oe *overloadedError
	if errors.As(err, &oe) {
		return oe
	}
	msg := err.Error()
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) {
		if st := gs.GRPCStatus(); st != nil {
			msg = st.Message()
		}
	}
	return &overloadedError{st: status.New(codes.Unavailable, msg)}
}

// Overloaded returns the error a handler returns to shed a call with the
// "overloaded, don't retry" marker: the server interceptors answer it
// UNAVAILABLE with msg and the trailer grpc-retry-pushback-ms: -1 (gRFC
// A6's "do not retry"), which the client interceptors read as
// retry.ErrOverloaded, so no layer of the caller's chain retries it.
//
//	if inFlight.Load() > limit {
//		return nil, grpcretry.Overloaded("inventory: too many requests in flight")
//	}
//
// Without a server interceptor the answer is a plain UNAVAILABLE, which
// clients retry. errors.Is(err, retry.ErrOverloaded) is true, and
// status.Code(err) is codes.Unavailable.
func Overloaded(msg string) error {
	return &overloadedError{st: status.New(codes.Unavailable, msg)}
}

// overloadedError is a status error that carries the overload marker.
type overloadedError struct{ st *status.Status }

func (e *overloadedError) Error() string              { return e.st.Err().Error() }
func (e *overloadedError) GRPCStatus() *status.Status { return e.st }
func (e *overloadedError) Unwrap() error              { return retry.ErrOverloaded }
