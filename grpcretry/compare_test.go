package grpcretry

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// grpcRetryConfig is grpc-go's own retry for the test service: 4 attempts,
// backoff of about a millisecond, Unavailable and ResourceExhausted
// retryable.
const grpcRetryConfig = `{"methodConfig": [{
	"name": [{"service": "grpc.testing.TestService"}],
	"retryPolicy": {
		"maxAttempts": 4,
		"initialBackoff": "0.001s",
		"maxBackoff": "0.001s",
		"backoffMultiplier": 1,
		"retryableStatusCodes": ["UNAVAILABLE", "RESOURCE_EXHAUSTED"]
	}
}]}`

// interceptorLikeConfig is the same policy as the interceptor's: the
// migration of grpcRetryConfig the README describes.
func interceptorLikeConfig() (*retry.Policy, []Option) {
	return &retry.Policy{MaxAttempts: 4, Backoff: noWait}, []Option{
		WithIdempotentServices(testService),
		WithRetryable(func(c codes.Code) bool { return c == codes.Unavailable || c == codes.ResourceExhausted }),
	}
}

// TestAgainstGRPCRetry puts the interceptor and grpc-go's service-config
// retry side by side on one real server, for the same scripted failures of
// a unary and a server-streaming call, and compares the attempts the
// server saw and the code the caller got.
func TestAgainstGRPCRetry(t *testing.T) {
	unavailable := outcome{code: codes.Unavailable}
	times := func(n int, o outcome) []outcome {
		s := make([]outcome, n)
		for i := range s {
			s[i] = o
		}
		return s
	}
	cases := []struct {
		name     string
		script   []outcome
		deadline time.Duration // the caller's, 0: none
		attempts int           // what both must make
		code     codes.Code    // what both must return
	}{
		{"Unavailable before headers, then OK", times(2, unavailable), 0, 3, codes.OK},
		{"Unavailable before headers, every attempt", times(6, unavailable), 0, 4, codes.Unavailable},
		{"Unavailable after SendHeader", []outcome{{code: codes.Unavailable, header: true}}, 0, 1, codes.Unavailable},
		{"Unavailable after SetHeader", []outcome{{code: codes.Unavailable, set: true}}, 0, 1, codes.Unavailable},
		{"Unavailable, then Unavailable after headers", []outcome{unavailable, {code: codes.Unavailable, header: true}}, 0, 2, codes.Unavailable},
		{"ResourceExhausted, pushback 0", []outcome{{code: codes.ResourceExhausted, pushback: []string{"0"}}}, 0, 2, codes.OK},
		{"ResourceExhausted, pushback 1ms twice", times(2, outcome{code: codes.ResourceExhausted, pushback: []string{"1"}}), 0, 3, codes.OK},
		{"ResourceExhausted, pushback -1", []outcome{{code: codes.ResourceExhausted, pushback: []string{"-1"}}}, 0, 1, codes.ResourceExhausted},
		{"Unavailable, malformed pushback", []outcome{{code: codes.Unavailable, pushback: []string{"soon"}}}, 0, 1, codes.Unavailable},
		{"Unavailable, repeated pushback", []outcome{{code: codes.Unavailable, pushback: []string{"1", "2"}}}, 0, 1, codes.Unavailable},
		{"ResourceExhausted without pushback", times(6, outcome{code: codes.ResourceExhausted}), 0, 4, codes.ResourceExhausted},
		{"InvalidArgument", []outcome{{code: codes.InvalidArgument}}, 0, 1, codes.InvalidArgument},
		{"Internal", []outcome{{code: codes.Internal}}, 0, 1, codes.Internal},
		{"Aborted (not listed)", []outcome{{code: codes.Aborted}}, 0, 1, codes.Aborted},
		{"DeadlineExceeded from the server", []outcome{{code: codes.DeadlineExceeded}}, 0, 1, codes.DeadlineExceeded},
		{"caller's deadline", []outcome{{block: true}}, 50 * time.Millisecond, 1, codes.DeadlineExceeded},
	}
	for _, method := range []string{"unary", "server stream"} {
		for _, c := range cases {
			t.Run(method+"/"+c.name, func(t *testing.T) {
				srv := newServer()
				addr := serve(t, srv)
				p, o := interceptorLikeConfig()
				ours := dialRetryAsIs(t, addr, p, o...)
				theirs := dialGRPCRetry(t, addr)
				got := map[string]string{}
				for name, client := range map[string]testpb.TestServiceClient{"interceptor": ours, "grpc-go": theirs} {
					srv.reset(c.script...)
					code := callOnce(t, client, method, c.deadline)
					attempts, _, _, _ := srv.stats()
					got[name] = fmt.Sprintf("%d attempts, %v", attempts, code)
				}
				want := fmt.Sprintf("%d attempts, %v", c.attempts, c.code)
				if got["interceptor"] != want || got["grpc-go"] != want {
					t.Fatalf("interceptor: %s; grpc-go: %s; want %s", got["interceptor"], got["grpc-go"], want)
				}
			})
		}
	}
}

