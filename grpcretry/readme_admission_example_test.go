package grpcretry_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/keyed"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// halfDown fails every UnaryCall (UNAVAILABLE) and answers every
// EmptyCall: one method of a service is down, the other is fine.
type halfDown struct {
	testpb.UnimplementedTestServiceServer
}

func (halfDown) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return nil, status.Error(codes.Unavailable, "down")
}

func (halfDown) EmptyCall(context.Context, *testpb.Empty) (*testpb.Empty, error) {
	return &testpb.Empty{}, nil
}

// Example_keyByMethod is the README's keyed snippet: a breaker per
// method, so the failing method opens its own breaker and the other's
// calls go on.
func Example_keyByMethod() {
	target, stop := serveExample(halfDown{})
	defer stop()

	breakers, err := keyed.NewBreakers(keyed.Config{MaxKeys: 100}, breaker.Config{ConsecutiveFailures: 2})
	if err != nil {
		log.Fatal(err)
	}
	p := &retry.Policy{MaxAttempts: 1, Breaker: breakers}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(p, grpcretry.KeyByMethod())),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	client, ctx := testpb.NewTestServiceClient(conn), context.Background()
	for range 3 {
		_, err = client.UnaryCall(ctx, &testpb.SimpleRequest{})
	}
	fmt.Println("UnaryCall:", errors.Is(err, breaker.ErrOpen))
	_, err = client.EmptyCall(ctx, &testpb.Empty{})
	fmt.Println("EmptyCall:", err)
	fmt.Println(breakers.Get("/grpc.testing.TestService/UnaryCall").State(), breakers.Get("/grpc.testing.TestService/EmptyCall").State())
	// Output:
	// UnaryCall: true
	// EmptyCall: <nil>
	// open closed
}

// holding answers a UnaryCall once release is closed, and says when it
// has started.
type holding struct {
	testpb.UnimplementedTestServiceServer
	started, release chan struct{}
}

func (h holding) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	h.started <- struct{}{}
	<-h.release
	return &testpb.SimpleResponse{}, nil
}

// Example_adaptiveServer is the README's admission snippet: a server
// whose calls an admission.Limiter admits. Its limit here is a fixed 1
// with no queue, so a second call while the first is served is shed:
// RESOURCE_EXHAUSTED with the overload marker, which no grpcretry client
// retries.
func Example_adaptiveServer() {
	lim, err := admission.New(admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1})
	if err != nil {
		log.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcretry.AdaptiveUnaryServerInterceptor(lim)),
		grpc.ChainStreamInterceptor(grpcretry.AdaptiveStreamServerInterceptor(lim)),
	)
	h := holding{started: make(chan struct{}), release: make(chan struct{})}
	testpb.RegisterTestServiceServer(srv, h)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	p := &retry.Policy{MaxAttempts: 3}
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(p)),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)

	first := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		first <- err
	}()
	<-h.started
	_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	fmt.Println(status.Code(err), retry.IsOverloaded(err), lim.Stats().Shed[admission.ReasonLimit])
	close(h.release)
	fmt.Println(<-first)
	// Output:
	// ResourceExhausted true 1
	// <nil>
}
