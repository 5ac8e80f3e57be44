package grpcretry

import (
	"context"
	"testing"

	"github.com/stormguard/stormguard/admission"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// panickyErr is a handler error whose Is and Unwrap panic: user code the
// interceptor runs when it judges the error (errors.Is).
type panickyErr struct{}

func (panickyErr) Error() string { return "panicky" }
func (panickyErr) Is(error) bool { panic("Is bug") }
func (panickyErr) Unwrap() error { panic("Unwrap bug") }

type panickyErrors struct {
	testpb.UnimplementedTestServiceServer
}

func (panickyErrors) UnaryCall(context.Context, *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return nil, panickyErr{}
}

// TestAdaptiveServerErrorPanicReleasesSlot (sweep, callback panics): a
// handler error whose own methods panic when the interceptor judges it
// gives the call's slot back (the panic goes on, to the recovery
// interceptor outside), so a limit of 1 keeps serving.
func TestAdaptiveServerErrorPanicReleasesSlot(t *testing.T) {
	l := newAdmission(t, admission.Config{Limit: admission.Fixed{N: 1}, QueueLength: -1, ProbeInterval: -1})
	client := dial(t, serveAdmitted(t, l, panickyErrors{}))
	for i := range 3 {
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("call %d: %v, want the recovered panic (INTERNAL), not a shed", i, err)
		}
	}
	if n := l.InFlight(); n != 0 {
		t.Fatalf("%d in flight after the judging panicked, want 0", n)
	}
}
