package grpcretry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stormguard/stormguard/config"
	"github.com/stormguard/stormguard/retry"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/status"
)

// failingServer answers every unary and server-streaming call with code
// and a pushback of 0 ms ("retry now", so no backoff is waited for), and
// counts the attempts.
type failingServer struct {
	testpb.UnimplementedTestServiceServer
	code     codes.Code
	attempts atomic.Int64
}

func (s *failingServer) fail(ctx context.Context) error {
	s.attempts.Add(1)
	if err := grpc.SetTrailer(ctx, PushbackTrailer(0)); err != nil {
		return err
	}
	return status.Error(s.code, "always failing")
}

func (s *failingServer) UnaryCall(ctx context.Context, _ *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	return nil, s.fail(ctx)
}

func (s *failingServer) StreamingOutputCall(_ *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	return s.fail(stream.Context())
}

// swapSource is a retry.PolicySource whose Policy is swapped atomically,
// as config.Handle's is on a reload; it counts how often it is asked.
type swapSource struct {
	p     atomic.Pointer[retry.Policy]
	reads atomic.Int64
}

func (s *swapSource) Policy() *retry.Policy {
	s.reads.Add(1)
	return s.p.Load()
}

// attemptsOf returns the attempts a failed call made, from the
// *retry.Error it wraps.
func attemptsOf(t testing.TB, err error) int {
	t.Helper()
	var re *retry.Error
	if !errors.As(err, &re) {
		t.Errorf("error %v wraps no *retry.Error", err)
		return 0
	}
	return re.Attempts
}

// callKind makes one unary or server-streaming call and returns its error.
func callKind(ctx context.Context, client testpb.TestServiceClient, unary bool) error {
	if unary {
		_, err := client.UnaryCall(ctx, &testpb.SimpleRequest{})
		return err
	}
	stream, err := client.StreamingOutputCall(ctx, outputRequest(1))
	if err != nil {
		return err
	}
	_, err = readAll(stream)
	return err
}

// TestPolicySourceReload (issue 25 blocker 1): the interceptors take a
// retry.PolicySource and ask it once per call, so swapping its Policy
// from 2 to 4 attempts reaches the next call on the same connection while
// concurrent unary and streaming calls flow against a real server: every
// call makes 2 or 4 attempts (never a mix), every call that starts after
// the swap makes 4, and the source is asked exactly once per call.
func TestPolicySourceReload(t *testing.T) {
	srv := &failingServer{code: codes.Unavailable}
	addr := serveWith(t, nil, srv)
	src := &swapSource{}
	src.p.Store(&retry.Policy{MaxAttempts: 2, Backoff: noWait})
	client := dial(t, addr,
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(src, WithIdempotentServices(testService))),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(src, WithIdempotentServices(testService))))

	const workers, perWorker = 6, 40 // bounded: at most 240 calls, 960 attempts
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		swapped   atomic.Bool
		calls     atomic.Int64
		before    = make(chan struct{}) // closed once 30 calls have ended before the swap
		beforeOne sync.Once
		mu        sync.Mutex
		seen      = map[string]int{} // "before/after: n attempts" → calls
	)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				after := swapped.Load()
				err := callKind(ctx, client, (w+i)%2 == 0)
				if ctx.Err() != nil {
					return
				}
				if status.Code(err) != codes.Unavailable {
					t.Errorf("err = %v", err)
					return
				}
				n := attemptsOf(t, err)
				when := "before"
				if after {
					when = "after"
				}
				mu.Lock()
				seen[fmt.Sprintf("%s: %d attempts", when, n)]++
				mu.Unlock()
				if calls.Add(1) >= 30 {
					beforeOne.Do(func() { close(before) })
				}
			}
		})
	}
	select {
	case <-before:
	case <-ctx.Done():
		t.Fatal("no calls ended")
	}
	src.p.Store(&retry.Policy{MaxAttempts: 4, Backoff: noWait}) // the reload
	swapped.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for k, n := range seen {
		switch k {
		case "before: 2 attempts", "before: 4 attempts", "after: 4 attempts":
		default:
			t.Errorf("%d calls %s", n, k)
		}
	}
	if seen["before: 2 attempts"] == 0 || seen["after: 4 attempts"] == 0 {
		t.Errorf("calls seen %v: want some under each Policy", seen)
	}
	if got, want := src.reads.Load(), calls.Load(); got != want {
		t.Errorf("the source was asked %d times for %d calls, want once per call", got, want)
	}
	t.Logf("calls: %v; server attempts %d", seen, srv.attempts.Load())
}

