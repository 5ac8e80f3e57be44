package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// tierServer is one tier of a call chain: it counts the attempts it
// receives and passes each call on to the next tier (the same method, with
// the handler's context, so the inbound facts and the deadline go along),
// or, at the bottom (next nil), fails it with bottom's error.
type tierServer struct {
	testpb.UnimplementedTestServiceServer
	next     testpb.TestServiceClient
	bottom   func() error
	attempts atomic.Int64
}

func (s *tierServer) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.attempts.Add(1)
	if s.next == nil {
		return nil, s.bottom()
	}
	return s.next.UnaryCall(ctx, req)
}

func (s *tierServer) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	s.attempts.Add(1)
	if s.next == nil {
		return s.bottom()
	}
	down, err := s.next.StreamingOutputCall(stream.Context(), req)
	if err != nil {
		return err
	}
	for {
		m, err := down.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(m); err != nil {
			return err
		}
	}
}

// tierClient says how one tier (or the outermost caller) calls the next:
// with the client interceptors under policy and opts, or plainly (policy
// nil: one attempt, nothing announced).
type tierClient struct {
	policy *retry.Policy
	opts   []Option
}

// dialTier connects to addr as c says.
func dialTier(t *testing.T, addr string, c tierClient) testpb.TestServiceClient {
	t.Helper()
	if c.policy == nil {
		return dial(t, addr)
	}
	return dialRetry(t, addr, c.policy, c.opts...)
}

// chain builds a three-tier chain on loopback — front, middle, bottom, each
// a real gRPC server with the server interceptors — where the front calls
// the middle as clients[1] says and the middle calls the bottom as
// clients[2] says; it returns the tiers and the outermost caller's client
// (clients[0]) to the front.
func chain(t *testing.T, bottom func() error, clients [3]tierClient) (tiers [3]*tierServer, outer testpb.TestServiceClient) {
	t.Helper()
	tiers[2] = &tierServer{bottom: bottom}
	addr := serveWith(t, serverInterceptors(), tiers[2])
	for i := 1; i >= 0; i-- {
		tiers[i] = &tierServer{next: dialTier(t, addr, clients[i+1])}
		addr = serveWith(t, serverInterceptors(), tiers[i])
	}
	return tiers, dialTier(t, addr, clients[0])
}

func counts(tiers [3]*tierServer) string {
	return fmt.Sprintf("front %d, middle %d, bottom %d", tiers[0].attempts.Load(), tiers[1].attempts.Load(), tiers[2].attempts.Load())
}

