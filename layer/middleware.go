package layer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/retry"
)

// Bounds on what a caller's headers may claim, used unless an Option sets
// others: an attempt number above DefaultMaxAttempt reads as
// DefaultMaxAttempt, and a deadline further than DefaultMaxDeadline away
// reads as DefaultMaxDeadline from now.
const (
	DefaultMaxAttempt  = 10
	DefaultMaxDeadline = 5 * time.Minute
	// DefaultRetryAfter is the Retry-After of the overload answers that
	// Middleware and Limit write.
	DefaultRetryAfter = time.Second
)

// ErrInboundDeadline is the cause of a request context that Middleware
// ended because the caller's deadline passed: context.Cause reports it,
// Err reports context.DeadlineExceeded.
var ErrInboundDeadline = errors.New("layer: the caller's deadline passed")

// ErrMaxDeadline is the cause of a request context that Middleware ended
// at the server's own bound on a caller's deadline (WithMaxDeadline),
// which the caller's header asked to exceed: it wraps ErrInboundDeadline,
// so errors.Is(cause, ErrInboundDeadline) holds for it too, but the time
// was the server's choice, not the caller's.
var ErrMaxDeadline = fmt.Errorf("%w (the server's bound, WithMaxDeadline)", ErrInboundDeadline)

// Option configures Middleware and Limit.
type Option func(*options)

type options struct {
	maxAttempt  int
	maxDeadline time.Duration
	retryAfter  time.Duration
	afterSet    bool // retryAfter was given by WithRetryAfter (d > 0)
	clock       clock.Clock
	mesh        bool       // WithMeshRetries
	meshSrc     MeshSource // WithMeshRetriesFrom; when set, it decides
}

func resolve(opts []Option) options {
	o := options{maxAttempt: DefaultMaxAttempt, maxDeadline: DefaultMaxDeadline, retryAfter: DefaultRetryAfter, clock: clock.Real}
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// WithMaxAttempt caps the attempt number a caller may claim (default
// DefaultMaxAttempt); n <= 0 restores the default.
func WithMaxAttempt(n int) Option {
	return func(o *options) {
		if n <= 0 {
			n = DefaultMaxAttempt
		}
		o.maxAttempt = n
	}
}

// WithMaxDeadline caps how far away a caller's deadline may be (default
// DefaultMaxDeadline): the request's context never gets more time than d
// from a header. d <= 0 restores the default.
func WithMaxDeadline(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			d = DefaultMaxDeadline
		}
		o.maxDeadline = d
	}
}

// WithRetryAfter sets the Retry-After of the overload answers written by
// Middleware (for errors that wrap retry.ErrOverloaded) and Limit (default
// DefaultRetryAfter); d <= 0 restores the default.
//
// Given to Middleware, it also holds for a Limit that Middleware wraps
// directly (Middleware(Limit(n, h), WithRetryAfter(d)), the nesting the
// README shows) — for Limit's sheds and for the errors of a HandlerFunc
// inside it — unless that Limit was given a WithRetryAfter of its own:
// the setting nearest the handler wins.
func WithRetryAfter(d time.Duration) Option {
	return func(o *options) {
		if d <= 0 {
			o.retryAfter, o.afterSet = DefaultRetryAfter, false
			return
		}
		o.retryAfter, o.afterSet = d, true
	}
}

// WithClock sets the clock the caller's deadline is measured on (default
// clock.Real), for tests and simulations.
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = clock.Or(c) }
}

// Middleware returns a handler that reads what the caller said about the
// request, and serves it with h:
//
//   - the caller's attempt number: Stormguard-Attempt, else Envoy's
//     x-envoy-attempt-count; at most WithMaxAttempt's bound;
//   - whether the caller retries the request itself (retry.Inbound.Retries):
//     Stormguard-Will-Retry "1", or an attempt number above 1 — a caller
//     that has already retried the call is the layer that retries it, so
//     on its last attempt ("0") the calls made here still make one attempt
//     each and the chain retries at one layer only — or, when the mesh is
//     declared to retry (WithMeshRetries, WithMeshRetriesFrom), any
//     request that carries x-envoy-attempt-count; an Envoy count of 1
//     alone says nothing about retries (meshes send the header whether or
//     not they retry);
//   - the caller's remaining time: Stormguard-Deadline-Ms, else Envoy's
//     x-envoy-expected-rq-timeout-ms; at most WithMaxDeadline's bound.
//
// When any is present, the request's context carries them as a
// retry.Inbound (retry.InboundOf), so that every retry.Do and httpretry
// call made while serving it obeys the policy's layer rule
// (retry.Policy.Nested), and the context ends at the caller's deadline
// (cause ErrInboundDeadline; ErrMaxDeadline when WithMaxDeadline's bound
// cut it short), so work for a caller who gave up stops and
// the deadline-aware stop of inner retries applies across the hop.
// Malformed values are ignored. A request without any of the headers is
// served as it came, at no allocation.
//
// When h is a HandlerFunc (or a Limit around one), an error it returns
// that wraps retry.ErrOverloaded — a downstream's "overloaded; don't
// retry", as httpretry.Result reports it — is answered with Overload (503,
// Retry-After, Stormguard-Overloaded: 1), so the marker travels up the
// chain and no caller retries; an error that a call made here did not
// retry because the caller retries (NotRetriedHere) is answered with
// NotRetried (503 without the marker), which the caller retries; see
// HandlerFunc for other errors.
func Middleware(h http.Handler, opts ...Option) http.Handler {
	return &middleware{next: h, o: resolve(opts)}
}

