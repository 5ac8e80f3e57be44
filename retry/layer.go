package retry

import (
	"context"
	"errors"
	"time"
)

// Inbound is what the caller of an inbound call (the request a server is
// handling) said about it: server middleware (layer.Middleware,
// grpcretry's server interceptors) reads it from the request and puts it in
// the request's context with WithInbound, and a retry.Do deep in the
// handler obeys Policy.Nested with no plumbing of its own.
type Inbound struct {
	// Attempt is the caller's attempt number for this request: 1 for its
	// first attempt, 0 when unknown.
	Attempt int
	// Retries reports that the caller will retry this call itself if it
	// fails, so a retry here would multiply with the caller's.
	Retries bool
	// Deadline is the caller's deadline; zero when it sent none. The
	// middleware also bounds the request's context by it.
	Deadline time.Time
}

type inboundKey struct{}

// WithInbound returns a context carrying in for the calls made while
// serving the inbound request.
func WithInbound(ctx context.Context, in Inbound) context.Context {
	return context.WithValue(ctx, inboundKey{}, in)
}

// InboundOf returns the Inbound facts ctx carries, if any. It costs one
// context lookup and no allocation.
func InboundOf(ctx context.Context) (Inbound, bool) {
	in, ok := ctx.Value(inboundKey{}).(Inbound)
	return in, ok
}

// NestedRule decides what a call does when the inbound request that caused
// it comes from a caller that retries (InboundOf(ctx).Retries): retrying at
// both layers multiplies the load on the bottom tier by the product of the
// attempts, so by default only the outermost layer retries.
type NestedRule uint8

// The layer rules for Policy.Nested.
const (
	// NestedOneLayer (the zero value): the call makes one attempt and
	// leaves retrying to the caller, as the SRE book recommends. A call
	// with no inbound facts, or whose caller does not retry, retries as
	// usual.
	NestedOneLayer NestedRule = iota
	// NestedBudget: the call retries only while Policy.NestedBudget
	// grants it (in addition to Policy.Budget); a nil NestedBudget grants
	// nothing.
	NestedBudget
	// NestedIgnore: the rule is off; the call retries whatever its
	// caller does.
	NestedIgnore
)

var nestedNames = [...]string{"one_layer", "budget", "ignore"}

// String returns the rule's name as config files spell it.
func (r NestedRule) String() string {
	if int(r) < len(nestedNames) {
		return nestedNames[r]
	}
	return "unknown"
}

var (
	// ErrNestedRetry: the layer rule (Policy.Nested) refused a retry
	// because the inbound caller retries this call itself.
	ErrNestedRetry = errors.New("retry: not retried here: the inbound caller retries (Policy.Nested)")
	// ErrOverloaded marks an answer that says "overloaded; don't retry":
	// no layer retries it, and a server that meets it passes it up on its
	// own response (see Overloaded).
	ErrOverloaded = errors.New("retry: downstream overloaded; do not retry")
)

// Overloaded marks err as a downstream's "overloaded; don't retry" answer:
// errors.Is(err, ErrOverloaded) is true, Do gives up at once with
// ReasonOverloaded, IsPermanent is true (budgets do not charge it) and
// IsDownstreamFault is true (breakers count it). Adapters mark the answers
// that carry the marker on the wire; server middleware turns an error that
// wraps it back into the marker, so it travels up a call chain. It returns
// nil when err is nil.
func Overloaded(err error) error {
	if err == nil {
		return nil
	}
	return &overloadedError{&permanentError{err}}
}

type overloadedError struct{ err error }

func (o *overloadedError) Error() string         { return o.err.Error() }
func (o *overloadedError) Unwrap() error         { return o.err }
func (o *overloadedError) Is(target error) bool  { return target == ErrOverloaded }
func (o *overloadedError) DownstreamFault() bool { return true }

// IsOverloaded reports whether err carries the overload marker: it wraps
// ErrOverloaded or an error made by Overloaded.
func IsOverloaded(err error) bool {
	return walk(err, func(e error) bool {
		if e == ErrOverloaded {
			return true
		}
		_, ok := e.(*overloadedError)
		return ok
	})
}

// CallerRetries reports whether the inbound caller of ctx retries the call
// it made, or has already retried it (Attempt > 1) — a caller that retried
// is the layer that retries, on its last attempt too, so that a chain
// retries at its outermost layer only. It is when Policy.Nested applies.
func CallerRetries(ctx context.Context) bool {
	in, ok := InboundOf(ctx)
	return ok && (in.Retries || in.Attempt > 1)
}

// NestedForbids reports whether p's layer rule lets a call made with ctx
// no attempt after its first: the caller retries (CallerRetries) and the
// rule is NestedOneLayer, or NestedBudget without a NestedBudget. Adapters
// that start attempts of their own (hedges) ask it as Do does. A nil p is
// the zero Policy.
func (p *Policy) NestedForbids(ctx context.Context) bool {
	if p == nil {
		p = &zeroPolicy
	}
	if p.Nested == NestedIgnore || !CallerRetries(ctx) {
		return false
	}
	return p.Nested != NestedBudget || p.NestedBudget == nil
}

// nestedApplies reports whether the layer rule governs this call.
func (c *Call) nestedApplies() bool { return CallerRetries(c.ctx) }

// MayRetry reports whether this call may make another attempt after the
// current one, as far as MaxAttempts and the layer rule say (a budget, a
// breaker or a deadline may still stop it). Hedging asks it before each
// hedge; WillRetry, what a client announces, also counts a caller above.
func (c *Call) MayRetry() bool {
	if limit := c.p.AttemptLimit(); limit > 0 && c.n >= limit {
		return false
	}
	return !c.p.NestedForbids(c.ctx)
}

// WillRetry reports whether a failure of the current attempt may be
// retried — what a client announces to its server (Stormguard-Will-Retry,
// stormguard-will-retry) so that the server's own calls do not retry too:
// true when another attempt may follow as far as MaxAttempts and the layer
// rule say, and also when the inbound call being served comes from a
// caller that retries, which will retry the whole chain. (Without the
// second half a tier that leaves retrying to its caller would tell the
// next tier that nobody retries, and the chain would retry at every other
// layer.) A budget, a breaker or a deadline may still stop the retry.
func (c *Call) WillRetry() bool {
	return c.nestedApplies() || c.MayRetry()
}
