package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"go.yaml.in/yaml/v3"
)

// HedgeSpec is a policy's hedging (hedge.Hedger): after Delay with no
// answer, another attempt, up to MaxHedges, under the policy's attempt
// limit, budget and breaker. Handle.Hedger builds the Hedger.
type HedgeSpec struct {
	// Delay is the fixed hedge delay, and with Adaptive the delay until
	// the window holds MinSamples latencies. Always positive when the file
	// gives it; 0 only with Adaptive and delay left out, meaning
	// hedge.DefaultDelay. A zero delay (gRFC A6's hedgingDelay 0: every
	// copy at once) doubles the load and is refused.
	Delay time.Duration
	// MaxHedges bounds the hedges of one call: at least 1 (the default
	// when the file leaves it out), at most the attempt limit − 1.
	MaxHedges int
	// Adaptive, when set, makes the delay a percentile of recent
	// latencies (hedge.NewAdaptive). Fields the file leaves out are zero:
	// the hedge package's defaults. Clock is the Registry's.
	Adaptive *hedge.AdaptiveConfig
	// NonFatalCodes are gRFC A6's nonFatalStatusCodes for gRPC
	// (grpcretry.WithNonFatalCodes): canonical names of the status codes
	// with which a hedged copy may fail while the other copies go on (and
	// the call is retried when none answers); any other code ends the
	// call. nil when the file leaves non_fatal_codes out: the policy's
	// retry_on.grpc_codes then apply (see PolicySpec.GRPCNonFatalCodes).
	// Empty (non_fatal_codes: []): every code is fatal, as in A6.
	NonFatalCodes []string
	// Keys, when set (per: host or method, with Adaptive), gives each key
	// its own Adaptive delay (Hedger.Adaptives); nil: one for every call.
	// See KeySpec.
	Keys *KeySpec
}

var hedgeFields = []string{"delay", "max_hedges", "adaptive", "non_fatal_codes", "per", "max_keys", "idle"}

var adaptiveFields = []string{"percentile", "window", "floor", "max", "min_samples"}

// maxHedgesLimit bounds max_hedges whatever the attempt limit.
const maxHedgesLimit = 100

// hedge reads a policy's hedge mapping. The attempt limit is checked by
// checkHedge once the whole policy is read.
func (d *decoder) hedge(n *yaml.Node, path string) *HedgeSpec {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping (delay, max_hedges, adaptive, non_fatal_codes), not %s", describe(n))
		return nil
	}
	h := &HedgeSpec{MaxHedges: hedge.DefaultMaxHedges}
	var delayNode *yaml.Node
	d.fields(n, path, hedgeFields, func(key string, v *yaml.Node, fp string) {
		switch key {
		case "delay":
			delayNode = v
			reported := len(d.problems)
			h.Delay = d.duration(v, fp)
			if h.Delay <= 0 && len(d.problems) == reported {
				d.fail(v, fp, "must be positive: a zero delay (gRFC A6's hedgingDelay 0) sends every copy at once and doubles the load")
			}
		case "max_hedges":
			h.MaxHedges = d.integer(v, fp, 1, maxHedgesLimit)
		case "adaptive":
			h.Adaptive = d.adaptive(v, fp)
		case "non_fatal_codes":
			h.NonFatalCodes = d.grpcCodes(v, fp)
		}
	})
	if delayNode == nil && valueOf(n, "adaptive") == nil {
		d.fail(n, path, "needs a delay (e.g. delay: 50ms) or adaptive: with neither, nothing says when to hedge")
	}
	return h
}

func (d *decoder) adaptive(n *yaml.Node, path string) *hedge.AdaptiveConfig {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "must be a mapping (%s; {} for the defaults), not %s", strings.Join(adaptiveFields, ", "), describe(n))
		return nil
	}
	a := &hedge.AdaptiveConfig{}
	var floorNode, maxNode *yaml.Node
	positive := func(v *yaml.Node, fp string, def string) time.Duration {
		reported := len(d.problems)
		x := d.duration(v, fp)
		if x <= 0 && len(d.problems) == reported {
			d.fail(v, fp, "must be positive (leave it out for the default, %s)", def)
		}
		return x
	}
	d.fields(n, path, adaptiveFields, func(key string, v *yaml.Node, fp string) {
		switch key {
		case "percentile":
			a.Percentile = d.number(v, fp, 0, 1, true)
		case "window":
			a.Window = positive(v, fp, hedge.DefaultWindow.String())
		case "floor":
			floorNode = v
			a.Floor = positive(v, fp, hedge.DefaultFloor.String())
		case "max":
			maxNode = v
			a.Max = positive(v, fp, "no cap")
		case "min_samples":
			a.MinSamples = d.integer(v, fp, 1, 1<<30)
		}
	})
	floor := a.Floor
	if floor <= 0 {
		floor = hedge.DefaultFloor
	}
	if a.Max > 0 && a.Max < floor {
		at := maxNode
		if at == nil {
			at = floorNode
		}
		d.fail(at, join(path, "max"), "%v is below the floor %v", a.Max, floor)
	}
	return a
}

