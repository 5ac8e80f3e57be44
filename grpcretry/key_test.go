package grpcretry

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const emptyMethod = "/grpc.testing.TestService/EmptyCall"

// splitServer fails every UnaryCall (UNAVAILABLE) and answers every
// EmptyCall, and records the key each handler's request metadata names.
type splitServer struct {
	testpb.UnimplementedTestServiceServer
	unary, empty atomic.Int64
}

func (s *splitServer) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.unary.Add(1)
	return nil, status.Error(codes.Unavailable, "down")
}

func (s *splitServer) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	s.empty.Add(1)
	return &testpb.Empty{}, nil
}

func newKeyedPolicy(t *testing.T) (*retry.Policy, *keyed.Breakers) {
	t.Helper()
	g, err := keyed.NewBreakers(keyed.Config{}, breaker.Config{ConsecutiveFailures: 2})
	if err != nil {
		t.Fatal(err)
	}
	return &retry.Policy{MaxAttempts: 1, Breaker: g}, g
}

// TestGRPCKeyByMethodOpensOnlyTheFailingMethodsBreaker (#37 item 2): on a
// real loopback server, with KeyByMethod and a keyed breaker group, a
// method that keeps failing opens its own breaker only: the healthy
// method's calls go on, and its breaker stays closed.
func TestGRPCKeyByMethodOpensOnlyTheFailingMethodsBreaker(t *testing.T) {
	srv := &splitServer{}
	p, g := newKeyedPolicy(t)
	c := dialRetry(t, serveWith(t, nil, srv), p, KeyByMethod())
	ctx := context.Background()
	for range 4 {
		c.UnaryCall(ctx, &testpb.SimpleRequest{})
	}
	if s := g.Get(unaryMethod).State(); s != breaker.Open {
		t.Fatalf("failing method's breaker %v", s)
	}
	if n := srv.unary.Load(); n != 2 {
		t.Fatalf("%d UnaryCalls reached the server; the open breaker should have refused the last two", n)
	}
	for range 3 {
		if _, err := c.EmptyCall(ctx, &testpb.Empty{}); err != nil {
			t.Fatalf("healthy method refused: %v", err)
		}
	}
	if s := g.Get(emptyMethod).State(); s != breaker.Closed || srv.empty.Load() != 3 {
		t.Fatalf("healthy method's breaker %v, %d calls served", s, srv.empty.Load())
	}
	if g.Default().State() != breaker.Closed {
		t.Fatal("the default member was used")
	}
}

// TestGRPCKeyFunctions: KeyByTarget keys by the connection's target;
// WithKey by a function of the method and the call's outgoing metadata;
// the attempts see the key in their context; without a key option a
// policy with groups keys by the full method unless the context carries
// a key already; WithKeyPer follows what its source says.
func TestGRPCKeyFunctions(t *testing.T) {
	addr := serveWith(t, nil, &splitServer{})
	seen := func(t *testing.T, o ...Option) (testpb.TestServiceClient, func() string) {
		var mu sync.Mutex
		var got string
		spy := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			mu.Lock()
			got = keyed.KeyFrom(ctx)
			mu.Unlock()
			return invoker(ctx, method, req, reply, cc, opts...)
		}
		p, _ := newKeyedPolicy(t)
		c := dial(t, addr, grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p, append(o, WithIdempotentServices(testService))...), spy))
		return c, func() string { mu.Lock(); defer mu.Unlock(); return got }
	}
	ctx := context.Background()

	c, got := seen(t, KeyByTarget())
	c.EmptyCall(ctx, &testpb.Empty{})
	if got() != "passthrough:///"+addr {
		t.Errorf("KeyByTarget: %q", got())
	}

	c, got = seen(t, WithKey(func(ctx context.Context, method string) string {
		md, _ := metadata.FromOutgoingContext(ctx)
		return method + "|" + md.Get("tenant")[0]
	}))
	c.EmptyCall(metadata.AppendToOutgoingContext(ctx, "tenant", "acme"), &testpb.Empty{})
	if got() != emptyMethod+"|acme" {
		t.Errorf("WithKey: %q", got())
	}

	c, got = seen(t)
	c.EmptyCall(ctx, &testpb.Empty{})
	if got() != emptyMethod {
		t.Errorf("default with groups: %q", got())
	}
	c.EmptyCall(keyed.WithKey(ctx, "mine"), &testpb.Empty{})
	if got() != "mine" {
		t.Errorf("the context's key was not kept: %q", got())
	}

	per := "host"
	c, got = seen(t, WithKeyPer(func() string { return per }))
	c.EmptyCall(ctx, &testpb.Empty{})
	if got() != "passthrough:///"+addr {
		t.Errorf("WithKeyPer host: %q", got())
	}
	per = "method"
	c.EmptyCall(ctx, &testpb.Empty{})
	if got() != emptyMethod {
		t.Errorf("WithKeyPer method: %q", got())
	}
}

// TestGRPCKeyFunctionPanicFailsCleanly (#37 bad input): a key function
// that panics, on a unary call and on a stream, sends nothing, takes no
// breaker permit, leaks no goroutine (goleak in TestMain), and the panic
// goes on to the caller; the next call works.
func TestGRPCKeyFunctionPanicFailsCleanly(t *testing.T) {
	srv := newServer()
	p, g := newKeyedPolicy(t)
	var boom atomic.Bool
	boom.Store(true)
	c := dialRetry(t, serve(t, srv), p, WithKey(func(context.Context, string) string {
		if boom.Load() {
			panic("key boom")
		}
		return "k"
	}))
	ctx := context.Background()
	mustPanic := func(what string, f func()) {
		t.Helper()
		defer func() {
			if v := recover(); v != "key boom" {
				t.Fatalf("%s: recovered %v, want the key function's panic", what, v)
			}
		}()
		f()
	}
	mustPanic("unary", func() { c.UnaryCall(ctx, &testpb.SimpleRequest{}) })
	mustPanic("stream", func() { c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{}) })
	if n, _, _, _ := srv.stats(); n != 0 {
		t.Fatalf("%d attempts reached the server after the key function panicked", n)
	}
	if g.Len() != 0 {
		t.Fatalf("%d members built for a call without a key", g.Len())
	}
	boom.Store(false)
	if _, err := c.UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("the next call: %v", err)
	}
	if g.Len() != 1 {
		t.Fatalf("members %d after a keyed call", g.Len())
	}
}
