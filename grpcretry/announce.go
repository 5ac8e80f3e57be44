package grpcretry

import (
	"context"
	"strconv"
	"sync/atomic"

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
// (willRetry, the retry.Call's word) unless turned off, and
// PreviousAttemptsKey on a retry, as grpc-go sends it. When actx carries
// no outgoing metadata of its own (the common case) and n is at most
// announcedAttempts, the metadata is a prebuilt one shared by every call
// (mdCtx): one allocation. Otherwise it costs one
// metadata.AppendToOutgoingContext (four). A first attempt with
// announcing off costs nothing.
func (ic *interceptor) announce(actx context.Context, n int, willRetry bool) context.Context {
	if ic.o.noAnnounce && n <= 1 {
		return actx
	}
	if n <= announcedAttempts && outgoingKey != nil && actx.Value(outgoingKey) == nil {
		return &mdCtx{Context: actx, md: prebuilt(n, willRetry, ic.o.noAnnounce)}
	}
	switch {
	case ic.o.noAnnounce:
		return metadata.AppendToOutgoingContext(actx, PreviousAttemptsKey, strconv.Itoa(n-1))
	case n <= 1:
		return metadata.AppendToOutgoingContext(actx, AttemptKey, "1", WillRetryKey, flag(willRetry))
	}
	return metadata.AppendToOutgoingContext(actx, AttemptKey, strconv.Itoa(n), WillRetryKey, flag(willRetry),
		PreviousAttemptsKey, strconv.Itoa(n-1))
}

// outgoingKey is the context key under which package metadata keeps
// outgoing metadata, learnt once by asking metadata.ValueFromOutgoingContext
// to look it up in a context that records the key (nil if it asked for
// none, when announce always appends): it tells whether an attempt
// context has outgoing metadata of its own without the copy
// metadata.FromOutgoingContext makes.
var outgoingKey = func() any {
	var r keyRecorder
	metadata.ValueFromOutgoingContext(&r, AttemptKey)
	return r.key
}()

// keyRecorder is a context that remembers the key of the first Value call.
type keyRecorder struct {
	context.Context
	key any
}

func (r *keyRecorder) Value(key any) any {
	if r.key == nil {
		r.key = key
	}
	return nil
}

// announcedAttempts is how many attempts have prebuilt metadata.
const announcedAttempts = 16

// mdCtx is an attempt's context whose outgoing metadata is a prebuilt
// one: md is metadata.NewOutgoingContext(context.Background(), ...) and
// answers Value first, so grpc-go finds the metadata there; every other
// key falls through to the attempt's context, as do Deadline, Done and
// Err. It is used only for an attempt context that has no outgoing
// metadata of its own, so it hides nothing. (grpc-go reads outgoing
// metadata and never modifies it; metadata.FromOutgoingContext hands out
// copies.)
type mdCtx struct {
	context.Context
	md context.Context
}

func (c *mdCtx) Value(key any) any {
	if v := c.md.Value(key); v != nil {
		return v
	}
	return c.Context.Value(key)
}

func (c *mdCtx) String() string { return "grpcretry.attempt" }

// prebuiltMD holds, per attempt number, will-retry and whether only the
// standard key is sent, a context with that attempt's metadata, made on
// first use.
var prebuiltMD [announcedAttempts + 1][2][2]atomic.Pointer[context.Context]

func prebuilt(n int, willRetry, quiet bool) context.Context {
	w, q := 0, 0
	if willRetry {
		w = 1
	}
	if quiet {
		q = 1
	}
	slot := &prebuiltMD[n][w][q]
	if p := slot.Load(); p != nil {
		return *p
	}
	var kv []string
	if !quiet {
		kv = append(kv, AttemptKey, strconv.Itoa(n), WillRetryKey, flag(willRetry))
	}
	if n > 1 {
		kv = append(kv, PreviousAttemptsKey, strconv.Itoa(n-1))
	}
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(kv...))
	slot.CompareAndSwap(nil, &ctx)
	return *slot.Load()
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
