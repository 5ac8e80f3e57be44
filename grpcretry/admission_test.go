package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/clock"
	"github.com/stormguard/stormguard/clock/clocktest"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

func newAdmission(t *testing.T, c admission.Config) *admission.Limiter {
	t.Helper()
	l, err := admission.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func waitFor(cond func() bool) {
	for !cond() {
		runtime.Gosched()
	}
}

// serveAdmitted serves impl behind both adaptive interceptors over l, with
// a recovery interceptor outside them (grpc-go does not recover handler
// panics: a server that wants to live through one installs such an
// interceptor).
func serveAdmitted(t *testing.T, l *admission.Limiter, impl testpb.TestServiceServer, opts ...ServerOption) string {
	t.Helper()
	recoverUnary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if v := recover(); v != nil {
				err = status.Errorf(codes.Internal, "panic: %v", v)
			}
		}()
		return h(ctx, req)
	}
	recoverStream := func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = status.Errorf(codes.Internal, "panic: %v", v)
			}
		}()
		return h(srv, ss)
	}
	return serveWith(t, []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(recoverUnary, AdaptiveUnaryServerInterceptor(l, opts...)),
		grpc.ChainStreamInterceptor(recoverStream, AdaptiveStreamServerInterceptor(l, opts...)),
	}, impl)
}

// wantShed checks that err is the admission shed as a grpcretry client
// sees it: RESOURCE_EXHAUSTED, carrying the overload marker (so
// retry.ErrOverloaded), not retried.
func wantShed(t *testing.T, err error) {
	t.Helper()
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("error %v (code %v), want RESOURCE_EXHAUSTED", err, status.Code(err))
	}
	if !retry.IsOverloaded(err) {
		t.Fatalf("error %v does not carry the overload marker", err)
	}
	var ae *AttemptError
	if !errors.As(err, &ae) || !ae.Overloaded || ae.Pushback != -1 {
		t.Fatalf("error %v: want an AttemptError with the pushback -1 marker", err)
	}
}

// TestAdaptiveServerShedsBeyondLimitWithOverloadMarker (issue 38 item 3):
// beyond the limit (no queue), a unary call and a stream are answered
// RESOURCE_EXHAUSTED with grpc-retry-pushback-ms: -1 without their
// handler running, and a retrying grpcretry client does not retry them.
func TestAdaptiveServerShedsBeyondLimitWithOverloadMarker(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1, ProbeInterval: -1})
	release := make(chan struct{})
	s := newServer(outcome{wait: release})
	addr := serveAdmitted(t, l, s)
	client := dialRetry(t, addr, &retry.Policy{MaxAttempts: 5, Backoff: noWait})
	done := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: payload("slow")})
		done <- err
	}()
	<-s.started
	waitFor(func() bool { return l.InFlight() == 1 })

	_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: payload("shed")})
	wantShed(t, err)

	stream, err := client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{Payload: payload("shed")})
	if err == nil {
		_, err = stream.Recv()
	}
	wantShed(t, err)

	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _, _, _ := s.stats(); n != 1 {
		t.Fatalf("handlers ran %d times, want 1 (shed calls never reach the handler)", n)
	}
	if got := l.Stats().Shed[admission.ReasonLimit]; got != 2 {
		t.Fatalf("shed for the limit %d times, want 2 (the client retried a shed call)", got)
	}
	waitFor(func() bool { return l.InFlight() == 0 })
	if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: payload("after")}); err != nil {
		t.Fatalf("after the slow call: %v", err)
	}
}

