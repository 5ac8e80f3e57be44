package grpcretry

import (
	"context"
	"errors"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	_ "google.golang.org/protobuf/types/known/emptypb" // registers google/protobuf/empty.proto
)

// TestNonIdempotentSentOnce: a failure from the server is final for a
// method that is not idempotent, however retryable its code.
func TestNonIdempotentSentOnce(t *testing.T) {
	byName := Options{NonIdempotent: []string{unaryMethod, inputMethod}}
	byPredicate := Options{Idempotent: func(m string) bool { return m != unaryMethod && m != inputMethod }}
	for name, o := range map[string]Options{"by name": byName, "by predicate": byPredicate} {
		t.Run(name, func(t *testing.T) {
			srv := newServer(outcome{code: codes.Unavailable}, outcome{code: codes.Unavailable})
			client := dialRetry(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait}, o)
			if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); status.Code(err) != codes.Unavailable {
				t.Fatalf("unary: %v", err)
			}
			stream, err := client.StreamingInputCall(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.CloseAndRecv(); status.Code(err) != codes.Unavailable {
				t.Fatalf("stream: %v", err)
			}
			if attempts, _, _, _ := srv.stats(); attempts != 2 {
				t.Fatalf("%d attempts, want one per call", attempts)
			}
		})
	}
}

// TestNotSentRetried: when nothing listens, the attempts never reach a
// server (no transport, no stream), so even a method that is not
// idempotent is tried again, and the Observer is told why.
func TestNotSentRetried(t *testing.T) {
	for _, idem := range []bool{true, false} {
		o := Options{}
		if !idem {
			o.NonIdempotent = []string{unaryMethod, outputMethod}
		}
		rec := newRecorder()
		p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: rec}
		client := dialRetry(t, closedAddr(t), p, o)

		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Fatalf("idempotent %v: unary err = %v", idem, err)
		}
		_, err = client.StreamingOutputCall(context.Background(), &testpb.StreamingOutputCallRequest{})
		if status.Code(err) != codes.Unavailable || !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Fatalf("idempotent %v: stream err = %v", idem, err)
		}
		ends := rec.Ends()
		if len(ends) != 6 {
			t.Fatalf("idempotent %v: %d attempts observed, want 3 per call", idem, len(ends))
		}
		for i, e := range ends {
			var ae *AttemptError
			if !errors.As(e.Err, &ae) || ae.Code() != codes.Unavailable {
				t.Fatalf("attempt %d: %v", i, e.Err)
			}
			// NotSent is established where it matters: for every stream
			// creation, and for unary calls of a method that is not idempotent.
			if want := i >= 3 || !idem; ae.NotSent != want {
				t.Fatalf("idempotent %v, attempt %d: NotSent = %v", idem, i, ae.NotSent)
			}
		}
	}
}

// TestIdempotentByProto reads idempotency_level from descriptors.
func TestIdempotentByProto(t *testing.T) {
	level := func(l descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodOptions {
		return &descriptorpb.MethodOptions{IdempotencyLevel: l.Enum()}
	}
	fd := &descriptorpb.FileDescriptorProto{
		Name:       proto.String("stormguard/test/items.proto"),
		Package:    proto.String("stormguard.test"),
		Syntax:     proto.String("proto3"),
		Dependency: []string{"google/protobuf/empty.proto"},
		Service: []*descriptorpb.ServiceDescriptorProto{{
			Name: proto.String("Items"),
			Method: []*descriptorpb.MethodDescriptorProto{
				{Name: proto.String("Get"), InputType: proto.String(".google.protobuf.Empty"), OutputType: proto.String(".google.protobuf.Empty"), Options: level(descriptorpb.MethodOptions_NO_SIDE_EFFECTS)},
				{Name: proto.String("Put"), InputType: proto.String(".google.protobuf.Empty"), OutputType: proto.String(".google.protobuf.Empty"), Options: level(descriptorpb.MethodOptions_IDEMPOTENT)},
				{Name: proto.String("Create"), InputType: proto.String(".google.protobuf.Empty"), OutputType: proto.String(".google.protobuf.Empty")},
			},
		}},
	}
	files := new(protoregistry.Files)
	emptyFile, err := protoregistry.GlobalFiles.FindFileByPath("google/protobuf/empty.proto")
	if err != nil {
		t.Fatal(err)
	}
	if err := files.RegisterFile(emptyFile); err != nil {
		t.Fatal(err)
	}
	file, err := protodesc.NewFile(fd, files)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.RegisterFile(file); err != nil {
		t.Fatal(err)
	}
	idem := IdempotentByProto(files)
	for m, want := range map[string]bool{
		"/stormguard.test.Items/Get":    true,
		"/stormguard.test.Items/Put":    true,
		"/stormguard.test.Items/Create": false,
		"/stormguard.test.Items/Nope":   false,
		"/stormguard.test.Nope/Get":     false,
		"/stormguard.test.Items":        false,
		"garbage":                       false,
		"/stormguard.test.Items/":       false,
	} {
		for range 2 { // the second answer comes from the cache
			if got := idem(m); got != want {
				t.Errorf("%s: %v, want %v", m, got, want)
			}
		}
	}
	// The interop service declares no levels: nothing is idempotent by proto.
	if IdempotentByProto(nil)(unaryMethod) {
		t.Error("UnaryCall declares no idempotency level")
	}
}
