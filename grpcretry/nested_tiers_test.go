package grpcretry

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// dialingTier is the bottom tier of a chain whose own downstream is not
// a gRPC server: each call dials a closed loopback port through retry.Do
// under the layer rule (4 attempts allowed), and returns retry.Do's error
// as it is, as a handler passing a client's error on does. A dropped
// connection at the bottom: connection refused, which DefaultClassifier
// retries.
type dialingTier struct {
	testpb.UnimplementedTestServiceServer
	addr   string
	policy *retry.Policy
	dials  atomic.Int64
	calls  atomic.Int64
}

func (s *dialingTier) do(ctx context.Context) error {
	s.calls.Add(1)
	_, err := retry.Do(ctx, s.policy, func(ctx context.Context) (struct{}, error) {
		s.dials.Add(1)
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", s.addr)
		if err == nil {
			_ = c.Close()
			return struct{}{}, errors.New("dialingTier: the closed port accepted")
		}
		return struct{}{}, err
	})
	return err
}

func (s *dialingTier) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return nil, s.do(ctx)
}

func (s *dialingTier) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	return s.do(stream.Context())
}

// TestNestedRefusalAnsweredRetryable is the regression test of issue 31
// item 25 (gRPC side): a transient error that an inner tier did not retry
// because of the layer rule (retry.ErrNestedRetry) is answered
// UNAVAILABLE without the overload marker, so the layer above retries it
// and exactly one layer of the chain makes the attempts: over three gRPC
// tiers on loopback under the default rule, with 4 attempts allowed
// everywhere, the outermost caller makes 4, every tier sees 4, and the
// dead downstream is dialed 4 times (before: once in the whole chain, the
// error crossing gRPC as UNKNOWN, which no caller retries).
func TestNestedRefusalAnsweredRetryable(t *testing.T) {
	policy := func() *retry.Policy { return &retry.Policy{MaxAttempts: 4, Backoff: noWait} }
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			bottom := &dialingTier{addr: closedAddr(t), policy: policy()}
			addr := serveWith(t, serverInterceptors(), bottom)
			middle := &tierServer{next: dialTier(t, addr, tierClient{policy: policy()})}
			addr = serveWith(t, serverInterceptors(), middle)
			front := &tierServer{next: dialTier(t, addr, tierClient{policy: policy()})}
			addr = serveWith(t, serverInterceptors(), front)
			rec := newRecorder()
			p := policy()
			p.Observer = rec
			outer := dialTier(t, addr, tierClient{policy: p})

			err := callMethod(context.Background(), outer, method)
			if status.Code(err) != codes.Unavailable || errors.Is(err, retry.ErrOverloaded) {
				t.Fatalf("outermost caller: %v (%v), want Unavailable without the overload marker", err, status.Code(err))
			}
			got := [4]int64{front.attempts.Load(), middle.attempts.Load(), bottom.calls.Load(), bottom.dials.Load()}
			if got != [4]int64{4, 4, 4, 4} {
				t.Fatalf("front, middle, bottom, dials = %v; want 4 each (one layer retries)", got)
			}
			if c := rec.lastCall(t); c.Attempts != 4 || c.Reason != retry.ReasonAttempts {
				t.Fatalf("outermost CallEnd %+v, want 4 attempts, reason attempts", c)
			}
		})
	}
}
