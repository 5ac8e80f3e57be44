package otelretry_test

import (
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stormguard/stormguard/httpretry"
	"github.com/stormguard/stormguard/otelretry"
	"github.com/stormguard/stormguard/retry"
)

type codeError struct{ code int }

func (e codeError) Error() string   { return "code" }
func (e codeError) StatusCode() int { return e.code }

// fakeStatus mimics grpc's *status.Status with another integer type.
type fakeStatus struct{ c int32 }

func (s *fakeStatus) Code() int32 { return s.c }

type fakeGRPCError struct{ s *fakeStatus }

func (e fakeGRPCError) Error() string           { return "fake grpc" }
func (e fakeGRPCError) GRPCStatus() *fakeStatus { return e.s }

// oddError has a GRPCStatus method of another shape.
type oddError struct{}

func (oddError) Error() string              { return "odd" }
func (oddError) GRPCStatus(int) *fakeStatus { return nil }

// cycle unwraps to itself.
type cycle struct{}

func (c *cycle) Error() string { return "cycle" }
func (c *cycle) Unwrap() error { return c }

func TestHTTPStatusCode(t *testing.T) {
	tests := []struct {
		err  error
		code int
		ok   bool
	}{
		{&httpretry.StatusError{StatusCode: 503}, 503, true},
		{retry.After(&httpretry.StatusError{StatusCode: 429}, time.Second), 429, true},
		{retry.Permanent(&httpretry.StatusError{StatusCode: http.StatusNotFound}), 404, true},
		{fmt.Errorf("wrapped: %w", codeError{502}), 502, true},
		{errors.Join(errTransient, codeError{500}), 500, true},
		{errTransient, 0, false},
		{nil, 0, false},
	}
	for _, tt := range tests {
		code, ok := otelretry.HTTPStatusCode(tt.err)
		if code != tt.code || ok != tt.ok {
			t.Errorf("HTTPStatusCode(%v) = %d, %v; want %d, %v", tt.err, code, ok, tt.code, tt.ok)
		}
	}
}

func TestGRPCStatusCode(t *testing.T) {
	unavailable := status.Error(grpccodes.Unavailable, "down")
	tests := []struct {
		name string
		err  error
		code int64
		ok   bool
	}{
		{"status error", unavailable, int64(grpccodes.Unavailable), true},
		{"wrapped", fmt.Errorf("call: %w", status.Error(grpccodes.ResourceExhausted, "slow down")), int64(grpccodes.ResourceExhausted), true},
		{"permanent", retry.Permanent(status.Error(grpccodes.InvalidArgument, "bad")), int64(grpccodes.InvalidArgument), true},
		{"joined", errors.Join(errTransient, unavailable), int64(grpccodes.Unavailable), true},
		{"retry.Error", &retry.Error{Attempts: 2, Reason: retry.ErrAttemptsExhausted, Last: unavailable}, int64(grpccodes.Unavailable), true},
		{"other integer type", fakeGRPCError{&fakeStatus{c: 8}}, 8, true},
		{"nil status", fakeGRPCError{nil}, 0, false},
		{"other method shape", oddError{}, 0, false},
		{"plain", errTransient, 0, false},
		{"cycle", &cycle{}, 0, false},
		{"nil", nil, 0, false},
	}
	for _, tt := range tests {
		code, ok := otelretry.GRPCStatusCode(tt.err)
		if code != tt.code || ok != tt.ok {
			t.Errorf("%s: GRPCStatusCode = %d, %v; want %d, %v", tt.name, code, ok, tt.code, tt.ok)
		}
	}
}

// FuzzGRPCStatusCode: any tree of wrapped and joined errors around one
// gRPC status error yields its code.
func FuzzGRPCStatusCode(f *testing.F) {
	f.Add(uint32(14), uint8(3), uint8(1))
	f.Add(uint32(0), uint8(0), uint8(0))
	f.Fuzz(func(t *testing.T, code uint32, wraps, joins uint8) {
		code %= 17
		var err error = status.Error(grpccodes.Code(code), "x")
		for i := range int(wraps % 16) {
			if i%2 == 0 {
				err = fmt.Errorf("w%d: %w", i, err)
			} else {
				err = retry.Permanent(err)
			}
		}
		for range int(joins % 8) {
			err = errors.Join(errTransient, err)
		}
		got, ok := otelretry.GRPCStatusCode(err)
		if code == 0 {
			// status.Error with OK returns a nil error.
			if ok {
				t.Fatalf("code %d from an OK status", got)
			}
			return
		}
		if !ok || got != int64(code) {
			t.Fatalf("GRPCStatusCode = %d, %v; want %d", got, ok, code)
		}
	})
}