// checkHedge checks a policy's hedging against the rest of the policy:
// hedges are attempts, so max_hedges must leave room in the attempt
// limit; and a policy with a limiter is not hedged.
func (d *decoder) checkHedge(p *PolicySpec, n *yaml.Node, path string) {
	if p.Hedge == nil || n.Kind != yaml.MappingNode {
		return
	}
	hn := valueOf(n, "hedge")
	at, fp := hn, join(path, "hedge")
	if v := valueOf(hn, "max_hedges"); v != nil {
		at, fp = v, join(fp, "max_hedges")
	}
	if p.MaxAttempts != retry.Unlimited && p.Hedge.MaxHedges > p.MaxAttempts-1 {
		if p.MaxAttempts <= 1 {
			d.fail(at, fp, "max_attempts %d leaves no attempt for a hedge (hedges count against max_attempts)", p.MaxAttempts)
		} else {
			d.fail(at, fp, "%d hedges do not fit in max_attempts %d (first attempt + hedges + retries); at most %d", p.Hedge.MaxHedges, p.MaxAttempts, p.MaxAttempts-1)
		}
	}
	if p.Limiter != nil {
		d.fail(hn, join(path, "hedge"), "a policy with a limiter is not hedged (hedge.Do does not hedge a call whose admission may wait): drop hedge or limiter")
	}
}

// adaptiveKey identifies an Adaptive's settings: a handle keeps its
// Adaptive across a reload while the key is unchanged.
func adaptiveKey(c *hedge.AdaptiveConfig) string {
	return fmt.Sprintf("%v %v %v %v %d", c.Percentile, c.Window, c.Floor, c.Max, c.MinSamples)
}

// Hedger returns the hedge.Hedger of the handle's policy: Policy is the
// Handle itself (so every reload of the policy reaches calls made through
// it), and Delay, MaxHedges and Adaptive are the file's hedge settings.
// A policy without hedge settings gets a Hedger with MaxHedges
// hedge.NoHedges, with which hedge.Do is retry.Do: the result is never
// nil. The Adaptive belongs to the handle (one per operation, as the
// hedge package advises) and is kept across reloads while its settings
// are unchanged, so a reload does not forget the latencies seen.
//
// A reload that changes the hedge settings installs a new Hedger: call
// Hedger for every call (it is one atomic load) to follow them, or keep
// the result to follow only the policy.
func (h *Handle) Hedger() *hedge.Hedger {
	if hd := h.hedger.Load(); hd != nil {
		return hd
	}
	return &hedge.Hedger{Policy: h, MaxHedges: hedge.NoHedges}
}

// planHedger works out st's Hedger from its spec, keeping the handle's
// Adaptive while its settings are unchanged; it changes nothing until
// st.store. It must be called with the Registry's mu held.
func (r *Registry) planHedger(st *handleState) {
	h, spec := st.h, st.spec
	hd := &hedge.Hedger{Policy: h, MaxHedges: hedge.NoHedges}
	if spec != nil && spec.Hedge != nil {
		s := spec.Hedge
		hd.Delay, hd.MaxHedges = s.Delay, s.MaxHedges
		if s.Adaptive != nil && s.Keys != nil {
			r.planAdaptives(st, s)
			hd.Adaptives = st.adaptives
		} else if s.Adaptive != nil {
			key := adaptiveKey(s.Adaptive)
			st.adaptive, st.adaptiveKey = h.adaptive, h.adaptiveKey
			if st.adaptive == nil || st.adaptiveKey != key {
				c := *s.Adaptive
				c.Clock = r.opts.Clock
				st.adaptive, st.adaptiveKey = hedge.NewAdaptive(c), key
			}
			hd.Adaptive = st.adaptive
		}
	}
	st.hedger = hd
}

// GRPCNonFatalCodes returns the numeric gRPC status codes with which a
// hedged copy of this policy's calls may fail without ending the call
// (gRFC A6's nonFatalStatusCodes, grpcretry.WithNonFatalCodes): the hedge
// block's non_fatal_codes, or, when it leaves them out, the policy's
// retry_on.grpc_codes (the codes its retries go on after). ok is false
// when the policy has no hedge block or names neither list: keep the
// interceptor's own option (with none, every code is fatal). Convert for
// the interceptor:
//
//	cs, _ := spec.GRPCNonFatalCodes()
//	var list []codes.Code
//	for _, c := range cs {
//		list = append(list, codes.Code(c))
//	}
//	grpcretry.UnaryHedgingInterceptor(h.Hedger(), grpcretry.WithNonFatalCodes(list...))
//
// That fixes the list when the interceptor is built; Handle.GRPCNonFatal
// follows reloads.
func (s *PolicySpec) GRPCNonFatalCodes() (codes []uint32, ok bool) {
	if s == nil || s.Hedge == nil {
		return nil, false
	}
	names := s.Hedge.NonFatalCodes
	if names == nil {
		names = s.RetryOn.GRPCCodes
		if len(names) == 0 {
			return nil, false
		}
	}
	codes = []uint32{}
	for _, n := range names {
		if c, ok := GRPCCodeNumber(n); ok && c != 0 && !slices.Contains(codes, c) {
			codes = append(codes, c)
		}
	}
	slices.Sort(codes)
	return codes, true
}

// GRPCNonFatal reports whether a hedged copy failing with the gRPC status
// code may let the other copies go on, under the policy in force now (see
// PolicySpec.GRPCNonFatalCodes; false when it names no list). It reads
// the current spec, so it follows reloads: a gRPC hedging interceptor
// that asks its Hedger's Policy source for this method per call follows
// the file's non_fatal_codes.
func (h *Handle) GRPCNonFatal(code uint32) bool {
	cs, ok := h.Spec().GRPCNonFatalCodes()
	return ok && slices.Contains(cs, code)
}
