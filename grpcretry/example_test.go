package grpcretry_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"sync"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// Example retries a unary call and a server-streaming call against a
// server whose first attempt at each fails with Unavailable and a pushback
// of 0 ms ("retry now"), so the example waits for no backoff.
func Example() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &flakyServer{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	policy := &retry.Policy{
		Operation:      "testservice",
		MaxAttempts:    3,
		Backoff:        backoff.Exponential{Base: 100 * time.Millisecond, Max: 2 * time.Second, Jitter: backoff.Full},
		AttemptTimeout: 5 * time.Second,
		Observer:       codePrinter{}, // in production: the promretry or otelretry Observer
		// Budget and Breaker: shared by every client of this downstream.
	}
	// Only methods declared idempotent are retried once they may have
	// reached the server: by proto idempotency_level (read by default), by
	// name, or, as here, a whole service whose owners want it retried.
	opts := []grpcretry.Option{
		grpcretry.WithIdempotentServices("grpc.testing.TestService"),
		grpcretry.WithMaxReplayBytes(64 << 10),
	}
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(), // the interceptors retry; grpc-go must not as well
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(policy, opts...)),
		grpc.WithChainStreamInterceptor(grpcretry.StreamClientInterceptor(policy, opts...)),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hello")}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("unary: %s\n", resp.GetPayload().GetBody())

	stream, err := client.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{
		ResponseParameters: []*testpb.ResponseParameters{{Size: 1}, {Size: 1}, {Size: 1}},
	})
	if err != nil {
		log.Fatal(err)
	}
	n := 0
	for {
		_, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		n++
	}
	fmt.Printf("stream: %d messages\n", n)
	// Output:
	// attempt 1: Unavailable
	// attempt 2: OK
	// unary: hello
	// attempt 1: Unavailable
	// attempt 2: OK
	// stream: 3 messages
}

// codePrinter prints each attempt's gRPC status code, which status.Code
// finds in the attempt's error.
type codePrinter struct{ retry.NopObserver }

func (codePrinter) AttemptEnd(_ context.Context, e retry.AttemptEnd) {
	fmt.Printf("attempt %d: %v\n", e.Attempt, status.Code(e.Err))
}

// flakyServer fails the first attempt of each method with Unavailable and
// a pushback of 0 ms.
type flakyServer struct {
	testpb.UnimplementedTestServiceServer
	mu   sync.Mutex
	seen map[string]bool
}

func (s *flakyServer) firstTime(ctx context.Context, method string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[method] {
		return nil
	}
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[method] = true
	if err := grpc.SetTrailer(ctx, grpcretry.PushbackTrailer(0)); err != nil {
		return err
	}
	return status.Error(codes.Unavailable, "warming up")
}

func (s *flakyServer) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	if err := s.firstTime(ctx, "unary"); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload()}, nil
}

func (s *flakyServer) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	if err := s.firstTime(stream.Context(), "stream"); err != nil {
		return err
	}
	for range req.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{}); err != nil {
			return err
		}
	}
	return nil
}

func ExampleParsePushback() {
	d, ok := grpcretry.ParsePushback([]string{"250"})
	fmt.Println(d, ok)
	d, ok = grpcretry.ParsePushback([]string{"-1"})
	fmt.Println("do not retry:", d < 0, ok)
	_, ok = grpcretry.ParsePushback(nil)
	fmt.Println("present:", ok)
	// Output:
	// 250ms true
	// do not retry: true true
	// present: false
}

func ExampleIdempotentByProto() {
	// The interceptors read idempotency_level from WithProtoFiles's
	// registry already; IdempotentByProto asks a second registry (here the
	// global one, for the example's sake).
	idempotent := grpcretry.IdempotentByProto(nil)
	_ = grpcretry.UnaryClientInterceptor(&retry.Policy{MaxAttempts: 3},
		grpcretry.WithIdempotent(idempotent),
		grpcretry.WithNonIdempotent("/shop.Orders/Place"), // overrides every declaration
	)
	fmt.Println(idempotent("/grpc.testing.TestService/UnaryCall"))
	// Output:
	// false
}

// ExampleWithMaxAttempts changes one call's attempts with a CallOption
// among its grpc.CallOptions: under a Policy of 3 attempts, the call is
// sent once, and the server's Unavailable (with a pushback of 0, "retry
// now") is final.
func ExampleWithMaxAttempts() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer()
	testpb.RegisterTestServiceServer(srv, &flakyServer{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	policy := &retry.Policy{MaxAttempts: 3, Observer: codePrinter{}}
	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(policy,
			grpcretry.WithIdempotentServices("grpc.testing.TestService"))),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)

	_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpcretry.WithMaxAttempts(1))
	fmt.Println("sent once:", status.Code(err))
	// Output:
	// attempt 1: Unavailable
	// sent once: Unavailable
}

// inboundServer reports, for each call, what the caller said about it.
type inboundServer struct {
	testpb.UnimplementedTestServiceServer
	shed bool // answer with the overload marker
}

func (s *inboundServer) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	in, ok := retry.InboundOf(ctx)
	fmt.Printf("server: attempt %d, caller retries %v, deadline %v (facts: %v)\n", in.Attempt, in.Retries, !in.Deadline.IsZero(), ok)
	if s.shed {
		// in a handler: shed with the marker, which no caller retries
		return nil, grpcretry.Overloaded("too many requests in flight")
	}
	return &testpb.SimpleResponse{}, nil
}

// ExampleUnaryServerInterceptor serves a call whose client announces its
// attempts: the handler's context carries the caller's facts
// (retry.InboundOf), so a retry.Do or a grpcretry client inside the
// handler obeys its Policy's layer rule (retry.Policy.Nested) with no
// plumbing of its own.
func ExampleUnaryServerInterceptor() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ChainUnaryInterceptor(grpcretry.UnaryServerInterceptor()),
		grpc.ChainStreamInterceptor(grpcretry.StreamServerInterceptor()),
	)
	testpb.RegisterTestServiceServer(srv, &inboundServer{})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(&retry.Policy{MaxAttempts: 3})),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := testpb.NewTestServiceClient(conn).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		log.Fatal(err)
	}
	// Output:
	// server: attempt 1, caller retries true, deadline true (facts: true)
}

// ExampleOverloaded sheds a call with the overload marker: the server
// interceptor answers UNAVAILABLE with grpc-retry-pushback-ms: -1, and the
// client interceptor, though its Policy allows 3 attempts, makes one and
// reports retry.ErrOverloaded — which a tier in the middle of a chain
// passes up the same way.
func ExampleOverloaded() {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(grpcretry.UnaryServerInterceptor()))
	testpb.RegisterTestServiceServer(srv, &inboundServer{shed: true})
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()

	conn, err := grpc.NewClient("passthrough:///"+lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryClientInterceptor(&retry.Policy{MaxAttempts: 3},
			grpcretry.WithIdempotentServices("grpc.testing.TestService"))),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	_, err = testpb.NewTestServiceClient(conn).UnaryCall(context.Background(), &testpb.SimpleRequest{})
	fmt.Println("client:", status.Code(err), errors.Is(err, retry.ErrOverloaded))
	// Output:
	// server: attempt 1, caller retries true, deadline false (facts: true)
	// client: Unavailable true
}
