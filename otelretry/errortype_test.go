package otelretry_test

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

func TestErrorType(t *testing.T) {
	if otelretry.AttrRPCStatusCode != semconv.RPCResponseStatusCodeKey || otelretry.AttrErrorType != semconv.ErrorTypeKey ||
		otelretry.AttrHTTPStatusCode != semconv.HTTPResponseStatusCodeKey {
		t.Error("attribute keys are not the semconv package's")
	}

	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{retry.Permanent(status.Error(grpccodes.InvalidArgument, "bad")), "INVALID_ARGUMENT"},
		{retry.After(&httpretry.StatusError{StatusCode: 429}, time.Second), "429"},
		{errors.New("x"), "*errors.errorString"},
		{retry.Permanent(errors.New("x")), "*errors.errorString"},
		{retry.After(retry.Permanent(&net.OpError{Op: "dial", Err: errors.New("refused")}), time.Second), "*net.OpError"},
		{retry.Permanent(fmt.Errorf("w: %w", &customError{})), "custom_failure"},
		{retry.Permanent(&retry.PanicError{Value: 1}), "*retry.PanicError"},
		{status.Error(grpccodes.Code(42), "odd"), "42"},
	}
	for _, tt := range tests {
		if got := otelretry.ErrorType(tt.err); got != tt.want {
			t.Errorf("ErrorType(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