// TestAdaptiveServerDropsQueuedCallPastCallerDeadline (issue 38 item 3): a
// call queued behind a busy slot whose inbound deadline passes (here the
// WithMaxInboundDeadline bound on a fake clock) is answered without its
// handler ever running, counted as caller_gone.
func TestAdaptiveServerDropsQueuedCallPastCallerDeadline(t *testing.T) {
	f := clocktest.NewFakeAt(time.Now()) // the caller's grpc-timeout is on the real clock
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, Clock: f, ProbeInterval: -1, QueueInterval: time.Hour})
	release := make(chan struct{})
	s := newServer(outcome{wait: release})
	addr := serveAdmitted(t, l, s, WithInboundClock(f), WithMaxInboundDeadline(20*time.Millisecond))
	client := dial(t, addr)
	done := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: payload("slow")})
		done <- err
	}()
	<-s.started
	waitFor(func() bool { return l.InFlight() == 1 })

	late := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{Payload: payload("late")})
		late <- err
	}()
	waitFor(func() bool {
		select {
		case err := <-late:
			t.Fatalf("late call answered before it queued: %v; stats %+v", err, l.Stats())
		default:
		}
		return l.Queued() == 1
	})
	f.Advance(20 * time.Millisecond) // the bound on the caller's deadline passes; the queue would allow an hour
	if err := <-late; status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("late call: %v, want RESOURCE_EXHAUSTED", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _, _, _ := s.stats(); n != 1 {
		t.Fatalf("handlers ran %d times, want 1 (the late call never reaches its handler)", n)
	}
	if got := l.Stats().Shed[admission.ReasonCallerGone]; got != 1 {
		t.Fatalf("stats %+v, want one caller_gone", l.Stats())
	}
}

// panicking is the test service whose handlers panic.
type panicking struct {
	testpb.UnimplementedTestServiceServer
}

func (panicking) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	panic("handler bug")
}

func (panicking) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	if _, err := stream.Recv(); err != nil && err != io.EOF {
		return err
	}
	panic("stream handler bug")
}

// TestAdaptiveServerHandlerPanicReleasesSlot (issue 38 item 3): a unary or
// stream handler that panics gives its slot back (the panic goes on, here
// to the recovery interceptor outside), so a limit of 1 keeps serving.
func TestAdaptiveServerHandlerPanicReleasesSlot(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1, ProbeInterval: -1})
	addr := serveAdmitted(t, l, panicking{})
	client := dial(t, addr)
	for i := range 3 {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("unary %d: %v, want the recovered panic (INTERNAL), not a shed", i, err)
		}
		stream, err := client.FullDuplexCall(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&testpb.StreamingOutputCallRequest{}); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		if status.Code(err) != codes.Internal {
			t.Fatalf("stream %d: %v, want the recovered panic (INTERNAL), not a shed", i, err)
		}
	}
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight after panics, want 0", n)
	}
	if s := l.Stats(); s.Shed != [len(s.Shed)]uint64{} {
		t.Fatalf("stats %+v, want no sheds", s)
	}
}

// TestAdaptiveServerNilLimiterPanics: a nil Limiter is a wiring bug,
// caught when the interceptor is built.
func TestAdaptiveServerNilLimiterPanics(t *testing.T) {
	for _, build := range []func(){
		func() { AdaptiveUnaryServerInterceptor(nil) },
		func() { AdaptiveStreamServerInterceptor(nil) },
	} {
		func() {
			defer func() {
				if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), "admission.Limiter") {
					t.Errorf("recovered %v, want a panic naming the Limiter", v)
				}
			}()
			build()
		}()
	}
}

// TestAdaptiveServerShedsCallerGoneOnArrival (outside review): a call
// whose caller's deadline has passed when it arrives is shed before its
// handler runs (admission.ErrCallerGone, answered RESOURCE_EXHAUSTED with
// the overload marker), also below the limit with no queue in the way.
// (Before: the Limiter admitted it at once and the handler ran for a
// caller that had given up.)
func TestAdaptiveServerShedsCallerGoneOnArrival(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 10}, ProbeInterval: -1})
	icpt := AdaptiveUnaryServerInterceptor(l)
	ran := 0
	handler := func(context.Context, any) (any, error) { ran++; return "ok", nil }
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer cancel()
	_, err := icpt(ctx, nil, nil, handler)
	if ran != 0 || status.Code(err) != codes.ResourceExhausted || !errors.Is(err, admission.ErrCallerGone) || !retry.IsOverloaded(err) {
		t.Fatalf("handler ran %d times, err %v; want no run and a caller_gone shed", ran, err)
	}
	if s := l.Stats(); s.Shed[admission.ReasonCallerGone] != 1 || s.InFlight != 0 {
		t.Fatalf("stats %+v, want one caller_gone and nothing in flight", s)
	}
}

// heardLimit is a Limit that counts the samples it hears.
type heardLimit struct{ samples, drops int }

