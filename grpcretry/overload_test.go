package grpcretry_test

import (
	"testing"

	"github.com/stormguard/stormguard/grpcretry"
	"github.com/stormguard/stormguard/throttle"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client-side throttling counts gRPC's overload answers as rejections
// without importing gRPC: AttemptError implements throttle.OverloadReporter.
func TestAttemptErrorReportsOverload(t *testing.T) {
	for c := codes.OK + 1; c <= codes.Unauthenticated; c++ {
		e := &grpcretry.AttemptError{Status: status.New(c, "x")}
		want := c == codes.ResourceExhausted || c == codes.Unavailable
		if got := throttle.IsOverload(e); got != want {
			t.Errorf("%v: IsOverload = %v, want %v", c, got, want)
		}
	}
	marked := &grpcretry.AttemptError{Status: status.New(codes.Aborted, "x"), Overloaded: true}
	if !throttle.IsOverload(marked) {
		t.Error("an attempt carrying the overload marker is an overload")
	}
}
