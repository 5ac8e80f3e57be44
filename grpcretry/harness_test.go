package grpcretry

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Full method names of the test service.
const (
	unaryMethod  = "/grpc.testing.TestService/UnaryCall"
	outputMethod = "/grpc.testing.TestService/StreamingOutputCall"
	inputMethod  = "/grpc.testing.TestService/StreamingInputCall"
	duplexMethod = "/grpc.testing.TestService/FullDuplexCall"
)

// outcome scripts one attempt on the test server.
type outcome struct {
	code     codes.Code    // codes.OK: succeed
	pushback []string      // values of grpc-retry-pushback-ms in the trailer
	before   int           // streaming output: messages sent before failing
	recv     int           // streaming input/duplex: messages read before failing (0: until EOF)
	block    bool          // wait for the call's context to end
	header   bool          // send headers ("attempt": n) before failing
	set      bool          // set headers with grpc.SetHeader (sent with the status, not Trailers-Only)
	wait     chan struct{} // wait until closed (or, failing, the context ends), then go on as scripted
}

// server is grpc-go's interop TestService, scripted: each attempt, of any
// method, takes the next outcome (success once the script is used up) and
// the server records what each attempt saw.
type server struct {
	testpb.UnimplementedTestServiceServer

	mu       sync.Mutex
	script   []outcome
	attempts int
	prev     []string        // grpc-previous-rpc-attempts of each attempt ("" if absent)
	left     []time.Duration // time to the deadline at the start of each attempt (-1: none)
	received [][]string      // payload bodies the client sent, per attempt
	incoming []metadata.MD   // each attempt's request metadata
	inbound  []inboundSeen   // what retry.InboundOf found in each attempt's context
	started  chan int        // attempt numbers, as handlers start (buffered)
	canceled chan int        // attempt numbers whose blocking handler saw cancellation
}

func newServer(script ...outcome) *server {
	return &server{script: script, started: make(chan int, 64), canceled: make(chan int, 64)}
}

// begin records an attempt and returns its number and outcome.
func (s *server) begin(ctx context.Context) (int, outcome) {
	s.mu.Lock()
	s.attempts++
	n := s.attempts
	var o outcome
	if len(s.script) > 0 {
		o, s.script = s.script[0], s.script[1:]
	}
	md, _ := metadata.FromIncomingContext(ctx)
	prev := ""
	if v := md.Get(PreviousAttemptsKey); len(v) > 0 {
		prev = v[0]
	}
	s.prev = append(s.prev, prev)
	left := time.Duration(-1)
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	s.left = append(s.left, left)
	s.received = append(s.received, nil)
	s.incoming = append(s.incoming, md.Copy())
	in, ok := retry.InboundOf(ctx)
	s.inbound = append(s.inbound, inboundSeen{in, ok})
	s.mu.Unlock()
	s.started <- n
	return n, o
}

// fail ends an attempt as scripted; nil for success.
func (s *server) fail(ctx context.Context, n int, o outcome) error {
	if o.set {
		if err := grpc.SetHeader(ctx, metadata.Pairs("attempt", strconv.Itoa(n))); err != nil {
			return err
		}
	}
	if o.header {
		if err := grpc.SendHeader(ctx, metadata.Pairs("attempt", strconv.Itoa(n))); err != nil {
			return err
		}
	}
	if o.wait != nil {
		select {
		case <-o.wait:
		case <-ctx.Done():
			s.canceled <- n
			return status.FromContextError(ctx.Err()).Err()
		}
	}
	if o.block {
		<-ctx.Done()
		s.canceled <- n
		return status.FromContextError(ctx.Err()).Err()
	}
	if len(o.pushback) > 0 {
		md := metadata.MD{}
		md[PushbackKey] = o.pushback
		if err := grpc.SetTrailer(ctx, md); err != nil {
			return err
		}
	}
	if o.code == codes.OK {
		return nil
	}
	return status.Errorf(o.code, "scripted %v on attempt %d", o.code, n)
}

// recvScripted reads and records attempt n's requests until the client
// closes or, when o.recv > 0, o.recv have been read.
func recvScripted[R interface{ GetPayload() *testpb.Payload }](s *server, n int, o outcome, recv func() (R, error)) ([]R, error) {
	var got []R
	for o.recv == 0 || len(got) < o.recv {
		req, err := recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		s.record(n, req.GetPayload().GetBody())
		got = append(got, req)
	}
	return got, nil
}

func (s *server) record(n int, body []byte) {
	s.mu.Lock()
	s.received[n-1] = append(s.received[n-1], string(body))
	s.mu.Unlock()
}

// reset starts the server over with a new script.
func (s *server) reset(script ...outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script, s.attempts = script, 0
	s.prev, s.left, s.received = nil, nil, nil
	s.incoming, s.inbound = nil, nil
	for len(s.started) > 0 {
		<-s.started
	}
}

