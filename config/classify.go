package config

import (
	"net/http"
	"slices"

	"github.com/stormguard/stormguard/httpretry"
)

// HTTPClassifier returns the HTTP classifier that this policy's
// retry_on.http_status asks for: a response is retried when its status is
// listed; errors (no response) are classified by
// httpretry.DefaultClassifier. Without an http_status list it returns
// httpretry.DefaultClassifier itself. A nil spec gives the default too.
// The Registry already puts it in the built policy's Classify (through
// httpretry.PolicyClassifier), so a transport built once over the Handle
// follows the list across reloads:
//
//	rt := httpretry.New(nil, reg.Policy("charge-card"))
func (s *PolicySpec) HTTPClassifier() func(*http.Response, error) bool {
	if s == nil || len(s.RetryOn.HTTPStatus) == 0 {
		return httpretry.DefaultClassifier
	}
	codes := slices.Clone(s.RetryOn.HTTPStatus)
	return func(resp *http.Response, err error) bool {
		if resp == nil {
			return httpretry.DefaultClassifier(nil, err)
		}
		return slices.Contains(codes, resp.StatusCode)
	}
}

// GRPCRetryable returns a predicate over numeric gRPC status codes for this
// policy's retry_on.grpc_codes, and false when the policy lists none,
// meaning: keep the interceptor's default table. Convert it for the
// grpcretry module's WithRetryable option:
//
//	grpcretry.WithRetryable(func(c codes.Code) bool { return f(uint32(c)) })
//
// That fixes the list when the interceptor is built. For one that follows
// reloads, build it into the policy instead: an Options.Classify that
// turns the spec's GRPCRetryable into a Classify over status.Code(err),
// with grpcretry.WithPolicyClassify on the interceptor.
func (s *PolicySpec) GRPCRetryable() (f func(code uint32) bool, ok bool) {
	if s == nil || len(s.RetryOn.GRPCCodes) == 0 {
		return nil, false
	}
	set := make([]bool, len(grpcCodes))
	for _, name := range s.RetryOn.GRPCCodes {
		if n, ok := GRPCCodeNumber(name); ok {
			set[n] = true
		}
	}
	return func(code uint32) bool { return int(code) < len(set) && set[code] }, true
}
