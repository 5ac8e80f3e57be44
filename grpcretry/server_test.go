package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// serverInterceptors returns the server options that install both server
// interceptors with opts.
func serverInterceptors(opts ...ServerOption) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(opts...)),
	}
}

// TestServerInboundFacts (issue 20, server side): the server interceptors
// read the attempt (stormguard-attempt, else grpc-previous-rpc-attempts
// plus one), whether the caller retries (stormguard-will-retry; a caller
// that sends grpc-previous-rpc-attempts alone is taken to retry) and the
// native deadline, cap them, and put them on the handler's context as a
// retry.Inbound; a call that carries none gets none. The calls are made by
// a plain client (no client interceptor) that sends exactly the metadata
// of each case.
func TestServerInboundFacts(t *testing.T) {
	pairs := func(kv ...string) []string { return kv }
	cases := []struct {
		name     string
		opts     []ServerOption
		md       []string
		deadline time.Duration // the caller's, 0: none
		want     string        // "attempt retries" of the Inbound, or "none"
		capped   time.Duration // want the Inbound's deadline this far from now (0: the caller's)
	}{
		{"nothing", nil, nil, 0, "none", 0},
		{"other metadata only", nil, pairs("x-request-id", "7"), 0, "none", 0},
		{"stormguard first attempt", nil, pairs(AttemptKey, "1", WillRetryKey, "1"), 0, "1 true", 0},
		{"stormguard last attempt", nil, pairs(AttemptKey, "3", WillRetryKey, "0"), 0, "3 false", 0},
		{"grpc-previous-rpc-attempts alone", nil, pairs(PreviousAttemptsKey, "2"), 0, "3 true", 0},
		{"stormguard-attempt wins", nil, pairs(AttemptKey, "4", PreviousAttemptsKey, "1"), 0, "4 true", 0},
		{"will-retry 0 with previous", nil, pairs(PreviousAttemptsKey, "1", WillRetryKey, "0"), 0, "2 false", 0},
		{"will-retry alone", nil, pairs(WillRetryKey, "1"), 0, "0 true", 0},
		{"attempt capped", nil, pairs(AttemptKey, "99"), 0, fmt.Sprint(DefaultMaxInboundAttempt, " false"), 0},
		{"attempt capped by option", []ServerOption{WithMaxInboundAttempt(3)}, pairs(AttemptKey, "4"), 0, "3 false", 0},
		{"huge previous capped", nil, pairs(PreviousAttemptsKey, "99999999999999999999999"), 0, fmt.Sprint(DefaultMaxInboundAttempt, " true"), 0},
		{"repeated: the last counts", nil, pairs(AttemptKey, "1", AttemptKey, "2", WillRetryKey, "1", WillRetryKey, "0"), 0, "2 false", 0},
		{"blanks allowed", nil, pairs(AttemptKey, " 2 ", WillRetryKey, " 1"), 0, "2 true", 0},
		{"malformed ignored", nil, pairs(AttemptKey, "two", WillRetryKey, "yes", PreviousAttemptsKey, "-1"), 0, "none", 0},
		{"attempt 0 ignored", nil, pairs(AttemptKey, "0"), 0, "none", 0},
		{"deadline alone", nil, nil, time.Minute, "0 false", 0},
		{"deadline capped", nil, nil, time.Hour, "0 false", DefaultMaxInboundDeadline},
		{"deadline capped by option", []ServerOption{WithMaxInboundDeadline(30 * time.Second)}, pairs(AttemptKey, "2", WillRetryKey, "1"), time.Minute, "2 true", 30 * time.Second},
	}
	for _, method := range []string{"unary", "server stream"} {
		for _, c := range cases {
			t.Run(method+"/"+c.name, func(t *testing.T) {
				srv := newServer()
				client := dial(t, serveWith(t, serverInterceptors(c.opts...), srv))
				ctx := context.Background()
				if len(c.md) > 0 {
					ctx = metadata.AppendToOutgoingContext(ctx, c.md...)
				}
				if c.deadline > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, c.deadline)
					defer cancel()
				}
				start := time.Now()
				if err := callMethod(ctx, client, method); err != nil {
					t.Fatal(err)
				}
				seen := srv.inbounds()
				if len(seen) != 1 {
					t.Fatalf("%d attempts", len(seen))
				}
				got := "none"
				if seen[0].ok {
					got = fmt.Sprint(seen[0].in.Attempt, " ", seen[0].in.Retries)
				}
				if got != c.want {
					t.Fatalf("inbound %s (%+v), want %s", got, seen[0].in, c.want)
				}
				// Deadlines: generous margins either side (what the
				// server saw is bounded by when the call started and
				// when it ended), never a timing assertion.
				dl := seen[0].in.Deadline
				_, _, left, _ := srv.stats()
				switch {
				case c.deadline == 0 && (!dl.IsZero() || left[0] != -1):
					t.Fatalf("deadline %v (left %v), want none", dl, left[0])
				case c.capped > 0 && (dl.Before(start.Add(c.capped-10*time.Second)) || dl.After(time.Now().Add(c.capped))):
					t.Fatalf("inbound deadline %v from the start, want the cap %v", dl.Sub(start), c.capped)
				case c.capped > 0 && left[0] > c.capped:
					t.Fatalf("the handler's context has %v left, more than the cap %v", left[0], c.capped)
				case c.deadline > 0 && c.capped == 0 && (dl.Before(start.Add(c.deadline-10*time.Second)) || dl.After(start.Add(c.deadline+10*time.Second))):
					t.Fatalf("inbound deadline %v from the start, want the caller's %v", dl.Sub(start), c.deadline)
				}
			})
		}
	}
}

