package grpcretry

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/hedge"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// metaServer sends each attempt's number in its response headers (unless
// it is to fail) and in its trailer ("attempt": n), then waits for gate[n] (closed by the test)
// or its context, and answers: OK, or the code fail[n] names.
type metaServer struct {
	testpb.UnimplementedTestServiceServer
	mu      sync.Mutex
	n       int
	gate    map[int]chan struct{}
	fail    map[int]codes.Code
	started chan int
}

func newMetaServer() *metaServer {
	return &metaServer{gate: map[int]chan struct{}{}, fail: map[int]codes.Code{}, started: make(chan int, 64)}
}

// reset starts a new call: attempts count from 1 again, with fresh gates.
func (s *metaServer) reset(fail map[int]codes.Code) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n = 0
	s.gate = map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{}), 3: make(chan struct{})}
	if fail == nil {
		fail = map[int]codes.Code{}
	}
	s.fail = fail
}

func (s *metaServer) open(ns ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range ns {
		close(s.gate[n])
	}
}

func (s *metaServer) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.mu.Lock()
	s.n++
	n := s.n
	gate, code := s.gate[n], s.fail[n]
	s.mu.Unlock()
	v := strconv.Itoa(n)
	if code == codes.OK { // a failing copy that sent headers would be committed
		if err := grpc.SendHeader(ctx, metadata.Pairs("attempt", v)); err != nil {
			return nil, err
		}
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs("attempt", v))
	s.started <- n
	select {
	case <-gate:
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	if code != codes.OK {
		return nil, status.Errorf(code, "attempt %d", n)
	}
	return &testpb.SimpleResponse{Username: v}, nil
}

func (s *metaServer) await(t *testing.T, want int) {
	t.Helper()
	select {
	case n := <-s.started:
		if n != want {
			t.Fatalf("attempt %d started, want %d", n, want)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("attempt %d did not reach the server", want)
	}
}

// TestHedgeCallerMetadataIsTheWinners is the regression test of issue 32
// item 2: the caller's grpc.Header, grpc.Trailer and grpc.Peer receive the
// metadata of the copy whose answer the call returns, not of a cancelled
// loser that finished later; and when both copies answer together there
// is no data race on the caller's variables (run with -race).
func TestHedgeCallerMetadataIsTheWinners(t *testing.T) {
	f := clocktest.NewFake()
	srv := newMetaServer()
	addr := serveWith(t, nil, srv)
	p := &retry.Policy{MaxAttempts: 3, Clock: f}
	h := &hedge.Hedger{Policy: p, Delay: hedgeDelay}
	client := dial(t, addr, grpc.WithChainUnaryInterceptor(
		UnaryHedgingInterceptor(h, WithIdempotentServices(testService), WithNonFatalCodes(codes.Unavailable))))

	type got struct {
		reply           string
		header, trailer string
		peer            bool
		code            codes.Code
	}
	call := func(decide func()) got {
		t.Helper()
		var header, trailer metadata.MD
		var pr peer.Peer
		out := make(chan got, 1)
		go func() {
			resp, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{},
				grpc.Header(&header), grpc.Trailer(&trailer), grpc.Peer(&pr))
			out <- got{reply: resp.GetUsername(), code: status.Code(err)}
		}()
		srv.await(t, 1)
		f.BlockUntil(1)
		f.Advance(hedgeDelay)
		srv.await(t, 2)
		decide()
		select {
		case g := <-out:
			g.header = join(header.Get("attempt"))
			g.trailer = join(trailer.Get("attempt"))
			g.peer = pr.Addr != nil
			return g
		case <-time.After(20 * time.Second):
			t.Fatal("the call did not return")
			return got{}
		}
	}
	for _, c := range []struct {
		name   string
		fail   map[int]codes.Code
		decide func()
		want   got
	}{
		{"hedge wins", nil, func() { srv.open(2) }, got{reply: "2", header: "2", trailer: "2", peer: true}},
		{"first wins", nil, func() { srv.open(1) }, got{reply: "1", header: "1", trailer: "1", peer: true}},
		{"first wins after the hedge failed", map[int]codes.Code{2: codes.Unavailable}, func() {
			srv.open(2)
			srv.open(1)
		}, got{reply: "1", header: "1", trailer: "1", peer: true}},
		{"fatal code from the hedge", map[int]codes.Code{2: codes.InvalidArgument}, func() { srv.open(2) },
			got{trailer: "2", peer: true, code: codes.InvalidArgument}},
	} {
		srv.reset(c.fail)
		if g := call(c.decide); g != c.want {
			t.Errorf("%s: reply, header, trailer, peer, code = %+v, want %+v", c.name, g, c.want)
		}
	}
	// Both copies answer together: either may win, and the caller's
	// metadata is that copy's, written by one goroutine only.
	for range 20 {
		srv.reset(nil)
		g := call(func() { srv.open(1, 2) })
		if g.code != codes.OK || g.header != g.reply || g.trailer != g.reply || !g.peer {
			t.Fatalf("both answered: %+v, want the winner's header and trailer", g)
		}
	}
}

func join(v []string) string {
	s := ""
	for i, x := range v {
		if i > 0 {
			s += ","
		}
		s += x
	}
	return s
}
