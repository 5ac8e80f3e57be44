package grpcretry

import (
	"context"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
)

// keyFunc gives a call its key (keyed.WithKey) from its context, full
// method name and connection.
type keyFunc func(ctx context.Context, method string, cc *grpc.ClientConn) string

// WithKey sets the function that gives each call its key, for a Policy
// whose Breaker, Budget, NestedBudget or Limiter is a group of members per
// key (keyed.Breakers, keyed.Budgets, keyed.Limiters) and for a Hedger
// with Adaptives: the call uses the members of its key, and its attempts
// run with a context carrying it (keyed.KeyFrom), which inner
// interceptors and the Policy's Observer can read. f gets the call's
// context, whose outgoing metadata (metadata.FromOutgoingContext) it may
// read, and its full method name ("/pkg.Service/Method"). The empty key
// is the groups' default member.
//
// f is called once per call (unary or stream), when it starts, before
// anything is sent or any part of the Policy is asked; if it panics,
// nothing is sent, no breaker, budget or limiter is asked, and the panic
// goes on to the caller. It must be safe for concurrent use.
//
// Without WithKey, KeyByMethod, KeyByTarget or WithKeyPer (or with a nil
// f), a call under a Policy with groups, or hedged by a Hedger with
// Adaptives, uses the key its context already carries (keyed.WithKey),
// else its full method name (KeyByMethod); any other call gets no key.
func WithKey(f func(ctx context.Context, method string) string) Option {
	var k keyFunc
	if f != nil {
		k = func(ctx context.Context, method string, _ *grpc.ClientConn) string { return f(ctx, method) }
	}
	return optionFunc(func(o *options) { o.key = k })
}

// KeyByMethod keys each call by its full method name
// ("/pkg.Service/Method"): one failing method opens only its own breaker.
func KeyByMethod() Option {
	return optionFunc(func(o *options) { o.key = methodKey })
}

// KeyByTarget keys each call by its connection's target
// (grpc.ClientConn.CanonicalTarget, such as "dns:///api.example.com:443"):
// over several connections sharing the interceptors, one failing backend
// opens only its own breaker.
func KeyByTarget() Option {
	return optionFunc(func(o *options) { o.key = targetKey })
}

// WithKeyPer keys each call by what per returns when the call starts:
// "host" keys by target (KeyByTarget), anything else by method
// (KeyByMethod). It is for a policy file's per setting, which follows
// reloads: grpcretry.WithKeyPer(handle.KeyPer) with a *config.Handle. per
// must be safe for concurrent use; if it panics, the call fails as with a
// panicking WithKey function.
func WithKeyPer(per func() string) Option {
	if per == nil {
		return optionFunc(func(o *options) { o.key = nil })
	}
	return optionFunc(func(o *options) {
		o.key = func(ctx context.Context, method string, cc *grpc.ClientConn) string {
			if per() == "host" {
				return targetKey(ctx, method, cc)
			}
			return method
		}
	})
}

func methodKey(_ context.Context, method string, _ *grpc.ClientConn) string { return method }

func targetKey(_ context.Context, _ string, cc *grpc.ClientConn) string {
	if cc == nil {
		return ""
	}
	return cc.CanonicalTarget()
}

// keyContext returns the context a call runs with: ctx, carrying the
// call's key when a key option is set, or when p has groups or h has
// Adaptives and ctx carries no key (then the method). It resolves p's
// groups, in place (p is the call's own copy), for that key. The key
// function may panic: nothing has been asked of p then.
func (ic *interceptor) keyContext(ctx context.Context, method string, cc *grpc.ClientConn, p *retry.Policy, h *hedge.Hedger) context.Context {
	f := ic.o.key
	if f == nil {
		if !retry.HasGroups(p) && (h == nil || h.Adaptives == nil) {
			return ctx
		}
		if _, ok := keyed.Lookup(ctx); ok {
			retry.ResolveGroups(ctx, p)
			return ctx
		}
		f = methodKey
	}
	ctx = keyed.WithKey(ctx, f(ctx, method, cc))
	retry.ResolveGroups(ctx, p)
	return ctx
}