// causeServer blocks each unary call until its context ends and reports
// the context's cause.
type causeServer struct {
	testpb.UnimplementedTestServiceServer
	started chan struct{}
	cause   chan error
}

func (s *causeServer) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.started <- struct{}{}
	<-ctx.Done()
	s.cause <- context.Cause(ctx)
	return nil, status.FromContextError(ctx.Err()).Err()
}

// TestServerDeadlineCapEndsContext: a caller that claims a deadline beyond
// WithMaxInboundDeadline gets a handler context that ends at the bound,
// on the interceptor's clock, with cause ErrInboundDeadline.
func TestServerDeadlineCapEndsContext(t *testing.T) {
	f := clocktest.NewFakeAt(time.Now())
	srv := &causeServer{started: make(chan struct{}, 1), cause: make(chan error, 1)}
	client := dial(t, serveWith(t, serverInterceptors(WithMaxInboundDeadline(time.Minute), WithInboundClock(f)), srv))
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		errc <- err
	}()
	<-srv.started
	f.BlockUntil(1)
	f.Advance(time.Minute)
	if cause := <-srv.cause; !errors.Is(cause, ErrInboundDeadline) {
		t.Fatalf("the handler's context ended with cause %v, want ErrInboundDeadline", cause)
	}
	if err := <-errc; status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
}

// overloadServer answers every call with the error err returns.
type overloadServer struct {
	testpb.UnimplementedTestServiceServer
	err      func() error
	attempts chan struct{}
}

func (s *overloadServer) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.attempts <- struct{}{}
	return nil, s.err()
}

func (s *overloadServer) StreamingOutputCall(*testpb.StreamingOutputCallRequest, testpb.TestService_StreamingOutputCallServer) error {
	s.attempts <- struct{}{}
	return s.err()
}

