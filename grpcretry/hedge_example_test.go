package grpcretry_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"sync"
	"time"

	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// straggler's first call hangs until its context ends (a straggler);
// later calls answer at once. It records each call's
// grpc-previous-rpc-attempts.
type straggler struct {
	testpb.UnimplementedTestServiceServer
	cancelled chan int

	mu   sync.Mutex
	prev []string
}

func (s *straggler) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.mu.Lock()
	s.prev = append(s.prev, strings.Join(md.Get(grpcretry.PreviousAttemptsKey), ","))
	n := len(s.prev)
	s.mu.Unlock()
	if n == 1 {
		<-ctx.Done()
		s.cancelled <- n
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload()}, nil
}

// ExampleUnaryHedgingInterceptor hedges a unary call whose first copy is
// a straggler: after the hedge delay a second copy goes out, answers, and
// wins; the server sees the first copy's context end. The mapping from a
// gRFC A6 hedgingPolicy is in the comments.
func ExampleUnaryHedgingInterceptor() {
	srv := &straggler{cancelled: make(chan int, 1)}
	target, stop := serveExample(srv)
	defer stop()
	creds := insecure.NewCredentials() // in production: credentials.NewTLS(cfg)
	ctx := context.Background()

	policy := &retry.Policy{
		Operation:   "inventory",
		MaxAttempts: 3,                                    // A6 maxAttempts: first attempt, hedges and retries together
		Budget:      budget.NewRatio(budget.TenPercent()), // hedges spend from it as retries do
	}
	h := &hedge.Hedger{
		Policy:    policy,
		Delay:     20 * time.Millisecond, // A6 hedgingDelay; or Adaptive: hedge.NewAdaptive(hedge.AdaptiveConfig{})
		MaxHedges: 1,
	}
	conn, err := grpc.NewClient(target,
		grpc.WithTransportCredentials(creds),
		grpc.WithDisableRetry(), // the interceptor hedges and retries; grpc-go must not as well
		grpc.WithChainUnaryInterceptor(grpcretry.UnaryHedgingInterceptor(h,
			grpcretry.WithIdempotentServices("grpc.testing.TestService"), // only idempotent methods are hedged
			grpcretry.WithNonFatalCodes(codes.Unavailable),               // A6 nonFatalStatusCodes
		)),
		grpc.WithChainStreamInterceptor(grpcretry.StreamClientInterceptor(policy)), // streams are retried, not hedged
	)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	client := testpb.NewTestServiceClient(conn)

	resp, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hello")}})
	fmt.Println(string(resp.GetPayload().GetBody()), err)
	fmt.Println("straggler cancelled on the server:", <-srv.cancelled == 1)
	srv.mu.Lock()
	fmt.Printf("grpc-previous-rpc-attempts per copy: %q\n", srv.prev)
	srv.mu.Unlock()
	// Output:
	// hello <nil>
	// straggler cancelled on the server: true
	// grpc-previous-rpc-attempts per copy: ["" "1"]
}
