// Package grpcretry retries gRPC client calls under a stormguard
// retry.Policy: jittered backoff, a retry budget and a circuit breaker
// shared by every caller of a downstream, deadline-aware waits, server
// pushback, and an Observer that sees every attempt.
//
//	p := &retry.Policy{Operation: "inventory", MaxAttempts: 4, AttemptTimeout: time.Second, Budget: b, Breaker: br}
//	idem := grpcretry.WithIdempotentServices("shop.Inventory") // or idempotency_level in the proto
//	conn, err := grpc.NewClient(target,
//		grpc.WithDisableRetry(), // this package retries; grpc-go must not as well
//		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, idem)),
//		grpc.WithChainStreamInterceptor(grpcretry.StreamClientInterceptor(p, idem)),
//	)
//
// The interceptors take functional Options (WithIdempotentMethods,
// WithRetryable, WithMaxReplayBytes, …), as grpc-go's constructors do; any
// number may be given. One call can change its attempts or its whole
// Policy with a CallOption among its grpc.CallOptions:
//
//	item, err := inventory.Get(ctx, req, grpcretry.WithMaxAttempts(1)) // never retried
//	item, err = inventory.Get(ctx, req, grpcretry.WithPolicy(batchPolicy))
//
// # Policies that change
//
// The interceptors take a retry.PolicySource: a *retry.Policy, which never
// changes, or a *config.Handle, which follows a hot-reloaded policy file.
// They ask it once per call, when the call starts (one atomic load for a
// Handle), so a reload reaches every setting of the next call on the same
// connection — no new dial — and a call in flight keeps the Policy it
// started with:
//
//	h := reg.Policy("inventory") // reg: a *config.Registry, loaded and watched
//	grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(h, idem))
//
// The Options (idempotency, the code table) are fixed when the interceptor
// is built.
//
// # What is retried
//
// By status code: Unavailable and Aborted; ResourceExhausted only when the
// server sent a pushback allowing a retry (or WithRetryResourceExhausted);
// DeadlineExceeded only when the attempt had a deadline of its own, earlier
// than the caller's (Policy.AttemptTimeout) — never the caller's deadline.
// Never: Canceled, InvalidArgument, NotFound, AlreadyExists,
// PermissionDenied, Unauthenticated, FailedPrecondition, OutOfRange,
// Unimplemented, Unknown, DataLoss, and Internal unless
// WithRetryInternal. WithRetryable replaces the table. The caller's
// own cancellation or deadline ends the call at once, whatever the code.
//
// # Server pushback (gRFC A6)
//
// A server may set the trailer grpc-retry-pushback-ms (see PushbackTrailer).
// A non-negative value replaces the next wait, even when shorter than the
// backoff, and 0 retries at once. The delay reaches the retry loop through
// retry.After, which caps it by Policy.MaxRetryAfter and jitters it a
// little, as it does any server advice; the backoff schedule then restarts
// from its first step. A negative, malformed or repeated value means "do
// not retry": the call ends with that attempt's error. A negative integer
// (-1, as PushbackTrailer(-1) and Overloaded send it) is moreover the
// overload marker: the attempt is marked retry.Overloaded, the call ends
// with retry.ReasonOverloaded and its error wraps retry.ErrOverloaded, so
// no layer retries it (see "Retry at one layer"). A negative
// Policy.MaxRetryAfter ignores the delays but still obeys "do not retry".
//
// # Attempts and deadlines
//
// Every attempt carries, in its request metadata, its number
// (stormguard-attempt, AttemptKey) and whether the call may be retried if
// it fails (stormguard-will-retry, WillRetryKey: retry.Call.WillRetry, by
// this client or by a caller above that retries), and every
// attempt after the first the standard grpc-previous-rpc-attempts (the
// number of attempts before it), with the values grpc-go's own retries
// send. WithAnnounce(false) keeps only the standard one, for third
// parties. Each attempt runs with a context bounded by
// Policy.AttemptTimeout and the caller's deadline, so the server sees the
// earlier of the two as its grpc-timeout; the caller's deadline also stops
// retries whose wait cannot fit before it.
//
// # Retry at one layer
//
// When every tier of a call chain retries, the bottom tier's load
// multiplies: three tiers of 4 attempts make 64 attempts at the bottom. The
// server interceptors (UnaryServerInterceptor, StreamServerInterceptor)
// read what the caller announced — its attempt (stormguard-attempt, else
// grpc-previous-rpc-attempts plus one), whether it retries, its native
// deadline — cap it (WithMaxInboundAttempt, WithMaxInboundDeadline) and
// put it on the handler's context as a retry.Inbound. The client
// interceptors of the calls the handler makes then obey their Policy's
// layer rule (retry.Policy.Nested): by default a call whose caller retries,
// or has retried, makes one attempt, and still announces that the call
// will be retried (above), so only the outermost layer retries — 4
// attempts at the bottom of those three tiers instead of 64
// (TestLayerRuleTiers).
//
// A server sheds load with the overload marker: a handler returns
// Overloaded(msg), or any error that wraps retry.ErrOverloaded — a
// downstream's marker, as the client interceptors report it — and the
// server interceptor answers UNAVAILABLE with grpc-retry-pushback-ms: -1.
// No client interceptor retries it, and a tier that meets it passes it up
// the same way, so the whole chain stops (TestOverloadMarkerCrossesTiers).
// grpc-go's own retries obey the marker too: it is gRFC A6's "do not
// retry". WithMaxInFlight sheds the calls beyond a concurrency limit with
// the same answer. A handler error that wraps retry.ErrNestedRetry (a call
// the layer rule left to this call's caller to retry) is answered
// UNAVAILABLE without the marker, so the caller retries it and exactly
// one layer makes the attempts (TestNestedRefusalAnsweredRetryable).
//
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(grpcretry.UnaryServerInterceptor()),
//		grpc.ChainStreamInterceptor(grpcretry.StreamServerInterceptor()),
//	)
//
// AdaptiveUnaryServerInterceptor and AdaptiveStreamServerInterceptor do
// the same behind an adaptive limit: an admission.Limiter admits each
// call, at once or after a short wait in its CoDel queue, and a call it
// sheds is answered RESOURCE_EXHAUSTED with the overload marker, without
// its handler running. They take an admission.Source — a
// *admission.Limiter, or config's *AdmissionHandle, whose Limiter a
// reload swaps — and ask it once per call.
//
// # Idempotency: unsafe methods are sent once
//
// A method is retried after its request may have reached a server only
// when it is declared idempotent: by its proto idempotency_level
// (NO_SIDE_EFFECTS or IDEMPOTENT, read from the registered descriptors,
// WithProtoFiles), by name (WithIdempotentMethods), by service
// (WithIdempotentServices: the explicit opt-in of owners who want every
// method retried, as a service config's retryPolicy does), or by
// WithIdempotent's predicate; WithNonIdempotent overrides them all. Any other
// method is attempted once, unless the failure proves that the request
// never reached a server: for a unary call, the attempt was never given a
// transport (no peer: the connection was refused or never ready, and the
// call failed fast); for a stream, the stream could not be created. Below
// the interceptor, grpc-go itself retries, transparently and even with
// grpc.WithDisableRetry, a stream that it could not start on a transport or
// that the server provably did not process (refused, or cut by GOAWAY
// before it was read) on the call's first attempt; those retries are
// invisible here, and a failure after the request reached a transport is
// final for such a method.
//
// # Commit on response headers (gRFC A6)
//
// Once the server has sent response headers — any response that is not
// Trailers-Only: headers sent with grpc.SendHeader, set with grpc.SetHeader,
// or sent with a first message — the call is committed: its failure is
// final, whatever its code, as with grpc-go's own retries. This holds for
// unary calls (read through a grpc.Header call option of the
// interceptor's) and for streams (read from the failed attempt), whether
// or not the caller looked at the headers. AttemptError.Committed reports
// it.
//
// # Streams
//
// A stream is retried while it is not committed: the interceptor keeps
// every message the client sent (up to WithMaxReplayBytes, 256 KiB by
// default, measured with proto.Size) and, when the stream fails with a
// retryable status, opens a new one and sends them again, followed by
// CloseSend if the client had closed. Response headers, a response
// message, or messages past the limit commit the stream, and its failure
// is final. A send that fails while the stream may still be retried
// returns nil: the message is kept, and RecvMsg reports the outcome.
// Messages must not be modified after SendMsg (grpc-go's rule too).
//
// The stream's Context is the call's: the caller's values, done when the
// caller's context is or when the call has ended. Unlike grpc-go's, it does
// not commit the stream, so middleware may log from it without turning
// retries off; once the stream is committed, its values are the committed
// attempt's (peer.FromContext finds that attempt's server).
//
// A stream's attempts are driven through the same checks as retry.Do, in
// the same order — MaxAttempts, deadline, breaker, budget, AttemptTimeout,
// Observer — one attempt per underlying stream, reported when that stream
// ends (or when the caller's context ends, for a stream its caller
// abandons). Policy.AttemptTimeout bounds every stream attempt, a
// long-lived one too: give long streams a Policy of their own. When code
// of the caller's panics inside an attempt — an inner interceptor or
// stream, an Option's callback — the attempt ends as failed for the
// breaker (a half-open probe is released), the budget and the Observer
// (retry.Call.Panic, ReasonPanic) before the panic goes on; the stream then
// returns a retry.ErrPanicked error from every method.
//
// # Call options
//
// The caller's call options reach every attempt, except grpc.OnFinish —
// its callbacks run once, when the call ends, with the call's error — and
// this package's CallOptions, which the interceptors consume.
// grpc.Header, grpc.Trailer and grpc.Peer describe the last attempt.
//
// # Errors and observation
//
// The Observer, Budget and Breaker see each failed attempt as an
// *AttemptError (wrapped by retry markers): status.Code(err) and
// errors.As(err, &ae) give its code, which is how metrics or logs label
// attempts by gRPC code. A failed call returns an error that carries the
// last attempt's status unchanged for status.FromError and status.Code
// (Canceled or DeadlineExceeded when the caller's context ended the call,
// Unavailable when the breaker refused before any attempt) and wraps the
// *retry.Error, so errors.Is finds retry.ErrAttemptsExhausted,
// retry.ErrBudgetExhausted, breaker.ErrOpen or the context's error.
// Policy.Classify is not used: gRPC failures are classified by the Options
// — unless WithPolicyClassify, for a Policy whose Classify is written for
// gRPC errors (config.Options.Classify from retry_on.grpc_codes, say), so
// that the retried codes follow a policy reload.
//
// # Health: what a breaker counts
//
// Whether an attempt is retried and whether it speaks against the server's
// health are separate questions. AttemptError implements
// retry.FaultReporter, so a breaker with the default IsFailure
// (retry.IsDownstreamFault) counts as failures Unavailable, Internal,
// Unknown, DeadlineExceeded (an attempt that ran out of time),
// ResourceExhausted and DataLoss — also when they are not retried, so a
// breaker opens for a server that crashes with Internal — and as
// successes every other code (the request was at fault) and the caller's
// cancellation. IsFault gives the table.
//
// # grpc-go's own retries
//
// grpc-go can retry by itself when a service config carries a retryPolicy
// (gRFC A6: maxAttempts, backoff, retryableStatusCodes, and the
// retryThrottling token bucket). Use one or the other, not both: both
// layers retrying multiplies the attempts (4 × 4 = 16 for one call), which
// is the storm this library exists to prevent. With these interceptors,
// dial with grpc.WithDisableRetry() (or give the service config no
// retryPolicy); grpc-go's transparent retry of unprocessed streams stays on
// either way and is harmless. The README's migration section maps every
// field of a retryPolicy to a Policy and Options; tests compare the
// interceptors' attempts with grpc-go's on one server. Prefer the
// interceptors when the Budget, Breaker, Observer or deadline rules must be
// shared with other clients (HTTP through httpretry, code through
// retry.Do); prefer the service config when the retry policy must be
// pushed to clients by the server's owners through name resolution.
// grpc-go never shipped A6's hedging: UnaryHedgingInterceptor does (see
// Hedging).
//
// # Hedging
//
// UnaryHedgingInterceptor(h, opts...) hedges unary calls to the methods
// declared idempotent (as above): when no copy has answered within h's
// delay another goes out, up to h.MaxHedges, and the first answer wins;
// the others are cancelled through their contexts. It follows gRFC A6's
// hedgingPolicy: maxAttempts is h.Policy's MaxAttempts (hedges and
// retries together), hedgingDelay is h.Delay or h.Adaptive,
// nonFatalStatusCodes is WithNonFatalCodes (any other code is fatal and
// ends the call). Every copy carries grpc-previous-rpc-attempts and the
// announcement; the overload marker stops further hedges. Hedges spend
// from the Policy's Budget and ask its Breaker as retries do (package
// hedge). Other methods are sent as UnaryClientInterceptor sends them.
package grpcretry
