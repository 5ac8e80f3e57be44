package grpcretry

import (
	"strings"
	"sync"

	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// DefaultMaxReplayBytes is the replay buffer of a stream when
// WithMaxReplayBytes is not given (or given 0): 256 KiB of client messages.
const DefaultMaxReplayBytes = 256 << 10

// An Option configures UnaryClientInterceptor and StreamClientInterceptor,
// as grpc.DialOption configures a connection. Options apply in the order
// given: those that take lists (WithIdempotentMethods,
// WithIdempotentServices, WithNonIdempotent) add to what earlier ones
// listed, the others replace an earlier value. No Option at all is the
// documented default of every setting.
//
// A method is retried after its request may have reached a server only
// when it is declared idempotent: listed by WithIdempotentMethods, part of
// a service listed by WithIdempotentServices, declared NO_SIDE_EFFECTS or
// IDEMPOTENT by its proto idempotency_level (read from WithProtoFiles's
// registry), or accepted by WithIdempotent's predicate — and not listed by
// WithNonIdempotent, which overrides all of them. Any other method is
// attempted once, and again only when the failure proves that the request
// never reached a server (see the package documentation). With no Option,
// the interceptors therefore retry, once they may have reached the server,
// only the methods whose protos declare them safe to repeat.
type Option interface {
	apply(*options)
}

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

// WithIdempotentMethods declares full method names
// ("/package.Service/Method") that may be sent more than once.
func WithIdempotentMethods(methods ...string) Option {
	methods = append([]string(nil), methods...)
	return optionFunc(func(o *options) { o.idempotentMethods = append(o.idempotentMethods, methods...) })
}

// WithIdempotentServices declares services ("package.Service", as in a
// service config's name entries) every method of which may be sent more
// than once: the explicit opt-in of owners who want everything retried, as
// a gRPC service config's retryPolicy does for the methods it names.
func WithIdempotentServices(services ...string) Option {
	services = append([]string(nil), services...)
	return optionFunc(func(o *options) { o.idempotentServices = append(o.idempotentServices, services...) })
}

// WithIdempotent sets a predicate asked about methods that the lists and
// the protos do not declare idempotent; true makes the method idempotent.
// It is called on every call of such a method (its answers are not
// cached) and must be safe for concurrent use. nil: none.
func WithIdempotent(f func(fullMethod string) bool) Option {
	return optionFunc(func(o *options) { o.idempotent = f })
}

// WithNonIdempotent lists full method names that are never sent twice,
// whatever the other options and the protos say.
func WithNonIdempotent(methods ...string) Option {
	methods = append([]string(nil), methods...)
	return optionFunc(func(o *options) { o.nonIdempotent = append(o.nonIdempotent, methods...) })
}

// WithProtoFiles sets where methods' idempotency_level options are looked
// up (by the method's full name). nil, or no such Option:
// protoregistry.GlobalFiles, where generated code registers itself.
// Answers are cached per method.
func WithProtoFiles(files *protoregistry.Files) Option {
	return optionFunc(func(o *options) { o.protoFiles = files })
}

// WithRetryable sets which status codes are retried, replacing the default
// table below, WithRetryInternal and WithRetryResourceExhausted (nil: the
// default table). Whatever it says, the caller's own cancellation and
// deadline are never retried, an attempt cut by the Policy's
// AttemptTimeout always is (for an idempotent method), and a server's "do
// not retry" pushback is obeyed. It must be safe for concurrent use.
//
// The default table retries Unavailable and Aborted; ResourceExhausted
// only when the server sent a pushback that allows a retry;
// DeadlineExceeded only when the attempt had a deadline of its own,
// earlier than the caller's (Policy.AttemptTimeout). Every other code,
// Internal included, is final.
func WithRetryable(f func(codes.Code) bool) Option {
	return optionFunc(func(o *options) { o.retryable = f })
}

// WithPolicyClassify makes the call's Policy.Classify, when it has one,
// decide which failed attempts are retried, in place of the default code
// table (WithRetryable, when given, still comes first). Classify is asked
// with the attempt's *AttemptError (status.Code finds its code) and must be
// written for gRPC errors. The rules that WithRetryable cannot change hold
// here too: the caller's cancellation and deadline, an attempt timeout, a
// "do not retry" pushback, commit on headers and idempotency.
//
// Use it when the Policy comes from a source that changes — a
// *config.Handle whose config.Options.Classify builds Classify from the
// policy's retry_on.grpc_codes — so the retried codes follow a reload with
// every other setting. Off by default, as a Policy shared with HTTP
// clients has a Classify for HTTP errors.
func WithPolicyClassify() Option {
	return optionFunc(func(o *options) { o.policyClassify = true })
}

// WithRetryInternal(true) also retries codes.Internal. Off by default:
// Internal usually reports a bug, which another attempt will meet again.
func WithRetryInternal(on bool) Option {
	return optionFunc(func(o *options) { o.retryInternal = on })
}

// WithRetryResourceExhausted(true) retries codes.ResourceExhausted even
// without a server pushback. Off by default: a quota or a full queue rarely
// frees itself within a backoff, and the server that can say when sends
// grpc-retry-pushback-ms.
func WithRetryResourceExhausted(on bool) Option {
	return optionFunc(func(o *options) { o.retryResourceExhausted = on })
}

// WithMaxReplayBytes bounds the client messages a stream keeps to replay
// on a new attempt, measured with proto.Size. A stream whose messages pass
// it is committed: it is no longer retried and the kept messages are
// released. 0: DefaultMaxReplayBytes. Negative: keep nothing, so a stream
// is retried only if it fails before its first message is sent.
func WithMaxReplayBytes(n int) Option {
	return optionFunc(func(o *options) { o.maxReplayBytes = n })
}

// options holds what the Options set.
type options struct {
	idempotentMethods      []string
	idempotentServices     []string
	idempotent             func(fullMethod string) bool
	nonIdempotent          []string
	protoFiles             *protoregistry.Files
	retryable              func(codes.Code) bool
	retryInternal          bool
	retryResourceExhausted bool
	maxReplayBytes         int
	noAnnounce             bool
	policyClassify         bool
	nonFatal               uint64  // WithNonFatalCodes: bit c for code c
	key                    keyFunc // WithKey, KeyByMethod, KeyByTarget, WithKeyPer (key.go)
}

// interceptor is the shared, immutable state of one pair of interceptors
// (and a cache that only grows).
type interceptor struct {
	src       retry.PolicySource // nil: the zero Policy
	o         options
	nonIdem   map[string]struct{}
	idemNames map[string]struct{} // idempotent methods, and "/service/" for idempotent services
	files     *protoregistry.Files
	declared  sync.Map       // full method name → bool: declared idempotent by the lists or the protos
	maxReplay int            // the replay limit, or its default
	hedger    *hedge.Hedger  // UnaryHedgingInterceptor's; nil: no hedging
	hedgers   HedgerSource   // when set, asked for the Hedger of each call instead
	nonFatals NonFatalSource // the hedger's Policy source, when it names non-fatal codes
}

var zeroPolicy retry.Policy

func newInterceptor(src retry.PolicySource, opts []Option) *interceptor {
	ic := &interceptor{src: src}
	for _, o := range opts {
		if o != nil {
			o.apply(&ic.o)
		}
	}
	ic.nonIdem = nameSet(ic.o.nonIdempotent, nil)
	ic.idemNames = nameSet(ic.o.idempotentMethods, ic.o.idempotentServices)
	ic.files = ic.o.protoFiles
	if ic.files == nil {
		ic.files = protoregistry.GlobalFiles
	}
	ic.maxReplay = ic.o.maxReplayBytes
	if ic.maxReplay == 0 {
		ic.maxReplay = DefaultMaxReplayBytes
	}
	return ic
}

// nameSet returns the set of methods, and of services as "/service/", or
// nil when both are empty.
func nameSet(methods, services []string) map[string]struct{} {
	if len(methods)+len(services) == 0 {
		return nil
	}
	set := make(map[string]struct{}, len(methods)+len(services))
	for _, m := range methods {
		set[m] = struct{}{}
	}
	for _, s := range services {
		set["/"+strings.Trim(s, "/")+"/"] = struct{}{}
	}
	return set
}

// idempotent reports whether method may be sent more than once.
func (ic *interceptor) idempotent(method string) bool {
	if _, ok := ic.nonIdem[method]; ok {
		return false
	}
	if ic.isDeclared(method) {
		return true
	}
	return ic.o.idempotent != nil && ic.o.idempotent(method)
}

// isDeclared reports whether the lists or the protos declare method
// idempotent, and caches the answer.
func (ic *interceptor) isDeclared(method string) bool {
	if v, ok := ic.declared.Load(method); ok {
		return v.(bool)
	}
	v := false
	if _, ok := ic.idemNames[method]; ok {
		v = true
	} else if i := strings.LastIndexByte(method, '/'); i > 0 {
		if _, ok := ic.idemNames[method[:i+1]]; ok {
			v = true
		}
	}
	if !v {
		v = protoIdempotent(ic.files, method)
	}
	ic.declared.Store(method, v)
	return v
}

// codeRetryable applies WithRetryable, the call's Policy.Classify (policy,
// with WithPolicyClassify) or the code table to ae. pushback reports a
// server pushback that allows a retry; ownDeadline that the attempt had a
// deadline earlier than the caller's.
func (ic *interceptor) codeRetryable(ae *AttemptError, policy func(error) bool, pushback, ownDeadline bool) bool {
	c := ae.Code()
	switch {
	case ic.o.retryable != nil:
		return ic.o.retryable(c)
	case policy != nil:
		return policy(ae)
	}
	switch c {
	case codes.Unavailable, codes.Aborted:
		return true
	case codes.ResourceExhausted:
		return pushback || ic.o.retryResourceExhausted
	case codes.DeadlineExceeded:
		return ownDeadline
	case codes.Internal:
		return ic.o.retryInternal
	}
	return false
}

// IdempotentByProto returns a WithIdempotent predicate that reads each
// method's idempotency_level option from the proto descriptors registered
// in files (nil: protoregistry.GlobalFiles, where generated code registers
// itself). The interceptors read WithProtoFiles's registry this way
// already; the predicate serves a second registry, or code of its own. A
// method declared NO_SIDE_EFFECTS or IDEMPOTENT is idempotent; one
// declared otherwise, or not found, is not:
//
//	rpc Get(GetRequest) returns (Item) { option idempotency_level = NO_SIDE_EFFECTS; }
//
// Answers are cached per method; the predicate is safe for concurrent use.
func IdempotentByProto(files *protoregistry.Files) func(fullMethod string) bool {
	if files == nil {
		files = protoregistry.GlobalFiles
	}
	var cache sync.Map // full method name → bool
	return func(fullMethod string) bool {
		if v, ok := cache.Load(fullMethod); ok {
			return v.(bool)
		}
		v := protoIdempotent(files, fullMethod)
		cache.Store(fullMethod, v)
		return v
	}
}

func protoIdempotent(files *protoregistry.Files, fullMethod string) bool {
	name := strings.TrimPrefix(fullMethod, "/")
	i := strings.LastIndexByte(name, '/')
	if i <= 0 || i == len(name)-1 {
		return false
	}
	d, err := files.FindDescriptorByName(protoreflect.FullName(name[:i] + "." + name[i+1:]))
	if err != nil {
		return false
	}
	md, ok := d.(protoreflect.MethodDescriptor)
	if !ok {
		return false
	}
	opts, ok := md.Options().(*descriptorpb.MethodOptions)
	if !ok {
		return false
	}
	switch opts.GetIdempotencyLevel() {
	case descriptorpb.MethodOptions_NO_SIDE_EFFECTS, descriptorpb.MethodOptions_IDEMPOTENT:
		return true
	}
	return false
}