func (h *heardLimit) OnSample(_ time.Time, _ time.Duration, _ int, dropped bool) {
	h.samples++
	if dropped {
		h.drops++
	}
}
func (*heardLimit) Limit() int { return 10 }

// TestAdaptiveServerCallerDeadlineIsNoDrop (outside review): a call whose
// caller's deadline (its grpc-timeout) passes while the handler runs is
// a sample but no drop, where one that reaches the server's
// WithMaxInboundDeadline bound is a drop; with AIMD, callers' short
// deadlines no longer halve the limit for everyone. (Before: every passed
// deadline was a drop: one such call per window pinned an idle server's
// AIMD limit at its minimum.)
func TestAdaptiveServerCallerDeadlineIsNoDrop(t *testing.T) {
	run := func(t *testing.T, alg admission.Limit, bound bool) *admission.Limiter {
		f := clocktest.NewFake()
		l := newAdmission(t, admission.Config{Limit: alg, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
		opts := []ServerOption{WithInboundClock(f)}
		deadline := time.Millisecond // the caller's grpc-timeout
		if bound {
			opts = append(opts, WithMaxInboundDeadline(time.Millisecond))
			deadline = time.Hour
		}
		icpt := AdaptiveUnaryServerInterceptor(l, opts...)
		handler := func(context.Context, any) (any, error) {
			f.Advance(2 * time.Millisecond) // past the deadline
			return "ok", nil
		}
		for range 10 {
			ctx, cancel := clock.WithTimeout(context.Background(), f, deadline, nil)
			if _, err := icpt(ctx, nil, nil, handler); err != nil {
				t.Fatal(err)
			}
			cancel()
			f.Advance(10 * time.Millisecond)
		}
		if n := l.InFlight(); n != 0 {
			t.Fatalf("%d in flight", n)
		}
		return l
	}
	t.Run("caller's grpc-timeout", func(t *testing.T) {
		h := &heardLimit{}
		run(t, h, false)
		if h.samples == 0 || h.drops != 0 {
			t.Fatalf("%d samples (%d drops), want samples and no drop", h.samples, h.drops)
		}
		aimd, err := admission.NewAIMD(admission.AIMDConfig{InitialLimit: 512, MinLimit: 1, MaxLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if got := run(t, aimd, false).Limit(); got < 512 {
			t.Fatalf("AIMD limit %d after 10 calls whose caller's deadline passed, want at least 512 (not lowered)", got)
		}
	})
	t.Run("server's bound", func(t *testing.T) {
		h := &heardLimit{}
		run(t, h, true)
		if h.samples == 0 || h.drops != h.samples {
			t.Fatalf("%d samples, %d drops; want every sample a drop", h.samples, h.drops)
		}
	})
}

// TestAdaptiveServerSlowPastGrpcTimeout (second outside review): an
// overloaded server whose latency climbs past its callers' grpc-timeouts
// is still heard: its calls' times are samples, so AIMD's Timeout lowers
// the limit. (A first fix gave them no sample: the limit never reacted.)
func TestAdaptiveServerSlowPastGrpcTimeout(t *testing.T) {
	f := clocktest.NewFake()
	aimd, err := admission.NewAIMD(admission.AIMDConfig{InitialLimit: 100, MinLimit: 1, MaxLimit: 1000, Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l := newAdmission(t, admission.Config{Limit: aimd, Clock: f, ProbeInterval: -1, WindowSamples: 1, Window: 10 * time.Millisecond})
	icpt := AdaptiveUnaryServerInterceptor(l, WithInboundClock(f))
	handler := func(context.Context, any) (any, error) {
		f.Advance(2 * time.Second) // the overloaded server takes 2 s
		return "ok", nil
	}
	for range 20 {
		ctx, cancel := clock.WithTimeout(context.Background(), f, time.Second, nil) // callers wait 1 s
		icpt(ctx, nil, nil, handler)
		cancel()
		f.Advance(10 * time.Millisecond)
	}
	if got := l.Limit(); got >= 100 {
		t.Fatalf("AIMD limit %d after 20 calls of 2 s (Timeout 500 ms) past their callers' 1 s grpc-timeouts, want it lowered", got)
	}
}