type middleware struct {
	next http.Handler
	o    options
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if in, d, capped, ok := m.o.read(r.Header); ok {
		ctx := r.Context()
		if d >= 0 {
			cause := ErrInboundDeadline
			if capped {
				cause = ErrMaxDeadline // the bound, not the caller's time
			}
			var cancel context.CancelFunc
			ctx, cancel = clock.WithTimeout(ctx, m.o.clock, d, cause)
			defer cancel()
			in.Deadline = m.o.clock.Now().Add(d)
		}
		r = r.WithContext(retry.WithInbound(ctx, in))
	}
	switch next := m.next.(type) {
	case HandlerFunc:
		next.serve(w, r, m.o.retryAfter)
	case *limiter:
		next.serve(w, r, &m.o)
	case *adaptive:
		next.serve(w, r, &m.o)
	default:
		next.ServeHTTP(w, r)
	}
}

// read returns the inbound facts in h, capped, and the caller's remaining
// time (-1: none), at most the WithMaxDeadline bound (capped reports that
// the header asked for more); ok is false when h carries none of them.
func (o *options) read(h http.Header) (in retry.Inbound, d time.Duration, capped, ok bool) {
	d = -1
	envoy := h[EnvoyAttemptCount]
	attempt := h[HeaderAttempt]
	if len(attempt) == 0 {
		attempt = envoy
	}
	if len(attempt) > 0 {
		if n, valid := ParseAttempt(attempt[0]); valid {
			in.Attempt, ok = min(n, o.maxAttempt), true
		}
	}
	if v := h[HeaderWillRetry]; len(v) > 0 {
		switch v[0] {
		case "1":
			in.Retries, ok = true, true
		case "0":
			ok = true
		}
	}
	if len(envoy) > 0 && !in.Retries && o.meshRetries() {
		// The request came through a mesh declared to retry: it retries
		// this request, whatever the caller behind it does.
		in.Retries, ok = true, true
	}
	if in.Attempt > 1 {
		// A caller that has retried this call is the layer that retries
		// it, on its last attempt too: retrying here as well would
		// multiply that attempt.
		in.Retries = true
	}
	ms := h[HeaderDeadline]
	if len(ms) == 0 {
		ms = h[EnvoyExpectedTimeout]
	}
	if len(ms) > 0 {
		if t, valid := ParseMillis(ms[0]); valid {
			d, capped, ok = min(t, o.maxDeadline), t > o.maxDeadline, true
		}
	}
	return in, d, capped, ok
}

// ParseAttempt reads an attempt number as Stormguard-Attempt and
// x-envoy-attempt-count carry it: decimal digits, at least 1, surrounding
// blanks allowed. A number too large for an int reads as the largest int
// (Middleware caps it further). It does not allocate.
func ParseAttempt(s string) (n int, ok bool) {
	v, ok := parseUint(s)
	if !ok || v == 0 {
		return 0, false
	}
	return int(min(v, uint64(maxInt))), true
}

// ParseMillis reads a duration in whole milliseconds as
// Stormguard-Deadline-Ms and x-envoy-expected-rq-timeout-ms carry it:
// decimal digits, surrounding blanks allowed. A value too large for a
// time.Duration reads as the largest one. It does not allocate.
func ParseMillis(s string) (time.Duration, bool) {
	v, ok := parseUint(s)
	if !ok {
		return 0, false
	}
	const maxMs = uint64(1<<63-1) / uint64(time.Millisecond)
	if v > maxMs {
		return time.Duration(1<<63 - 1), true
	}
	return time.Duration(v) * time.Millisecond, true
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
