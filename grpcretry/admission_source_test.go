package grpcretry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stormguard/stormguard/admission"
	"github.com/stormguard/stormguard/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// config.AdmissionHandle, which a reload swaps the Limiter of, is an
// admission.Source.
var _ admission.Source = (*config.AdmissionHandle)(nil)

// swapAdmission is an admission.Source whose Limiter the test swaps, as a
// config reload swaps an AdmissionHandle's.
type swapAdmission struct {
	l atomic.Pointer[admission.Limiter]
}

func (s *swapAdmission) Limiter() *admission.Limiter { return s.l.Load() }

// gate is a test service whose unary calls wait for release and whose
// streams last until the client closes them.
type gate struct {
	testpb.UnimplementedTestServiceServer
	started chan struct{}
	release chan struct{}
}

func (g *gate) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	g.started <- struct{}{}
	<-g.release
	return &testpb.SimpleResponse{}, nil
}

func (g *gate) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	g.started <- struct{}{}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// TestAdaptiveServerFollowsSwappedLimiter (issue 38): the interceptors
// built over an admission.Source admit each call with the Limiter the
// source has in force when the call arrives, so a config reload takes
// effect at once; a call or stream admitted before the swap gives its
// slot back to the Limiter it took it from.
func TestAdaptiveServerFollowsSwappedLimiter(t *testing.T) {
	old := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 2}, QueueLength: -1, ProbeInterval: -1})
	cur := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 2}, QueueLength: -1, ProbeInterval: -1})
	src := &swapAdmission{}
	src.l.Store(old)
	g := &gate{started: make(chan struct{}, 8), release: make(chan struct{})}
	addr := serveWith(t, []grpc.ServerOption{
		grpc.UnaryInterceptor(AdaptiveUnaryServerInterceptor(src)),
		grpc.StreamInterceptor(AdaptiveStreamServerInterceptor(src)),
	}, g)
	client := dial(t, addr)
	unary := func(done chan<- error) {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		done <- err
	}
	done := make(chan error, 4)

	// Before the swap: a call and a stream fill the old Limiter.
	go unary(done)
	<-g.started
	stream, err := client.FullDuplexCall(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	if old.InFlight() != 2 {
		t.Fatalf("old Limiter: %d in flight, want 2", old.InFlight())
	}

	src.l.Store(cur) // the reload
	go unary(done)
	<-g.started
	go unary(done)
	<-g.started
	if old.InFlight() != 2 || cur.InFlight() != 2 {
		t.Fatalf("in flight: old %d, new %d; want 2 and 2 (the new calls admitted by the new Limiter)", old.InFlight(), cur.InFlight())
	}
	_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	wantShedPlain(t, err)
	if o, c := old.Stats().Shed[admission.ReasonLimit], cur.Stats().Shed[admission.ReasonLimit]; o != 0 || c != 1 {
		t.Fatalf("shed for the limit: old %d, new %d; want 0 and 1", o, c)
	}

	close(g.release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("stream: %v, want its end", err)
	}
	// Every answer is back, and each interceptor ends its permit before
	// the answer is sent.
	if old.InFlight() != 0 || cur.InFlight() != 0 {
		t.Fatalf("in flight after every call ended: old %d, new %d; want 0 and 0 (each slot given back where it was taken)", old.InFlight(), cur.InFlight())
	}
}

// TestAdaptiveServerSourceNilLimiterKeepsLast: a source that returns nil
// (a bug of its own: config's handle never does) is refused when the
// interceptor is built, and afterwards served by the last Limiter it
// returned, not by no limit at all.
func TestAdaptiveServerSourceNilLimiterKeepsLast(t *testing.T) {
	for _, build := range []func(admission.Source){
		func(s admission.Source) { AdaptiveUnaryServerInterceptor(s) },
		func(s admission.Source) { AdaptiveStreamServerInterceptor(s) },
	} {
		wantPanic(t, "admission.Source", func() { build(nil) })
		wantPanic(t, "admission.Source", func() { build(&swapAdmission{}) })
	}
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1, ProbeInterval: -1})
	src := &swapAdmission{}
	src.l.Store(l)
	g := &gate{started: make(chan struct{}, 8), release: make(chan struct{})}
	addr := serveWith(t, []grpc.ServerOption{grpc.UnaryInterceptor(AdaptiveUnaryServerInterceptor(src))}, g)
	client := dial(t, addr)
	src.l.Store(nil)
	done := make(chan error, 1)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		done <- err
	}()
	<-g.started
	_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	wantShedPlain(t, err)
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if l.InFlight() != 0 || l.Stats().Shed[admission.ReasonLimit] != 1 {
		t.Fatalf("the last Limiter: %d in flight, stats %+v; want 0 and one shed", l.InFlight(), l.Stats())
	}
}

// wantShedPlain checks that err, as a plain grpc-go client sees it, is a
// shed: RESOURCE_EXHAUSTED naming the concurrency limit.
func wantShedPlain(t *testing.T, err error) {
	t.Helper()
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "concurrency limit") {
		t.Fatalf("error %v, want RESOURCE_EXHAUSTED for the concurrency limit", err)
	}
}

func wantPanic(t *testing.T, naming string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		if v := recover(); v == nil || !strings.Contains(fmt.Sprint(v), naming) {
			t.Errorf("recovered %v, want a panic naming %s", v, naming)
		}
	}()
	f()
}

// TestAdaptiveServerFollowsConfigReload: over a config.AdmissionHandle,
// a reload that raises the block's limit admits the next call at once.
func TestAdaptiveServerFollowsConfigReload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "policy.yaml")
	write := func(limit int) {
		data := fmt.Sprintf("policies:\n  default: {}\nadmission:\n  api: {algorithm: fixed, limit: %d, queue_size: none, probe_interval: never}\n", limit)
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1)
	reg, err := config.Open(path, config.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h := reg.Admission("api")
	first := h.Limiter()
	g := &gate{started: make(chan struct{}, 8), release: make(chan struct{})}
	addr := serveWith(t, []grpc.ServerOption{grpc.UnaryInterceptor(AdaptiveUnaryServerInterceptor(h))}, g)
	client := dial(t, addr)
	done := make(chan error, 2)
	go func() {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		done <- err
	}()
	<-g.started
	_, err = client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
	wantShedPlain(t, err) // limit 1, one in flight

	write(2)
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	if h.Limiter() == first {
		t.Fatal("the reload kept the Limiter of limit 1")
	}
	go func() {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		done <- err
	}()
	<-g.started // admitted by the new Limiter
	close(g.release)
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if first.InFlight() != 0 || h.Limiter().InFlight() != 0 {
		t.Fatalf("in flight: old %d, new %d; want 0 and 0", first.InFlight(), h.Limiter().InFlight())
	}
}