// dialGRPCRetry connects with grpc-go's own retry (grpcRetryConfig) and no
// interceptor.
func dialGRPCRetry(t testing.TB, addr string) testpb.TestServiceClient {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(grpcRetryConfig))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testpb.NewTestServiceClient(conn)
}

// callOnce makes one call of the given kind and returns its status code.
func callOnce(t *testing.T, client testpb.TestServiceClient, method string, deadline time.Duration) codes.Code {
	t.Helper()
	ctx := context.Background()
	if deadline > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, deadline)
		defer cancel()
	}
	if method == "unary" {
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		return status.Code(err)
	}
	stream, err := client.StreamingOutputCall(ctx, outputRequest(2))
	if err == nil {
		var got []string
		got, err = readAll(stream)
		if err == nil && len(got) != 2 {
			t.Fatalf("received %q", got)
		}
	}
	return status.Code(err)
}

// TestAnnounceAgainstGRPCRetry (issue 20) compares, on one real server with
// the server interceptors, what the interceptor and grpc-go's own retry
// (the service config of TestAgainstGRPCRetry) tell the server where the
// two overlap: grpc-previous-rpc-attempts is absent on the first attempt
// and counts the earlier attempts on every retry, identically; the server
// interceptor reads the same attempt numbers from both (grpc-go's first
// attempt carries nothing, and its retries are taken to come from a client
// that retries); only the interceptor says, on its last attempt, that it
// will not retry.
func TestAnnounceAgainstGRPCRetry(t *testing.T) {
	unavailable := outcome{code: codes.Unavailable}
	inbound := func(seen []inboundSeen) []string {
		out := make([]string, len(seen))
		for i, s := range seen {
			out[i] = "none"
			if s.ok {
				out[i] = fmt.Sprint(s.in.Attempt, " ", s.in.Retries)
			}
		}
		return out
	}
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			srv := newServer()
			addr := serveWith(t, serverInterceptors(), srv)
			p, o := interceptorLikeConfig()
			got := map[string]string{}
			for name, client := range map[string]testpb.TestServiceClient{"interceptor": dialRetryAsIs(t, addr, p, o...), "grpc-go": dialGRPCRetry(t, addr)} {
				srv.reset(unavailable, unavailable, unavailable) // then OK: 4 attempts
				if code := callOnce(t, client, method, 0); code != codes.OK {
					t.Fatalf("%s: %v", name, code)
				}
				_, prev, _, _ := srv.stats()
				got[name+" previous"] = fmt.Sprintf("%q", prev)
				got[name+" inbound"] = fmt.Sprint(inbound(srv.inbounds()))
			}
			want := map[string]string{
				"interceptor previous": `["" "1" "2" "3"]`,
				"grpc-go previous":     `["" "1" "2" "3"]`,
				"interceptor inbound":  "[1 true 2 true 3 true 4 false]",
				"grpc-go inbound":      "[none 2 true 3 true 4 true]",
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}
}

// TestOverloadedAgainstGRPCRetry: the server interceptor's answer to
// Overloaded (UNAVAILABLE with grpc-retry-pushback-ms: -1) stops grpc-go's
// own retry as it stops the interceptor's: one attempt, UNAVAILABLE, though
// both would retry a plain UNAVAILABLE.
func TestOverloadedAgainstGRPCRetry(t *testing.T) {
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			srv := &overloadServer{err: func() error { return Overloaded("shedding") }, attempts: make(chan struct{}, 8)}
			addr := serveWith(t, serverInterceptors(), srv)
			p, o := interceptorLikeConfig()
			for name, client := range map[string]testpb.TestServiceClient{"interceptor": dialRetryAsIs(t, addr, p, o...), "grpc-go": dialGRPCRetry(t, addr)} {
				err := callMethod(context.Background(), client, method)
				if n := len(srv.attempts); status.Code(err) != codes.Unavailable || n != 1 {
					t.Fatalf("%s: %d attempts, %v; want 1 attempt, Unavailable", name, n, err)
				}
				for len(srv.attempts) > 0 {
					<-srv.attempts
				}
			}
		})
	}
}
