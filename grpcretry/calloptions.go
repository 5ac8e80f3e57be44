package grpcretry

import (
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
)

// CallOption is a setting of the interceptors for one call, passed among
// the call's grpc.CallOptions:
//
//	resp, err := client.Get(ctx, req, grpcretry.WithMaxAttempts(1))
//
// The interceptors take their CallOptions out before the call reaches
// grpc-go (which would ignore them anyway: CallOption embeds
// grpc.EmptyCallOption), so a CallOption passed on a connection without
// the interceptors does nothing.
type CallOption struct {
	grpc.EmptyCallOption
	kind        callOptionKind
	policy      retry.PolicySource
	maxAttempts int
}

type callOptionKind uint8

const (
	callMaxAttempts callOptionKind = iota + 1
	callPolicy
)

// WithMaxAttempts sets the call's attempt limit, the first attempt
// included, in place of its Policy's MaxAttempts (read as MaxAttempts is:
// 0 is retry.DefaultMaxAttempts, retry.Unlimited no count limit). It
// applies on top of WithPolicy, whichever comes first. WithMaxAttempts(1)
// makes a call that is never retried.
func WithMaxAttempts(n int) CallOption {
	return CallOption{kind: callMaxAttempts, maxAttempts: n}
}

// WithPolicy runs the call under the Policy src gives (a *retry.Policy, a
// *config.Handle; nil: the zero Policy) instead of the interceptor's
// source; it is asked once, when the call starts. The Policy's Classify is
// not consulted, as for the interceptor's own; the interceptor's Options
// still apply.
func WithPolicy(src retry.PolicySource) CallOption {
	return CallOption{kind: callPolicy, policy: src}
}

// callSettings is what a call's CallOptions asked for.
type callSettings struct {
	policy         retry.PolicySource
	policySet      bool
	maxAttempts    int
	maxAttemptsSet bool
}

func (cs *callSettings) add(o CallOption) {
	switch o.kind {
	case callMaxAttempts:
		cs.maxAttempts, cs.maxAttemptsSet = o.maxAttempts, true
	case callPolicy:
		cs.policy, cs.policySet = o.policy, true
	}
}

// callPolicy sets up one call's Policy in pol: a copy of the one the
// interceptor's source (or WithPolicy's) gives now — asked once per call,
// so a reload reaches the next call whole — with WithMaxAttempts applied,
// bo (the Policy's backoff, obeying server pushback) and notPermanent.
func (ic *interceptor) callPolicy(pol *retry.Policy, bo *pushbackBackoff, cs *callSettings) {
	src := ic.src
	if cs.policySet {
		src = cs.policy
	}
	p := policyOf(src)
	*pol = *p
	if cs.maxAttemptsSet {
		pol.MaxAttempts = cs.maxAttempts
	}
	bo.base = pol.Backoff
	if bo.base == nil {
		bo.base = retry.DefaultBackoff
	}
	bo.ignoreAdvice = pol.MaxRetryAfter < 0
	bo.classify = nil
	if ic.o.policyClassify {
		bo.classify = pol.Classify
	}
	pol.Backoff = bo
	pol.Classify = notPermanent
}

// policyOf asks src for the Policy of a call starting now; a nil source or
// a nil Policy is the zero Policy.
func policyOf(src retry.PolicySource) *retry.Policy {
	if src == nil {
		return &zeroPolicy
	}
	if p := src.Policy(); p != nil {
		return p
	}
	return &zeroPolicy
}

// notPermanent is the Classify of the per-call Policy: classify has already
// marked with retry.Permanent every error that must not be retried.
func notPermanent(error) bool { return true }

// splitCallOptions appends to dst the options of opts that go to grpc-go,
// and returns apart the grpc.OnFinish options (the interceptor runs those
// once per call rather than letting every attempt run them) and what the
// call's CallOptions asked for (they do not go to grpc-go).
func splitCallOptions(dst, opts []grpc.CallOption, cs *callSettings) (rest, onFinish []grpc.CallOption) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.OnFinishCallOption:
			onFinish = append(onFinish, o)
			continue
		case CallOption:
			cs.add(o)
			continue
		}
		dst = append(dst, o)
	}
	return dst, onFinish
}

// passThrough reports whether every option of opts goes to grpc-go as it
// is (no grpc.OnFinish, no CallOption), so that the slice may be used
// unchanged.
func passThrough(opts []grpc.CallOption) bool {
	for _, o := range opts {
		switch o.(type) {
		case grpc.OnFinishCallOption, CallOption:
			return false
		}
	}
	return true
}

// runOnFinish calls the grpc.OnFinish callbacks with the call's error.
func runOnFinish(opts []grpc.CallOption, err error) {
	for _, o := range opts {
		o.(grpc.OnFinishCallOption).OnFinish(err)
	}
}