// TestLayerRuleTiers (issue 20): the layer rule through the interceptors,
// over three real gRPC tiers whose bottom always fails with Unavailable;
// every client allows 4 attempts. The counts are exact: the chain is
// sequential and the attempts' announcements are deterministic.
//
//   - naive (NestedIgnore everywhere): 4 × 4 × 4 = 64 at the bottom;
//   - the default rule (NestedOneLayer): a tier whose caller retries, or
//     has retried (attempt > 1: it is the retrying layer, on its last
//     attempt too), makes one attempt and announces that retries happen
//     above, so only the outermost caller retries: 4 at every tier;
//   - NestedBudget without a budget: the same as one layer; with one
//     retry per inner tier, the first call spends both: 4, 5, 6;
//   - a plain outermost caller (one attempt, nothing announced): the front
//     is the outermost retrying layer: 1, 4, 4;
//   - the front's client not announcing (WithAnnounce(false)): its first
//     attempts carry nothing, so the middle retries each of them: 4, 4, 16.
func TestLayerRuleTiers(t *testing.T) {
	policy := func(rule retry.NestedRule) *retry.Policy {
		return &retry.Policy{MaxAttempts: 4, Backoff: noWait, Nested: rule}
	}
	oneLayer := tierClient{policy: policy(retry.NestedOneLayer)}
	nestedBudget := func(retries int) tierClient {
		p := policy(retry.NestedBudget)
		p.NestedBudget = &limitBudget{left: retries}
		return tierClient{policy: p}
	}
	cases := []struct {
		name    string
		clients func() [3]tierClient // fresh budgets for each run
		want    string
	}{
		{"naive: every tier ignores the rule", func() [3]tierClient {
			return [3]tierClient{{policy: policy(retry.NestedIgnore)}, {policy: policy(retry.NestedIgnore)}, {policy: policy(retry.NestedIgnore)}}
		}, "front 4, middle 16, bottom 64"},
		{"one layer (the default)", func() [3]tierClient { return [3]tierClient{oneLayer, oneLayer, oneLayer} },
			"front 4, middle 4, bottom 4"},
		{"NestedBudget without a budget", func() [3]tierClient {
			return [3]tierClient{oneLayer, {policy: policy(retry.NestedBudget)}, {policy: policy(retry.NestedBudget)}}
		}, "front 4, middle 4, bottom 4"},
		// Each inner tier may retry once in all under the rule: the middle
		// spends its retry on the first call (2 at the bottom), the front
		// its own on the same call (1 more); later calls make one attempt
		// per tier.
		{"NestedBudget of one retry per tier", func() [3]tierClient { return [3]tierClient{oneLayer, nestedBudget(1), nestedBudget(1)} },
			"front 4, middle 5, bottom 6"},
		{"plain outermost caller", func() [3]tierClient { return [3]tierClient{{}, oneLayer, oneLayer} },
			"front 1, middle 4, bottom 4"},
		{"front's client does not announce", func() [3]tierClient {
			return [3]tierClient{oneLayer, {policy: policy(retry.NestedOneLayer), opts: []Option{WithAnnounce(false)}}, oneLayer}
		}, "front 4, middle 4, bottom 16"},
	}
	for _, method := range []string{"unary", "server stream"} {
		for _, c := range cases {
			t.Run(method+"/"+c.name, func(t *testing.T) {
				tiers, outer := chain(t, func() error { return status.Error(codes.Unavailable, "bottom down") }, c.clients())
				err := callMethod(context.Background(), outer, method)
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("err = %v", err)
				}
				if got := counts(tiers); got != c.want {
					t.Fatalf("attempts received: %s; want %s", got, c.want)
				}
			})
		}
	}
}

// TestOverloadMarkerCrossesTiers (issue 20): the bottom tier sheds with
// Overloaded; the marker (UNAVAILABLE with grpc-retry-pushback-ms: -1)
// travels up through the middle and the front — each tier's client reads
// it as retry.ErrOverloaded, each tier's server interceptor answers it as
// the marker again — and no tier retries, though every client ignores the
// layer rule and allows 4 attempts (64 at the bottom without the marker).
func TestOverloadMarkerCrossesTiers(t *testing.T) {
	naive := tierClient{policy: &retry.Policy{MaxAttempts: 4, Backoff: noWait, Nested: retry.NestedIgnore}}
	for _, method := range []string{"unary", "server stream"} {
		t.Run(method, func(t *testing.T) {
			rec := newRecorder()
			outer := tierClient{policy: &retry.Policy{MaxAttempts: 4, Backoff: noWait, Nested: retry.NestedIgnore, Observer: rec}}
			tiers, client := chain(t, func() error { return Overloaded("bottom: too many requests in flight") }, [3]tierClient{outer, naive, naive})
			err := callMethod(context.Background(), client, method)
			if got, want := counts(tiers), "front 1, middle 1, bottom 1"; got != want {
				t.Fatalf("attempts received: %s; want %s", got, want)
			}
			if !errors.Is(err, retry.ErrOverloaded) || status.Code(err) != codes.Unavailable {
				t.Fatalf("outermost caller: %v, want retry.ErrOverloaded as Unavailable", err)
			}
			if msg := status.Convert(err).Message(); msg != "bottom: too many requests in flight" {
				t.Fatalf("message %q: want the bottom's", msg)
			}
			if c := rec.lastCall(t); c.Reason != retry.ReasonOverloaded || c.Attempts != 1 {
				t.Fatalf("outermost CallEnd %+v, want one attempt, reason overloaded", c)
			}
		})
	}
}