// TestConfigHandleReload (issue 25 blocker 1): a *config.Handle, loaded
// from a real YAML file, is the interceptors' PolicySource; rewriting the
// file from 2 to 4 attempts and reloading it reaches the next calls on the
// same connection, while calls flow against a real server.
func TestConfigHandleReload(t *testing.T) {
	srv := &failingServer{code: codes.Unavailable}
	addr := serveWith(t, nil, srv)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	writePolicies := func(attempts int) {
		t.Helper()
		// Write a new file and rename it over the old one, as editors and
		// config maps do, so a reader never sees half a file.
		tmp := path + ".tmp"
		data := fmt.Sprintf("policies:\n  inventory:\n    max_attempts: %d\n    backoff: {strategy: full_jitter, base: 1ms, max: 2ms}\noperations:\n  grpc-inventory: inventory\n", attempts)
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	writePolicies(2)
	reg := config.NewRegistry(config.Options{})
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := reg.Policy("grpc-inventory")
	client := dial(t, addr,
		grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(h, WithIdempotentServices(testService))),
		grpc.WithChainStreamInterceptor(StreamClientInterceptor(h, WithIdempotentServices(testService))))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	run := func(calls int) map[int]int {
		attempts := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := range calls {
					err := callKind(ctx, client, (w+i)%2 == 0)
					if status.Code(err) != codes.Unavailable {
						t.Errorf("err = %v", err)
						return
					}
					n := attemptsOf(t, err)
					mu.Lock()
					attempts[n]++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return attempts
	}
	if got := run(5); fmt.Sprint(got) != "map[2:20]" {
		t.Fatalf("before the reload: attempts → calls %v, want 20 calls of 2", got)
	}
	// Reload while calls flow: each call makes 2 or 4 attempts.
	during := make(chan map[int]int, 1)
	go func() { during <- run(10) }()
	writePolicies(4)
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	for n := range <-during {
		if n != 2 && n != 4 {
			t.Fatalf("a call made %d attempts during the reload", n)
		}
	}
	if got := run(5); fmt.Sprint(got) != "map[4:20]" {
		t.Fatalf("after the reload: attempts → calls %v, want 20 calls of 4", got)
	}
}

// TestConfigRetryOnReload (issue 25 blocker 1): with WithPolicyClassify,
// the codes a policy file's retry_on.grpc_codes lists — turned into the
// Policy's Classify by config.Options.Classify — follow a reload too: a
// server failing with Internal is not retried under [UNAVAILABLE], and is
// once the file says [UNAVAILABLE, INTERNAL]. Without the option the
// interceptor keeps its code table.
func TestConfigRetryOnReload(t *testing.T) {
	srv := &failingServer{code: codes.Internal}
	addr := serveWith(t, nil, srv)
	path := filepath.Join(t.TempDir(), "policies.yaml")
	write := func(codes string) {
		t.Helper()
		data := "policies:\n  inventory:\n    max_attempts: 3\n    backoff: {strategy: full_jitter, base: 1ms, max: 2ms}\n" +
			"    retry_on: {grpc_codes: [" + codes + "]}\noperations:\n  grpc-inventory: inventory\n"
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("UNAVAILABLE")
	reg := config.NewRegistry(config.Options{Classify: func(spec *config.PolicySpec) func(error) bool {
		f, ok := spec.GRPCRetryable()
		if !ok {
			return nil
		}
		return func(err error) bool { return f(uint32(status.Code(err))) }
	}})
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	h := reg.Policy("grpc-inventory")
	following := dial(t, addr, grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(h, WithIdempotentServices(testService), WithPolicyClassify())))
	table := dial(t, addr, grpc.WithChainUnaryInterceptor(UnaryClientInterceptor(h, WithIdempotentServices(testService))))
	attempts := func(client testpb.TestServiceClient) int {
		t.Helper()
		_, err := client.UnaryCall(context.Background(), &testpb.SimpleRequest{})
		if status.Code(err) != codes.Internal {
			t.Fatalf("err = %v", err)
		}
		return attemptsOf(t, err)
	}
	got := fmt.Sprint(attempts(following), attempts(table))
	write("UNAVAILABLE, INTERNAL")
	if err := reg.Reload(path); err != nil {
		t.Fatal(err)
	}
	got += fmt.Sprint(" then ", attempts(following), attempts(table))
	if want := "1 1 then 3 1"; got != want {
		t.Fatalf("attempts (WithPolicyClassify, code table): %s, want %s", got, want)
	}
}
