package hedge

import (
	"context"
	"net/http"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
)

// NewAdaptives returns a group of Adaptive delays, one per key, each made
// by NewAdaptive(ac), bounded by kc (kc.Clock nil: ac.Clock), for
// Hedger.Adaptives. It refuses a kc keyed.Config.Validate refuses.
func NewAdaptives(kc keyed.Config, ac AdaptiveConfig) (*keyed.Group[*Adaptive], error) {
	if kc.Clock == nil {
		kc.Clock = ac.Clock
	}
	return keyed.New(kc, func(string) *Adaptive { return NewAdaptive(ac) }, nil)
}

// adaptive returns the Adaptive of a call made with ctx.
func (h *Hedger) adaptive(ctx context.Context) *Adaptive {
	if h.Adaptives != nil {
		return h.Adaptives.For(ctx)
	}
	return h.Adaptive
}

// resolveGroups returns p, or c's copy of p with its groups replaced by
// the members of ctx's key (retry.ResolveGroups).
func (c *call) resolveGroups(ctx context.Context, p *retry.Policy) *retry.Policy {
	if !retry.HasGroups(p) {
		return p
	}
	c.pol = *p
	retry.ResolveGroups(ctx, &c.pol)
	return &c.pol
}

// keyContext returns the context req's call runs with: req's, carrying
// the request's key when t.Key is set, or when the policy has groups or
// the Hedger has Adaptives and the context carries no key (then
// httpretry.HostKey). If t.Key panics, the panic goes on (RoundTrip
// closes req's body on the way out).
func (t *Transport) keyContext(req *http.Request, h *Hedger, p *retry.Policy) context.Context {
	ctx := req.Context()
	f := t.Key
	if f == nil {
		if !retry.HasGroups(p) && h.Adaptives == nil {
			return ctx
		}
		if _, ok := keyed.Lookup(ctx); ok {
			return ctx
		}
		f = httpretry.HostKey
	}
	return keyed.WithKey(ctx, f(req))
}
