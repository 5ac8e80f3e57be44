package grpcretry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stormguard/stormguard/breaker"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// halfOpen returns a breaker that is half-open on f, admitting one probe.
func halfOpen(t *testing.T, f *clocktest.Fake) *breaker.Breaker {
	t.Helper()
	br := breaker.New(breaker.Config{ConsecutiveFailures: 1, OpenTimeout: time.Minute, OpenJitter: -1, Clock: f})
	done, err := br.Allow()
	if err != nil {
		t.Fatal(err)
	}
	done(errors.New("downstream failed"))
	f.Advance(time.Minute)
	if s := br.State(); s != breaker.HalfOpen {
		t.Fatalf("breaker %v, want half-open", s)
	}
	return br
}

// panicStream wraps a stream whose RecvMsg panics.
type panicStream struct{ grpc.ClientStream }

func (panicStream) RecvMsg(any) error { panic("inner RecvMsg") }

// panicHeader wraps a stream whose Header panics.
type panicHeader struct{ grpc.ClientStream }

func (panicHeader) Header() (metadata.MD, error) { panic("inner Header") }

// TestStreamPanicReleasesProbe (issue 17 item 1): code of the caller's that
// panics inside a stream attempt — an inner interceptor's streamer, an
// inner stream's RecvMsg or Header, the Retryable classifier — ends the attempt as
// failed through retry.Call.Panic before the panic goes on, so the
// half-open breaker's probe permit is released (the breaker reopens)
// instead of being held forever, and the Observer hears ReasonPanic.
func TestStreamPanicReleasesProbe(t *testing.T) {
	for _, c := range []struct {
		name   string
		inner  string // "streamer" or "recv": where the inner interceptor panics
		o      []Option
		script []outcome
	}{
		{name: "inner streamer", inner: "streamer"},
		{name: "inner RecvMsg", inner: "recv"},
		{name: "inner Header", inner: "header"},
		{name: "Retryable", o: []Option{WithRetryable(func(codes.Code) bool { panic("classifier") })}, script: []outcome{{code: codes.Unavailable}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(c.script...)
			f := clocktest.NewFake()
			br := halfOpen(t, f)
			rec := newRecorder()
			p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, Breaker: br, Observer: rec, Clock: f}
			o := append(c.o, WithIdempotentServices(testService))
			inner := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				if c.inner == "streamer" {
					panic("inner streamer")
				}
				cs, err := streamer(ctx, desc, cc, method, opts...)
				switch {
				case err != nil:
				case c.inner == "recv":
					cs = panicStream{cs}
				case c.inner == "header":
					cs = panicHeader{cs}
				}
				return cs, err
			}
			client := dial(t, serve(t, srv), grpc.WithChainStreamInterceptor(StreamClientInterceptor(p, o...), inner))
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()

			var stream testpb.TestService_StreamingOutputCallClient
			v := func() (v any) {
				defer func() { v = recover() }()
				var err error
				if stream, err = client.StreamingOutputCall(ctx, outputRequest(1)); err != nil {
					t.Fatalf("NewStream: %v", err)
				}
				if c.inner == "header" {
					_, err = stream.Header()
				} else {
					_, err = stream.Recv()
				}
				t.Fatalf("the stream returned %v instead of panicking", err)
				return nil
			}()
			if v == nil {
				t.Fatal("no panic reached the caller")
			}
			if s := br.State(); s != breaker.Open {
				t.Fatalf("breaker %v after the probe panicked, want open again (probe released as a failure)", s)
			}
			if _, err := br.Allow(); !errors.Is(err, breaker.ErrOpen) || errors.Is(err, breaker.ErrTooManyProbes) {
				t.Fatalf("Allow: %v", err)
			}
			if c := rec.lastCall(t); c.Reason != retry.ReasonPanic || c.Attempts != 1 {
				t.Fatalf("CallEnd %+v", c)
			}
			if ends := rec.Ends(); len(ends) != 1 || !errors.Is(ends[0].Err, retry.ErrPanicked) {
				t.Fatalf("attempt ends %+v", ends)
			}
			if stream != nil {
				if _, err := stream.Recv(); !errors.Is(err, retry.ErrPanicked) {
					t.Fatalf("Recv after the panic: %v", err)
				}
			}
		})
	}
}

// TestUnaryPanicReleasesProbe: code of the caller's that panics inside a
// unary attempt — an inner interceptor, the Retryable classifier — ends
// the attempt as failed (retry.Call.Panic) before the panic goes on: the
// half-open breaker's probe is released as a failure, and the Observer
// hears ReasonPanic.
func TestUnaryPanicReleasesProbe(t *testing.T) {
	for _, c := range []struct {
		name   string
		inner  bool
		o      []Option
		script []outcome
	}{
		{name: "inner interceptor", inner: true},
		{name: "Retryable", o: []Option{WithRetryable(func(codes.Code) bool { panic("classifier") })}, script: []outcome{{code: codes.Unavailable}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer(c.script...)
			f := clocktest.NewFake()
			br := halfOpen(t, f)
			rec := newRecorder()
			p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, Breaker: br, Observer: rec, Clock: f}
			inner := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				if c.inner {
					panic("inner interceptor")
				}
				return invoker(ctx, method, req, reply, cc, opts...)
			}
			o := append(c.o, WithIdempotentServices(testService))
			client := dial(t, serve(t, srv), grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(p, o...), inner))
			v := func() (v any) {
				defer func() { v = recover() }()
				_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
				t.Fatalf("the call returned %v instead of panicking", err)
				return nil
			}()
			if v == nil {
				t.Fatal("no panic reached the caller")
			}
			if s := br.State(); s != breaker.Open {
				t.Fatalf("breaker %v after the probe panicked, want open again", s)
			}
			if c := rec.lastCall(t); c.Reason != retry.ReasonPanic || c.Attempts != 1 {
				t.Fatalf("CallEnd %+v", c)
			}
		})
	}
}