// TestServerOverloaded (issue 20): a handler error that wraps
// retry.ErrOverloaded — Overloaded's, or any error marked with
// retry.Overloaded — is answered UNAVAILABLE with the trailer
// grpc-retry-pushback-ms: -1, which a plain client sees and the client
// interceptor reads as the marker: one attempt, retry.ErrOverloaded.
// Other errors pass unchanged; without the server interceptor Overloaded
// is a plain UNAVAILABLE.
func TestServerOverloaded(t *testing.T) {
	cases := []struct {
		name        string
		err         func() error
		interceptor bool
		code        codes.Code
		msg         string
		marker      bool // the trailer carries pushback -1
	}{
		{"Overloaded", func() error { return Overloaded("shedding") }, true, codes.Unavailable, "shedding", true},
		{"wrapped Overloaded", func() error { return fmt.Errorf("inventory: %w", Overloaded("shedding")) }, true, codes.Unavailable, "shedding", true},
		{"retry.Overloaded", func() error { return retry.Overloaded(status.Error(codes.ResourceExhausted, "queue full")) }, true, codes.Unavailable, "queue full", true},
		{"plain error", func() error { return status.Error(codes.Internal, "bug") }, true, codes.Internal, "bug", false},
		{"no server interceptor", func() error { return Overloaded("shedding") }, false, codes.Unavailable, "shedding", false},
	}
	for _, method := range []string{"unary", "server stream"} {
		for _, c := range cases {
			t.Run(method+"/"+c.name, func(t *testing.T) {
				srv := &overloadServer{err: c.err, attempts: make(chan struct{}, 8)}
				var opts []grpc.ServerOption
				if c.interceptor {
					opts = serverInterceptors()
				}
				addr := serveWith(t, opts, srv)

				// A plain client sees the status and the trailer as sent.
				var trailer metadata.MD
				var err error
				plain := dial(t, addr)
				if method == "unary" {
					_, err = plain.UnaryCall(context.Background(), &testpb.SimpleRequest{}, grpc.Trailer(&trailer))
				} else {
					var stream testpb.TestService_StreamingOutputCallClient
					if stream, err = plain.StreamingOutputCall(context.Background(), outputRequest(1)); err == nil {
						_, err = readAll(stream)
						trailer = stream.Trailer()
					}
				}
				st := status.Convert(err)
				pushback := strings.Join(trailer[PushbackKey], ",")
				if st.Code() != c.code || st.Message() != c.msg || (pushback == "-1") != c.marker || (!c.marker && pushback != "") {
					t.Fatalf("plain client: %v, pushback %q; want %v %q, marker %v", st, pushback, c.code, c.msg, c.marker)
				}
				<-srv.attempts

				// The client interceptor: the marker is never retried.
				client := dialRetry(t, addr, &retry.Policy{MaxAttempts: 3, Backoff: noWait, MaxRetryAfter: -1})
				err = callMethod(context.Background(), client, method)
				attempts := len(srv.attempts)
				if errors.Is(err, retry.ErrOverloaded) != c.marker {
					t.Fatalf("interceptor: err %v; want the marker %v", err, c.marker)
				}
				if c.marker && attempts != 1 {
					t.Fatalf("interceptor: %d attempts for the marker, want 1", attempts)
				}
			})
		}
	}
}

// TestOverloadedError: Overloaded's error reads as the marker and as an
// UNAVAILABLE status.
func TestOverloadedError(t *testing.T) {
	err := Overloaded("too many requests in flight")
	if !errors.Is(err, retry.ErrOverloaded) || !retry.IsOverloaded(err) || status.Code(err) != codes.Unavailable ||
		status.Convert(err).Message() != "too many requests in flight" {
		t.Fatalf("Overloaded: %v", err)
	}
	wrapped := fmt.Errorf("shop: %w", err)
	if !retry.IsOverloaded(wrapped) || status.Code(wrapped) != codes.Unavailable {
		t.Fatalf("wrapped: %v", wrapped)
	}
}

// noFactsContext is a server's context for a call that carries ordinary
// metadata and none of the facts, and no deadline.
func noFactsContext() context.Context {
	return metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		":authority", "127.0.0.1:443", "content-type", "application/grpc", "user-agent", "grpc-go/1.85.0", "x-request-id", "42"))
}

// TestInboundNoFactsNoAlloc (issue 20 acceptance): reading the facts of a
// call that carries none costs no allocation, in the interceptor as a whole.
func TestInboundNoFactsNoAlloc(t *testing.T) {
	ic := UnaryServerInterceptor()
	ctx := noFactsContext()
	handler := func(ctx context.Context, req any) (any, error) {
		if _, ok := retry.InboundOf(ctx); ok {
			t.Fatal("facts found")
		}
		return req, nil
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = ic(ctx, nil, nil, handler) }); n != 0 {
		t.Fatalf("%v allocations per call without facts, want 0", n)
	}
}

// BenchmarkServerInbound measures the unary server interceptor around a
// handler that returns at once: "none" for a call without facts (0
// allocations), "facts" for one that carries the announcement and a
// deadline.
func BenchmarkServerInbound(b *testing.B) {
	ic := UnaryServerInterceptor()
	handler := func(ctx context.Context, req any) (any, error) { return req, nil }
	facts, cancel := context.WithTimeout(metadata.NewIncomingContext(context.Background(), metadata.Pairs(
		":authority", "127.0.0.1:443", "content-type", "application/grpc", "user-agent", "grpc-go/1.85.0",
		AttemptKey, "2", WillRetryKey, "1", PreviousAttemptsKey, "1")), time.Minute)
	defer cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
	}{{"none", noFactsContext()}, {"facts", facts}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = ic(c.ctx, nil, nil, handler)
			}
		})
	}
}

