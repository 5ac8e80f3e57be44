package docs_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/stormguard/stormguard/backoff"
	"github.com/stormguard/stormguard/budget"
	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// flakyHealth answers UNAVAILABLE twice, then SERVING, and counts the
// attempts it saw.
type flakyHealth struct {
	healthpb.UnimplementedHealthServer
	n atomic.Int64
}

func (h *flakyHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.n.Add(1) <= 2 {
		return nil, status.Error(codes.Unavailable, "warming up")
	}
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// serveHealth starts a flakyHealth on loopback and returns its address.
func serveHealth() (string, *flakyHealth, func()) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	h := &flakyHealth{}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, h)
	go s.Serve(lis)
	return lis.Addr().String(), h, s.Stop
}

// The same client with grpc-go's built-in retry: a service config names
// the service, its attempts, backoff and retryable codes, and a
// client-wide token bucket.
func Example_grpcServiceConfig() {
	addr, seen, stop := serveHealth()
	defer stop()

	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(`{
		  "methodConfig": [{
		    "name": [{"service": "grpc.health.v1.Health"}],
		    "retryPolicy": {
		      "maxAttempts": 4, "initialBackoff": "0.01s", "maxBackoff": "1s",
		      "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]
		    }
		  }],
		  "retryThrottling": {"maxTokens": 10, "tokenRatio": 0.1}
		}`))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err, "after", seen.n.Load(), "attempts")
	// Output: SERVING <nil> after 3 attempts
}

// The same client with stormguard: a retry.Policy (the same one an HTTP
// client or retry.Do uses, or a config.Handle that follows a policy file)
// and an interceptor; the service is declared idempotent as the service
// config's name entry does.
func Example_grpcServiceConfigStormguard() {
	addr, seen, stop := serveHealth()
	defer stop()

	policy := &retry.Policy{
		MaxAttempts: 4, // maxAttempts
		Backoff:     backoff.Exponential{Base: 10 * time.Millisecond, Max: time.Second, Jitter: backoff.Full},
		Budget:      budget.NewRatio(budget.GRPCThrottling(10, 0.1)), // retryThrottling
	}
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpcretry.UnaryClientInterceptor(policy,
			grpcretry.WithIdempotentServices("grpc.health.v1.Health"), // the service config's "name"
		)))
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	fmt.Println(resp.GetStatus(), err, "after", seen.n.Load(), "attempts")
	// Output: SERVING <nil> after 3 attempts
}
