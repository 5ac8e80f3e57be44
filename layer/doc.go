// Package layer keeps a chain of services from multiplying retries: retry
// at one layer, and let an overloaded server say "don't retry" to the
// whole chain.
//
// A client (httpretry, grpcretry) announces on every attempt its attempt
// number, whether it will retry this call itself and its remaining
// deadline. Middleware reads those facts (and Envoy's
// x-envoy-attempt-count and x-envoy-expected-rq-timeout-ms), caps them by
// configured bounds, bounds the request's context by the caller's deadline
// and puts retry.Inbound in it, so that every retry.Do and httpretry call
// made while serving the request obeys Policy.Nested with no plumbing:
// under the default, retry.NestedOneLayer, a call whose inbound caller
// retries makes one attempt and leaves retrying to that caller.
//
// Overload answers "overloaded; don't retry" — 503 with Retry-After and
// Stormguard-Overloaded: 1 — which clients never retry, at any layer.
// Handlers written as HandlerFunc return errors; Middleware turns an error
// that wraps retry.ErrOverloaded (a downstream's marker, as httpretry
// reports it) into that answer, so the marker travels up the chain, and
// an error that a call made here did not retry only because the caller
// retries (NotRetriedHere) into a 503 without the marker (NotRetried),
// which the caller retries, so the one layer that retries makes its
// attempts. Limit
// sheds requests beyond a concurrency limit with the same answer.
package layer