func FuzzParseAttempt(f *testing.F) {
	for _, s := range []string{"1", "0", " 7 ", "\t3", "-1", "+1", "1e3", "", " ", "99999999999999999999999", "0x10", "12a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, ok := parseAttempt(s)
		trimmed := strings.Trim(s, " \t")
		v, err := strconv.ParseUint(trimmed, 10, 64)
		digits := trimmed != "" && strings.Trim(trimmed, "0123456789") == ""
		switch {
		case ok && n < 1:
			t.Fatalf("parseAttempt(%q) = %d, ok", s, n)
		case ok != (digits && (err != nil || v > 0)):
			t.Fatalf("parseAttempt(%q) ok = %v, digits %v, ParseUint %d %v", s, ok, digits, v, err)
		case ok && err == nil && v <= uint64(maxInt) && n != int(v):
			t.Fatalf("parseAttempt(%q) = %d, want %d", s, n, v)
		case ok && (err != nil || v > uint64(maxInt)) && n != maxInt:
			t.Fatalf("parseAttempt(%q) = %d, want saturation", s, n)
		}
		p, pok := parsePreviousAttempts(s)
		if pok != digits || (pok && p < 0) || (ok && p != n) {
			t.Fatalf("parsePreviousAttempts(%q) = %d, %v", s, p, pok)
		}
	})
}

func FuzzParseWillRetry(f *testing.F) {
	for _, s := range []string{"1", "0", " 1", "0 ", "true", "yes", "", "01", "2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		retries, known := parseWillRetry(s)
		trimmed := strings.Trim(s, " \t")
		if known != (trimmed == "0" || trimmed == "1") || retries != (trimmed == "1") {
			t.Fatalf("parseWillRetry(%q) = %v, %v", s, retries, known)
		}
	})
}

// FuzzServerRead: whatever metadata a caller sends, the facts read are
// within the bounds: an attempt in [0, the cap], present only when some
// key parsed.
func FuzzServerRead(f *testing.F) {
	f.Add("1", "1", "")
	f.Add("", "", "4")
	f.Add("999999999999999999999", "x", "18446744073709551615")
	f.Fuzz(func(t *testing.T, attempt, will, prev string) {
		md := metadata.MD{}
		for k, v := range map[string]string{AttemptKey: attempt, WillRetryKey: will, PreviousAttemptsKey: prev} {
			if v != "" {
				md[k] = []string{v}
			}
		}
		o := resolveServer([]ServerOption{WithMaxInboundAttempt(5)})
		in, ok := o.read(metadata.NewIncomingContext(context.Background(), md))
		_, aok := parseAttempt(attempt)
		_, wok := parseWillRetry(will)
		_, pok := parsePreviousAttempts(prev)
		if ok != (aok || wok || pok) || in.Attempt < 0 || in.Attempt > 5 || (!aok && !pok && in.Attempt != 0) {
			t.Fatalf("read(%q, %q, %q) = %+v, %v", attempt, will, prev, in, ok)
		}
	})
}

// TestServerMaxInFlight (issue 20): one WithMaxInFlight value given to both
// server interceptors limits unary calls and streams together; a call
// beyond the limit is shed without running its handler, with the overload
// marker, which the client interceptor does not retry; the slot comes back
// when the handler returns.
func TestServerMaxInFlight(t *testing.T) {
	srv := newServer(outcome{block: true})
	limit := WithMaxInFlight(1)
	addr := serveWith(t, serverInterceptors(limit), srv)
	client := dialRetry(t, addr, &retry.Policy{MaxAttempts: 3, Backoff: noWait})

	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() { first <- callMethod(ctx, client, "unary") }()
	<-srv.started // the first call holds the only slot

	err := callMethod(context.Background(), client, "server stream")
	if !errors.Is(err, retry.ErrOverloaded) || status.Code(err) != codes.Unavailable {
		t.Fatalf("second call: %v, want the overload marker", err)
	}
	if attempts, _, _, _ := srv.stats(); attempts != 1 {
		t.Fatalf("the handlers ran %d times, want 1 (the shed call never reaches its handler)", attempts)
	}
	cancel()
	if err := <-first; status.Code(err) != codes.Canceled {
		t.Fatalf("first call: %v", err)
	}
	// The slot is back once the first handler has returned: the server
	// may see the cancellation a little after the client, so wait for it.
	<-srv.canceled
	within(t, func() {
		for range 1000 { // bounded: the handler returns right after it reports
			err := callMethod(context.Background(), client, "unary")
			if err == nil {
				return
			}
			if !errors.Is(err, retry.ErrOverloaded) {
				t.Errorf("third call: %v", err)
				return
			}
		}
		t.Error("the slot never came back")
	})
}
