package grpcretry_test

import (
	"context"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

// The README's snippets are taken from the Examples of this file (and of
// example_test.go), so that they compile and run.

// inventoryClient stands for a generated client with a Get method.
type inventoryClient struct{ c testpb.TestServiceClient }

func (i inventoryClient) Get(ctx context.Context, req *testpb.SimpleRequest, opts ...grpc.CallOption) (*testpb.SimpleResponse, error) {
	return i.c.UnaryCall(ctx, req, opts...)
}

// serveExample starts impl on a loopback port behind the server
// interceptors and returns the target to dial and a stop function.
func serveExample(impl testpb.TestServiceServer) (target string, stop func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcretry.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(grpcretry.StreamServerInterceptor()),
	)
	testpb.RegisterTestServiceServer(srv, impl)
	go func() { _ = srv.Serve(lis) }()
	return "passthrough:///" + lis.Addr().String(), srv.Stop
}

// Example_quickStart is the README's first snippet: the interceptors on a
// connection, and two calls that change their own attempts with
// CallOptions. The server prints what each call announced.
func Example_quickStart() {
	target, stop := serveExample(&inboundServer{})
	defer stop()
	creds := insecure.NewCredentials() // in production: credentials.NewTLS(cfg)
	b := budget.NewRatio(budget.TenPercent())
	br := breaker.New(breaker.Config{})
	batchPolicy := &retry.Policy{Operation: "inventory-batch", MaxAttempts: 2}
	ctx, req := context.Background(), &testpb.SimpleRequest{}

	p := &retry.Policy{Operation: "inventory", MaxAttempts: 4, AttemptTimeout: time.Second, Budget: b, Breaker: br}
	idem := grpcretry.WithIdempotentServices("shop.Inventory") // or idempotency_level in the proto
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDisableRetry(), // the interceptors retry; grpc-go must not as well
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, idem)),
		grpc.WithChainStreamInterceptor(grpcretry.StreamClientInterceptor(p, idem)),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	inventory := inventoryClient{testpb.NewTestServiceClient(conn)}

	item, err := inventory.Get(ctx, req, grpcretry.WithMaxAttempts(1)) // sent once
	item, err = inventory.Get(ctx, req, grpcretry.WithPolicy(batchPolicy))
	fmt.Println(item != nil, err)
	// Output:
	// server: attempt 1, caller retries false, deadline true (facts: true)
	// server: attempt 1, caller retries true, deadline false (facts: true)
	// true <nil>
}

// Example_fromServiceConfig is the README's translation of a service
// config's retryPolicy and retryThrottling, run against a server whose
// first answer is Unavailable with a pushback of 0 ms.
func Example_fromServiceConfig() {
	target, stop := serveExample(&flakyServer{})
	defer stop()

	p := &retry.Policy{
		MaxAttempts: 4,
		Backoff:     backoff.Exponential{Base: 100 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: backoff.Proportional},
		Budget:      budget.NewRatio(budget.GRPCThrottling(10, 0.1)), // one per downstream, shared
	}
	opts := []grpcretry.Option{
		grpcretry.WithIdempotentServices("shop.Inventory"),
		grpcretry.WithIdempotentMethods("/shop.Orders/Get"),
		grpcretry.WithRetryable(func(c codes.Code) bool { return c == codes.Unavailable || c == codes.ResourceExhausted }),
	}
	p.Observer = codePrinter{}
	opts = append(opts, grpcretry.WithIdempotentServices("grpc.testing.TestService")) // the example's server
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, opts...)),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	_, err = testpb.NewTestServiceClient(conn).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	fmt.Println(err)
	// Output:
	// attempt 1: Unavailable
	// attempt 2: OK
	// <nil>
}