func (s *server) stats() (attempts int, prev []string, left []time.Duration, received [][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.attempts, append([]string(nil), s.prev...), append([]time.Duration(nil), s.left...), append([][]string(nil), s.received...)
}

// inboundSeen is what retry.InboundOf returned in a handler.
type inboundSeen struct {
	in retry.Inbound
	ok bool
}

// announced returns, per attempt, the announcement the server received:
// "attempt/will-retry/previous", with "-" for a key that was absent.
func (s *server) announced() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.incoming))
	for i, md := range s.incoming {
		get := func(k string) string {
			if v := md.Get(k); len(v) > 0 {
				return strings.Join(v, ",")
			}
			return "-"
		}
		out[i] = get(AttemptKey) + "/" + get(WillRetryKey) + "/" + get(PreviousAttemptsKey)
	}
	return out
}

func (s *server) inbounds() []inboundSeen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]inboundSeen(nil), s.inbound...)
}

func (s *server) UnaryCall(ctx context.Context, req *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	n, o := s.begin(ctx)
	s.record(n, req.GetPayload().GetBody())
	if err := s.fail(ctx, n, o); err != nil {
		return nil, err
	}
	return &testpb.SimpleResponse{Payload: req.GetPayload(), Username: "attempt"}, nil
}

func (s *server) StreamingOutputCall(req *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	n, o := s.begin(stream.Context())
	s.record(n, req.GetPayload().GetBody())
	count := len(req.GetResponseParameters())
	if o.code != codes.OK || o.block {
		count = o.before
	}
	for i := 0; i < count; i++ {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: []byte{byte(i)}}}); err != nil {
			return err
		}
	}
	return s.fail(stream.Context(), n, o)
}

func (s *server) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	n, o := s.begin(stream.Context())
	got, err := recvScripted(s, n, o, stream.Recv)
	if err != nil {
		return err
	}
	total := 0
	for _, req := range got {
		total += len(req.GetPayload().GetBody())
	}
	if err := s.fail(stream.Context(), n, o); err != nil {
		return err
	}
	return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
}

// FullDuplexCall echoes each request's payload once o.recv requests have
// been read (all of them when the client closes first); a failing outcome
// fails at that point instead, having sent nothing.
func (s *server) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	n, o := s.begin(stream.Context())
	got, err := recvScripted(s, n, o, stream.Recv)
	if err != nil {
		return err
	}
	if o.code != codes.OK || o.block {
		return s.fail(stream.Context(), n, o)
	}
	for _, req := range got {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		s.record(n, req.GetPayload().GetBody())
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: req.GetPayload()}); err != nil {
			return err
		}
	}
}

// serve starts s on a loopback port and returns its address; the server
// stops when the test ends.
func serve(t testing.TB, s *server) string {
	t.Helper()
	return serveWith(t, nil, s)
}

// serveWith starts impl on a loopback port, with the server options opts
// (interceptors, say), and returns its address; the server stops when the
// test ends.
func serveWith(t testing.TB, opts []grpc.ServerOption, impl testpb.TestServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(opts...)
	testpb.RegisterTestServiceServer(gs, impl)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial connects to addr with grpc-go's own retries off and the given
// interceptors; the connection closes when the test ends.
func dial(t testing.TB, addr string, opts ...grpc.DialOption) testpb.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDisableRetry(),
	}, opts...)
	conn, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return testpb.NewTestServiceClient(conn)
}

// testService is the interop service's name, as WithIdempotentServices takes it.
const testService = "grpc.testing.TestService"

// dialRetry connects with both interceptors under p and o. Unless o
// declares idempotency of its own (WithIdempotent, WithIdempotentMethods,
// WithIdempotentServices), the whole test service is declared idempotent, as
// most tests are about what is retried when retrying is safe;
// dialRetryAsIs does not add that.
func dialRetry(t testing.TB, addr string, p *retry.Policy, o ...Option) testpb.TestServiceClient {
	t.Helper()
	var set options
	for _, opt := range o {
		opt.apply(&set)
	}
	if set.idempotent == nil && set.idempotentMethods == nil && set.idempotentServices == nil {
		o = append(o, WithIdempotentServices(testService))
	}
	return dialRetryAsIs(t, addr, p, o...)
}

// dialRetryAsIs connects with both interceptors under p and o, unchanged.
func dialRetryAsIs(t testing.TB, addr string, p *retry.Policy, o ...Option) testpb.TestServiceClient {
	t.Helper()
	return dial(t, addr,
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p, o...)),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(p, o...)))
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t testing.TB) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func payload(s string) *testpb.Payload { return &testpb.Payload{Body: []byte(s)} }
