package grpcretry

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"

	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/known/emptypb"
)

// TestNonIdempotentSentOnce: a failure from the server is final for a
// method that is not idempotent, however retryable its code.
func TestNonIdempotentSentOnce(t *testing.T) {
	byName := WithNonIdempotent(unaryMethod, inputMethod)
	byPredicate := WithIdempotent(func(m string) bool { return m != unaryMethod && m != inputMethod })
	for name, o := range map[string]Option{"by name": byName, "by predicate": byPredicate} {
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
		var o []Option
		if !idem {
			o = append(o, WithNonIdempotent(unaryMethod, outputMethod))
		}
		rec := newRecorder()
		p := &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: rec}
		client := dialRetry(t, closedAddr(t), p, o...)

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

// itemsFiles returns a registry holding stormguard.test.Items, whose Get
// is NO_SIDE_EFFECTS, Put IDEMPOTENT and Create undeclared.
func itemsFiles(t testing.TB) *protoregistry.Files {
	t.Helper()
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
	return files
}

// TestIdempotentByProto reads idempotency_level from descriptors.
func TestIdempotentByProto(t *testing.T) {
	files := itemsFiles(t)
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

// TestUnsafeByDefault (issue 18 item 8): with no Option a method is
// sent once when its request may have reached the server, and retried
// only once declared idempotent — by name, by service, by predicate —
// unless NonIdempotent says otherwise.
func TestUnsafeByDefault(t *testing.T) {
	for _, c := range []struct {
		name string
		o    []Option
		want int // attempts of each call
	}{
		{"no Option", nil, 1},
		{"WithIdempotentMethods", []Option{WithIdempotentMethods(unaryMethod, outputMethod, inputMethod)}, 2},
		{"WithIdempotentMethods twice", []Option{WithIdempotentMethods(unaryMethod), WithIdempotentMethods(outputMethod, inputMethod)}, 2},
		{"WithIdempotentServices", []Option{WithIdempotentServices(testService)}, 2},
		{"WithIdempotentServices with slashes", []Option{WithIdempotentServices("/" + testService + "/")}, 2},
		{"another service", []Option{WithIdempotentServices("grpc.testing.Other")}, 1},
		{"WithIdempotent", []Option{WithIdempotent(func(string) bool { return true })}, 2},
		{"WithIdempotent replaced", []Option{WithIdempotent(func(string) bool { return true }), WithIdempotent(nil)}, 1},
		{"WithNonIdempotent overrides", []Option{WithIdempotentServices(testService), WithIdempotent(func(string) bool { return true }),
			WithNonIdempotent(unaryMethod, outputMethod), WithNonIdempotent(inputMethod)}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := newServer()
			client := dialRetryAsIs(t, serve(t, srv), &retry.Policy{MaxAttempts: 3, Backoff: noWait}, c.o...)
			check := func(what string, err error) {
				t.Helper()
				attempts, _, _, _ := srv.stats()
				if attempts != c.want || (c.want == 1) != (status.Code(err) == codes.Unavailable) {
					t.Fatalf("%s: %d attempts (err %v), want %d", what, attempts, err, c.want)
				}
			}
			srv.reset(outcome{code: codes.Unavailable})
			_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
			check("unary", err)

			srv.reset(outcome{code: codes.Unavailable})
			out, err := client.StreamingOutputCall(context.Background(), outputRequest(1))
			if err == nil {
				_, err = readAll(out)
			}
			check("server stream", err)

			srv.reset(outcome{code: codes.Unavailable})
			in, err := client.StreamingInputCall(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Send(inputMessages(1, 10)[0]); err != nil {
				t.Fatal(err)
			}
			_, err = in.CloseAndRecv()
			check("client stream", err)
		})
	}
	t.Run("nothing sent is retried", func(t *testing.T) {
		rec := newRecorder()
		client := dialRetryAsIs(t, closedAddr(t), &retry.Policy{MaxAttempts: 3, Backoff: noWait, Observer: rec})
		if _, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{}); !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Fatalf("unary: %v", err)
		}
		if _, err := client.StreamingOutputCall(context.Background(), outputRequest(1)); !errors.Is(err, retry.ErrAttemptsExhausted) {
			t.Fatalf("stream: %v", err)
		}
		if n := len(rec.Ends()); n != 6 {
			t.Fatalf("%d attempts, want 3 per call", n)
		}
	})
}

// itemsServer serves stormguard.test.Items (see itemsFiles) on a loopback
// port: every method fails its first attempt with Unavailable and then
// succeeds; it counts attempts per method.
type itemsServer struct {
	mu       sync.Mutex
	attempts map[string]int
}

func serveItems(t *testing.T) (*itemsServer, string) {
	t.Helper()
	is := &itemsServer{attempts: map[string]int{}}
	desc := grpc.ServiceDesc{ServiceName: "stormguard.test.Items", HandlerType: (*any)(nil)}
	for _, m := range []string{"Get", "Put", "Create"} {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{
			MethodName: m,
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				if err := dec(new(emptypb.Empty)); err != nil {
					return nil, err
				}
				is.mu.Lock()
				is.attempts[m]++
				n := is.attempts[m]
				is.mu.Unlock()
				if n == 1 {
					return nil, status.Error(codes.Unavailable, "first attempt")
				}
				return new(emptypb.Empty), nil
			},
		})
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	gs.RegisterService(&desc, struct{}{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
	return is, lis.Addr().String()
}

// TestIdempotencyLevelOnServer (issue 18 item 8): the interceptor reads
// idempotency_level from the method descriptors by itself: against a real
// server, Get (NO_SIDE_EFFECTS) and Put (IDEMPOTENT) are retried, Create
// (undeclared) is sent once, and nothing is retried for a registry that
// does not know the service.
func TestIdempotencyLevelOnServer(t *testing.T) {
	for _, c := range []struct {
		name  string
		files *protoregistry.Files
		want  map[string]int
	}{
		{"ProtoFiles", itemsFiles(t), map[string]int{"Get": 2, "Put": 2, "Create": 1}},
		{"GlobalFiles", nil, map[string]int{"Get": 1, "Put": 1, "Create": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			is, addr := serveItems(t)
			conn, err := grpc.NewClient("passthrough:///"+addr,
				grpc.WithTransportCredentials(insecure.NewCredentials()),
				grpc.WithDisableRetry(),
				grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(&retry.Policy{MaxAttempts: 3, Backoff: noWait}, WithProtoFiles(c.files))))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			for m, want := range c.want {
				err := conn.Invoke(context.Background(), "/stormguard.test.Items/"+m, new(emptypb.Empty), new(emptypb.Empty))
				if (want == 1) != (status.Code(err) == codes.Unavailable) {
					t.Fatalf("%s: err %v", m, err)
				}
				is.mu.Lock()
				got := is.attempts[m]
				is.mu.Unlock()
				if got != want {
					t.Fatalf("%s: %d attempts, want %d", m, got, want)
				}
			}
		})
	}
}
