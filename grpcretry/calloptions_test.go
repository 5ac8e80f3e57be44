package grpcretry

import (
	"context"
	"fmt"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// TestCallOptions (issue 25 papercut 9): WithMaxAttempts and WithPolicy,
// passed among a call's grpc.CallOptions, change that call only, for a
// unary and a server-streaming call against a real server that always
// answers Unavailable; WithMaxAttempts applies on top of WithPolicy in
// either order, and the last of each kind wins.
func TestCallOptions(t *testing.T) {
	other := newRecorder()
	otherPolicy := &retry.Policy{Operation: "other", MaxAttempts: 2, Backoff: noWait, Observer: other}
	cases := []struct {
		name     string
		opts     []grpc.CallOption
		attempts int
		observer string // whose Observer saw the attempts: "own", "other" or "none"
	}{
		{"none: the interceptor's Policy", nil, 4, "own"},
		{"WithMaxAttempts(1)", []grpc.CallOption{WithMaxAttempts(1)}, 1, "own"},
		{"WithMaxAttempts(2)", []grpc.CallOption{WithMaxAttempts(2)}, 2, "own"},
		{"WithMaxAttempts(0): the default", []grpc.CallOption{WithMaxAttempts(0)}, retry.DefaultMaxAttempts, "own"},
		{"last WithMaxAttempts wins", []grpc.CallOption{WithMaxAttempts(1), WithMaxAttempts(3)}, 3, "own"},
		{"WithPolicy", []grpc.CallOption{WithPolicy(otherPolicy)}, 2, "other"},
		{"WithPolicy(nil): the zero Policy", []grpc.CallOption{WithPolicy(nil)}, retry.DefaultMaxAttempts, "none"},
		{"WithPolicy then WithMaxAttempts", []grpc.CallOption{WithPolicy(otherPolicy), WithMaxAttempts(1)}, 1, "other"},
		{"WithMaxAttempts then WithPolicy", []grpc.CallOption{WithMaxAttempts(1), WithPolicy(otherPolicy)}, 1, "other"},
		{"among grpc-go's options", []grpc.CallOption{grpc.WaitForReady(false), WithMaxAttempts(1), grpc.MaxCallRecvMsgSize(1 << 20)}, 1, "own"},
	}
	// Unavailable with a pushback of 0 ("retry now"), so that no Policy's
	// backoff is waited for, the zero Policy's included.
	always := make([]outcome, 8)
	for i := range always {
		always[i] = outcome{code: codes.Unavailable, pushback: []string{"0"}}
	}
	for _, method := range []string{"unary", "server stream"} {
		for _, c := range cases {
			t.Run(method+"/"+c.name, func(t *testing.T) {
				srv := newServer(always...)
				own := newRecorder()
				other.Reset()
				client := dialRetry(t, serve(t, srv), &retry.Policy{Operation: "own", MaxAttempts: 4, Backoff: noWait, Observer: own})
				var err error
				if method == "unary" {
					_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, c.opts...)
				} else {
					var stream testpb.TestService_StreamingOutputCallClient
					if stream, err = client.StreamingOutputCall(context.Background(), outputRequest(1), c.opts...); err == nil {
						_, err = readAll(stream)
					}
				}
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("err = %v", err)
				}
				attempts, _, _, _ := srv.stats()
				ownEnds, otherEnds := len(own.Ends()), len(other.Ends())
				wantOwn, wantOther := 0, 0
				switch c.observer {
				case "own":
					wantOwn = c.attempts
				case "other":
					wantOther = c.attempts
				}
				want := fmt.Sprintf("%d attempts, own observer %d, other %d", c.attempts, wantOwn, wantOther)
				if got := fmt.Sprintf("%d attempts, own observer %d, other %d", attempts, ownEnds, otherEnds); got != want {
					t.Fatalf("got %s, want %s", got, want)
				}
			})
		}
	}
}

// TestCallOptionsFiltered: the interceptors take their CallOptions out
// before the call goes on, so an interceptor further in (or grpc-go) never
// sees them, while the caller's other options pass, on every attempt.
func TestCallOptionsFiltered(t *testing.T) {
	type seen struct{ ours, others int }
	var got []seen
	count := func(opts []grpc.CallOption) {
		var s seen
		for _, o := range opts {
			switch o.(type) {
			case CallOption:
				s.ours++
			case grpc.MaxRecvMsgSizeCallOption:
				s.others++
			}
		}
		got = append(got, s)
	}
	innerUnary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		count(opts)
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	innerStream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		count(opts)
		return streamer(ctx, desc, cc, method, opts...)
	}
	srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
	p := &retry.Policy{MaxAttempts: 4, Backoff: noWait}
	client := dial(t, serve(t, srv),
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p, WithIdempotentServices(testService)), innerUnary),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(p, WithIdempotentServices(testService)), innerStream))
	opts := []grpc.CallOption{WithMaxAttempts(2), grpc.MaxCallRecvMsgSize(1 << 20), WithPolicy(p)}
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}, opts...); status.Code(err) != codes.Unavailable {
		t.Fatalf("unary: %v", err)
	}
	stream, err := client.StreamingOutputCall(context.Background(), outputRequest(1), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := readAll(stream); err != nil {
		t.Fatalf("stream: %v", err)
	}
	// unary: 2 attempts (WithMaxAttempts(2)), both Unavailable; stream:
	// Unavailable, then OK.
	want := []seen{{0, 1}, {0, 1}, {0, 1}, {0, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("inner interceptors saw %v, want %v", got, want)
	}
}

// TestOptionsCombine (issue 25 papercut 9): Options given in several
// values combine, where the old Options struct panicked when given twice;
// scalar options given twice take the last value.
func TestOptionsCombine(t *testing.T) {
	srv := newServer(outcome{code: codes.Internal}, outcome{code: codes.Internal})
	client := dialRetryAsIs(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait},
		WithIdempotentServices(testService),
		WithRetryInternal(false), WithRetryInternal(true),
		WithMaxReplayBytes(10), WithMaxReplayBytes(0))
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); err != nil {
		t.Fatalf("unary: %v", err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 3 {
		t.Fatalf("%d attempts, want 3 (Internal retried twice)", attempts)
	}
}
